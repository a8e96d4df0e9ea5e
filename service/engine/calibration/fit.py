"""Fit a calibration profile bottom-up: kernel tables first, then end-to-end overheads.

Stages (each runs only when it has measurements, each robust in log(pred/meas) within the
physical bounds of ``service.engine.efficiency.PARAMETER_BOUNDS``):

1. GEMM, per dtype group (bf16, fp8): best-shape compute fraction, row and column half-points,
   streaming bandwidth fraction and launch latency.
2. Attention (decode and prefill together): KV bandwidth fraction per KV dtype group, attention
   compute fraction and its length half-point, attention kernel latency.
3. Collectives: base and per-hop latency, bus bandwidth fraction.
4. End-to-end (static and serving runs): only what kernels cannot see — per-layer, per-step and
   per-sequence overheads, and for serving the admission wait and the prompts ahead per ln R
   (the queue share stays at the backend's prior; see ``end_to_end``).

The result is one ``EfficiencyParams`` (``CalibrationResult.efficiency``) that ``estimate()``
uses directly; ``to_dict``/``from_dict`` store and rebuild it with what intervals need.

Held-out error: k-fold (5) over kernel measurements, leave-one-group-out over end-to-end runs
(group = model for static runs, (model, backend, tp, weights dtype) for serving; beyond
``end_to_end.MAX_FOLDS`` groups, whole groups are merged into that many folds).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from service.engine.calibration import end_to_end as e2e
from service.engine.calibration.domain import Domain, model_kind
from service.engine.calibration.end_to_end import RunPredictions
from service.engine.calibration.extrapolation_cv import extrapolation_spreads
from service.engine.calibration.intervals import (
    ExtrapolationSpread,
    FeatureRange,
    Interval,
    ResidualQuantiles,
    doublings_outside,
    interval,
    residual_quantiles,
    spread_sigma,
    stored_spreads,
)
from service.engine.calibration.kernel_models import KernelBatch, KernelMeasurement
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
    Measurement,
    ServingMeasurement,
    StaticMeasurement,
)
from service.engine.calibration.priors import Prior, prior_backend, priors_for
from service.engine.calibration.quality import (
    ErrorStats,
    MetricQuality,
    error_stats,
    kfold_splits,
    log_residuals,
)
from service.engine.calibration.reach import within_reach
from service.engine.calibration.run_predictor import RunPredictor, mode_of
from service.engine.calibration.solver import solve
from service.engine.efficiency import (
    DTYPE_GROUPS,
    HARNESS_TERMS,
    PARAMETER_BOUNDS,
    EfficiencyParams,
    dtype_group,
    spec_sheet_efficiency,
)
from service.engine.hardware import Accelerator
from service.engine.precision import default_activations
from service.engine.shapes import ModelShape

KFOLDS = 5
FORMAT_VERSION = 1
COLLECTIVE_NAMES = (
    "collective_latency_us",
    "collective_hop_latency_us",
    "collective_bandwidth_efficiency",
)


# attention parameter → (phase whose kernels fit it, "" for either; decode KV dtype group, "" any)
ATTENTION_PARAMETERS: Mapping[str, tuple[str, str]] = {
    "attention_kernel_latency_us": ("", ""),
    "attention_work_item_us": ("decode", ""),
    **{f"kv_bandwidth_efficiency_{g}": ("decode", g) for g in DTYPE_GROUPS},
    "attention_compute_efficiency": ("prefill", ""),
    "attention_half_efficiency_tokens": ("prefill", ""),
}


# The kernel groups a profile fits, each a ``fit.metrics`` key without ``.latency_ms``: GEMMs
# per dtype group, attention per phase, collectives. An upload that lacks a group builds on the
# newest profile fitted on it (services.calibration.kernel_base).
KERNEL_GROUPS: tuple[str, ...] = (
    *(f"gemm_{g}" for g in DTYPE_GROUPS),
    "attention_prefill",
    "attention_decode",  # after prefill: the kernel latency both fit comes from decode tables
    "collective",
)


def kernel_group_parameters(group: str) -> tuple[str, ...]:
    """The parameters measurements of one kernel group (``KERNEL_GROUPS``) set: a GEMM dtype
    group's, with the streaming fraction the bf16 GEMM fit also sets (``_sync_streaming``); an
    attention phase's, with the kernel latency the two phases share; the collectives'."""
    if group.startswith("gemm_"):
        dtype = group.removeprefix("gemm_")
        return (*gemm_names(dtype), *(("memory_bandwidth_efficiency",) if dtype == "bf16" else ()))
    if group.startswith("attention_"):
        phase = group.removeprefix("attention_")
        return tuple(n for n, (p, _) in ATTENTION_PARAMETERS.items() if p in ("", phase))
    if group == "collective":
        return COLLECTIVE_NAMES
    raise ValueError(f"unknown kernel group {group!r}")


def kernel_groups_of(measurements: Sequence[Measurement]) -> set[str]:
    """The kernel groups (``KERNEL_GROUPS``) that ``measurements`` hold."""
    out: set[str] = set()
    for m in measurements:
        if isinstance(m, GemmMeasurement):
            out.add(f"gemm_{dtype_group(m.dtype)}")
        elif isinstance(m, AttentionMeasurement):
            out.add(f"attention_{m.phase}")
        elif isinstance(m, CollectiveMeasurement):
            out.add("collective")
    return out


def gemm_names(group: str) -> tuple[str, ...]:
    """Names of the GEMM parameters fitted for one dtype group (``bf16`` or ``fp8``)."""
    return (
        f"gemm_compute_efficiency_{group}",
        f"gemm_half_efficiency_rows_{group}",
        f"gemm_half_efficiency_columns_{group}",
        f"gemm_memory_bandwidth_efficiency_{group}",
        f"gemm_kernel_latency_us_{group}",
    )


@dataclass(frozen=True)
class CalibrationResult:
    """A fitted profile: one EfficiencyParams, its uncertainty, and how well it predicts."""

    accelerator: str
    efficiency: EfficiencyParams  # every parameter; pass it to estimate() as ``params``
    standard_errors: Mapping[str, float]  # fitted parameters only
    n_measurements: Mapping[str, int]
    quality: Mapping[str, MetricQuality]  # "<kind>.<metric>" → before/after/held-out
    residual_quantiles: Mapping[str, ResidualQuantiles]  # held-out, per metric key
    ranges: Mapping[str, FeatureRange] = field(default_factory=dict)
    transferred_from: str | None = None
    warnings: tuple[str, ...] = ()
    # held-out log(meas/pred) per metric; in memory only (storage keeps the quantiles)
    residuals: Mapping[str, NDArray[np.float64]] = field(default_factory=dict)
    # what the end-to-end stage was fitted on (domain.py); empty for kernel-only profiles
    domain: Domain | None = None
    # the prior set the end-to-end fit shrank toward (priors.py) and its values
    prior_backend: str | None = None
    priors: Mapping[str, Prior] = field(default_factory=dict)
    # measured extra log-spread per metric and extrapolation kind (extrapolation_cv.py)
    spreads: Mapping[str, Mapping[str, ExtrapolationSpread]] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, float]:
        """Every parameter by name."""
        return self.efficiency.to_dict()

    @property
    def parameters(self) -> dict[str, float]:
        """Fitted parameter values by name (unit in the name; efficiencies are fractions)."""
        values = self.values
        return {k: values[k] for k in self.standard_errors}

    def transfer_to(self, accelerator: Accelerator) -> CalibrationResult:
        """The same fitted efficiencies on another spec sheet, flagged as transferred."""
        if accelerator.id == self.accelerator:
            return self
        return replace(
            self,
            accelerator=accelerator.id,
            transferred_from=self.transferred_from or self.accelerator,
        )

    def predict(
        self,
        runs: Sequence[StaticMeasurement | ServingMeasurement],
        accelerator: Accelerator,
        models: Mapping[str, ModelShape],
    ) -> RunPredictions:
        """Predict the measured metrics of end-to-end runs on ``accelerator`` with this profile.

        As estimates do: per GPU count and backend, parameters within their reach (reach.py).
        """
        by_layout: dict[tuple[int, str | None, str, str | None], list[int]] = {}
        for i, r in enumerate(runs):
            shape = models.get(r.model)
            kind = model_kind(shape) if shape is not None else None
            by_layout.setdefault((r.tp * r.pp, r.backend, mode_of(r), kind), []).append(i)
        parts = []
        for (gpus, backend, mode, kind), idx in by_layout.items():
            params = self.params_for(gpus=float(gpus), backend=backend, mode=mode, model_kind=kind)
            got = e2e.predict_runs([runs[i] for i in idx], accelerator, models, params)
            parts.append(replace(got, run=np.asarray(idx, dtype=np.intp)[got.run]))
        if not parts:
            return e2e.predict_runs([], accelerator, models, self.efficiency)
        run = np.concatenate([p.run for p in parts])
        order = np.argsort(run, kind="stable")  # the order predict_runs gives: by run
        return e2e.RunPredictions(
            run=run[order],
            metric=np.concatenate([p.metric for p in parts])[order],
            predicted=np.concatenate([p.predicted for p in parts])[order],
            measured=np.concatenate([p.measured for p in parts])[order],
        )

    def params_for(
        self,
        *,
        gpus: float,
        backend: str | None = None,
        mode: str | None = None,
        model_kind: str | None = None,
    ) -> EfficiencyParams:
        """The efficiencies an estimate on ``gpus`` GPUs uses (``reach.within_reach``)."""
        return within_reach(
            self.efficiency,
            self.priors,
            self.domain,
            gpus=gpus,
            backend=backend,
            mode=mode,
            model_kind=model_kind,
        )

    def quantiles(self, metric: str) -> ResidualQuantiles:
        """Held-out residual quantiles of ``metric`` (e.g. ``serving.tpot_ms``)."""
        found = self.residual_quantiles.get(metric)
        return found if found is not None else residual_quantiles(np.zeros(0))

    def interval(
        self,
        metric: str,
        predicted: ArrayLike,
        features: Mapping[str, ArrayLike] | None = None,
        extrapolating: Mapping[str, ArrayLike] | None = None,
    ) -> Interval:
        """80% prediction interval for ``metric`` around ``predicted`` (see ``intervals``).

        ``extrapolating`` (kind → doublings outside, or 1.0; ``domain.extrapolation_amounts``)
        widens it by the spreads measured held out for those kinds. Without it, ``features``
        (``batch_size``, ``input_tokens``, ``output_tokens``, ``gpus``) widen it by the old
        fixed distance term (profiles stored before domains were recorded).
        """
        transferred = self.transferred_from is not None
        if extrapolating is not None:
            spreads = self.spreads.get(metric, {})
            return interval(
                predicted,
                self.quantiles(metric),
                transferred=transferred,
                extra_sigma=spread_sigma(spreads, extrapolating, metric),
            )
        far = doublings_outside(self.ranges, features) if features else 0.0
        return interval(
            predicted, self.quantiles(metric), transferred=transferred, doublings_outside=far
        )

    def parameter_report(self) -> dict[str, dict[str, float | None]]:
        """Per end-to-end parameter: prior, prior sd, fitted, standard error, shift in prior sds."""
        values = self.values
        out: dict[str, dict[str, float | None]] = {}
        for name, prior in self.priors.items():
            if name not in self.standard_errors:
                continue
            fitted = values[name]
            out[name] = {
                "prior": prior.mean,
                "prior_sd": prior.sd,
                "fitted": fitted,
                "standard_error": _json_float(self.standard_errors[name]),
                "shift_prior_sd": (fitted - prior.mean) / prior.sd,
            }
        return out

    def fit_summary(self) -> dict[str, object]:
        """The profile's ``fit`` object: counts and per kind/metric errors (docs/api.md)."""
        metrics: dict[str, object] = {}
        for key, q in self.quality.items():
            metrics[key] = {
                "before": q.before.as_dict(),
                "after": q.after.as_dict(),
                "held_out": None if q.held_out is None else q.held_out.as_dict(),
            }
        return {
            "n_measurements": sum(self.n_measurements.values()),
            "n_by_kind": dict(self.n_measurements),
            "metrics": metrics,
            "prior_backend": self.prior_backend,
            "parameter_shifts": self.parameter_report(),
            "domain": None if self.domain is None else self.domain.to_dict(),
            "harness_terms": self.harness_terms(),
        }

    def harness_terms(self) -> dict[str, dict[str, float]]:
        """Fitted load-generator terms by load pattern (closed loop only: the shipped runs)."""
        fitted = {n: self.values[n] for n in HARNESS_TERMS if n in self.standard_errors}
        return {"closed_loop": fitted} if fitted else {}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form for storage (NaN becomes None); ``from_dict`` rebuilds the result."""
        return {
            "format_version": FORMAT_VERSION,
            "accelerator": self.accelerator,
            "parameters": self.efficiency.to_dict(),
            "standard_errors": {k: _json_float(v) for k, v in self.standard_errors.items()},
            "n_measurements": dict(self.n_measurements),
            "quality": {
                k: {
                    "before": _stats_dict(q.before),
                    "after": _stats_dict(q.after),
                    "held_out": None if q.held_out is None else _stats_dict(q.held_out),
                }
                for k, q in self.quality.items()
            },
            "residual_quantiles": {
                k: {"n": q.n, "q_low": q.q_low, "q_high": q.q_high}
                for k, q in self.residual_quantiles.items()
            },
            "ranges": {k: {"low": r.low, "high": r.high} for k, r in self.ranges.items()},
            "transferred_from": self.transferred_from,
            "warnings": list(self.warnings),
            "domain": None if self.domain is None else self.domain.to_dict(),
            "prior_backend": self.prior_backend,
            "priors": {k: {"mean": p.mean, "sd": p.sd} for k, p in self.priors.items()},
            "extrapolation_spreads": {
                metric: {
                    kind: {"log_sigma": v.log_sigma, "per_doubling": v.per_doubling, "n": v.n}
                    for kind, v in kinds.items()
                }
                for metric, kinds in self.spreads.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationResult:
        """Rebuild a result stored with ``to_dict`` (parameters absent from it keep the priors)."""
        quality = {
            k: MetricQuality(
                _stats(q["before"]),
                _stats(q["after"]),
                None if q.get("held_out") is None else _stats(q["held_out"]),
            )
            for k, q in data.get("quality", {}).items()
        }
        return cls(
            accelerator=str(data["accelerator"]),
            efficiency=EfficiencyParams.from_dict(data["parameters"]),
            standard_errors={k: _float(v) for k, v in data.get("standard_errors", {}).items()},
            n_measurements={k: int(v) for k, v in data.get("n_measurements", {}).items()},
            quality=quality,
            residual_quantiles={
                k: ResidualQuantiles(int(q["n"]), float(q["q_low"]), float(q["q_high"]))
                for k, q in data.get("residual_quantiles", {}).items()
            },
            ranges={
                k: FeatureRange(float(r["low"]), float(r["high"]))
                for k, r in data.get("ranges", {}).items()
            },
            transferred_from=data.get("transferred_from"),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
            domain=None if data.get("domain") is None else Domain.from_dict(data["domain"]),
            prior_backend=data.get("prior_backend"),
            priors={
                k: Prior(float(p["mean"]), float(p["sd"]))
                for k, p in data.get("priors", {}).items()
            },
            spreads=stored_spreads(data),
        )


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _float(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _stats_dict(s: ErrorStats) -> dict[str, float | int | None]:
    return {"n": s.n, "mdape_pct": _json_float(s.mdape_pct), "mape_pct": _json_float(s.mape_pct)}


def _stats(d: Mapping[str, Any]) -> ErrorStats:
    return ErrorStats(int(d["n"]), _float(d.get("mdape_pct")), _float(d.get("mape_pct")))


def _count(measurements: Sequence[Measurement]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in measurements:
        out[m.kind] = out.get(m.kind, 0) + 1
    return out


@dataclass
class _Stage:
    """One kernel fitting stage: which measurements, which parameters."""

    name: str
    items: list[KernelMeasurement]
    names: tuple[str, ...]


def _kernel_stages(measurements: Sequence[Measurement]) -> list[_Stage]:
    stages: list[_Stage] = []
    for g in DTYPE_GROUPS:
        items: list[KernelMeasurement] = [
            m for m in measurements if isinstance(m, GemmMeasurement) and dtype_group(m.dtype) == g
        ]
        stages.append(_Stage(f"gemm_{g}", items, gemm_names(g)))
    attention = [m for m in measurements if isinstance(m, AttentionMeasurement)]
    measured = {(m.phase, dtype_group(m.kv_dtype)) for m in attention}
    names = tuple(
        name
        for name, (phase, group) in ATTENTION_PARAMETERS.items()
        if not phase or any(p == phase and group in ("", g) for p, g in measured)
    )
    stages.append(_Stage("attention", list(attention), names))
    collectives: list[KernelMeasurement] = [
        m for m in measurements if isinstance(m, CollectiveMeasurement)
    ]
    stages.append(_Stage("collective", collectives, COLLECTIVE_NAMES))
    return [s for s in stages if len(s.items) > len(s.names)]


def _fit_kernels(
    batch: KernelBatch,
    names: Sequence[str],
    values: Mapping[str, float],
    accelerator: Accelerator,
) -> tuple[dict[str, float], dict[str, float]]:
    def residuals(x: Mapping[str, float]) -> NDArray[np.float64]:
        params = EfficiencyParams.from_dict({**values, **x})
        ratio = batch.predict_ms(accelerator, params) / batch.measured_ms
        return np.asarray(np.log(ratio), dtype=np.float64)

    sol = solve(names, values, PARAMETER_BOUNDS, residuals)
    return {**values, **sol.values}, dict(sol.standard_errors)


def streaming_source(groups: Collection[str]) -> str | None:
    """The GEMM dtype group (of ``groups``) whose fit sets the non-GEMM HBM streaming fraction:
    bf16's, else fp8's (the engine's default path is 16-bit); None without either."""
    return next((g for g in ("bf16", "fp8") if g in groups), None)


def _sync_streaming(values: dict[str, float], groups_fitted: set[str]) -> None:
    """Set the non-GEMM streaming fraction from a fitted GEMM group (``streaming_source``)."""
    source = streaming_source(groups_fitted)
    if source is not None:
        values["memory_bandwidth_efficiency"] = values[f"gemm_memory_bandwidth_efficiency_{source}"]


def _kernel_quality(
    stage: _Stage,
    batch: KernelBatch,
    values: Mapping[str, float],
    start: Mapping[str, float],
    accelerator: Accelerator,
    cross_validate: bool,
) -> dict[str, tuple[MetricQuality, NDArray[np.float64]]]:
    """Quality per metric key; attention is reported per phase."""
    measured = batch.measured_ms
    before = batch.predict_ms(accelerator, EfficiencyParams.from_dict(start))
    after = batch.predict_ms(accelerator, EfficiencyParams.from_dict(values))
    held = np.full(len(batch), np.nan)
    if cross_validate:
        for train, test in kfold_splits(len(batch), KFOLDS):
            sub = KernelBatch([batch.items[i] for i in train])
            fold_values, _ = _fit_kernels(sub, stage.names, start, accelerator)
            held_batch = KernelBatch([batch.items[i] for i in test])
            held[test] = held_batch.predict_ms(accelerator, EfficiencyParams.from_dict(fold_values))
    kinds = batch.kinds()
    labels = kinds if stage.name == "attention" else np.full(len(batch), stage.name)
    out: dict[str, tuple[MetricQuality, NDArray[np.float64]]] = {}
    for label in dict.fromkeys(labels.tolist()):
        mask = labels == label
        held_stats = error_stats(held[mask], measured[mask]) if cross_validate else None
        quality = MetricQuality(
            error_stats(before[mask], measured[mask]),
            error_stats(after[mask], measured[mask]),
            held_stats,
        )
        residuals = log_residuals(held[mask], measured[mask]) if cross_validate else np.zeros(0)
        out[f"{label}.latency_ms"] = (quality, residuals)
    return out


# Compute dtypes whose label in a run may name only the weight format (nvfp4/mxfp4 checkpoints
# on GPUs without fp4 tensor cores run their GEMMs on dequantised bf16 tiles).
WEIGHT_ONLY_LABEL = "fp4"
# Runs that are not measuring the engine, left out of the end-to-end fit and reported:
# - decode speed (TPOT, or a static batch's latency) that the fitted engine model misses by more
#   than OUTLIER_FACTOR: at the fitted runs' robust scatter of 3–10% (see
#   benchmarks/results/accuracy.md) a 3× miss lies beyond 10 σ, and soft-L1 still gives such a
#   point the weight of about ten sound ones;
# - a closed-loop TTFT above OUTLIER_FACTOR × the most the engine can make a client wait: every
#   other client's prompt ahead of it (``prefill_queue_share`` = 1) plus Little's-law slot wait
#   (serving.py). Beyond that the time was spent outside the engine (a load generator that could
#   not keep its clients in flight).
OUTLIER_FACTOR = 3.0
SPEED_METRICS = ("serving.tpot_ms", "static.latency_ms")
OUTLIER_ROUNDS = 3  # refit and screen again: a fit freed of gross outliers exposes the next


def compute_dtypes_on(
    runs: Sequence[StaticMeasurement | ServingMeasurement],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
) -> tuple[list[StaticMeasurement | ServingMeasurement], int]:
    """Runs with the activations engines run them with on ``accelerator``, and how many were
    read as weight-only: fp4 compute on a part without an fp4 peak becomes bf16 compute, and
    fp8 or fp4 weights that do not name their activations take
    ``precision.default_activations`` (W8A8 / W4A4 where the part has that peak, as estimates
    asking ``activations="auto"`` do). Runs of models not in ``models`` keep their labels."""
    has_fp4 = WEIGHT_ONLY_LABEL in accelerator.peak_tflops
    out: list[StaticMeasurement | ServingMeasurement] = []
    weight_only = 0
    for r in runs:
        model = models.get(r.model)
        if r.activations_dtype == WEIGHT_ONLY_LABEL and not has_fp4:
            out.append(replace(r, activations_dtype="bf16"))
            weight_only += 1
        elif r.activations_dtype is None and r.weights_dtype in ("fp8", "fp4") and model:
            experts_only = model.quantizes_only_experts(r.weights_dtype)
            activations = default_activations(r.weights_dtype, accelerator, experts_only)
            out.append(replace(r, activations_dtype=activations))
        else:
            out.append(r)
    return out, weight_only


def _outlier_warning(runs: Sequence[StaticMeasurement | ServingMeasurement]) -> str:
    shown = ", ".join(
        f"{r.model} tp{r.tp} {r.input_tokens}/{r.output_tokens}"
        + (f" concurrency {r.concurrency}" if isinstance(r, ServingMeasurement) else "")
        for r in runs[:5]
    )
    more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    return (
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} left out of the fit as not measuring "
        "the engine: it misses their "
        f"decode speed by more than {OUTLIER_FACTOR:g}x, beyond any sound run's scatter, or "
        f"their TTFT exceeds {OUTLIER_FACTOR:g}x the most the engine can queue a closed-loop "
        f"client ({shown}{more})"
    )


