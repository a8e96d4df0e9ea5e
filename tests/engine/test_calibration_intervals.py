"""Prediction intervals: nominal coverage on synthetic data, widening, quality helpers."""

from __future__ import annotations

import numpy as np
import pytest

from service.engine.calibration.intervals import (
    FALLBACK_LOG_SIGMA,
    TRANSFER_LOG_SIGMA,
    Z_90,
    FeatureRange,
    coverage_of,
    doublings_outside,
    interval,
    residual_quantiles,
)
from service.engine.calibration.quality import error_stats, group_splits, kfold_splits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_intervals_cover_about_eighty_percent(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.uniform(1.0, 100.0, 4000)
    # a biased, skewed model error: the intervals must follow it, not assume symmetry
    measured = truth * np.exp(0.05 + rng.gumbel(0.0, 0.12, truth.size))
    calib, test = slice(0, 400), slice(400, None)
    q = residual_quantiles(np.log(measured[calib] / truth[calib]))
    cov = coverage_of(interval(truth[test], q), measured[test])
    assert 0.75 <= cov <= 0.85


def test_widening_for_transfer_and_distance() -> None:
    q = residual_quantiles(np.linspace(-0.1, 0.1, 101))
    plain = interval(np.array([10.0]), q)
    moved = interval(np.array([10.0]), q, transferred=True)
    far = interval(np.array([10.0]), q, transferred=True, doublings_outside=3.0)
    assert plain.low[0] > moved.low[0] > far.low[0]
    assert plain.high[0] < moved.high[0] < far.high[0]
    assert plain.low[0] < 10.0 < plain.high[0]
    # The transfer spread adds in quadrature to the band's half-width (0.082 here).
    half = np.log(moved.high[0] / moved.low[0]) / 2.0
    assert (q.q_high - q.q_low) / 2.0 == pytest.approx(0.082)
    assert half == pytest.approx(np.hypot(0.082, Z_90 * TRANSFER_LOG_SIGMA))


def test_few_residuals_fall_back_to_a_wide_band() -> None:
    q = residual_quantiles([0.0, 0.01])
    assert q.n == 2
    assert q.q_high - q.q_low == pytest.approx(2 * 1.2815515655446004 * FALLBACK_LOG_SIGMA)


def test_doublings_outside_range() -> None:
    ranges = {"batch_size": FeatureRange(1, 64), "input_tokens": FeatureRange(128, 2048)}
    d = doublings_outside(ranges, {"batch_size": [32, 256], "input_tokens": [64, 1024]})
    assert d.tolist() == pytest.approx([1.0, 2.0])


def test_quality_helpers() -> None:
    s = error_stats([110.0, 90.0, 100.0], [100.0, 100.0, 100.0])
    assert (s.n, s.mdape_pct) == (3, pytest.approx(10.0))
    assert s.mape_pct == pytest.approx(20.0 / 3)
    folds = kfold_splits(10, 5)
    assert len(folds) == 5
    assert sorted(np.concatenate([t for _, t in folds]).tolist()) == list(range(10))
    for train, test in folds:
        assert not set(train) & set(test)
    groups = group_splits(["a", "b", "a", "c"])
    assert [g for g, _ in groups] == ["a", "b", "c"]
    assert groups[0][1][1].tolist() == [0, 2]
    assert group_splits(["a", "a"]) == []
