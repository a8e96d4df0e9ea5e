"""Kernel time models: roofline form, efficiency curve, collectives, parameter handling."""

from __future__ import annotations

import numpy as np
import pytest
from engine_refs import make_a100

from service.engine.efficiency import DEFAULT_EFFICIENCY, PARAMETER_BOUNDS, EfficiencyParams
from service.engine.errors import UnsupportedDtypeError
from service.engine.hardware import Accelerator
from service.engine.kernels import (
    attended_pairs,
    attention_decode_time_s,
    attention_prefill_time_s,
    collective_time_s,
    gemm_cost,
    gemm_time_s,
)

GEMM = {"weight_bytes_per_element": 2.0, "activation_bytes_per_element": 2.0}


def test_params_round_trip_and_bounds() -> None:
    values = DEFAULT_EFFICIENCY.to_dict()
    assert set(values) == set(PARAMETER_BOUNDS)
    assert EfficiencyParams.from_dict(values) == DEFAULT_EFFICIENCY
    changed = DEFAULT_EFFICIENCY.replace(memory_bandwidth_efficiency=0.5)
    assert changed.memory_bandwidth_efficiency == 0.5
    DEFAULT_EFFICIENCY.check_bounds()
    with pytest.raises(ValueError, match="memory_bandwidth_efficiency"):
        changed.replace(memory_bandwidth_efficiency=1.5).check_bounds()
    with pytest.raises(KeyError):
        EfficiencyParams.from_dict({"not_a_param": 1.0})
    assert DEFAULT_EFFICIENCY.gemm_compute_efficiency("fp8") == 0.71
    assert DEFAULT_EFFICIENCY.gemm_compute_efficiency("bf16") == 0.80