def unsound_runs(
    runs: Sequence[StaticMeasurement | ServingMeasurement],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    values: Mapping[str, float],
) -> set[int]:
    """Indices of runs a first fit finds not measuring the engine (see OUTLIER_FACTOR)."""
    prepared: e2e.Prepared = {}
    first, *_ = e2e.fit_end_to_end(
        runs, accelerator, models, dict(values), cross_validate=False, prepared=prepared
    )
    predictor: RunPredictor = prepared["predictor"]
    params = EfficiencyParams.from_dict(first)
    fitted = predictor.predict(params)
    bound = predictor.predict(replace(params, prefill_queue_share=1.0))
    measured = predictor.measured
    metric = np.array([t.metric for t in predictor.targets])
    closed = np.array([_closed_loop(runs[i]) for i in predictor.target_run], dtype=bool)
    limit = math.log(OUTLIER_FACTOR)
    with np.errstate(divide="ignore", invalid="ignore"):
        speed_miss = np.isin(metric, SPEED_METRICS) & (np.abs(np.log(fitted / measured)) > limit)
        queue_miss = (metric == "serving.ttft_ms") & closed & (np.log(measured / bound) > limit)
    return {int(i) for i in predictor.target_run[speed_miss | queue_miss]}


def _closed_loop(run: StaticMeasurement | ServingMeasurement) -> bool:
    return isinstance(run, ServingMeasurement) and run.load_pattern == "closed_loop"


