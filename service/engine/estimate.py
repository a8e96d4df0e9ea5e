"""One entry point: latency, throughput, memory, cost and energy over an array of batch sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from service.engine.cost import energy_per_token_j, usd_per_million_tokens
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray, peak_flops_s
from service.engine.memory import (
    DEFAULT_MEMORY_UTILIZATION,
    max_batch_size,
    memory_breakdown,
)
from service.engine.operators import StepCost, decode_step, prefill_step
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import critical_batch_size, ridge_point_flop_per_byte
from service.engine.serving import serving_state
from service.engine.shapes import ModelShape

Mode = Literal["static", "serving"]
MODES = ("static", "serving")
StrArray = npt.NDArray[np.str_]


@dataclass(frozen=True, slots=True)
class EstimateResult:
    """Estimate per batch size (arrays aligned with ``batch_size``); memory is per GPU.

    Throughputs are per replica (``gpus_per_replica`` GPUs). Cost fields are NaN when no price is
    known; energy fields are NaN without a TDP.
    """

    mode: str
    compute_dtype: str
    gpus_per_replica: int
    input_tokens: int
    output_tokens: int
    ridge_point_flop_per_byte: float
    critical_batch_size: int | None
    max_batch_size: int  # sequences of input+output tokens whose KV cache fits beside the weights
    usd_per_hour: float | None  # the replica's price (per-GPU price × GPUs)
    batch_size: FloatArray
    running_batch_size: FloatArray  # serving: concurrency capped by KV room; static: batch
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    e2e_latency_ms: FloatArray
    queue_wait_ms: FloatArray
    output_tokens_per_s: FloatArray
    total_tokens_per_s: FloatArray
    requests_per_s: FloatArray
    output_tokens_per_s_per_gpu: FloatArray
    decode_arithmetic_intensity_flop_per_byte: FloatArray
    decode_bound: StrArray
    prefill_arithmetic_intensity_flop_per_byte: FloatArray
    prefill_bound: StrArray
    weights_gb: FloatArray
    kv_cache_gb: FloatArray
    activations_gb: FloatArray
    runtime_overhead_gb: FloatArray
    total_gb: FloatArray
    capacity_gb: FloatArray
    usable_gb: FloatArray
    fits: npt.NDArray[np.bool_]
    usd_per_million_output_tokens: FloatArray
    usd_per_million_input_tokens: FloatArray
    energy_per_output_token_j: FloatArray
    energy_per_token_j: FloatArray


def _check_inputs(
    model: ModelShape,
    accelerator: Accelerator,
    precision: Precision,
    parallelism: Parallelism,
    input_tokens: int,
    output_tokens: int,
    batches: FloatArray,
    mode: str,
) -> None:
    model.validate()
    precision.validate()
    parallelism.check_divides(model)
    peak_flops_s(accelerator, precision.compute_dtype)  # raises UnsupportedDtypeError
    if mode not in MODES:
        raise EngineError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if input_tokens < 1 or output_tokens < 1:
        raise EngineError("input_tokens and output_tokens must be at least 1")
    if batches.ndim != 1 or batches.size == 0 or not np.all(batches >= 1):
        raise EngineError("batch_sizes must be a non-empty list of values ≥ 1")


def estimate(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision = Precision(),
    parallelism: Parallelism = Parallelism(),
    input_tokens: int,
    output_tokens: int,
    batch_sizes: npt.ArrayLike,
    mode: Mode | str = "static",
    params: EfficiencyParams = DEFAULT_EFFICIENCY,
    price_usd_per_hour: float | None = None,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> EstimateResult:
    """Estimate speed, memory and cost per batch size (static) or concurrency (serving).

    Static: TTFT = prefill of B·S_in tokens; TPOT = decode step at batch B and context
    S_in + S_out/2; e2e = TTFT + (S_out − 1)·TPOT. Serving: see ``serving.serving_state``.
    A configuration that does not fit is reported with ``fits`` False, not raised.
    """
    batches = np.asarray(batch_sizes, dtype=np.float64)
    _check_inputs(
        model, accelerator, precision, parallelism, input_tokens, output_tokens, batches, mode
    )
    s_in, s_out = float(input_tokens), float(output_tokens)
    gpus = parallelism.gpus_per_replica
    price = price_usd_per_hour if price_usd_per_hour is not None else accelerator.price_usd_per_hour
    chunk = params.prefill_chunk_tokens
    max_batch = max_batch_size(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        context_tokens=s_in + s_out,
        step_tokens=chunk,
        memory_utilization=memory_utilization,
    )
    decode: StepCost
    prefill: StepCost
    if mode == "static":
        running = batches
        prefill = prefill_step(
            model,
            accelerator,
            batch_size=batches,
            input_tokens=s_in,
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        decode = decode_step(
            model,
            accelerator,
            batch_size=batches,
            context_tokens=s_in + s_out / 2.0,
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        ttft_s = prefill.time_s
        tpot_s = decode.time_s
        e2e_s = ttft_s + (s_out - 1.0) * tpot_s
        queue_s = np.zeros_like(batches)
        requests_per_s = batches / e2e_s
        input_busy_share = ttft_s / e2e_s
        step_tokens = np.minimum(batches * s_in, chunk)
    else:
        state = serving_state(
            model,
            accelerator,
            concurrency=batches,
            max_running=max_batch,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        running = state.running
        decode = state.decode_only
        prefill = prefill_step(
            model,
            accelerator,
            batch_size=1.0,
            input_tokens=min(s_in, chunk),
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        ttft_s, tpot_s, e2e_s = state.ttft_s, state.tpot_s, state.e2e_s
        queue_s = state.queue_wait_s
        requests_per_s = state.requests_per_s
        input_busy_share = state.prefill_time_share
        step_tokens = np.full_like(batches, chunk)
    output_tps = requests_per_s * s_out
    total_tps = requests_per_s * (s_in + s_out)
    memory = memory_breakdown(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        sequences=running,
        context_tokens=s_in + s_out,
        step_tokens=step_tokens,
        memory_utilization=memory_utilization,
    )
    # Cost: split the replica's busy time between prefill (input) and decode (output) tokens.
    one_second = np.ones_like(batches)
    usd_in = usd_per_million_tokens(
        price, gpus, input_busy_share * one_second, requests_per_s * s_in
    )
    usd_out = usd_per_million_tokens(price, gpus, (1.0 - input_busy_share) * one_second, output_tps)
    shape = batches.shape

    def full(x: npt.ArrayLike) -> FloatArray:
        return np.broadcast_to(np.asarray(x, dtype=np.float64), shape).copy()

    def gb(x: npt.ArrayLike) -> FloatArray:
        return full(np.asarray(x, dtype=np.float64) / 1e9)

    return EstimateResult(
        mode=mode,
        compute_dtype=precision.compute_dtype,
        gpus_per_replica=gpus,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        ridge_point_flop_per_byte=ridge_point_flop_per_byte(accelerator, precision.compute_dtype),
        critical_batch_size=critical_batch_size(
            model, accelerator, precision=precision, parallelism=parallelism, params=params
        ),
        max_batch_size=max_batch,
        usd_per_hour=None if price is None else price * gpus,
        batch_size=batches.copy(),
        running_batch_size=full(running),
        ttft_ms=full(ttft_s * 1e3),
        tpot_ms=full(tpot_s * 1e3),
        e2e_latency_ms=full(e2e_s * 1e3),
        queue_wait_ms=full(queue_s * 1e3),
        output_tokens_per_s=full(output_tps),
        total_tokens_per_s=full(total_tps),
        requests_per_s=full(requests_per_s),
        output_tokens_per_s_per_gpu=full(output_tps / gpus),
        decode_arithmetic_intensity_flop_per_byte=full(decode.arithmetic_intensity_flop_per_byte),
        decode_bound=np.broadcast_to(decode.bound, shape).copy(),
        prefill_arithmetic_intensity_flop_per_byte=full(prefill.arithmetic_intensity_flop_per_byte),
        prefill_bound=np.broadcast_to(prefill.bound, shape).copy(),
        weights_gb=gb(memory.weights_bytes),
        kv_cache_gb=gb(memory.kv_cache_bytes),
        activations_gb=gb(memory.activations_bytes),
        runtime_overhead_gb=gb(memory.runtime_overhead_bytes),
        total_gb=gb(memory.total_bytes),
        capacity_gb=gb(memory.capacity_bytes),
        usable_gb=gb(memory.usable_bytes),
        fits=np.broadcast_to(memory.fits, shape).copy(),
        usd_per_million_output_tokens=full(usd_out),
        usd_per_million_input_tokens=full(usd_in),
        energy_per_output_token_j=full(energy_per_token_j(accelerator.tdp_w, gpus, output_tps)),
        energy_per_token_j=full(energy_per_token_j(accelerator.tdp_w, gpus, total_tps)),
    )
