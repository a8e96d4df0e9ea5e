"""Held-out extrapolation inside a fit: how much wider an interval must be outside the domain.

The ordinary cross-validation of ``end_to_end`` holds out groups of runs that lie inside the
domain of the rest (same models, same ranges), so its residuals size intervals for
interpolation. Here each kind of extrapolation that ``domain.extrapolation`` can report is
re-enacted on the profile's own runs, where they allow it:

- ``model``: leave one model out (two or more models), where a fitted model is of the same
  kind (dense, MoE, MLA: ``domain.model_kind``); ``model_kind`` where none is;
- ``mode``: fit the static runs, predict the serving runs, and the reverse (both present);
- ``concurrency``, ``length``, ``gpus``: fit the runs at or below the median batch size or
  concurrency (prompt + output tokens; GPU count) and predict those above (the kind
  ``concurrency_above``, ...), and the reverse (``concurrency_below``): the two directions
  err differently and are measured apart (``domain.extrapolation_amounts``).

For each kind and metric the held-out log residuals give an 80% band; the extra log-spread is
what that band needs beyond the in-domain band, in quadrature (``intervals.extra_spread``). For
the numeric kinds it is divided by the median number of doublings the held-out points lay
outside their training range, so it applies per doubling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration import end_to_end as e2e
from service.engine.calibration import response
from service.engine.calibration.intervals import (
    DIRECTIONS,
    ExtrapolationSpread,
    directed,
    extra_spread,
    residual_quantiles,
)
from service.engine.calibration.measurements import StaticMeasurement
from service.engine.calibration.priors import Prior
from service.engine.calibration.quality import log_residuals
from service.engine.calibration.run_predictor import RunPredictor

Run = e2e.Run
Fold = tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64] | None]
# Per numeric kind, a run's value; concurrency is the running batch (the load the domain
# records and an estimate is checked by), passed in from ``RunPredictor.running_batches``.
NUMERIC_KINDS: Mapping[str, Callable[[Run, float], float]] = {
    "concurrency": lambda r, running: running,
    "length": lambda r, running: float(r.input_tokens + r.output_tokens),
    "gpus": lambda r, running: float(r.tp * r.pp),
}
DIRECTED_KINDS = frozenset(directed(k, d) for k in NUMERIC_KINDS for d in DIRECTIONS)
MIN_HELD = 8  # held-out residuals below which a kind is not measured


def _numeric_folds(values: NDArray[np.float64]) -> dict[str, Fold]:
    """Per direction of the held-out values (``above`` the training range or ``below``)."""
    mid = float(np.median(values))
    low = values <= mid
    if low.all() or not low.any():
        return {}
    folds: dict[str, Fold] = {}
    for direction, train_mask in (("above", low), ("below", ~low)):
        train = np.flatnonzero(train_mask)
        test = np.flatnonzero(~train_mask)
        lo, hi = values[train].min(), values[train].max()
        v = values[test]
        doublings = np.maximum(np.maximum(np.log2(lo / v), np.log2(v / hi)), 0.0)
        folds[direction] = (train, test, doublings)
    return folds


def _folds(
    runs: Sequence[Run], kinds: Mapping[str, str], running: NDArray[np.float64]
) -> dict[str, list[Fold]]:
    out: dict[str, list[Fold]] = {}
    idx = np.arange(len(runs))
    models = np.array([r.model for r in runs])
    if len(set(models.tolist())) >= 2:
        for m in np.unique(models):
            fitted_kinds = {kinds.get(str(other)) for other in np.unique(models[models != m])}
            kind = "model" if kinds.get(str(m)) in fitted_kinds else "model_kind"
            out.setdefault(kind, []).append((idx[models != m], idx[models == m], None))
    static = np.array([isinstance(r, StaticMeasurement) for r in runs])
    if static.any() and not static.all():
        out["mode"] = [(idx[static], idx[~static], None), (idx[~static], idx[static], None)]
    for kind, feature in NUMERIC_KINDS.items():
        values = [feature(r, float(load)) for r, load in zip(runs, running, strict=True)]
        folds = _numeric_folds(np.array(values, dtype=float))
        for direction, fold in folds.items():
            out[directed(kind, direction)] = [fold]
    return out


def extrapolation_spreads(
    runs: Sequence[Run],
    prepared: e2e.Prepared,
    in_domain: Mapping[str, NDArray[np.float64]],
    priors: Mapping[str, Prior],
    kinds: Mapping[str, str],
    running: NDArray[np.float64],
) -> dict[str, dict[str, ExtrapolationSpread]]:
    """Measured extra log-spread per metric and extrapolation kind (see the module doc).

    ``prepared`` is what ``end_to_end.fit_end_to_end`` handed on (predictor, response, start
    values); ``in_domain`` the ordinary cross-validated residuals per metric; ``kinds`` each
    run model's kind (``domain.model_kind``); ``running`` each run's running batch
    (``RunPredictor.running_batches``).
    """
    if not prepared:
        return {}
    predictor: RunPredictor = prepared["predictor"]
    folds = _folds(runs, kinds, running)
    if not folds:
        return {}
    resp: response.Response = prepared["response"]
    start: dict[str, float] = prepared["start"]
    metrics = np.array([t.metric for t in predictor.targets])
    out: dict[str, dict[str, ExtrapolationSpread]] = {}
    for kind, kind_folds in folds.items():
        held = np.full(predictor.measured.size, np.nan)
        far = np.full(predictor.measured.size, np.nan)
        for train, test, doublings in kind_folds:
            train_rows = np.isin(predictor.target_run, train)
            test_rows = np.flatnonzero(np.isin(predictor.target_run, test))
            fold_names = e2e.free_names([runs[i] for i in train])
            fitted, _ = e2e.fit_response(resp, predictor, train_rows, start, fold_names, priors)
            x, q = resp.split(fitted)
            held[test_rows] = resp.predict(x, q, test_rows)
            if doublings is not None:
                position = {int(run): k for k, run in enumerate(test)}
                far[test_rows] = doublings[
                    [position[int(r)] for r in predictor.target_run[test_rows]]
                ]
        for metric in dict.fromkeys(metrics.tolist()):
            mask = metrics == metric
            r = log_residuals(held[mask], predictor.measured[mask])
            keep = np.isfinite(r)
            per_doubling = kind in DIRECTED_KINDS
            if per_doubling:
                keep &= far[mask] > 0
            if int(keep.sum()) < MIN_HELD or metric not in in_domain:
                continue
            sigma = extra_spread(residual_quantiles(r[keep]), residual_quantiles(in_domain[metric]))
            if per_doubling:
                sigma /= float(np.median(far[mask][keep]))
            out.setdefault(metric, {})[kind] = ExtrapolationSpread(
                sigma, per_doubling, int(keep.sum())
            )
    return out
