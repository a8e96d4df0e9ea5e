"""What a profile was fitted on (its domain) and what of an estimate request lies outside it.

A profile's end-to-end parameters are evidenced only by the runs it was fitted on: their
backends and their versions, models (with the traits that change the physics: dense / MoE /
MLA, layer count, hidden size), precisions, modes (static batch or serving) and how serving load
was offered (closed loop, open loop, offline), batch sizes or
concurrencies, prompt and output lengths, GPU counts, and the accelerator. ``Domain`` records
that; ``extrapolation`` lists, for one request, every dimension it lies outside of, and
``extrapolation_kinds`` groups them into the kinds whose held-out interval widening the fit
measures (``intervals``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from service.engine.backend_names import canonical_backend
from service.engine.calibration.intervals import DIRECTIONS, directed
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.run_predictor import batch_of, precision_of
from service.engine.efficiency import dtype_group
from service.engine.shapes import ModelShape

Run = StaticMeasurement | ServingMeasurement
# Kinds that apply whole once a request is outside (numeric kinds apply per doubling).
WHOLE_KINDS = ("model", "model_kind", "mode", "backend")
# Numeric kinds whose spreads are measured per direction (intervals.directed; the keys of
# extrapolation_cv.NUMERIC_KINDS).
PER_DIRECTION_KINDS = ("concurrency", "length", "gpus")
# Numeric dimensions and the request feature each is checked against.
NUMERIC = ("batch_size", "concurrency", "input_tokens", "output_tokens", "gpus", "layers")
# Which widening kind (a key of intervals.DEFAULT_SPREADS) each dimension belongs to.
KIND_OF: Mapping[str, str] = {
    "model": "model",
    "model_kind": "model_kind",
    "layers": "model",
    "hidden_size": "model",
    "precision": "model",
    "backend": "backend",
    "mode": "mode",
    "batch_size": "concurrency",
    "concurrency": "concurrency",
    "input_tokens": "length",
    "output_tokens": "length",
    "gpus": "gpus",
    "accelerator": "accelerator",
    # reported only: no shipped run measures a load pattern besides the closed loop, so no
    # spread widens for it (intervals.spread_sigma skips kinds without one)
    "load_pattern": "load_pattern",
}


def model_kind(model: ModelShape) -> str:
    """``mla`` (DeepSeek-style latent attention), ``moe`` or ``dense``."""
    if model.is_mla:
        return "mla"
    return "moe" if model.is_moe else "dense"


@dataclass(frozen=True, slots=True)
class ModelTraits:
    """A fitted model and the traits that change how its runs scale."""

    id: str
    kind: str  # dense / moe / mla
    layers: int
    hidden_size: int

    @classmethod
    def of(cls, model: ModelShape) -> ModelTraits:
        """Traits of a catalog model."""
        return cls(model.id, model_kind(model), model.num_layers, model.hidden_size)


@dataclass(frozen=True, slots=True)
class Extrapolation:
    """One dimension of a request outside the profile's domain.

    Numeric dimensions give the fitted range (``fitted_low`` … ``fitted_high``); categorical ones
    the fitted values. ``requested`` is the value (for a sweep, the one farthest outside).
    """

    dimension: str
    requested: float | str
    fitted_low: float | None = None
    fitted_high: float | None = None
    fitted_values: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """Widening kind of this dimension (``model``, ``concurrency``, ``length``, ...)."""
        return KIND_OF[self.dimension]

    @property
    def doublings(self) -> float | None:
        """log2 distance of the requested value outside the fitted range (numeric dimensions)."""
        if self.fitted_low is None or self.fitted_high is None or isinstance(self.requested, str):
            return None
        v = max(float(self.requested), 1e-12)
        return max(math.log2(self.fitted_low / v), math.log2(v / self.fitted_high), 0.0)

    def widening_kind(self, model_kind_outside: bool) -> str:
        """The kind this dimension widens an interval under (``extrapolation_amounts``):
        numeric kinds by direction; a model's traits under ``model_kind`` when the model's
        kind lies outside too (measured on held-out models of another kind than any fitted
        one, that spread is the whole model extrapolation, not an addition to the same-kind
        one)."""
        kind = self.kind
        if kind == "model" and model_kind_outside:
            return "model_kind"
        if kind in PER_DIRECTION_KINDS and self.fitted_high is not None:
            above = not isinstance(self.requested, str) and self.requested > self.fitted_high
            return directed(kind, "above" if above else "below")
        return kind

    def as_dict(self) -> dict[str, Any]:
        """JSON form (the API's ``calibration.extrapolation`` item)."""
        return {
            "dimension": self.dimension,
            "requested": self.requested,
            "fitted_low": self.fitted_low,
            "fitted_high": self.fitted_high,
            "fitted_values": list(self.fitted_values),
        }


@dataclass(frozen=True, slots=True)
class Domain:
    """What a profile's end-to-end stage was fitted on; empty for a kernel-only profile."""

    accelerator: str
    backends: tuple[str, ...] = ()
    models: tuple[ModelTraits, ...] = ()
    precisions: tuple[str, ...] = ()  # "weights/activations/kv_cache"
    modes: tuple[str, ...] = ()
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # "backend version" of each run that names one (an engine release changes its overheads:
    # the 2024 vLLM static batches pay far more per step than 2025–26 serving releases)
    backend_versions: tuple[str, ...] = ()
    # how the serving runs' load was offered (closed_loop, open_loop, offline)
    load_patterns: tuple[str, ...] = ()

    @classmethod
    def of_runs(
        cls,
        runs: Sequence[Run],
        models: Mapping[str, ModelShape],
        accelerator: str,
        running: Sequence[float] | None = None,
    ) -> Domain:
        """The domain of runs whose models are all in ``models``. ``running``: per run, the
        requests its engine ran at once (``RunPredictor.running_batches``), the load an
        estimate is checked by; default each run's batch or concurrency."""
        if not runs:
            return cls(accelerator)
        loads = [float(batch_of(r)) for r in runs] if running is None else running
        columns: dict[str, list[float]] = {k: [] for k in NUMERIC}
        for r, load in zip(runs, loads, strict=True):
            name = "batch_size" if isinstance(r, StaticMeasurement) else "concurrency"
            columns[name].append(float(load))
            columns["input_tokens"].append(float(r.input_tokens))
            columns["output_tokens"].append(float(r.output_tokens))
            columns["gpus"].append(float(r.tp * r.pp))
            columns["layers"].append(float(models[r.model].num_layers))
        traits = {r.model: ModelTraits.of(models[r.model]) for r in runs}
        return cls(
            accelerator=accelerator,
            backends=tuple(sorted({r.backend for r in runs if r.backend})),
            models=tuple(traits[k] for k in sorted(traits)),
            precisions=tuple(sorted({_precision_key(r) for r in runs})),
            modes=tuple(
                sorted({"static" if isinstance(r, StaticMeasurement) else "serving" for r in runs})
            ),
            ranges={k: (min(v), max(v)) for k, v in columns.items() if v},
            backend_versions=tuple(
                sorted(
                    {
                        f"{r.backend} {r.backend_version}"
                        for r in runs
                        if isinstance(r, ServingMeasurement) and r.backend_version
                    }
                )
            ),
            load_patterns=tuple(
                sorted({r.load_pattern for r in runs if isinstance(r, ServingMeasurement)})
            ),
        )

    @property
    def empty(self) -> bool:
        """True when no end-to-end run was fitted (kernel tables only)."""
        return not self.models

    def to_dict(self) -> dict[str, Any]:
        """JSON form stored in the profile's result."""
        return {
            "accelerator": self.accelerator,
            "backends": list(self.backends),
            "models": [
                {"id": m.id, "kind": m.kind, "layers": m.layers, "hidden_size": m.hidden_size}
                for m in self.models
            ],
            "precisions": list(self.precisions),
            "modes": list(self.modes),
            "ranges": {k: {"low": lo, "high": hi} for k, (lo, hi) in self.ranges.items()},
            "backend_versions": list(self.backend_versions),
            "load_patterns": list(self.load_patterns),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Domain:
        """Rebuild a stored domain."""
        return cls(
            accelerator=str(data.get("accelerator", "")),
            # profiles stored before names were canonical may spell an engine otherwise
            backends=tuple(sorted({canonical_backend(str(b)) for b in data.get("backends", ())})),
            models=tuple(
                ModelTraits(str(m["id"]), str(m["kind"]), int(m["layers"]), int(m["hidden_size"]))
                for m in data.get("models", ())
            ),
            precisions=tuple(str(p) for p in data.get("precisions", ())),
            modes=tuple(str(m) for m in data.get("modes", ())),
            ranges={
                str(k): (float(r["low"]), float(r["high"]))
                for k, r in data.get("ranges", {}).items()
            },
            backend_versions=tuple(str(v) for v in data.get("backend_versions", ())),
            load_patterns=tuple(str(p) for p in data.get("load_patterns", ())),
        )


def _precision_key(run: Run) -> str:
    p = precision_of(run)
    return f"{p.weights}/{p.activations}/{p.kv_cache}"


def _numeric(
    dimension: str, values: ArrayLike, ranges: Mapping[str, tuple[float, float]]
) -> Extrapolation | None:
    if dimension not in ranges:
        return None
    low, high = ranges[dimension]
    v = np.atleast_1d(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    outside = v[(v < low) | (v > high)]
    if outside.size == 0:
        return None
    # the requested value farthest outside, in doublings
    far = outside[np.argmax(np.maximum(np.log2(low / outside), np.log2(outside / high)))]
    return Extrapolation(dimension, float(far), low, high)


def extrapolation(
    domain: Domain,
    *,
    model: ModelShape,
    accelerator: str,
    mode: str,
    batch_sizes: ArrayLike,
    input_tokens: float,
    output_tokens: float,
    gpus: float,
    weights_dtype: str,
    backend: str | None = None,
    load_pattern: str = "closed_loop",
) -> list[Extrapolation]:
    """Every dimension of a request that lies outside ``domain`` (empty when all inside).

    A kernel-only domain (no end-to-end runs) has no end-to-end evidence to extrapolate from,
    so only the accelerator is checked. A serving request whose ``load_pattern`` (closed_loop,
    offline, open_loop) no fitted run had is reported. Empty ``batch_sizes`` (a simulated
    open-loop stream, which has no concurrency of its own) leave the load unchecked.
    """
    out: list[Extrapolation] = []
    if accelerator != domain.accelerator:
        out.append(Extrapolation("accelerator", accelerator, fitted_values=(domain.accelerator,)))
    if domain.empty:
        return out
    if backend and domain.backends and backend not in domain.backends:
        out.append(Extrapolation("backend", backend, fitted_values=domain.backends))
    if mode not in domain.modes:
        out.append(Extrapolation("mode", mode, fitted_values=domain.modes))
    elif mode == "serving" and domain.load_patterns and load_pattern not in domain.load_patterns:
        out.append(Extrapolation("load_pattern", load_pattern, fitted_values=domain.load_patterns))
    fitted_ids = tuple(m.id for m in domain.models)
    if model.id not in fitted_ids:
        out.append(Extrapolation("model", model.id, fitted_values=fitted_ids))
        kinds = tuple(sorted({m.kind for m in domain.models}))
        if model_kind(model) not in kinds:
            out.append(Extrapolation("model_kind", model_kind(model), fitted_values=kinds))
        hidden = [float(m.hidden_size) for m in domain.models]
        found = _numeric(
            "hidden_size", model.hidden_size, {"hidden_size": (min(hidden), max(hidden))}
        )
        if found is not None:
            out.append(found)
    groups = tuple(sorted({dtype_group(p.split("/")[0]) for p in domain.precisions}))
    if dtype_group(weights_dtype) not in groups:
        out.append(Extrapolation("precision", weights_dtype, fitted_values=groups))
    load = "batch_size" if mode == "static" else "concurrency"
    for dimension, values in (
        (load, batch_sizes),
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
        ("gpus", gpus),
        ("layers", float(model.num_layers)),
    ):
        found = _numeric(dimension, values, domain.ranges)
        if found is not None:
            out.append(found)
    return out


def doublings_outside(domain: Domain, dimension: str, values: ArrayLike) -> np.ndarray:
    """log2 distance of each value outside the fitted range of ``dimension`` (0 inside/unknown)."""
    below, above = doublings_below_above(domain, dimension, values)
    return np.asarray(np.maximum(below, above))


def doublings_below_above(
    domain: Domain, dimension: str, values: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """log2 distances of each value below and above the fitted range (0 inside/unknown)."""
    v = np.maximum(np.asarray(values, dtype=float), 1e-12)
    if dimension not in domain.ranges:
        return np.zeros(np.shape(v)), np.zeros(np.shape(v))
    low, high = domain.ranges[dimension]
    return np.maximum(np.log2(low / v), 0.0), np.maximum(np.log2(v / high), 0.0)


def extrapolation_amounts(
    domain: Domain,
    found: Sequence[Extrapolation],
    *,
    mode: str,
    batch_sizes: ArrayLike,
    input_tokens: float,
    output_tokens: float,
    gpus: float,
    prefill_only: bool = False,
) -> dict[str, ArrayLike]:
    """Per widening kind, how far a request extrapolates (intervals.spread_sigma's input).

    ``prefill_only``: for a figure the output length plays no part in (a static batch's TTFT,
    its prefill), the length kind counts the input length alone.

    Numeric kinds give doublings outside the fitted range, per point for the batch size or
    concurrency (a sweep's points lie at different distances), each under its direction
    (``concurrency_above``, ``concurrency_below``, ...: intervals.directed): predicting a
    heavier load than the fit saw reaches regimes its runs did not show (compute-bound steps,
    KV-limited admission), a lighter one approaches the memory-bound limit, so the two are
    measured apart. Whole kinds give 1.0. The accelerator is left out: transfer has its own
    widening (``intervals.TRANSFER_LOG_SIGMA``).
    """
    out: dict[str, ArrayLike] = {}
    dims = {e.dimension for e in found}

    def add(kind: str, below: ArrayLike, above: ArrayLike) -> None:
        for direction, amount in zip(DIRECTIONS, (below, above), strict=True):
            if np.any(np.asarray(amount) > 0):
                out[directed(kind, direction)] = amount

    load = "batch_size" if mode == "static" else "concurrency"
    if load in dims:
        add("concurrency", *doublings_below_above(domain, load, batch_sizes))
    if dims & {"input_tokens", "output_tokens"}:
        in_below, in_above = doublings_below_above(domain, "input_tokens", input_tokens)
        out_below, out_above = doublings_below_above(domain, "output_tokens", output_tokens)
        if prefill_only:
            out_below, out_above = np.zeros(()), np.zeros(())
        add(
            "length",
            float(np.maximum(in_below, out_below)),
            float(np.maximum(in_above, out_above)),
        )
    if "gpus" in dims:
        add("gpus", *(float(a) for a in doublings_below_above(domain, "gpus", gpus)))
    outside_kind = model_kind_outside(found)
    for e in found:
        if e.kind in WHOLE_KINDS:
            out[e.widening_kind(outside_kind)] = 1.0
    return out


def model_kind_outside(found: Sequence[Extrapolation]) -> bool:
    """Whether the requested model is of a kind (dense, MoE, MLA) no fitted model is."""
    return any(e.kind == "model_kind" for e in found)
