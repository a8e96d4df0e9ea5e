"""Roofline answers: ridge point, critical batch size, and the per-operator intensity table."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import cast

import numpy as np

from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.errors import EngineError, check_context
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.operators import (
    OperatorRow,
    decode_step,
    intensity,
    prefill_step,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

PHASES = ("prefill", "decode")
# Largest batch searched for the critical batch size (MoE models need N·k/E ≳ ridge rows).
_MAX_CRITICAL_BATCH = 2**22
_SEARCH_RATIO = 1.02
# Memo of critical batch sizes (a pure function of its inputs); bounded, cleared when full.
_CRITICAL_CACHE: dict[Hashable, int | None] = {}
_CRITICAL_CACHE_SIZE = 1024
_NOT_CACHED = object()


def critical_batch_size(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams = DEFAULT_EFFICIENCY,
) -> int | None:
    """Return the smallest decode batch whose step is compute-bound, or None.

    Compute-bound by the rule of the ``decode_bound`` label (``StepCost.time_by_bound``): the
    rows whose compute term exceeds their memory term take at least as long as the others,
    at achieved rates (peak × GEMM efficiency at that many rows vs bandwidth × streaming
    efficiency), with a one-token context so the KV cache does not count. The spec-sheet ridge
    point (peak ÷ bandwidth) is reported beside it; the two differ by the efficiencies.
    """
    key = (
        model,
        accelerator.memory_bandwidth_gb_s,
        tuple(sorted(accelerator.peak_tflops.items())),
        accelerator.interconnect_gb_s,
        precision,
        parallelism,
        params,
    )
    found = _CRITICAL_CACHE.get(key, _NOT_CACHED)
    if found is _NOT_CACHED:
        if len(_CRITICAL_CACHE) >= _CRITICAL_CACHE_SIZE:
            _CRITICAL_CACHE.clear()
        found = _CRITICAL_CACHE[key] = _search_critical_batch(
            model, accelerator, precision=precision, parallelism=parallelism, params=params
        )
    return cast(int | None, found)


def _search_critical_batch(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
) -> int | None:
    """Search a geometric grid of batches, then the integers inside the first bracket."""
    count = int(np.ceil(np.log(_MAX_CRITICAL_BATCH) / np.log(_SEARCH_RATIO)))
    grid = np.unique(np.floor(_SEARCH_RATIO ** np.arange(count + 1)))

    def reaches(batches: FloatArray) -> FloatArray:
        step = decode_step(
            model,
            accelerator,
            batch_size=batches,
            context_tokens=1.0,
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        compute_s, memory_s, _ = step.time_by_bound()
        return np.asarray(compute_s >= memory_s)

    hit = reaches(grid)
    if not hit.any():
        return None
    first = int(np.argmax(hit))
    if first == 0:
        return int(grid[0])
    candidates = np.arange(grid[first - 1] + 1, grid[first] + 1)
    return int(candidates[int(np.argmax(reaches(candidates)))])


@dataclass(frozen=True, slots=True)
class IntensityRow:
    """One operator (or the total) of the intensity table, per GPU, for one step."""

    name: str
    kind: str
    flops: float
    bytes: float
    arithmetic_intensity_flop_per_byte: float
    bound: str
    time_ms: float


@dataclass(frozen=True, slots=True)
class IntensityResult:
    """Answer of POST /v1/intensity: ridge point, critical batch and the operator table."""

    phase: str
    batch_size: int
    context_tokens: int
    compute_dtype: str
    precision: Precision  # as used: ``weights="native"`` resolved to the model's dtype
    ridge_point_flop_per_byte: float
    critical_batch_size: int | None
    operators: tuple[IntensityRow, ...]
    total: IntensityRow
    overhead_ms: float  # per-layer and per-step fixed costs, included in total.time_ms


def _row(row: OperatorRow) -> IntensityRow:
    return IntensityRow(
        name=row.name,
        kind=row.kind,
        flops=float(row.flops),
        bytes=float(row.bytes),
        arithmetic_intensity_flop_per_byte=float(row.arithmetic_intensity_flop_per_byte),
        bound=str(row.bound),
        time_ms=float(row.time_s) * 1e3,
    )


def analyze_intensity(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    phase: str,
    batch_size: int,
    context_tokens: int,
    precision: Precision = Precision(),
    parallelism: Parallelism = Parallelism(),
    params: EfficiencyParams = DEFAULT_EFFICIENCY,
) -> IntensityResult:
    """Tabulate one step's operators: prefill of ``context_tokens`` per sequence, or a decode
    step after ``context_tokens`` cached tokens, for ``batch_size`` sequences.
    """
    model.validate()
    precision = precision.resolved(model, accelerator)
    precision.validate()
    parallelism.check_divides(model)
    if phase not in PHASES:
        raise EngineError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if batch_size < 1 or context_tokens < 1:
        raise EngineError("batch_size and context_tokens must be at least 1")
    # A decode step adds one token after the cached ones.
    tokens = context_tokens + (1 if phase == "decode" else 0)
    check_context("context_tokens", tokens, model.max_context_tokens, model.id)
    if phase == "decode":
        step = decode_step(
            model,
            accelerator,
            batch_size=float(batch_size),
            context_tokens=float(context_tokens),
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
    else:
        step = prefill_step(
            model,
            accelerator,
            batch_size=float(batch_size),
            input_tokens=float(context_tokens),
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
    total = step.total
    total_row = IntensityRow(
        name="total",
        kind="total",
        flops=float(total.flops),
        bytes=float(total.bytes),
        arithmetic_intensity_flop_per_byte=float(intensity(total.flops, total.bytes)),
        bound=str(step.bound),
        time_ms=float(step.time_s) * 1e3,
    )
    return IntensityResult(
        phase=phase,
        batch_size=batch_size,
        context_tokens=context_tokens,
        compute_dtype=precision.compute_dtype,
        precision=precision,
        ridge_point_flop_per_byte=accelerator.ridge_point_flop_per_byte(precision.compute_dtype),
        critical_batch_size=critical_batch_size(
            model, accelerator, precision=precision, parallelism=parallelism, params=params
        ),
        operators=tuple(_row(r) for r in step.rows),
        total=total_row,
        overhead_ms=float(step.overhead_s) * 1e3,
    )
