"""Measurement records a calibration is fitted on (one frozen dataclass per kind)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from service.engine.errors import EngineError

KINDS: tuple[str, ...] = ("gemm", "attention", "collective", "static", "serving")
ATTENTION_PHASES: tuple[str, ...] = ("prefill", "decode")
COLLECTIVE_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "send")
# How a benchmark harness offered the load (docs/measurement-formats.md):
# static      one batch of ``batch_size`` prompts, run to completion (StaticMeasurement);
# closed_loop ``concurrency`` requests in flight, a new one sent as soon as one finishes;
# open_loop   requests sent at ``request_rate_per_s`` (arrival process if known), whatever is
#             in flight; ``concurrency`` is then the mean number in flight (or the harness cap);
# offline     every request released at once; ``concurrency`` is the number of requests.
LOAD_PATTERNS: tuple[str, ...] = ("static", "closed_loop", "open_loop", "offline")
SERVING_LOAD_PATTERNS: tuple[str, ...] = ("closed_loop", "open_loop", "offline")
ARRIVAL_PROCESSES: tuple[str, ...] = ("poisson", "constant", "gamma")


class MeasurementError(EngineError):
    """One measurement is unusable; names the row (1 = first data row) and the field."""

    def __init__(self, row: int | None, field: str, message: str) -> None:
        where = f"row {row}: " if row is not None else ""
        super().__init__(f"{where}{field}: {message}")
        self.row = row
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class GemmMeasurement:
    """One dense GEMM [m×k]·[k×n] in ``dtype``, latency per call."""

    dtype: str
    m: int
    n: int
    k: int
    latency_ms: float
    kind: Literal["gemm"] = "gemm"


@dataclass(frozen=True, slots=True)
class AttentionMeasurement:
    """One attention kernel call for one layer.

    Decode: one query token per sequence attending ``context_tokens`` cached tokens.
    Prefill: ``context_tokens`` new tokens per sequence, causal (the prompt length).
    ``num_heads``/``num_kv_heads`` are per GPU.
    """

    phase: str
    batch_size: int
    context_tokens: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    kv_dtype: str
    latency_ms: float
    kind: Literal["attention"] = "attention"


@dataclass(frozen=True, slots=True)
class CollectiveMeasurement:
    """One collective (``op``) over ``num_gpus`` GPUs of one node on a ``message_bytes`` buffer."""

    op: str
    num_gpus: int
    message_bytes: float
    latency_ms: float
    kind: Literal["collective"] = "collective"


@dataclass(frozen=True, slots=True)
class StaticMeasurement:
    """A static batch: ``batch_size`` prompts of ``input_tokens`` each generate ``output_tokens``.

    Gives at least one of: ``latency_ms`` (whole batch, prefill plus decode), ``ttft_ms`` /
    ``tpot_ms``, or ``output_tokens_per_s`` / ``total_tokens_per_s`` (whole batch).
    """

    model: str
    batch_size: int
    input_tokens: int
    output_tokens: int
    weights_dtype: str = "bf16"
    activations_dtype: str | None = None
    kv_cache_dtype: str | None = None
    tp: int = 1
    pp: int = 1
    latency_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    output_tokens_per_s: float | None = None
    total_tokens_per_s: float | None = None
    backend: str = ""
    accelerator: str = ""
    load_pattern: Literal["static"] = "static"
    # Every sequence of the batch is a copy of one prompt, decoded greedily: the harness's batch
    # routes alike through MoE layers (Argonne's TensorRT-LLM scripts; measurement-formats.md).
    identical_prompts: bool = False
    kind: Literal["static"] = "static"

    def whole_batch_latency_ms(self) -> float | None:
        """Whole-batch latency in ms from whichever metric was given, else None."""
        if self.latency_ms is not None:
            return self.latency_ms
        if self.ttft_ms is not None and self.tpot_ms is not None:
            return self.ttft_ms + max(self.output_tokens - 1, 0) * self.tpot_ms
        if self.output_tokens_per_s is not None:
            return 1000.0 * self.batch_size * self.output_tokens / self.output_tokens_per_s
        if self.total_tokens_per_s is not None:
            tokens = self.batch_size * (self.input_tokens + self.output_tokens)
            return 1000.0 * tokens / self.total_tokens_per_s
        return None


@dataclass(frozen=True, slots=True)
class ServingMeasurement:
    """Serving under ``load_pattern`` at ``concurrency`` requests in flight: mean TTFT and TPOT.

    ``request_rate_per_s`` is the offered request rate of an open-loop run (None otherwise);
    ``arrival_process`` how its requests were spaced (``""`` = not stated) and ``burstiness`` the
    shape of a gamma arrival process (1 = Poisson).
    """

    model: str
    input_tokens: int
    output_tokens: int
    concurrency: int
    ttft_ms: float | None
    tpot_ms: float | None
    weights_dtype: str = "bf16"
    activations_dtype: str | None = None
    kv_cache_dtype: str | None = None
    tp: int = 1
    pp: int = 1
    backend: str = ""
    backend_version: str = ""
    accelerator: str = ""
    load_pattern: str = "closed_loop"
    request_rate_per_s: float | None = None
    arrival_process: str = ""
    burstiness: float | None = None
    kind: Literal["serving"] = "serving"


Measurement = (
    GemmMeasurement
    | AttentionMeasurement
    | CollectiveMeasurement
    | StaticMeasurement
    | ServingMeasurement
)


def _positive_finite(row: int | None, field: str, value: float | None, *, optional: bool) -> None:
    if value is None:
        if not optional:
            raise MeasurementError(row, field, "is required")
        return
    if not math.isfinite(value):
        raise MeasurementError(row, field, f"must be finite, got {value}")
    if value <= 0:
        raise MeasurementError(row, field, f"must be positive, got {value}")


def _positive_int(row: int | None, field: str, value: int) -> None:
    if value <= 0:
        raise MeasurementError(row, field, f"must be a positive integer, got {value}")


def validate(m: Measurement, row: int | None = None) -> None:
    """Raise MeasurementError naming ``row`` and the first impossible field of ``m``."""
    if isinstance(m, GemmMeasurement):
        for name in ("m", "n", "k"):
            _positive_int(row, name, getattr(m, name))
        _positive_finite(row, "latency_ms", m.latency_ms, optional=False)
    elif isinstance(m, AttentionMeasurement):
        if m.phase not in ATTENTION_PHASES:
            raise MeasurementError(row, "phase", f"must be one of {', '.join(ATTENTION_PHASES)}")
        for name in ("batch_size", "context_tokens", "num_heads", "num_kv_heads", "head_dim"):
            _positive_int(row, name, getattr(m, name))
        if m.num_heads % m.num_kv_heads:
            raise MeasurementError(
                row, "num_kv_heads", f"must divide num_heads ({m.num_heads}), got {m.num_kv_heads}"
            )
        _positive_finite(row, "latency_ms", m.latency_ms, optional=False)
    elif isinstance(m, CollectiveMeasurement):
        if m.op not in COLLECTIVE_OPS:
            raise MeasurementError(row, "op", f"must be one of {', '.join(COLLECTIVE_OPS)}")
        if m.num_gpus < 2:
            raise MeasurementError(row, "num_gpus", f"needs ≥ 2 GPUs, got {m.num_gpus}")
        _positive_finite(row, "message_bytes", m.message_bytes, optional=False)
        _positive_finite(row, "latency_ms", m.latency_ms, optional=False)
    elif isinstance(m, StaticMeasurement):
        for name in ("batch_size", "input_tokens", "output_tokens", "tp", "pp"):
            _positive_int(row, name, getattr(m, name))
        metrics = ("latency_ms", "ttft_ms", "tpot_ms", "output_tokens_per_s", "total_tokens_per_s")
        for name in metrics:
            _positive_finite(row, name, getattr(m, name), optional=True)
        if m.whole_batch_latency_ms() is None and m.ttft_ms is None and m.tpot_ms is None:
            raise MeasurementError(row, "latency_ms", "give latency, ttft/tpot or tokens/s")
        if m.load_pattern != "static":
            raise MeasurementError(row, "load_pattern", "a static run's load pattern is static")
    elif isinstance(m, ServingMeasurement):
        for name in ("input_tokens", "output_tokens", "concurrency", "tp", "pp"):
            _positive_int(row, name, getattr(m, name))
        _positive_finite(row, "ttft_ms", m.ttft_ms, optional=True)
        _positive_finite(row, "tpot_ms", m.tpot_ms, optional=True)
        if m.ttft_ms is None and m.tpot_ms is None:
            raise MeasurementError(row, "ttft_ms", "give ttft_ms and/or tpot_ms")
        _validate_load(m, row)


def _validate_load(m: ServingMeasurement, row: int | None) -> None:
    if m.load_pattern not in SERVING_LOAD_PATTERNS:
        raise MeasurementError(
            row, "load_pattern", f"must be one of {', '.join(SERVING_LOAD_PATTERNS)} for serving"
        )
    _positive_finite(row, "request_rate_per_s", m.request_rate_per_s, optional=True)
    _positive_finite(row, "burstiness", m.burstiness, optional=True)
    if m.load_pattern == "open_loop" and m.request_rate_per_s is None:
        raise MeasurementError(row, "request_rate_per_s", "is required for an open_loop run")
    if m.load_pattern != "open_loop":
        for name in ("request_rate_per_s", "burstiness"):
            if getattr(m, name) is not None:
                raise MeasurementError(
                    row, name, f"applies to open_loop runs only, not {m.load_pattern}"
                )
        if m.arrival_process:
            raise MeasurementError(
                row, "arrival_process", f"applies to open_loop runs only, not {m.load_pattern}"
            )
    if m.arrival_process and m.arrival_process not in ARRIVAL_PROCESSES:
        raise MeasurementError(
            row, "arrival_process", f"must be one of {', '.join(ARRIVAL_PROCESSES)} or empty"
        )
