"""Kernel time models (GEMM, attention, collectives): max(compute, memory) + fixed latency."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from service.engine.accelerator_stack import AcceleratorStack
from service.engine.efficiency import EfficiencyParams, dtype_group
from service.engine.hardware import DTYPE_BYTES, Accelerator

FloatArray = npt.NDArray[np.float64]
# One accelerator, or several laid out per point (figures become arrays over the points).
Hardware = Accelerator | AcceleratorStack
CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "send"]
COLLECTIVE_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "send")

# Attention math runs in 16-bit (fp8 KV caches are dequantised in the kernel): bf16, or fp16 on
# parts without bf16 (``Accelerator.sixteen_bit_dtype``).
ATTENTION_DTYPE = "bf16"
# GEMM outputs are written in at least 16-bit (fp8 scaled-mm kernels emit bf16).
_MIN_OUTPUT_BYTES = 2.0


def as_array(value: npt.ArrayLike) -> FloatArray:
    """Return a float64 array view of a scalar or array input."""
    return np.asarray(value, dtype=np.float64)


def spread(value: npt.ArrayLike, shape: tuple[int, ...]) -> FloatArray:
    """Return ``value`` as a float array of ``shape`` (itself when it has that shape already).

    Adding zeros broadcasts like ``np.broadcast_to`` but costs one ufunc call, which matters
    for the one-point arrays of a single estimate.
    """
    array = as_array(value)
    if array.shape == shape:
        return array
    return array + np.zeros(shape)


# One-point evaluations (``operators.step_cost`` of a single point) pass Python floats through the
# same formulas instead of one-element arrays: a float operation costs ~20 ns, a numpy call on a
# one-element array ~0.5 us. The helpers below are numpy's functions on arrays and the same
# IEEE operation on floats (NaN propagates as in numpy), so either path gives the same numbers.
# They are annotated as arrays, which is what every vectorised caller passes.


def is_scalar(value: object) -> bool:
    """Return whether ``value`` is a one-point evaluation's plain Python float."""
    return type(value) is float


def values(value: npt.ArrayLike) -> FloatArray:
    """Return a Python number as a float (one-point evaluation), else a float64 array."""
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    return np.asarray(value, dtype=np.float64)


