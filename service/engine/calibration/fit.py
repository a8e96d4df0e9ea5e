"""Fit a calibration profile bottom-up: kernel tables first, then end-to-end overheads.

Stages (each runs only when it has measurements, each robust in log(pred/meas) within the
physical bounds of ``service.engine.efficiency.PARAMETER_BOUNDS``):

1. GEMM, per dtype group: best-shape compute fraction, row and column half-points, weight
   streaming bandwidth fraction and launch latency (see ``profile``).
2. Attention (decode and prefill together): KV bandwidth fraction, attention compute fraction,
   attention kernel latency.
3. Collectives: base and per-hop latency, bus bandwidth fraction.
4. End-to-end (static and serving runs): only what kernels cannot see — per-layer and per-step
   overheads, and for serving the admission wait (see ``end_to_end``).

Held-out error: k-fold (5) over kernel measurements, leave-one-group-out over end-to-end runs
(group = model for static runs, (model, backend, tp, weights dtype) for serving).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from service.engine.calibration import end_to_end as e2e
from service.engine.calibration.end_to_end import RunPredictions
from service.engine.calibration.intervals import (
    FeatureRange,
    Interval,
    ResidualQuantiles,
    doublings_outside,
    interval,
    residual_quantiles,
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
from service.engine.calibration.profile import (
    BOUNDS,
    GEMM_GROUPS,
    engine_params,
    gemm_group,
    gemm_names,
    initial_values,
    params_for,
)
from service.engine.calibration.quality import (
    MetricQuality,
    error_stats,
    kfold_splits,
    log_residuals,
)
from service.engine.calibration.solver import solve
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape

KFOLDS = 5
COLLECTIVE_NAMES = (
    "collective_latency_us",
    "collective_hop_latency_us",
    "collective_bandwidth_efficiency",
)


@dataclass(frozen=True)
class CalibrationResult:
    """A fitted profile: parameters, their uncertainty, and how well they predict."""

    accelerator: str
    values: Mapping[str, float]  # every parameter (engine fields + per-dtype GEMM terms)
    standard_errors: Mapping[str, float]  # fitted parameters only
    base: EfficiencyParams
    n_measurements: Mapping[str, int]
    quality: Mapping[str, MetricQuality]  # "<kind>.<metric>" → before/after/held-out
    residuals: Mapping[str, NDArray[np.float64]]  # held-out log(meas/pred) per metric
    ranges: Mapping[str, FeatureRange] = field(default_factory=dict)
    transferred_from: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def parameters(self) -> dict[str, float]:
        """Fitted parameter values by name (unit in the name; efficiencies are fractions)."""
        return {k: self.values[k] for k in self.standard_errors}

    @property
    def params(self) -> EfficiencyParams:
        """EfficiencyParams for 16-bit compute without a model-specific GEMM width term."""
        return params_for(self.values, self.base, "bf16")

    def params_for(
        self,
        compute_dtype: str,
        model: ModelShape | None = None,
        tp: int = 1,
        kv_dtype: str = "bf16",
        prefill_tokens: float | None = None,
        batch_size: float | None = None,
    ) -> EfficiencyParams:
        """EfficiencyParams to run the engine with, for one precision (and model/TP/prompt/B)."""
        return params_for(
            self.values, self.base, compute_dtype, model, tp, kv_dtype, prefill_tokens, batch_size
        )

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
        """Predict the measured metrics of end-to-end runs on ``accelerator`` with this profile."""
        return e2e.predict_runs(runs, accelerator, models, self.values, self.base)

    def quantiles(self, metric: str) -> ResidualQuantiles:
        """Held-out residual quantiles of ``metric`` (e.g. ``serving.tpot_ms``)."""
        return residual_quantiles(self.residuals.get(metric, np.zeros(0)))

    def interval(
        self,
        metric: str,
        predicted: ArrayLike,
        features: Mapping[str, ArrayLike] | None = None,
    ) -> Interval:
        """80% prediction interval for ``metric`` around ``predicted`` (see ``intervals``).

        ``features`` (``batch_size``, ``input_tokens``, ``output_tokens``, ``gpus``) widen the
        interval by how far they lie outside the end-to-end calibration data.
        """
        far = doublings_outside(self.ranges, features) if features else 0.0
        return interval(
            predicted,
            self.quantiles(metric),
            transferred=self.transferred_from is not None,
            doublings_outside=far,
        )

    def fit_summary(self) -> dict[str, object]:
        """The profile's ``fit`` object: counts and per kind/metric errors (api.md)."""
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
        }


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
    for g in GEMM_GROUPS:
        items: list[KernelMeasurement] = [
            m for m in measurements if isinstance(m, GemmMeasurement) and gemm_group(m.dtype) == g
        ]
        stages.append(_Stage(f"gemm_{g}", items, gemm_names(g)))
    attention = [m for m in measurements if isinstance(m, AttentionMeasurement)]
    names = ["attention_kernel_latency_us"]
    for g in GEMM_GROUPS:
        if any(m.phase == "decode" and gemm_group(m.kv_dtype) == g for m in attention):
            names.append(f"kv_bandwidth_efficiency_{g}")
    if any(m.phase == "prefill" for m in attention):
        names += ["attention_compute_efficiency", "attention_seq_half_efficiency"]
    stages.append(_Stage("attention", list(attention), tuple(names)))
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
    base: EfficiencyParams,
) -> tuple[dict[str, float], dict[str, float]]:
    def residuals(x: Mapping[str, float]) -> NDArray[np.float64]:
        merged = {**values, **x}
        ratio = batch.predict_ms(accelerator, merged, base) / batch.measured_ms
        return np.asarray(np.log(ratio), dtype=np.float64)

    sol = solve(names, values, BOUNDS, residuals)
    return {**values, **sol.values}, dict(sol.standard_errors)


