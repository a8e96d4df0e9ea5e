"""One entry point: latency, throughput, memory, cost and energy over an array of batch sizes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from service.engine.accelerator_stack import AcceleratorStack, IntArray
from service.engine.cost import energy_per_token_j, usd_per_million_tokens
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams, engine_only
from service.engine.errors import EngineError, check_context
from service.engine.hardware import Accelerator
from service.engine.kernels import (
    FloatArray,
    Hardware,
    is_scalar,
    minimum,
    spread,
    values,
    zeros_like,
)
from service.engine.memory import (
    DEFAULT_MEMORY_UTILIZATION,
    MemoryBreakdown,
    max_batch_sizes,
    memory_breakdown,
)
from service.engine.operators import AttentionGroup, StepCost, prefill_step, step_costs
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import critical_batch_size
from service.engine.serving import serving_state
from service.engine.shapes import ModelShape

Mode = Literal["static", "serving"]
MODES = ("static", "serving")
# How a serving estimate's requests are offered: a closed loop of clients at the concurrency
# (each sends its next request when the last one ends); open loop, requests arriving on their own
# (a production service's users) with that many in flight on average; or offline, that many
# requests queued at once. Open-loop and offline answers use the engine terms only
# (``efficiency.engine_only``): the closed-loop harness terms describe a load generator's waves,
# which neither has. Open-loop arrivals are spread over the decode cycle (queue share 0).
LOAD_PATTERNS = ("closed_loop", "open_loop", "offline")
StrArray = npt.NDArray[np.str_]


@dataclass(frozen=True, slots=True)
class EstimateResult:
    """Estimate per batch size (arrays aligned with ``batch_size``); memory is per GPU.

    Throughputs are per replica (``gpus_per_replica`` GPUs). Cost fields are NaN when no price is
    known; energy fields are NaN without a TDP.
    """

    mode: str
    compute_dtype: str
    precision: Precision  # as used: ``weights="native"`` resolved to the model's dtype
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
    # Parts of ttft_ms before the request's own prompt runs (serving; 0 for static batches):
    # the admission wait (admission_wait_steps decode steps) and the other requests' prompts
    # that run first.
    admission_wait_ms: FloatArray
    prompts_ahead_ms: FloatArray
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


def _resolved_for_all(
    precision: Precision, model: ModelShape, accelerators: Sequence[Accelerator]
) -> Precision:
    """The precision every stacked member runs (``Precision.resolved``); members whose
    accelerators would resolve it differently cannot share one pass."""
    resolved = {precision.resolved(model, acc) for acc in accelerators}
    if len(resolved) > 1:
        raise EngineError("stacked members' accelerators resolve the precision differently")
    return resolved.pop()


def _check_shared(
    model: ModelShape,
    precision: Precision,
    parallelism: Parallelism,
    mode: str,
    load_pattern: str = "closed_loop",
) -> None:
    """Validate what every member of a call shares: shape, dtypes, layout, mode, load."""
    model.validate()
    precision.validate()
    parallelism.check_divides(model)
    if mode not in MODES:
        raise EngineError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if load_pattern not in LOAD_PATTERNS:
        raise EngineError(
            f"load_pattern must be one of {', '.join(LOAD_PATTERNS)}, got {load_pattern!r}"
        )
    if load_pattern != "closed_loop" and mode != "serving":
        raise EngineError(f"load_pattern {load_pattern} needs mode serving")


def _for_load(params: EfficiencyParams, load_pattern: str) -> EfficiencyParams:
    """The parameters a load pattern uses: only a closed loop keeps its harness terms."""
    return params if load_pattern == "closed_loop" else engine_only(params)


def _check_member(
    model: ModelShape,
    accelerator: Accelerator,
    precision: Precision,
    input_tokens: int,
    output_tokens: int,
    batches: FloatArray,
) -> None:
    """Validate one member: the accelerator's peak for the dtype, lengths and batch sizes."""
    accelerator.peak_flops_s(precision.compute_dtype)  # raises UnsupportedDtypeError
    if input_tokens < 1 or output_tokens < 1:
        raise EngineError("input_tokens and output_tokens must be at least 1")
    check_context(
        "input_tokens + output_tokens", input_tokens + output_tokens, model.max_context_tokens,
        model.id,
    )  # fmt: skip
    if batches.ndim != 1 or batches.size == 0 or np.count_nonzero(batches >= 1) < batches.size:
        raise EngineError("batch_sizes must be a non-empty list of values ≥ 1")