def fit(
    measurements: Sequence[Measurement],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    *,
    base: EfficiencyParams | None = None,
    cross_validate: bool = True,
) -> CalibrationResult:
    """Fit a profile for ``accelerator`` from measurements taken on it (models by catalog id).

    Parameters without measurements keep their value in ``base`` (default: the accelerator's
    spec sheet, ``spec_sheet_efficiency``; a service passes the kernel efficiencies of another
    profile here when the upload holds end-to-end runs without kernel tables).
    """
    borrowed = base is not None
    if base is None:
        base = spec_sheet_efficiency(accelerator)
    start = base.to_dict()
    values = dict(start)
    errors: dict[str, float] = {}
    quality: dict[str, MetricQuality] = {}
    residuals: dict[str, NDArray[np.float64]] = {}
    warnings: list[str] = []
    fitted_groups: set[str] = set()

    stages = _kernel_stages(measurements)
    for stage in stages:
        batch = KernelBatch(stage.items)
        values, se = _fit_kernels(batch, stage.names, values, accelerator)
        errors.update(se)
        if stage.name.startswith("gemm_"):
            fitted_groups.add(stage.name.removeprefix("gemm_"))
    _sync_streaming(values, fitted_groups)
    for stage in stages:
        batch = KernelBatch(stage.items)
        reports = _kernel_quality(stage, batch, values, start, accelerator, cross_validate)
        for key, (q, r) in reports.items():
            quality[key] = q
            residuals[key] = r

    runs = [m for m in measurements if isinstance(m, StaticMeasurement | ServingMeasurement)]
    runs, weight_only = compute_dtypes_on(runs, accelerator, models)
    if weight_only:
        warnings.append(
            f"{weight_only} runs label {WEIGHT_ONLY_LABEL} compute, which this accelerator has "
            "no tensor cores for: fitted as weight-only (4-bit weights, bf16 GEMMs), as engines "
            "run them there"
        )
    known = [m for m in runs if m.model in models]
    for missing in sorted({m.model for m in runs if m.model not in models}):
        warnings.append(f"model {missing!r} is not in the catalog; its runs were skipped")
    ranges: dict[str, FeatureRange] = {}
    domain: Domain | None = None
    backend: str | None = None
    priors: Mapping[str, Prior] = {}
    spreads: dict[str, dict[str, ExtrapolationSpread]] = {}
    if known and not stages and not borrowed:
        warnings.append(
            "no kernel measurements: the kernels keep their spec-sheet efficiencies and the "
            "engine overheads fitted on these runs absorb the kernels' error, which carries "
            "poorly to other models; upload the kernel tables with the runs (several files in "
            "one upload), or before them, to price kernels from measurements"
        )
    if known:
        left_out: list[StaticMeasurement | ServingMeasurement] = []
        for _ in range(OUTLIER_ROUNDS):
            outliers = unsound_runs(known, accelerator, models, values)
            if not outliers or len(outliers) >= len(known):
                break
            left_out += [known[i] for i in sorted(outliers)]
            known = [r for i, r in enumerate(known) if i not in outliers]
        if left_out:
            warnings.append(_outlier_warning(left_out))
        backend = prior_backend([r.backend for r in known])
        priors = priors_for(backend)
        prepared: e2e.Prepared = {}
        values, se, e2e_quality, e2e_residuals = e2e.fit_end_to_end(
            known,
            accelerator,
            models,
            dict(values),
            cross_validate=cross_validate,
            before_values=start,
            priors=priors,
            prepared=prepared,
        )
        errors.update(se)
        quality.update(e2e_quality)
        residuals.update(e2e_residuals)
        ranges = e2e.feature_ranges(known)
        # the domain's loads are what the engine ran at once, as estimates are checked by
        running = prepared["predictor"].running_batches()
        domain = Domain.of_runs(known, models, accelerator.id, running.tolist())
        if cross_validate:
            kinds = {m.id: m.kind for m in domain.models}
            spreads = extrapolation_spreads(known, prepared, e2e_residuals, priors, kinds, running)
    return CalibrationResult(
        accelerator=accelerator.id,
        efficiency=EfficiencyParams.from_dict(values),
        standard_errors=errors,
        n_measurements=_count(measurements),
        quality=quality,
        residual_quantiles={k: residual_quantiles(r) for k, r in residuals.items() if r.size},
        ranges=ranges,
        warnings=tuple(warnings),
        residuals=residuals,
        domain=domain,
        prior_backend=backend,
        priors={k: v for k, v in priors.items() if k in errors},
        spreads=spreads,
    )