def test_small_gemm_is_memory_bound_and_streams_weights(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(gemm_kernel_latency_us_bf16=0.0)
    t = gemm_time_s(1, 8192, 8192, compute_dtype="bf16", accelerator=h100, params=p, **GEMM)
    weight_bytes = 8192 * 8192 * 2
    bandwidth = h100.memory_bandwidth_bytes_s * p.gemm_memory_bandwidth_efficiency_bf16
    expected = weight_bytes / bandwidth
    assert float(t) == pytest.approx(expected, rel=1e-3)


def test_large_gemm_reaches_max_compute_efficiency(h100: Accelerator) -> None:
    m = np.array([64.0, 1024.0, 65536.0])
    cost = gemm_cost(
        m, 8192, 8192, compute_dtype="bf16", accelerator=h100, params=DEFAULT_EFFICIENCY, **GEMM
    )
    achieved = cost.flops / cost.time_s / h100.peak_flops_s("bf16")
    assert achieved[-1] == pytest.approx(0.80, rel=0.01)
    assert np.all(np.diff(achieved) > 0)
    assert list(cost.bound) == ["memory", "compute", "compute"]


def test_fp8_gemm_uses_fp8_peak_and_efficiency(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(
        gemm_kernel_latency_us_bf16=0.0,
        gemm_kernel_latency_us_fp8=0.0,
        gemm_half_efficiency_rows_bf16=0.0,
        gemm_half_efficiency_rows_fp8=0.0,
    )
    bf = gemm_time_s(16384, 8192, 8192, compute_dtype="bf16", accelerator=h100, params=p, **GEMM)
    f8 = gemm_time_s(
        16384,
        8192,
        8192,
        compute_dtype="fp8",
        accelerator=h100,
        params=p,
        weight_bytes_per_element=1.0,
        activation_bytes_per_element=1.0,
    )
    assert float(bf / f8) == pytest.approx(2.0 * 0.71 / 0.80, rel=1e-3)


def test_gemm_fields_are_per_dtype(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(
        gemm_kernel_latency_us_bf16=0.0,
        gemm_kernel_latency_us_fp8=7.0,
        gemm_memory_bandwidth_efficiency_fp8=0.5,
    )
    fp8 = {"weight_bytes_per_element": 1.0, "activation_bytes_per_element": 1.0}
    small = gemm_cost(1, 8192, 8192, compute_dtype="fp8", accelerator=h100, params=p, **fp8)
    assert float(small.memory_s) == pytest.approx(float(small.bytes) / (3.35e12 * 0.5), rel=1e-6)
    assert float(small.time_s - np.maximum(small.compute_s, small.memory_s)) == pytest.approx(7e-6)
    bf = gemm_cost(1, 8192, 8192, compute_dtype="bf16", accelerator=h100, params=p, **GEMM)
    assert float(bf.time_s) == pytest.approx(float(np.maximum(bf.compute_s, bf.memory_s)))


def test_gemm_output_width_term(h100: Accelerator) -> None:
    """Compute time scales by (n + n_half) / n; memory time does not change."""
    p = DEFAULT_EFFICIENCY.replace(gemm_half_efficiency_columns_fp8=2900.0)
    fp8 = {"weight_bytes_per_element": 1.0, "activation_bytes_per_element": 1.0}
    n = np.array([1024.0, 16384.0])
    plain = gemm_cost(
        8192, n, 8192, compute_dtype="fp8", accelerator=h100, params=DEFAULT_EFFICIENCY, **fp8
    )
    wide = gemm_cost(8192, n, 8192, compute_dtype="fp8", accelerator=h100, params=p, **fp8)
    assert wide.compute_s / plain.compute_s == pytest.approx((n + 2900.0) / n)
    assert np.array_equal(wide.memory_s, plain.memory_s)
    bf = gemm_cost(8192, n, 8192, compute_dtype="bf16", accelerator=h100, params=p, **GEMM)
    bf_plain = gemm_cost(
        8192, n, 8192, compute_dtype="bf16", accelerator=h100, params=DEFAULT_EFFICIENCY, **GEMM
    )
    assert np.array_equal(bf.compute_s, bf_plain.compute_s)


def test_a_grouped_kernel_pays_the_column_term_over_its_whole_grid(h100: Accelerator) -> None:
    """T experts' GEMMs in one grid cost, in compute, what one GEMM T times as wide costs: the
    column roll-off belongs to the grid, not to each expert's narrow slice of it."""
    p = DEFAULT_EFFICIENCY.replace(
        gemm_half_efficiency_columns_fp8=2600.0, gemm_half_efficiency_rows_fp8=150.0
    )
    fp8 = {"weight_bytes_per_element": 1.0, "activation_bytes_per_element": 1.0}
    experts, n = 80.0, 384.0
    one = gemm_cost(
        2.0,
        n,
        4096,
        compute_dtype="fp8",
        accelerator=h100,
        params=p,
        grid_columns=experts * n,
        **fp8,
    )
    wide = gemm_cost(2.0, experts * n, 4096, compute_dtype="fp8", accelerator=h100, params=p, **fp8)
    assert float(one.compute_s) * experts == pytest.approx(float(wide.compute_s), rel=1e-9)
    alone = gemm_cost(2.0, n, 4096, compute_dtype="fp8", accelerator=h100, params=p, **fp8)
    assert float(one.memory_s) == float(alone.memory_s)
    # a grid narrower than one GEMM is that GEMM
    narrow = gemm_cost(
        2.0, n, 4096, compute_dtype="fp8", accelerator=h100, params=p, grid_columns=1.0, **fp8
    )
    assert float(narrow.compute_s) == float(alone.compute_s)


def test_kv_bandwidth_and_attention_length_terms(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(
        attention_kernel_latency_us=0.0,
        kv_bandwidth_efficiency_fp8=0.45,
        attention_half_efficiency_tokens=940.0,
    )
    bf = attention_decode_time_s(64, 8192, 64, 8, 128, kv_dtype="bf16", accelerator=h100, params=p)
    f8 = attention_decode_time_s(64, 8192, 64, 8, 128, kv_dtype="fp8", accelerator=h100, params=p)
    # half the bytes at half the bandwidth fraction: the same time
    assert float(f8) == pytest.approx(float(bf), rel=0.01)
    t = np.array([512.0, 16384.0])
    slow = attention_prefill_time_s(1, t, 64, 8, 128, accelerator=h100, params=p)
    base = attention_prefill_time_s(
        1, t, 64, 8, 128, accelerator=h100, params=p.replace(attention_half_efficiency_tokens=0.0)
    )
    assert slow / base == pytest.approx((t + 940.0) / t, rel=1e-6)


def test_unsupported_dtype_raises() -> None:
    with pytest.raises(UnsupportedDtypeError):
        gemm_time_s(
            1,
            1024,
            1024,
            compute_dtype="fp8",
            accelerator=make_a100(),
            params=DEFAULT_EFFICIENCY,
            **GEMM,
        )


def test_decode_attention_is_kv_bandwidth_bound(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(attention_kernel_latency_us=0.0)
    t = attention_decode_time_s(64, 8192, 64, 8, 128, kv_dtype="bf16", accelerator=h100, params=p)
    kv_bytes = 2 * 64 * 8192 * 8 * 128 * 2
    assert float(t) == pytest.approx(
        kv_bytes / (3.35e12 * p.kv_bandwidth_efficiency_bf16), rel=0.01
    )


def test_decode_attention_of_many_short_sequences_is_bound_by_work_items(
    h100: Accelerator,
) -> None:
    # 256 sequences × 8 KV heads at one cached token: 2,048 work items × 0.026 µs = 53.2 µs,
    # far above the 1 MiB of K/V (0.35 µs at 3.35 TB/s × 0.9), plus the 12 µs kernel floor:
    # 65.2 µs (the H100 FA3 table measures 65.2 µs for this shape).
    t = attention_decode_time_s(256, 1, 8, 8, 128, kv_dtype="bf16", accelerator=h100,
                                params=DEFAULT_EFFICIENCY)  # fmt: skip
    assert float(t) * 1e6 == pytest.approx(2048 * 0.026 + 12.0, rel=1e-3)
    # a long context is bound by its bytes again: the item term does not add to them
    long = attention_decode_time_s(64, 8192, 64, 8, 128, kv_dtype="bf16", accelerator=h100,
                                   params=DEFAULT_EFFICIENCY)  # fmt: skip
    kv_bytes = 2 * 64 * 8192 * 8 * 128 * 2
    bytes_us = kv_bytes / (3.35e12 * DEFAULT_EFFICIENCY.kv_bandwidth_efficiency_bf16) * 1e6
    assert float(long) * 1e6 == pytest.approx(bytes_us + 12.0, rel=0.01)


def test_prefill_attention_is_causal_and_compute_bound(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY.replace(attention_kernel_latency_us=0.0)
    t = attention_prefill_time_s(1, 16384, 64, 8, 128, accelerator=h100, params=p)
    causal_flops = 4 * 64 * 128 * 16384 * 16385 / 2
    assert float(t) == pytest.approx(
        causal_flops / (989.5e12 * p.attention_compute_efficiency), rel=1e-3
    )


def test_attended_pairs_window() -> None:
    assert float(attended_pairs(4, 0)) == 10.0  # 1 + 2 + 3 + 4
    assert float(attended_pairs(1, 99)) == 100.0
    assert float(attended_pairs(1, 99, window_tokens=10)) == 10.0
    assert float(attended_pairs(4, 0, window_tokens=2)) == 1 + 2 + 2 + 2


def test_collectives(h100: Accelerator) -> None:
    p = DEFAULT_EFFICIENCY
    assert float(collective_time_s("all_reduce", 1, 1e9, accelerator=h100, params=p)) == 0.0
    nccl2 = collective_time_s("all_reduce", 2, 512, accelerator=h100, params=p, one_shot=False)
    nccl8 = collective_time_s("all_reduce", 8, 512, accelerator=h100, params=p, one_shot=False)
    assert nccl8 > nccl2 > 0
    big = 1e9
    t = collective_time_s("all_reduce", 8, big, accelerator=h100, params=p)
    ring = 2 * 7 / 8 * big / (450e9 * p.collective_bandwidth_efficiency)
    assert float(t) == pytest.approx(ring, rel=0.01)
    ag = collective_time_s("all_gather", 8, big, accelerator=h100, params=p)
    assert float(ag) == pytest.approx(float(t) / 2, rel=0.01)
    with pytest.raises(ValueError):
        collective_time_s("broadcast", 8, big, accelerator=h100, params=p)


def test_engine_all_reduce_is_the_cheapest_of_one_shot_two_shot_and_ring(
    h100: Accelerator,
) -> None:
    p = DEFAULT_EFFICIENCY
    bw = 450e9 * p.collective_bandwidth_efficiency  # 382.5 GB/s per direction
    lat = p.one_shot_allreduce_latency_us * 1e-6  # 6.3 µs
    # TP8, 4 KiB: one-shot 6.3 µs + 7 × 4096 B / 382.5 GB/s = 6.375 µs (flat in TP: no hops).
    small = collective_time_s("all_reduce", 8, 4096, accelerator=h100, params=p)
    assert float(small) == pytest.approx(lat + 7 * 4096 / bw, rel=1e-9)
    # TP8, 512 KiB: one-shot 6.3 + 7·524288/382.5e9 s = 15.89 µs; two-shot 12.6 + 1.75·524288 /
    # 382.5e9 = 15.00 µs; ring 5 + 14·0.8 + 2.40 = 18.60 µs → two-shot, 15.00 µs.
    m = 524288.0
    medium = collective_time_s("all_reduce", 8, m, accelerator=h100, params=p)
    assert float(medium) == pytest.approx(2 * lat + 1.75 * m / bw, rel=1e-9)
    assert float(medium) * 1e6 == pytest.approx(15.00, abs=0.01)
    # TP2: ring latency 5 + 2 × 0.8 = 6.6 µs > one-shot 6.3 µs, same M bytes each: one-shot.
    two = collective_time_s("all_reduce", 2, m, accelerator=h100, params=p)
    assert float(two) == pytest.approx(lat + m / bw, rel=1e-9)
    # NCCL alone (kernel benchmarks) is the ring.
    nccl = collective_time_s("all_reduce", 8, m, accelerator=h100, params=p, one_shot=False)
    assert float(nccl) == pytest.approx(1.75 * m / bw + (5.0 + 14 * 0.8) * 1e-6, rel=1e-9)


def test_engine_all_reduce_has_no_step_in_message_size(h100: Accelerator) -> None:
    # Consecutive message sizes (one 16 KiB token row of Llama-3.1-70B apart) never jump by more
    # than the transfer of one row at the one-shot byte count: 7 × 16384 B / 382.5 GB/s = 0.30 µs.
    p = DEFAULT_EFFICIENCY
    sizes = np.arange(1, 1025) * 16384.0
    t = collective_time_s("all_reduce", 8, sizes, accelerator=h100, params=p)
    step_limit = 7 * 16384 / (450e9 * p.collective_bandwidth_efficiency)
    assert np.all(np.diff(t) >= 0)
    assert np.max(np.diff(t)) <= step_limit * (1 + 1e-9)
