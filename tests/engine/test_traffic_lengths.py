"""Length distributions and arrival processes of the traffic model."""

from __future__ import annotations

import numpy as np
import pytest

from service.engine.traffic.arrivals import unit_gaps
from service.engine.traffic.lengths import LengthDistribution, LengthError


def test_percentiles_are_reproduced_by_the_samples() -> None:
    dist = LengthDistribution.from_percentiles({0.5: 200, 0.9: 800, 0.99: 1500}, maximum=4000)
    samples = dist.quantile(np.random.default_rng(0).random(200_000))
    # The share of samples at or below each knot is its level (±0.004: 200,000 samples, and
    # rounding to whole tokens moves up to half a token across the knot).
    for level, tokens in ((0.5, 200), (0.9, 800), (0.99, 1500)):
        assert np.mean(samples <= tokens) == pytest.approx(level, abs=0.004)
    assert samples.min() >= 1 and samples.max() <= 4000


def test_mean_solves_the_top_knot() -> None:
    # Hand calculation: knots (0, 1), (0.5, 100), (1, m); mean = 0.5·(1 + 100)/2 + 0.5·(100 + m)/2
    # = 150  →  m = 2·(150 − 25.25)/0.5 − 100 = 399.
    dist = LengthDistribution.from_percentiles({0.5: 100}, mean=150.0)
    assert dist.tokens[-1] == pytest.approx(399.0)
    assert dist.mean == pytest.approx(150.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"percentiles": {0.5: 300, 0.9: 200}, "maximum": 1000}, "percentiles"),
        ({"percentiles": {0.5: 300}, "maximum": 100}, "max"),
        ({"percentiles": {0.5: 300}}, "max"),
        ({"percentiles": {0.5: 300, 0.9: 900}, "mean": 100.0}, "mean"),
        ({"percentiles": {1.5: 300}, "maximum": 1000}, "percentiles"),
    ],
)
def test_inconsistent_percentiles_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(LengthError) as info:
        LengthDistribution.from_percentiles(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_histogram_samples_its_shares_and_must_sum_to_one() -> None:
    dist = LengthDistribution.from_histogram((1, 100, 1000), (0.25, 0.75))
    samples = dist.quantile(np.random.default_rng(1).random(100_000))
    assert np.mean(samples < 100) == pytest.approx(0.25, abs=0.01)
    assert dist.mean == pytest.approx(0.25 * 50.5 + 0.75 * 550.0)
    with pytest.raises(LengthError, match=r"sum to 0\.9"):
        LengthDistribution.from_histogram((1, 100, 1000), (0.2, 0.7))
    with pytest.raises(LengthError, match="increase"):
        LengthDistribution.from_histogram((1, 100, 50), (0.5, 0.5))


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0])
def test_gamma_gaps_have_unit_mean_and_the_asked_cv(cv: float) -> None:
    gaps = unit_gaps("gamma", cv, 400_000, np.random.default_rng(2))
    assert gaps.mean() == pytest.approx(1.0, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.02)


def test_mean_square_integrates_the_quantile_function_squared() -> None:
    """Hand calculation: fixed 300 gives 90,000; uniform on [100, 400) gives (100² + 100·400 +
    400²)/3 = 70,000; the percentile mix agrees with its samples' mean square within 1%."""
    assert LengthDistribution.fixed(300).mean_square == pytest.approx(90_000.0)
    uniform = LengthDistribution.from_histogram((100.0, 400.0), (1.0,))
    assert uniform.mean_square == pytest.approx(70_000.0)
    mix = LengthDistribution.from_percentiles({0.5: 682, 0.9: 1536}, maximum=2048)
    samples = mix.quantile(np.random.default_rng(0).random(200_000))
    assert mix.mean_square == pytest.approx(float(np.mean(samples**2)), rel=0.01)