def where(condition: object, a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Return ``np.where(condition, a, b)``; on a plain bool, ``a`` or ``b`` itself."""
    if type(condition) is bool:
        return a if condition else b  # type: ignore[return-value]
    return cast(FloatArray, np.where(condition, a, b))  # type: ignore[call-overload]


def maximum(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Return ``np.maximum(a, b)``; on two floats the larger, NaN if either is NaN."""
    if type(a) is float and type(b) is float:
        return a if a >= b or a != a else b
    return np.maximum(a, b)


def minimum(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Return ``np.minimum(a, b)``; on two floats the smaller, NaN if either is NaN."""
    if type(a) is float and type(b) is float:
        return a if a <= b or a != a else b
    return np.minimum(a, b)


def log(value: npt.ArrayLike) -> FloatArray:
    """Return ``np.log(value)``; on a float, ``math.log`` as a float."""
    if type(value) is float:
        return math.log(value)
    return np.log(value)


def sqrt(value: npt.ArrayLike) -> FloatArray:
    """Return ``np.sqrt(value)``; on a float, ``math.sqrt`` as a float."""
    if type(value) is float:
        return math.sqrt(value)
    return np.sqrt(value)


def floor(value: npt.ArrayLike) -> FloatArray:
    """Return ``np.floor(value)``; on a float, the same whole number as a float."""
    if type(value) is float:
        return float(math.floor(value)) if math.isfinite(value) else value
    return np.floor(value)


def ceil(value: npt.ArrayLike) -> FloatArray:
    """Return ``np.ceil(value)``; on a float, the same whole number as a float."""
    if type(value) is float:
        return float(math.ceil(value)) if math.isfinite(value) else value
    return np.ceil(value)


def zeros_like(value: npt.ArrayLike) -> FloatArray:
    """Return zeros shaped like ``value`` (0.0 for a one-point float)."""
    if type(value) is float:
        return 0.0
    return np.zeros_like(value, dtype=np.float64)


def _number_or_array(value: npt.ArrayLike) -> float | FloatArray:
    """Keep a scalar as a Python float (cheaper arithmetic than a 0-d array), else an array."""
    if isinstance(value, (int, float)):
        return float(value)
    return as_array(value)


# Not frozen: a frozen slots dataclass sets each field through object.__setattr__ (~4x the
# construction cost), and a single estimate builds dozens of these. Treat them as immutable.
@dataclass(slots=True)
class KernelCost:
    """Work and time of one or more kernels; every field broadcasts over batch sizes."""

    flops: FloatArray
    bytes: FloatArray
    compute_s: FloatArray  # FLOPs / achieved FLOP/s
    memory_s: FloatArray  # bytes / achieved bandwidth
    communication_s: FloatArray  # interconnect transfer time
    time_s: FloatArray  # summed max(compute, memory) + communication + fixed latency

    def __add__(self, other: KernelCost) -> KernelCost:
        return KernelCost(
            self.flops + other.flops,
            self.bytes + other.bytes,
            self.compute_s + other.compute_s,
            self.memory_s + other.memory_s,
            self.communication_s + other.communication_s,
            self.time_s + other.time_s,
        )

    def scaled(self, count: npt.ArrayLike) -> KernelCost:
        """Return the cost of ``count`` identical kernels (e.g. one per layer)."""
        c = values(count) if is_scalar(self.time_s) else as_array(count)
        return KernelCost(
            self.flops * c,
            self.bytes * c,
            self.compute_s * c,
            self.memory_s * c,
            self.communication_s * c,
            self.time_s * c,
        )

    @property
    def bound(self) -> npt.NDArray[np.str_]:
        """Return which term dominates: 'compute', 'memory' or 'communication'."""
        return bound_of(self.compute_s, self.memory_s, self.communication_s)


def bound_of(
    compute_s: FloatArray, memory_s: FloatArray, communication_s: FloatArray
) -> npt.NDArray[np.str_]:
    """Name the largest of three time terms, elementwise (a str on three floats)."""
    if is_scalar(compute_s) and is_scalar(memory_s) and is_scalar(communication_s):
        # A plain str, no cast: ``cast(npt.NDArray[np.str_], ...)`` subscripts the generic at
        # run time (~5 us, more than the rest of the function).
        label = "compute" if compute_s >= memory_s else "memory"
        top = maximum(compute_s, memory_s)
        return "communication" if communication_s > top else label  # type: ignore[return-value]
    compute_s, memory_s, communication_s = np.broadcast_arrays(compute_s, memory_s, communication_s)
    out = np.where(compute_s >= memory_s, "compute", "memory")
    return np.where(communication_s > np.maximum(compute_s, memory_s), "communication", out)


def zero_cost(shape: tuple[int, ...] = ()) -> KernelCost:
    """Return a cost of nothing."""
    z = np.zeros(shape)
    return KernelCost(z, z, z, z, z, z)


def hardware_peak_flops_s(hardware: Hardware, dtype: str) -> float | FloatArray:
    """Return dense peak FLOP/s of one accelerator, or per point of a stack."""
    if isinstance(hardware, AcceleratorStack):
        return hardware.peak_flops_s(dtype)
    return hardware.peak_flops_s(dtype)


def hardware_attention_flops_s(hardware: Hardware) -> float | FloatArray:
    """Return the 16-bit peak that attention math runs at (bf16, fp16 where bf16 is absent)."""
    if isinstance(hardware, AcceleratorStack):
        return hardware.attention_peak_flops_s()
    return hardware.peak_flops_s(hardware.sixteen_bit_dtype())


def hardware_link_bytes_s(hardware: Hardware, peers: npt.ArrayLike) -> float | FloatArray:
    """Return the per-direction link bandwidth of a collective over ``peers`` GPUs.

    One accelerator (``Accelerator.link_bytes_s``), or per point of a stack.
    """
    counts = np.asarray(peers)
    if counts.ndim == 0:
        return hardware.link_bytes_s(int(counts))
    if isinstance(hardware, AcceleratorStack):
        raise ValueError("a stack of accelerators takes one GPU count per collective")
    unique, inverse = np.unique(counts.astype(np.intp), return_inverse=True)
    rates = np.asarray([hardware.link_bytes_s(int(u)) for u in unique], dtype=np.float64)
    return np.asarray(rates[inverse].reshape(counts.shape), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class GemmRates:
    """One dtype's GEMM figures on one accelerator (or per point of a stack) and parameter set."""

    peak_flops_s: float | FloatArray  # dense peak × best-shape efficiency
    half_rows: float
    half_columns: float
    bandwidth_bytes_s: float | FloatArray  # HBM bandwidth × GEMM streaming fraction
    latency_s: float

    @classmethod
    def of(cls, compute_dtype: str, accelerator: Hardware, params: EfficiencyParams) -> GemmRates:
        eff_max: float | FloatArray = params.gemm_compute_efficiency(compute_dtype)
        if isinstance(accelerator, AcceleratorStack):
            eff_max = eff_max * accelerator.gemm_efficiency_scale(dtype_group(compute_dtype))
        bandwidth_fraction = params.gemm_memory_bandwidth_efficiency(compute_dtype)
        return cls(
            peak_flops_s=hardware_peak_flops_s(accelerator, compute_dtype) * eff_max,
            half_rows=params.gemm_half_efficiency_rows(compute_dtype),
            half_columns=params.gemm_half_efficiency_columns(compute_dtype),
            bandwidth_bytes_s=accelerator.memory_bandwidth_bytes_s * bandwidth_fraction,
            latency_s=params.gemm_kernel_latency_us(compute_dtype) * 1e-6,
        )


def gemm_cost(
    m: npt.ArrayLike,
    n: npt.ArrayLike,
    k: npt.ArrayLike,
    *,
    compute_dtype: str,
    weight_bytes_per_element: float,
    activation_bytes_per_element: float,
    accelerator: Hardware,
    params: EfficiencyParams,
    rates: GemmRates | None = None,
    grid_columns: npt.ArrayLike | None = None,
) -> KernelCost:
    """Cost one GEMM x[m, k] · W[k, n]; m = 0 costs nothing.

    compute: 2mnk / (peak · eff_max · m/(m + m_half) · N/(N + n_half)); memory: weights + input +
    output bytes at the dtype's GEMM bandwidth fraction; plus the dtype's launch latency.
    N is the columns the kernel's grid spans: n for a GEMM of its own; ``grid_columns`` for a
    grouped kernel (one launch over several experts' weights, each n wide), at least n. The
    column roll-off is a cost per input row that the kernel's output columns share (the fp8
    table loses efficiency with fewer columns at every m, docs/physics.md), so a grouped kernel
    shares it over its whole grid. ``rates`` (``GemmRates.of`` the same dtype, accelerator and
    params) skips their lookup.
    """
    if rates is None:
        rates = GemmRates.of(compute_dtype, accelerator, params)
    m_, n_, k_ = values(m), _number_or_array(n), _number_or_array(k)
    weight_elements = n_ * k_
    flops = m_ * (2.0 * weight_elements)
    out_bytes = max(activation_bytes_per_element, _MIN_OUTPUT_BYTES)
    # Weights + input rows + output rows; nothing moves when m = 0.
    row_bytes = k_ * activation_bytes_per_element + n_ * out_bytes
    nbytes = weight_elements * weight_bytes_per_element + m_ * row_bytes
    # flops / (peak · eff_max · m/(m+m_half) · N/(N+n_half)) written without dividing by m or n.
    half_columns: float | FloatArray = rates.half_columns
    if grid_columns is not None and rates.half_columns > 0:
        half_columns = half_columns * n_ / maximum(values(grid_columns), n_)
    seconds_per_row = 2.0 * k_ * (n_ + half_columns) / rates.peak_flops_s
    compute_s = (m_ + rates.half_rows) * seconds_per_row
    latency_s: float | FloatArray = rates.latency_s
    # A GEMM with no rows moves and launches nothing.
    if is_scalar(m_):
        if not m_ > 0:
            nbytes, compute_s, latency_s = zeros_like(nbytes), zeros_like(compute_s), 0.0
    else:
        active = m_ > 0
        if np.count_nonzero(active) < active.size:
            nbytes = np.where(active, nbytes, 0.0)
            compute_s = np.where(active, compute_s, 0.0)
            latency_s = np.where(active, latency_s, 0.0)
    memory_s = nbytes / rates.bandwidth_bytes_s
    time_s = maximum(compute_s, memory_s) + latency_s
    return KernelCost(flops, nbytes, compute_s, memory_s, zeros_like(time_s), time_s)


def gemm_time_s(
    m: npt.ArrayLike,
    n: npt.ArrayLike,
    k: npt.ArrayLike,
    *,
    compute_dtype: str,
    weight_bytes_per_element: float,
    activation_bytes_per_element: float,
    accelerator: Accelerator,
    params: EfficiencyParams,
) -> FloatArray:
    """Return seconds for one GEMM x[m, k] · W[k, n]."""
    return gemm_cost(
        m,
        n,
        k,
        compute_dtype=compute_dtype,
        weight_bytes_per_element=weight_bytes_per_element,
        activation_bytes_per_element=activation_bytes_per_element,
        accelerator=accelerator,
        params=params,
    ).time_s


def attended_pairs(
    new_tokens: npt.ArrayLike, past_tokens: npt.ArrayLike, window_tokens: float = 0.0
) -> FloatArray:
    """Count causal (query, key) pairs for ``new_tokens`` queries after ``past_tokens`` cached ones.

    Query i (0-based) sees past + i + 1 keys, capped at the window when one is set.
    """
    t, s = values(new_tokens), values(past_tokens)

    def cumulative(n: FloatArray) -> FloatArray:
        # Σ_{x=1..n} min(x, W)
        full = n * (n + 1.0) / 2.0
        if window_tokens <= 0:
            return full
        w = float(window_tokens)
        return where(n <= w, full, w * (w + 1.0) / 2.0 + (n - w) * w)

    return cumulative(s + t) - cumulative(s)


def attention_compute_s(
    flops: FloatArray, length: FloatArray, accelerator: Hardware, params: EfficiencyParams
) -> FloatArray:
    """Return attention compute seconds: flops / (peak · eff · L / (L + L_half)), 16-bit math.

    ``length`` is the attention length, the keys seen by the last query of each sequence.
    """
    peak = hardware_attention_flops_s(accelerator) * params.attention_compute_efficiency
    half = params.attention_half_efficiency_tokens
    if half <= 0:
        return values(flops / peak)
    if is_scalar(flops) and is_scalar(length):
        return cast(FloatArray, (flops * (length + half) / length if length > 0 else 0.0) / peak)
    with np.errstate(divide="ignore", invalid="ignore"):
        slowed = np.where(length > 0, flops * (length + half) / length, 0.0)
    return np.asarray(slowed / peak, dtype=np.float64)


def kv_bytes_s(
    accelerator: Hardware, params: EfficiencyParams, kv_dtype: str
) -> float | FloatArray:
    """Return the achieved KV-cache read bandwidth in bytes/s for a KV-cache dtype."""
    return accelerator.memory_bandwidth_bytes_s * params.kv_bandwidth_efficiency(kv_dtype)


def attention_items_s(
    batch_size: npt.ArrayLike, kv_heads: npt.ArrayLike, params: EfficiencyParams
) -> FloatArray:
    """Seconds of an attention kernel's work items: B · KV heads · ``attention_work_item_us``
    (each item a thread block with its own Q load, softmax set-up and output write)."""
    return values(values(batch_size) * values(kv_heads) * params.attention_work_item_us * 1e-6)


def attention_cost(
    batch_size: npt.ArrayLike,
    new_tokens: npt.ArrayLike,
    past_tokens: npt.ArrayLike,
    *,
    num_heads: float | FloatArray,
    score_dim: float | FloatArray,
    value_dim: float | FloatArray,
    kv_bytes_per_token: float | FloatArray,
    kv_heads: float | FloatArray,
    kv_dtype: str = "bf16",
    window_tokens: float = 0.0,
    activation_bytes_per_element: float = 2.0,
    accelerator: Hardware,
    params: EfficiencyParams,
) -> KernelCost:
    """Cost one attention kernel over ``batch_size`` sequences (scores + values, causal).

    FLOPs = 2·B·n_h·(score_dim + value_dim)·pairs (= 4·B·T·S·n_h·d_h for GQA).
    Bytes = cached KV read once per sequence (window-capped) + new KV written + Q read + O written.
    ``kv_bytes_per_token`` is one layer's cache per token on this GPU (GQA: 2·n_kv·d_h·b_kv).
    Work items = B · ``kv_heads`` (the KV heads on this GPU; one for a shared latent cache),
    each ``attention_work_item_us``: time = max(compute, bytes, items) + kernel latency.
    """
    b, t, s = values(batch_size), values(new_tokens), values(past_tokens)
    pairs = attended_pairs(t, s, window_tokens)
    flops = 2.0 * b * num_heads * (score_dim + value_dim) * pairs
    visible = s + t if window_tokens <= 0 else minimum(s + t, window_tokens)
    kv_bytes = b * (visible + t) * kv_bytes_per_token
    qo_bytes = b * t * num_heads * (score_dim + value_dim) * activation_bytes_per_element
    nbytes = kv_bytes + qo_bytes
    compute_s = attention_compute_s(flops, visible, accelerator, params)
    memory_s = nbytes / kv_bytes_s(accelerator, params, kv_dtype)
    items_s = attention_items_s(b, kv_heads, params)
    latency_s = where(b * t > 0, params.attention_kernel_latency_us * 1e-6, 0.0)
    time_s = maximum(maximum(compute_s, memory_s), items_s) + latency_s
    return KernelCost(flops, nbytes, compute_s, memory_s, zeros_like(time_s), time_s)


def attention_decode_time_s(
    batch_size: npt.ArrayLike,
    context_tokens: npt.ArrayLike,
    num_heads: npt.ArrayLike,
    num_kv_heads: npt.ArrayLike,
    head_dim: npt.ArrayLike,
    *,
    kv_dtype: str,
    accelerator: Accelerator,
    params: EfficiencyParams,
) -> FloatArray:
    """Return seconds for one decode attention kernel (one new token, ``context_tokens`` keys).

    The same formula as the estimates' decode step (``attention_cost`` with one new token after
    ``context_tokens − 1`` cached ones, GQA K and V of ``num_kv_heads`` heads, 16-bit Q and O),
    so calibration fits exactly the bytes and FLOPs that estimates charge.
    """
    heads, kv_heads, dim = as_array(num_heads), as_array(num_kv_heads), as_array(head_dim)
    s = as_array(context_tokens)
    cost = attention_cost(
        batch_size,
        1.0,
        np.maximum(s - 1.0, 0.0),
        num_heads=heads,
        score_dim=dim,
        value_dim=dim,
        kv_bytes_per_token=2.0 * kv_heads * dim * DTYPE_BYTES[kv_dtype],
        kv_heads=kv_heads,
        kv_dtype=kv_dtype,
        activation_bytes_per_element=DTYPE_BYTES[ATTENTION_DTYPE],
        accelerator=accelerator,
        params=params,
    )
    return np.asarray(cost.time_s, dtype=np.float64)


def attention_prefill_time_s(
    batch_size: npt.ArrayLike,
    seq_len: npt.ArrayLike,
    num_heads: npt.ArrayLike,
    num_kv_heads: npt.ArrayLike,
    head_dim: npt.ArrayLike,
    *,
    accelerator: Accelerator,
    params: EfficiencyParams,
) -> FloatArray:
    """Return seconds for one causal prefill attention kernel over ``seq_len`` tokens (16-bit)."""
    heads, kv_heads, dim = as_array(num_heads), as_array(num_kv_heads), as_array(head_dim)
    b, t = as_array(batch_size), as_array(seq_len)
    pairs = t * (t + 1.0) / 2.0
    flops = 4.0 * b * heads * dim * pairs
    # Q, O (n_h) and K, V (n_kv) each read or written once, 2 bytes per element.
    nbytes = 2.0 * b * t * dim * (2.0 * heads + 2.0 * kv_heads)
    compute_s = attention_compute_s(flops, t, accelerator, params)
    memory_s = nbytes / kv_bytes_s(accelerator, params, ATTENTION_DTYPE)
    items_s = attention_items_s(b, kv_heads, params)
    latency_s = np.where(b * t > 0, params.attention_kernel_latency_us * 1e-6, 0.0)
    time_s = np.maximum(np.maximum(compute_s, memory_s), items_s) + latency_s
    return np.asarray(time_s, dtype=np.float64)


def _wire_fraction_and_hops(op: str, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return (bytes on the wire per GPU ÷ message bytes, sequential hops) of a ring algorithm."""
    if op == "all_reduce":
        return 2.0 * (n - 1.0) / n, 2.0 * (n - 1.0)
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1.0) / n, n - 1.0
    if op == "send":
        if is_scalar(n):
            return zeros_like(n) + 1.0, zeros_like(n) + 1.0
        return np.ones_like(n), np.ones_like(n)
    raise ValueError(f"unknown collective {op!r}; expected one of {', '.join(COLLECTIVE_OPS)}")


def collective_cost(
    op: str,
    num_gpus: npt.ArrayLike,
    message_bytes: npt.ArrayLike,
    *,
    accelerator: Hardware,
    params: EfficiencyParams,
    one_shot: bool = True,
    link_bytes_s: float | FloatArray | None = None,
) -> KernelCost:
    """Cost one collective over ``num_gpus``; one GPU costs nothing.

    Ring (NCCL): all_reduce moves 2(N−1)/N·M per GPU, all_gather/reduce_scatter/alltoall
    (N−1)/N·M (M = the full buffer), send M; latency = collective_latency_us + hops ·
    collective_hop_latency_us. With ``one_shot`` (a serving engine's all-reduce: vLLM, SGLang
    and TensorRT-LLM custom kernels beside NCCL) an all-reduce takes the cheapest of
      one-shot: one exchange, each GPU reads its N − 1 peers' whole buffers: L + (N−1)·M / bw;
      two-shot: reduce-scatter then all-gather: 2·L + 2(N−1)/N·M / bw;
      ring: as above,
    with L = one_shot_allreduce_latency_us. A minimum of continuous costs is continuous, so
    the cost grows smoothly with the message (no jump where one algorithm hands over to the
    next). Pass ``one_shot=False`` to model NCCL itself (kernel benchmarks).
    The link rate depends on where the N peers are (``Accelerator.link_bytes_s``), or is
    ``link_bytes_s`` when the caller knows it (a send between two placed GPUs).
    """
    n = maximum(values(num_gpus), 1.0)
    m = values(message_bytes)
    fraction, hops = _wire_fraction_and_hops(op, n)
    active = (n > 1) & (m > 0)
    if link_bytes_s is not None:
        rate = link_bytes_s
    elif is_scalar(n):
        rate = accelerator.link_bytes_s(int(n))
    else:
        rate = hardware_link_bytes_s(accelerator, n)
    bandwidth = rate * params.collective_bandwidth_efficiency
    ring_bytes = fraction * m
    ring_s = (
        ring_bytes / bandwidth
        + (params.collective_latency_us + hops * params.collective_hop_latency_us) * 1e-6
    )
    if one_shot and op == "all_reduce":
        custom_latency_s = params.one_shot_allreduce_latency_us * 1e-6
        one_bytes = (n - 1.0) * m
        one_s = one_bytes / bandwidth + custom_latency_s
        two_s = ring_bytes / bandwidth + 2.0 * custom_latency_s
        best_s = minimum(minimum(one_s, two_s), ring_s)
        chosen_bytes = where(one_s <= minimum(two_s, ring_s), one_bytes, ring_bytes)
    else:
        best_s, chosen_bytes = ring_s, ring_bytes
    time_s = where(active, best_s, 0.0)
    wire_bytes = where(active, chosen_bytes, 0.0)
    zero = zeros_like(time_s)
    return KernelCost(zero, wire_bytes + zero, zero, zero, time_s, time_s)


def collective_time_s(
    op: str,
    num_gpus: npt.ArrayLike,
    message_bytes: npt.ArrayLike,
    *,
    accelerator: Accelerator,
    params: EfficiencyParams,
    one_shot: bool = True,
) -> FloatArray:
    """Return seconds for a collective (all_reduce, all_gather, reduce_scatter, alltoall, send)."""
    return collective_cost(
        op, num_gpus, message_bytes, accelerator=accelerator, params=params, one_shot=one_shot
    ).time_s