@dataclass(frozen=True, slots=True)
class _Points:
    """Per-point outcome of one evaluation (arrays over the evaluated points)."""

    max_batch: FloatArray
    running: FloatArray
    ttft_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    queue_s: FloatArray
    admission_s: FloatArray
    ahead_s: FloatArray
    requests_per_s: FloatArray
    output_tps: FloatArray
    total_tps: FloatArray
    decode: StepCost
    prefill: StepCost
    memory: MemoryBreakdown
    usd_in: FloatArray
    usd_out: FloatArray


def _evaluate(
    model: ModelShape,
    hardware: Hardware,
    *,
    precision: Precision,
    parallelism: Parallelism,
    s_in: FloatArray,
    s_out: FloatArray,
    batches: FloatArray,
    mode: str,
    params: EfficiencyParams,
    price: float | FloatArray | None,
    memory_utilization: float,
    load_pattern: str = "closed_loop",
    max_running_requests: int | None = None,
    identical_sequences: bool = False,
) -> _Points:
    """Run the timeline, memory and cost formulas elementwise over the points."""
    gpus = parallelism.gpus_per_replica
    chunk = params.prefill_chunk_tokens
    max_batch = max_batch_sizes(
        model,
        hardware,
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
        # Prefill of B prompts, and a decode step at the mean context S_in + S_out/2.
        prefill, decode = step_costs(
            model,
            hardware,
            precision=precision,
            parallelism=parallelism,
            steps=[
                ("prefill", [AttentionGroup.of(batches, s_in, 0.0)]),
                ("decode", [AttentionGroup.of(batches, 1.0, s_in + s_out / 2.0)]),
            ],
            points=np.size(batches),
            params=params,
            identical_sequences=identical_sequences,
        )
        ttft_s = prefill.point_time_s
        tpot_s = decode.point_time_s
        e2e_s = ttft_s + (s_out - 1.0) * tpot_s
        queue_s = admission_s = ahead_s = zeros_like(batches)
        requests_per_s = batches / e2e_s
        input_busy_share = ttft_s / e2e_s
        step_tokens = minimum(batches * s_in, chunk)
    else:
        state = serving_state(
            model,
            hardware,
            concurrency=batches,
            # the KV-cache limit, and the engine's own cap on running requests where it has one
            max_running=(
                max_batch
                if max_running_requests is None
                else minimum(max_batch, float(max_running_requests))
            ),
            input_tokens=s_in,
            output_tokens=s_out,
            precision=precision,
            parallelism=parallelism,
            params=params,
            offline=load_pattern == "offline",
        )
        running = state.running
        decode = state.decode_only
        prefill = prefill_step(
            model,
            hardware,
            batch_size=1.0,
            input_tokens=minimum(s_in, chunk),
            precision=precision,
            parallelism=parallelism,
            params=params,
        )
        ttft_s, tpot_s, e2e_s = state.ttft_s, state.tpot_s, state.e2e_s
        queue_s = state.queue_wait_s
        admission_s, ahead_s = state.admission_wait_s, state.prompts_ahead_s
        requests_per_s = state.requests_per_s
        input_busy_share = state.prefill_time_share
        step_tokens = (
            zeros_like(batches) + chunk if is_scalar(batches) else np.full_like(batches, chunk)
        )
    output_tps = requests_per_s * s_out
    memory = memory_breakdown(
        model,
        hardware,
        precision=precision,
        parallelism=parallelism,
        sequences=running,
        context_tokens=s_in + s_out,
        step_tokens=step_tokens,
        memory_utilization=memory_utilization,
    )
    # Cost: split the replica's busy time between prefill (input) and decode (output) tokens.
    one_second = zeros_like(batches) + 1.0 if is_scalar(batches) else np.ones_like(batches)
    usd_in = usd_per_million_tokens(
        price, gpus, input_busy_share * one_second, requests_per_s * s_in
    )
    usd_out = usd_per_million_tokens(price, gpus, (1.0 - input_busy_share) * one_second, output_tps)
    return _Points(
        max_batch=max_batch,
        running=running,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        e2e_s=e2e_s,
        queue_s=queue_s,
        admission_s=admission_s,
        ahead_s=ahead_s,
        requests_per_s=requests_per_s,
        output_tps=output_tps,
        total_tps=requests_per_s * (s_in + s_out),
        decode=decode,
        prefill=prefill,
        memory=memory,
        usd_in=usd_in,
        usd_out=usd_out,
    )


def _columns(
    p: _Points, batches: FloatArray, tdp_w: float | FloatArray, gpus: int
) -> dict[str, Any]:
    """Return the per-point fields of ``EstimateResult``, each an array shaped like ``batches``."""
    shape = batches.shape
    one = batches.size == 1

    def full(x: npt.ArrayLike) -> FloatArray:
        if one and type(x) is float:  # one point evaluated on floats: packed into arrays below
            return values(x)
        array = np.asarray(x, dtype=np.float64)
        return array.copy() if array.shape == shape else spread(array, shape)

    def gb(x: npt.ArrayLike) -> FloatArray:
        return full(values(x) / 1e9)

    def labels(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if isinstance(x, bool):
            return np.array(x).reshape(shape)
        return x.copy() if x.shape == shape else np.broadcast_to(x, shape).copy()

    memory = p.memory
    # A step costed on floats answers its intensity as a float too.
    decode = p.decode.floats if p.decode.floats is not None else p.decode
    prefill = p.prefill.floats if p.prefill.floats is not None else p.prefill
    columns = {
        "batch_size": batches.copy(),
        "running_batch_size": full(p.running),
        "ttft_ms": full(p.ttft_s * 1e3),
        "tpot_ms": full(p.tpot_s * 1e3),
        "e2e_latency_ms": full(p.e2e_s * 1e3),
        "queue_wait_ms": full(p.queue_s * 1e3),
        "admission_wait_ms": full(p.admission_s * 1e3),
        "prompts_ahead_ms": full(p.ahead_s * 1e3),
        "output_tokens_per_s": full(p.output_tps),
        "total_tokens_per_s": full(p.total_tps),
        "requests_per_s": full(p.requests_per_s),
        "output_tokens_per_s_per_gpu": full(p.output_tps / gpus),
        "decode_arithmetic_intensity_flop_per_byte": full(
            decode.arithmetic_intensity_flop_per_byte
        ),
        "decode_bound": labels(p.decode.bound),
        "prefill_arithmetic_intensity_flop_per_byte": full(
            prefill.arithmetic_intensity_flop_per_byte
        ),
        "prefill_bound": labels(p.prefill.bound),
        "weights_gb": gb(memory.weights_bytes),
        "kv_cache_gb": gb(memory.kv_cache_bytes),
        "activations_gb": gb(memory.activations_bytes),
        "runtime_overhead_gb": gb(memory.runtime_overhead_bytes),
        "total_gb": gb(memory.total_bytes),
        "capacity_gb": gb(memory.capacity_bytes),
        "usable_gb": gb(memory.usable_bytes),
        "fits": labels(memory.fits),
        "usd_per_million_output_tokens": full(p.usd_out),
        "usd_per_million_input_tokens": full(p.usd_in),
        "energy_per_output_token_j": full(energy_per_token_j(tdp_w, gpus, p.output_tps)),
        "energy_per_token_j": full(energy_per_token_j(tdp_w, gpus, p.total_tps)),
    }
    floats = [name for name, value in columns.items() if is_scalar(value)]
    if floats:  # one allocation for all of them (one-element views)
        block = np.array([columns[name] for name in floats], dtype=np.float64)
        block = block.reshape((len(floats), *shape))
        for i, name in enumerate(floats):
            columns[name] = block[i, ...]
    return columns


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
    load_pattern: str = "closed_loop",
    max_running_requests: int | None = None,
) -> EstimateResult:
    """Estimate speed, memory and cost per batch size (static) or concurrency (serving).

    ``precision.weights="native"`` takes the model's ``native_weights_dtype`` (the result's
    ``precision`` says which was used). Static: TTFT = prefill of B·S_in tokens; TPOT = decode
    step at batch B and context S_in + S_out/2; e2e = TTFT + (S_out − 1)·TPOT. Serving: see
    ``serving.serving_state``; ``load_pattern`` (``LOAD_PATTERNS``) says how serving requests
    are offered, and ``max_running_requests`` is the serving engine's cap on requests it runs at
    once (vLLM ``max_num_seqs``; None: only the KV-cache limit). A configuration that does not
    fit is reported with ``fits`` False, not raised.
    """
    batches = np.asarray(batch_sizes, dtype=np.float64)
    precision = precision.resolved(model, accelerator)
    _check_shared(model, precision, parallelism, mode, load_pattern)
    params = _for_load(params, load_pattern)
    _check_member(model, accelerator, precision, input_tokens, output_tokens, batches)
    gpus = parallelism.gpus_per_replica
    price = price_usd_per_hour if price_usd_per_hour is not None else accelerator.price_usd_per_hour
    evaluate = partial(
        _evaluate,
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        mode=mode,
        params=params,
        price=price,
        memory_utilization=memory_utilization,
        load_pattern=load_pattern,
        max_running_requests=max_running_requests,
    )
    points = None
    if batches.size == 1:
        # One point: the same formulas on Python floats (far cheaper than one-element arrays);
        # where a float division by zero or overflow stands for numpy's inf or NaN, the arrays.
        try:
            points = evaluate(
                s_in=values(float(input_tokens)),
                s_out=values(float(output_tokens)),
                batches=values(float(batches[0])),
            )
        except (ZeroDivisionError, OverflowError):
            points = None
    if points is None:
        points = evaluate(
            s_in=np.asarray(float(input_tokens)),
            s_out=np.asarray(float(output_tokens)),
            batches=batches,
        )
    return EstimateResult(
        mode=mode,
        compute_dtype=precision.compute_dtype,
        precision=precision,
        gpus_per_replica=gpus,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        ridge_point_flop_per_byte=accelerator.ridge_point_flop_per_byte(precision.compute_dtype),
        critical_batch_size=critical_batch_size(
            model, accelerator, precision=precision, parallelism=parallelism, params=params
        ),
        max_batch_size=int(points.max_batch),
        usd_per_hour=None if price is None else price * gpus,
        **_columns(points, batches, accelerator.tdp_w, gpus),
    )


def _gemm_efficiency_scales(
    params: EfficiencyParams, member_params: Sequence[EfficiencyParams] | None, member: IntArray
) -> dict[str, FloatArray]:
    """Return each point's GEMM compute efficiency relative to ``params``, per dtype group."""
    if member_params is None:
        return {}
    unit = {"gemm_compute_efficiency_bf16": 1.0, "gemm_compute_efficiency_fp8": 1.0}
    shared = params.replace(**unit)
    if any(own.replace(**unit) != shared for own in member_params):
        raise EngineError("stacked members may differ only in their GEMM compute efficiencies")
    scales: dict[str, FloatArray] = {}
    for group in ("bf16", "fp8"):
        base = params.gemm_compute_efficiency(group)
        ratios = np.asarray([own.gemm_compute_efficiency(group) / base for own in member_params])
        if np.any(ratios != 1.0):
            scales[group] = ratios[member]
    return scales


def estimate_stacked(
    model: ModelShape,
    accelerators: Sequence[Accelerator],
    *,
    precision: Precision = Precision(),
    parallelism: Parallelism = Parallelism(),
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
    batch_sizes: Sequence[npt.ArrayLike],
    mode: Mode | str = "static",
    params: EfficiencyParams = DEFAULT_EFFICIENCY,
    prices_usd_per_hour: Sequence[float | None] | None = None,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
    with_critical_batch: bool = True,
    member_params: Sequence[EfficiencyParams] | None = None,
    load_pattern: str = "closed_loop",
    max_running_requests: int | None = None,
    identical_sequences: bool = False,
) -> list[EstimateResult]:
    """Return ``estimate`` of every member in one vectorised pass over all their points.

    Member i is (accelerators[i], input_tokens[i], output_tokens[i], batch_sizes[i],
    prices_usd_per_hour[i]); model, precision, layout, mode and parameters are shared, except
    that ``member_params[i]`` may differ from ``params`` in the GEMM compute efficiencies (the
    per-accelerator priors). Any invalid member raises for the whole call. Without
    ``with_critical_batch`` the (memoised, but costly when cold) critical batch size is None.
    ``identical_sequences`` (static only): every batch is copies of one prompt decoded
    greedily, as some benchmark harnesses run them, so MoE layers read only one sequence's
    experts (calibration sets it from the measurement; estimates for users never do).
    """
    if identical_sequences and mode != "static":
        raise EngineError("identical_sequences describes a static batch")
    members = len(accelerators)
    prices = list(prices_usd_per_hour) if prices_usd_per_hour is not None else [None] * members
    if not len(input_tokens) == len(output_tokens) == len(batch_sizes) == len(prices) == members:
        raise EngineError("every member needs an accelerator, lengths, batch sizes and a price")
    if members == 0:
        return []
    precision = _resolved_for_all(precision, model, accelerators)
    _check_shared(model, precision, parallelism, mode, load_pattern)
    params = _for_load(params, load_pattern)
    if member_params is not None:
        member_params = [_for_load(p, load_pattern) for p in member_params]
    arrays = [np.asarray(b, dtype=np.float64) for b in batch_sizes]
    distinct = list({id(a): a for a in accelerators}.values())
    for acc in distinct:
        acc.peak_flops_s(precision.compute_dtype)  # raises UnsupportedDtypeError
    if min(input_tokens) < 1 or min(output_tokens) < 1:
        raise EngineError("input_tokens and output_tokens must be at least 1")
    longest = max(i + o for i, o in zip(input_tokens, output_tokens, strict=True))
    check_context("input_tokens + output_tokens", longest, model.max_context_tokens, model.id)
    if any(b.ndim != 1 or b.size == 0 for b in arrays) or not np.all(np.concatenate(arrays) >= 1):
        raise EngineError("batch_sizes must be a non-empty list of values ≥ 1")
    sizes = np.fromiter((b.size for b in arrays), dtype=np.intp, count=members)
    member = np.repeat(np.arange(members), sizes)
    unique = {id(a): k for k, a in enumerate(distinct)}
    acc_index = np.fromiter((unique[id(a)] for a in accelerators), dtype=np.intp, count=members)
    own_params = list(member_params) if member_params is not None else [params] * members
    if len(own_params) != members:
        raise EngineError("member_params needs one entry per member")
    stack = AcceleratorStack.of(
        distinct, acc_index[member], _gemm_efficiency_scales(params, member_params, member)
    )
    member_price = [
        p if p is not None else a.price_usd_per_hour
        for p, a in zip(prices, accelerators, strict=True)
    ]
    price_array = np.asarray([np.nan if p is None else p for p in member_price])[member]
    batches = np.concatenate(arrays)
    gpus = parallelism.gpus_per_replica
    points = _evaluate(
        model,
        stack,
        precision=precision,
        parallelism=parallelism,
        s_in=np.asarray(input_tokens, dtype=np.float64)[member],
        s_out=np.asarray(output_tokens, dtype=np.float64)[member],
        batches=batches,
        mode=mode,
        params=params,
        price=price_array,
        memory_utilization=memory_utilization,
        load_pattern=load_pattern,
        max_running_requests=max_running_requests,
        identical_sequences=identical_sequences,
    )
    columns = _columns(points, batches, stack.tdp_w, gpus)
    ends = np.cumsum(sizes).tolist()
    starts = [0, *ends[:-1]]
    max_batch = points.max_batch[starts].tolist()
    dtype = precision.compute_dtype
    ridge = {id(a): a.ridge_point_flop_per_byte(dtype) for a in distinct}
    critical = [
        critical_batch_size(model, a, precision=precision, parallelism=parallelism, params=p)
        if with_critical_batch
        else None
        for a, p in zip(accelerators, own_params, strict=True)
    ]
    results = []
    for i, acc in enumerate(accelerators):
        price = member_price[i]
        start, end = starts[i], ends[i]
        results.append(
            EstimateResult(
                mode=mode,
                compute_dtype=dtype,
                precision=precision,
                gpus_per_replica=gpus,
                input_tokens=input_tokens[i],
                output_tokens=output_tokens[i],
                ridge_point_flop_per_byte=ridge[id(acc)],
                critical_batch_size=critical[i],
                max_batch_size=int(max_batch[i]),
                usd_per_hour=None if price is None else price * gpus,
                **{name: values[start:end] for name, values in columns.items()},
            )
        )
    return results
