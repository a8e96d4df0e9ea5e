"""End-to-end stage: fit per-layer/per-step overheads and admission wait to static and serving runs.

Kernel-fitted efficiencies stay fixed here. Runs are predicted in one engine pass per model and
layout (``run_predictor``); the predictions' exact bilinear response to the free parameters
(``response``) is built from a few such passes, so the robust fits of the full data and of every
cross-validation fold run on arrays. The fit is checked against an engine pass at the solution;
should the engine ever stop being bilinear in these parameters, the response is rebuilt there
and the fit repeated (Gauss-Newton rounds).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration import response
from service.engine.calibration.intervals import FeatureRange
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.priors import Prior, engine_side, prior_backend, priors_for
from service.engine.calibration.quality import (
    ErrorStats,
    MetricQuality,
    error_stats,
    kfold_splits,
    log_residuals,
    merged_group_splits,
)
from service.engine.calibration.response import Response
from service.engine.calibration.run_predictor import (
    OUTPUTS,
    RunPredictor,
    batch_of,
    precision_of,
)
from service.engine.calibration.solver import solve
from service.engine.efficiency import PARAMETER_BOUNDS, EfficiencyParams
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape

__all__ = [
    "QUEUE_NAMES",
    "SERVING_NAMES",
    "STATIC_NAMES",
    "RunPredictions",
    "feature_ranges",
    "fit_end_to_end",
    "free_names",
    "group_of",
    "precision_of",
    "predict_runs",
]

Run = StaticMeasurement | ServingMeasurement
STATIC_NAMES = (
    "layer_overhead_us",
    "step_overhead_us",
    "sequence_layer_overhead_us",
    "sequence_layer_sharded_us",
)
# The queue share is not among them: the scheduler sets it (efficiency.SCHEDULER_TERMS), and a
# fit holds it at the backend's prior.
QUEUE_NAMES = ("admission_wait_steps", "prefill_queue_ln_prompts")
# queue terms that move prompts between TTFT and the decode window, so TPOT depends on them
WINDOW_TERMS = ("prefill_queue_share", "prefill_queue_ln_prompts")
SERVING_NAMES = (*STATIC_NAMES, "eager_layer_launch_us", *QUEUE_NAMES)
ROUNDS = 3
STAGE_ROUNDS = 50  # alternations of the overhead and queue stages at most
WINDOW_TOLERANCE = 1e-5  # change of the WINDOW_TERMS that ends the alternation
MAX_FOLDS = 10  # cross-validation folds at most; more groups are merged (quality.py)
EXACT_LOG_TOLERANCE = 1e-6  # bilinear response vs the engine at the solution


@dataclass(frozen=True)
class RunPredictions:
    """Predicted and measured values of every metric of some runs (one entry per target)."""

    run: NDArray[np.intp]  # index of the run in the input
    metric: NDArray[np.str_]  # "static.latency_ms", "serving.ttft_ms", ...
    predicted: NDArray[np.float64]
    measured: NDArray[np.float64]


def predict_runs(
    runs: Sequence[Run],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    params: EfficiencyParams,
) -> RunPredictions:
    """Predict every measured metric of ``runs`` with ``params`` on ``accelerator``."""
    predictor = RunPredictor(runs, accelerator, models)
    return RunPredictions(
        run=predictor.target_run,
        metric=np.array([t.metric for t in predictor.targets], dtype=str),
        predicted=predictor.predict(params),
        measured=predictor.measured,
    )


# What ``fit_end_to_end`` hands on for further held-out fits: predictor, response, start.
Prepared = dict[str, Any]


def free_names(runs: Sequence[Run]) -> tuple[str, ...]:
    """Parameters the end-to-end stage fits for these runs."""
    if any(isinstance(r, ServingMeasurement) for r in runs):
        return SERVING_NAMES
    return STATIC_NAMES


def group_of(run: Run) -> Hashable:
    """Leave-one-group-out label: the model for static runs, model+backend+layout for serving."""
    if isinstance(run, StaticMeasurement):
        return ("static", run.model)
    return ("serving", run.model, run.backend, run.tp, run.weights_dtype)


def _solve_affine(
    names: Sequence[str],
    start: Mapping[str, float],
    offset: NDArray[np.float64],
    slope: NDArray[np.float64],
    measured: NDArray[np.float64],
    priors: Mapping[str, Prior],
) -> tuple[dict[str, float], dict[str, float]]:
    """Robust fit of log((offset + slope·v) / measured) over ``names`` within their bounds.

    Each name with a prior adds the residual ``σ · (v − mean) / sd`` (a Gaussian prior in a
    least-squares fit whose runs scatter by σ in log units): σ is the robust scatter
    (1.4826 · MAD) of the runs' residuals at the unregularised solution, and the fit is repeated
    from there with the priors.
    """
    fitted, se, data = _solve_affine_once(names, start, offset, slope, measured, priors, 0.0)
    if not data.size or not any(n in priors for n in names):
        return fitted, se
    scatter = float(np.clip(1.4826 * np.median(np.abs(data - np.median(data))), *SCATTER))
    fitted, se, _ = _solve_affine_once(names, fitted, offset, slope, measured, priors, scatter)
    return fitted, se


SCATTER = (1e-4, 1.0)  # bounds of the residual scatter that weighs the priors


def _solve_affine_once(
    names: Sequence[str],
    start: Mapping[str, float],
    offset: NDArray[np.float64],
    slope: NDArray[np.float64],
    measured: NDArray[np.float64],
    priors: Mapping[str, Prior],
    scatter: float,
) -> tuple[dict[str, float], dict[str, float], NDArray[np.float64]]:
    held = [n for n in names if n in priors]
    mean = np.array([priors[n].mean for n in held], dtype=float)
    weight = np.array([scatter / priors[n].sd for n in held], dtype=float)
    prior_jac = np.zeros((len(held), len(names)))
    for row, n in enumerate(held):
        prior_jac[row, list(names).index(n)] = weight[row]

    def predicted(v: Mapping[str, float]) -> NDArray[np.float64]:
        return np.asarray(offset + slope @ np.array([v[n] for n in names]), dtype=np.float64)

    def residuals(v: Mapping[str, float]) -> NDArray[np.float64]:
        pred = np.maximum(predicted(v), 1e-9)
        shrink = weight * (np.array([v[n] for n in held], dtype=float) - mean)
        return np.asarray(np.concatenate([np.log(pred / measured), shrink]), dtype=np.float64)

    def jacobian(v: Mapping[str, float]) -> NDArray[np.float64]:
        pred = predicted(v)
        live = (pred > 1e-9)[:, None]
        data = np.where(live, slope / np.maximum(pred, 1e-9)[:, None], 0.0)
        return np.asarray(np.vstack([data, prior_jac]), dtype=np.float64)

    sol = solve(names, start, PARAMETER_BOUNDS, residuals, jacobian)
    data = residuals(sol.values)[: measured.size]
    return dict(sol.values), dict(sol.standard_errors), data[np.isfinite(data)]


def fit_response(
    resp: Response,
    predictor: RunPredictor,
    use: NDArray[np.bool_],
    values: Mapping[str, float],
    names: Sequence[str],
    priors: Mapping[str, Prior],
) -> tuple[dict[str, float], dict[str, float]]:
    """Fit host overheads on step times, then the serving queue terms on TTFT with them fixed.

    Only targets in ``use`` enter. The split keeps TTFT's queueing from being absorbed into
    per-step overheads. TPOT depends on the prompts ahead (those a request does not wait behind
    run while it decodes), so the two stages alternate until the WINDOW_TERMS settle.
    Parameters not in ``names`` keep their value in ``values``.
    """
    current: dict[str, float] = dict(values)
    se: dict[str, float] = {}
    for _ in range(STAGE_ROUNDS):
        before = [current.get(n, 0.0) for n in WINDOW_TERMS]
        current, se = _fit_stages(resp, predictor, use, current, names, priors)
        after = [current.get(n, 0.0) for n in WINDOW_TERMS]
        if max(abs(a - b) for a, b in zip(after, before, strict=True)) <= WINDOW_TOLERANCE:
            break
    return current, se


def _fit_stages(
    resp: Response,
    predictor: RunPredictor,
    use: NDArray[np.bool_],
    values: Mapping[str, float],
    names: Sequence[str],
    priors: Mapping[str, Prior],
) -> tuple[dict[str, float], dict[str, float]]:
    """One pass of the two stages: overheads on step times, then queue terms on TTFT."""
    is_ttft = predictor.serving & (predictor.target_output == OUTPUTS.index("ttft_ms"))
    current, se = dict(values), {}
    stages = (
        (resp.linear_names, np.flatnonzero(use & ~is_ttft)),
        (resp.queue_names, np.flatnonzero(use & is_ttft)),
    )
    for stage, (group, rows) in enumerate(stages):
        chosen = [n for n in group if n in names]
        if not chosen or rows.size == 0:
            continue
        x, q = resp.split(current)
        if stage == 0:
            offset, slope = resp.affine_in_x(q, rows)
            fixed = x
        else:
            offset, slope = resp.affine_in_q(x, rows)
            fixed = q
        pick = [i for i, n in enumerate(group) if n in chosen]
        rest = [i for i, n in enumerate(group) if n not in chosen]
        offset = offset + slope[:, rest] @ fixed[rest]
        fitted, stage_se = _solve_affine(
            chosen, current, offset, slope[:, pick], predictor.measured[rows], priors
        )
        current.update(fitted)
        se.update(stage_se)
    return current, se


def fit_end_to_end(
    runs: Sequence[Run],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    values: Mapping[str, float],
    *,
    cross_validate: bool = True,
    before_values: Mapping[str, float] | None = None,
    priors: Mapping[str, Prior] | None = None,
    prepared: Prepared | None = None,
) -> tuple[
    dict[str, float],
    dict[str, float],
    dict[str, MetricQuality],
    dict[str, NDArray[np.float64]],
]:
    """Fit the end-to-end parameters; return values, standard errors, quality and residuals.

    ``values`` holds every EfficiencyParams field (the kernel-fitted profile so far). The fit
    starts at and shrinks toward ``priors`` (default: those of the runs' backend, priors.py).
    ``prepared``, when given, receives the predictor, first response and start values, so
    further held-out fits (``extrapolation_cv``) reuse the engine passes.
    """
    names = free_names(runs)
    if priors is None:
        priors = priors_for(prior_backend([r.backend for r in runs]))
    # fitted parameters start at their priors, and the engine terms these runs do not fit stay
    # there (the terms each backend sets; a static fit's eager launch floor, which only
    # serving steps pay), so a profile asked about another mode prices them as its engine does
    at_prior = {n: p.mean for n, p in priors.items() if n in names or engine_side(n)}
    values = {**values, **at_prior}
    predictor = RunPredictor(runs, accelerator, models)
    every = np.ones(predictor.measured.size, dtype=bool)
    linear = [n for n in names if n not in QUEUE_NAMES]
    queue = [n for n in names if n in QUEUE_NAMES]
    centre = dict(values)
    for round_ in range(ROUNDS):
        resp = response.build(predictor, centre, linear, queue)
        if round_ == 0 and prepared is not None:
            prepared.update(predictor=predictor, response=resp, start=dict(values))
        fitted, se = fit_response(resp, predictor, every, centre, names, priors)
        after = predictor.predict(EfficiencyParams.from_dict(fitted))
        if resp.max_log_error(after, fitted) <= EXACT_LOG_TOLERANCE:
            break
        centre = fitted
    before = predictor.predict(EfficiencyParams.from_dict(before_values or values))
    held = np.full(predictor.measured.size, np.nan)
    if cross_validate:
        labels = [group_of(r) for r in runs]
        splits = merged_group_splits(labels, MAX_FOLDS) or kfold_splits(len(runs), 5)
        for train, test in splits:
            train_rows = np.isin(predictor.target_run, train)
            test_rows = np.flatnonzero(np.isin(predictor.target_run, test))
            fold_names = free_names([runs[i] for i in train])
            # starts from ``values`` (not the full fit): nothing of the held-out runs leaks in
            fold, _ = fit_response(resp, predictor, train_rows, values, fold_names, priors)
            x, q = resp.split(fold)
            held[test_rows] = resp.predict(x, q, test_rows)
    quality: dict[str, MetricQuality] = {}
    residuals: dict[str, NDArray[np.float64]] = {}
    metrics = np.array([t.metric for t in predictor.targets])
    for metric in dict.fromkeys(metrics.tolist()):
        mask = metrics == metric
        held_stats: ErrorStats | None = (
            error_stats(held[mask], predictor.measured[mask]) if cross_validate else None
        )
        quality[metric] = MetricQuality(
            error_stats(before[mask], predictor.measured[mask]),
            error_stats(after[mask], predictor.measured[mask]),
            held_stats,
        )
        if cross_validate:
            r = log_residuals(held[mask], predictor.measured[mask])
            residuals[metric] = r[np.isfinite(r)]
    return fitted, se, quality, residuals


def feature_ranges(runs: Sequence[Run]) -> dict[str, FeatureRange]:
    """Range of batch/concurrency, lengths and GPU count covered by the runs."""
    columns = {
        "batch_size": [float(batch_of(r)) for r in runs],
        "input_tokens": [float(r.input_tokens) for r in runs],
        "output_tokens": [float(r.output_tokens) for r in runs],
        "gpus": [float(r.tp * r.pp) for r in runs],
    }
    return {k: FeatureRange(min(v), max(v)) for k, v in columns.items()}
