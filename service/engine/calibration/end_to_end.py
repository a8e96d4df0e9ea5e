"""End-to-end stage: fit per-layer/per-step overheads and admission wait to static and serving runs.

Kernel-fitted efficiencies stay fixed here. The engine is called once per run configuration
(model, precision, layout, lengths, mode) with all its batch sizes at once. The fit is
Gauss-Newton on the engine itself: the predictions are linearised in the free parameters by
finite differences (one engine call per parameter and configuration), the robust problem is
solved on that linear model, and the linearisation is refreshed at the new point (a few rounds;
the overheads enter TTFT and TPOT almost linearly, so one or two rounds suffice).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration.intervals import FeatureRange
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.quality import (
    ErrorStats,
    MetricQuality,
    error_stats,
    group_splits,
    kfold_splits,
    log_residuals,
)
from service.engine.calibration.solver import solve
from service.engine.efficiency import PARAMETER_BOUNDS, EfficiencyParams
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import WIDE_DTYPES, Precision
from service.engine.shapes import ModelShape

Run = StaticMeasurement | ServingMeasurement
STATIC_NAMES = ("layer_overhead_us", "step_overhead_us", "sequence_overhead_us")
QUEUE_NAMES = ("admission_wait_steps", "prefill_queue_share")
SERVING_NAMES = (*STATIC_NAMES, *QUEUE_NAMES)
ROUNDS = 3
# Relative step for finite differences; overheads at 0 use an absolute step in their unit.
_REL_STEP = 0.05
_ABS_STEP = {
    "layer_overhead_us": 2.0,
    "step_overhead_us": 50.0,
    "sequence_overhead_us": 2.0,
    "admission_wait_steps": 0.25,
    "prefill_queue_share": 0.05,
}


def precision_of(run: Run) -> Precision:
    """Engine precision of a run: unset activations/KV follow 16-bit weights, else bf16."""
    default = run.weights_dtype if run.weights_dtype in WIDE_DTYPES else "bf16"
    return Precision(
        weights=run.weights_dtype,
        activations=run.activations_dtype or default,
        kv_cache=run.kv_cache_dtype or default,
    )


def _batch(run: Run) -> int:
    return run.batch_size if isinstance(run, StaticMeasurement) else run.concurrency


def _config_key(run: Run) -> Hashable:
    mode = "static" if isinstance(run, StaticMeasurement) else "serving"
    p = precision_of(run)
    return (run.model, p, run.tp, run.pp, run.input_tokens, run.output_tokens, mode)


@dataclass(frozen=True)
class _Target:
    """One measured value: run index, engine output name, metric key, value."""

    run: int
    output: str  # ttft_ms | tpot_ms | e2e_latency_ms
    metric: str  # "<kind>.<metric>" for quality reports
    value: float


def _targets(runs: Sequence[Run]) -> list[_Target]:
    out: list[_Target] = []
    for i, r in enumerate(runs):
        if isinstance(r, StaticMeasurement):
            if r.ttft_ms is not None:
                out.append(_Target(i, "ttft_ms", "static.ttft_ms", r.ttft_ms))
            if r.tpot_ms is not None and r.output_tokens > 1:
                out.append(_Target(i, "tpot_ms", "static.tpot_ms", r.tpot_ms))
            whole = r.whole_batch_latency_ms()
            if whole is not None and (r.ttft_ms is None or r.tpot_ms is None):
                out.append(_Target(i, "e2e_latency_ms", "static.latency_ms", whole))
        else:
            if r.ttft_ms is not None:
                out.append(_Target(i, "ttft_ms", "serving.ttft_ms", r.ttft_ms))
            if r.tpot_ms is not None:
                out.append(_Target(i, "tpot_ms", "serving.tpot_ms", r.tpot_ms))
    return out


def _step(name: str, value: float) -> float:
    return max(abs(value) * _REL_STEP, _ABS_STEP.get(name, 1e-3))


class _Predictor:
    """Engine predictions for a fixed set of runs, grouped into one call per configuration."""

    def __init__(
        self, runs: Sequence[Run], accelerator: Accelerator, models: Mapping[str, ModelShape]
    ) -> None:
        self.runs = list(runs)
        self.accelerator = accelerator
        self.models = models
        self.targets = _targets(self.runs)
        self.measured = np.array([t.value for t in self.targets], dtype=float)
        groups: dict[Hashable, list[int]] = {}
        for i, r in enumerate(self.runs):
            groups.setdefault(_config_key(r), []).append(i)
        self.groups = list(groups.values())
        self.serving = np.array(
            [isinstance(self.runs[t.run], ServingMeasurement) for t in self.targets], dtype=bool
        )

    def predict(self, params: EfficiencyParams) -> NDArray[np.float64]:
        """Predicted value of every target with ``params`` (one engine call per configuration)."""
        per_run: dict[int, Mapping[str, float]] = {}
        for idx in self.groups:
            first = self.runs[idx[0]]
            precision = precision_of(first)
            result = estimate(
                self.models[first.model],
                self.accelerator,
                precision=precision,
                parallelism=Parallelism(tp=first.tp, pp=first.pp),
                input_tokens=first.input_tokens,
                output_tokens=first.output_tokens,
                batch_sizes=np.array([_batch(self.runs[i]) for i in idx]),
                mode="static" if isinstance(first, StaticMeasurement) else "serving",
                params=params,
            )
            for j, i in enumerate(idx):
                per_run[i] = {
                    "ttft_ms": float(result.ttft_ms[j]),
                    "tpot_ms": float(result.tpot_ms[j]),
                    "e2e_latency_ms": float(result.e2e_latency_ms[j]),
                }
        return np.array([per_run[t.run][t.output] for t in self.targets], dtype=float)


def _fit(
    predictor: _Predictor,
    names: Sequence[str],
    values: Mapping[str, float],
) -> tuple[dict[str, float], dict[str, float]]:
    """Fit host overheads on step times, then the serving queue terms on TTFT with them fixed.

    TPOT and static latencies do not depend on the queue terms, so the stages are exact; the
    split keeps TTFT's queueing from being absorbed into per-step overheads.
    """
    is_ttft = predictor.serving & np.array([t.output == "ttft_ms" for t in predictor.targets])
    current, se = dict(values), {}
    stages = [
        ([n for n in names if n not in QUEUE_NAMES], ~is_ttft),
        ([n for n in names if n in QUEUE_NAMES], is_ttft),
    ]
    for stage_names, use in stages:
        if stage_names and use.any():
            current, stage_se = _fit_stage(predictor, stage_names, current, use)
            se.update(stage_se)
    return current, se


def _fit_stage(
    predictor: _Predictor,
    names: Sequence[str],
    values: Mapping[str, float],
    use: NDArray[np.bool_],
) -> tuple[dict[str, float], dict[str, float]]:
    """Gauss-Newton rounds on the linearised engine over the targets in ``use``.

    The overheads enter every prediction (almost) linearly, so a forward-difference Jacobian
    per round is near exact and two or three rounds converge.
    """
    current = dict(values)
    se: dict[str, float] = {}
    rounds = ROUNDS if predictor.serving.any() else 2
    for _ in range(rounds):
        p0 = predictor.predict(EfficiencyParams.from_dict(current))
        jac = np.empty((p0.size, len(names)))
        for j, name in enumerate(names):
            h = _step(name, current[name])
            sign = 1.0 if current[name] + h <= PARAMETER_BOUNDS[name][1] else -1.0
            shifted = {**current, name: current[name] + sign * h}
            jac[:, j] = (predictor.predict(EfficiencyParams.from_dict(shifted)) - p0) / (sign * h)
        p0, jac = p0[use], jac[use]
        x0 = np.array([current[n] for n in names])
        measured = predictor.measured[use]

        def residuals(
            x: Mapping[str, float],
            p0: NDArray[np.float64] = p0,
            jac: NDArray[np.float64] = jac,
            x0: NDArray[np.float64] = x0,
            measured: NDArray[np.float64] = measured,
        ) -> NDArray[np.float64]:
            dx = np.array([x[n] for n in names]) - x0
            pred = np.maximum(p0 + jac @ dx, 1e-9)
            return np.asarray(np.log(pred / measured), dtype=np.float64)

        sol = solve(names, current, PARAMETER_BOUNDS, residuals)
        moved = max(
            abs(sol.values[n] - current[n]) / max(abs(current[n]), _ABS_STEP.get(n, 1e-3))
            for n in names
        )
        current.update(sol.values)
        se = dict(sol.standard_errors)
        if moved < 1e-3:
            break
    return current, se


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
    predictor = _Predictor(runs, accelerator, models)
    return RunPredictions(
        run=np.array([t.run for t in predictor.targets], dtype=np.intp),
        metric=np.array([t.metric for t in predictor.targets], dtype=str),
        predicted=predictor.predict(params),
        measured=predictor.measured,
    )


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


def fit_end_to_end(
    runs: Sequence[Run],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    values: Mapping[str, float],
    *,
    cross_validate: bool = True,
    before_values: Mapping[str, float] | None = None,
) -> tuple[
    dict[str, float],
    dict[str, float],
    dict[str, MetricQuality],
    dict[str, NDArray[np.float64]],
]:
    """Fit the end-to-end parameters; return values, standard errors, quality and residuals.

    ``values`` holds every EfficiencyParams field (the kernel-fitted profile so far).
    """
    names = free_names(runs)
    predictor = _Predictor(runs, accelerator, models)
    fitted, se = _fit(predictor, names, values)
    before = predictor.predict(EfficiencyParams.from_dict(before_values or values))
    after = predictor.predict(EfficiencyParams.from_dict(fitted))
    held = np.full(predictor.measured.size, np.nan)
    if cross_validate:
        labels = [group_of(r) for r in runs]
        splits = [s for _, s in group_splits(labels)] or kfold_splits(len(runs), 5)
        for train, test in splits:
            train_runs = [runs[i] for i in train]
            test_runs = [runs[i] for i in test]
            sub = _Predictor(train_runs, accelerator, models)
            fold_values, _ = _fit(sub, free_names(train_runs), values)
            fold_params = EfficiencyParams.from_dict(fold_values)
            held_pred = _Predictor(test_runs, accelerator, models).predict(fold_params)
            # test indices are sorted, so their targets appear in the same order in both
            test_set = {int(i) for i in test}
            positions = [k for k, t in enumerate(predictor.targets) if t.run in test_set]
            held[positions] = held_pred
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
        "batch_size": [float(_batch(r)) for r in runs],
        "input_tokens": [float(r.input_tokens) for r in runs],
        "output_tokens": [float(r.output_tokens) for r in runs],
        "gpus": [float(r.tp * r.pp) for r in runs],
    }
    return {k: FeatureRange(min(v), max(v)) for k, v in columns.items()}