def _sync_engine_gemm_fields(values: dict[str, float], groups_fitted: set[str]) -> None:
    """Copy a fitted GEMM group's fields into the engine-named defaults (bf16 first)."""
    for g in ("fp8", "bf16"):  # bf16 last so it wins: the engine default path is 16-bit
        if g in groups_fitted:
            values["gemm_rows_half_efficiency"] = values[f"gemm_rows_half_efficiency_{g}"]
            values["memory_bandwidth_efficiency"] = values[f"gemm_memory_bandwidth_efficiency_{g}"]
            values["kernel_latency_us"] = values[f"gemm_kernel_latency_us_{g}"]
    values["kv_bandwidth_efficiency"] = values["kv_bandwidth_efficiency_bf16"]


def _kernel_quality(
    stage: _Stage,
    batch: KernelBatch,
    values: Mapping[str, float],
    start: Mapping[str, float],
    accelerator: Accelerator,
    base: EfficiencyParams,
    cross_validate: bool,
) -> dict[str, tuple[MetricQuality, NDArray[np.float64]]]:
    """Quality per metric key; attention is reported per phase."""
    measured = batch.measured_ms
    before = batch.predict_ms(accelerator, start, base)
    after = batch.predict_ms(accelerator, values, base)
    held = np.full(len(batch), np.nan)
    if cross_validate:
        for train, test in kfold_splits(len(batch), KFOLDS):
            sub = KernelBatch([batch.items[i] for i in train])
            fold_values, _ = _fit_kernels(sub, stage.names, start, accelerator, base)
            held_batch = KernelBatch([batch.items[i] for i in test])
            held[test] = held_batch.predict_ms(accelerator, fold_values, base)
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


def fit(
    measurements: Sequence[Measurement],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    *,
    base: EfficiencyParams = DEFAULT_EFFICIENCY,
    cross_validate: bool = True,
) -> CalibrationResult:
    """Fit a profile for ``accelerator`` from measurements taken on it (models by catalog id)."""
    start = initial_values(base)
    values = dict(start)
    errors: dict[str, float] = {}
    quality: dict[str, MetricQuality] = {}
    residuals: dict[str, NDArray[np.float64]] = {}
    warnings: list[str] = []
    fitted_groups: set[str] = set()

    stages = _kernel_stages(measurements)
    for stage in stages:
        batch = KernelBatch(stage.items)
        values, se = _fit_kernels(batch, stage.names, values, accelerator, base)
        errors.update(se)
        if stage.name.startswith("gemm_"):
            fitted_groups.add(stage.name.removeprefix("gemm_"))
    _sync_engine_gemm_fields(values, fitted_groups)
    for stage in stages:
        batch = KernelBatch(stage.items)
        reports = _kernel_quality(stage, batch, values, start, accelerator, base, cross_validate)
        for key, (q, r) in reports.items():
            quality[key] = q
            residuals[key] = r

    runs = [m for m in measurements if isinstance(m, StaticMeasurement | ServingMeasurement)]
    known = [m for m in runs if m.model in models]
    for missing in sorted({m.model for m in runs if m.model not in models}):
        warnings.append(f"model {missing!r} is not in the catalog; its runs were skipped")
    ranges: dict[str, FeatureRange] = {}
    if known:
        kernel_values = dict(values)
        values, se, e2e_quality, e2e_residuals = e2e.fit_end_to_end(
            known,
            accelerator,
            models,
            kernel_values,
            base,
            cross_validate=cross_validate,
            before_values=start,
        )
        errors.update(se)
        quality.update(e2e_quality)
        residuals.update(e2e_residuals)
        ranges = e2e.feature_ranges(known)
    return CalibrationResult(
        accelerator=accelerator.id,
        values=values,
        standard_errors=errors,
        base=base,
        n_measurements=_count(measurements),
        quality=quality,
        residuals=residuals,
        ranges=ranges,
        warnings=tuple(warnings),
    )


def engine_params_of(result: CalibrationResult) -> EfficiencyParams:
    """The engine-named subset of a result as EfficiencyParams."""
    return engine_params(result.values, result.base)
