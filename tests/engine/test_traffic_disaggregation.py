"""Disaggregated prefill and decode pools (xPyD): hand-checked TTFT, TPOT, transfer and load."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from engine_refs import llama_31_8b, make_h100

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import EngineError
from service.engine.memory import kv_cache_bytes_per_token
from service.engine.operators import AttentionGroup, step_cost
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.traffic.disaggregation import (
    PoolGroup,
    Pools,
    decode_capacity,
    link_peers,
    prefill_capacity,
    transfer_seconds,
)
from service.engine.traffic.lengths import LengthDistribution
from service.engine.traffic.model import Replica, TrafficSpec

PARAMS = DEFAULT_EFFICIENCY.replace(admission_wait_steps=0.0, prefill_queue_share=0.0)
PRECISION, LAYOUT = Precision(), Parallelism()
# Llama-3.1-8B in bf16 on one GPU: 2 (K and V) · 32 layers · 8 KV heads · 128 · 2 bytes.
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 131,072
# One point-to-point send (kernels.collective_cost): bytes / (link · 0.85) + (5 + 0.8) µs.
EFFICIENCY, LATENCY_S = 0.85, (5.0 + 0.8) * 1e-6


@pytest.fixture(scope="module")
def replica() -> Replica:
    return Replica.prepare(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        params=PARAMS,
        max_num_batched_tokens=8192,
        max_running_requests=None,
        scheduling="decode_first",
        max_input_tokens=1024,
        max_output_tokens=256,
    )


def _spec(rate: float, s_in: int = 1024, s_out: int = 256, **extra: object) -> TrafficSpec:
    return TrafficSpec(
        rate,
        LengthDistribution.fixed(s_in),
        LengthDistribution.fixed(s_out),
        **extra,  # type: ignore[arg-type]
    )


def test_kv_transfer_is_the_prompts_kv_bytes_over_the_link(replica: Replica) -> None:
    """Hand calculation: a 1,024-token prompt holds 1,024 · 131,072 = 134,217,728 B of KV per
    GPU. 1P1D on H100 (2 GPUs, within the 8-GPU NVLink domain): 450 GB/s per direction, so
    134,217,728 / (450e9 · 0.85) + 5.8 µs = 0.356696 ms. Forced onto the network (no scale-out
    figure in this part: the PCIe fallback, 32 GB/s): 134,217,728 / (32e9 · 0.85) + 5.8 µs."""
    assert kv_cache_bytes_per_token(llama_31_8b(), PRECISION, LAYOUT).per_token_bytes == 131_072
    prompt = 1024 * KV_BYTES_PER_TOKEN
    nvlink = float(transfer_seconds(replica, Pools(1, 1), [1024])[0])
    assert nvlink == pytest.approx(prompt / (450e9 * EFFICIENCY) + LATENCY_S, rel=1e-12)
    assert nvlink * 1e3 == pytest.approx(0.356696, abs=1e-6)
    network = float(transfer_seconds(replica, Pools(1, 1, "scale_out"), [1024])[0])
    assert network == pytest.approx(prompt / (32e9 * EFFICIENCY) + LATENCY_S, rel=1e-12)
    # auto: 8P8D is 16 GPUs, beyond one 8-GPU node: the network (here the PCIe fallback).
    assert link_peers(replica, Pools(8, 8)) == 16
    big = float(transfer_seconds(replica, Pools(8, 8), [1024])[0])
    assert big == pytest.approx(network, rel=1e-12)
    assert link_peers(replica, Pools(1, 1, "scale_up")) == 2


def test_lone_request_ttft_is_one_prefill_step_plus_the_transfer(replica: Replica) -> None:
    """Hand calculation, one request at a time (0.01/s, regular arrivals): TTFT = one
    prefill-only step of 1,024 tokens (the engine's step_cost, within the step table's 1%) +
    the 0.356696 ms transfer; TPOT = the decode-only steps of one sequence at contexts
    1,025 … 1,279, Σ / 255, which is what the colocated replica decodes alone too."""
    spec = _spec(0.01, num_requests=20, arrival_process="gamma", arrival_cv=0.01)
    result = PoolGroup(replica, Pools(1, 1)).run_pools(spec)
    prefill = step_cost(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        groups=[AttentionGroup.of(1.0, 1024.0, 0.0)],
        params=PARAMS,
        phase="prefill",
    )
    transfer_ms = 0.356696
    assert result.traffic.ttft_ms.p50 == pytest.approx(
        float(prefill.time_s) * 1e3 + transfer_ms, rel=0.01
    )
    table_prefill_ms = replica.table.step_s(0, 0.0, [(1024.0, 0.0)]) * 1e3
    assert result.traffic.ttft_ms.p50 == pytest.approx(table_prefill_ms + transfer_ms, rel=1e-6)
    assert result.transfer_ms.mean == pytest.approx(transfer_ms, abs=1e-6)
    assert result.transfer_ms.p99 == pytest.approx(transfer_ms, abs=1e-6)
    decode_ms = sum(replica.table.decode_s(1, 1025.0 + k) for k in range(255)) / 255 * 1e3
    assert result.traffic.tpot_ms.p50 == pytest.approx(decode_ms, rel=1e-6)
    colocated = replica.run(spec)
    assert result.traffic.tpot_ms.p50 == pytest.approx(colocated.tpot_ms.p50, rel=1e-6)
    assert result.prefill.queue_wait_ms.p99 == pytest.approx(0.0, abs=1e-9)
    assert result.decode.queue_wait_ms.p99 == pytest.approx(0.0, abs=1e-9)


def test_more_decode_replicas_lower_decode_load_proportionally(replica: Replica) -> None:
    """Hand calculation at 0.05 requests/s (requests rarely overlap): the pool decodes 200
    requests of 255 steps each, 200 · 255 · TPOT seconds, over the stream's span (last arrival
    + one e2e latency): that busy share (the steady stretch the answer measures has the same
    arrival rate within 5%), shared by Y replicas: Y = 1, 2, 4 give utilizations in the ratio
    4 : 2 : 1 (within 10%: rare overlaps share steps), the load factor λ ÷ (Y · capacity)."""
    spec = _spec(0.05, num_requests=200)
    runs = [PoolGroup(replica, Pools(1, y)).run_pools(spec) for y in (1, 2, 4)]
    one = runs[0]
    unit, _, _ = replica.stream(spec)
    span_s = float(unit[-1]) / 0.05 + one.traffic.e2e_latency_ms.mean / 1e3
    expected = 200 * 255 * one.traffic.tpot_ms.mean / 1e3 / span_s
    assert one.decode.utilization == pytest.approx(expected, rel=0.05)
    for y, run in zip((1, 2, 4), runs, strict=True):
        assert run.decode.utilization == pytest.approx(one.decode.utilization / y, rel=0.1)
        assert run.decode.load_factor == pytest.approx(one.decode.load_factor / y, rel=1e-12)
        assert run.prefill.utilization == pytest.approx(one.prefill.utilization, rel=1e-9)
    cap = decode_capacity(replica, spec)
    assert one.decode.load_factor == pytest.approx(0.05 / cap, rel=1e-12)


def test_decode_capacity_is_full_slots_over_their_steps(replica: Replica) -> None:
    """Hand calculation: slots = min(running cap, KV tokens ÷ 1,280); one step decodes them
    all at mean context 1,024 + 128; 255 steps per request: capacity = slots / (255 · step)."""
    spec = _spec(1.0)
    config = replica.config
    slots = min(config.max_running, int(config.kv_capacity_tokens // 1280))
    step = replica.table.decode_s(slots, slots * 1152.0)
    assert decode_capacity(replica, spec) == pytest.approx(slots / (255 * step), rel=1e-12)


def test_prefill_capacity_is_full_steps_of_prompts(replica: Replica) -> None:
    """Hand calculation: 1,024-token prompts fill an 8,192-token step eight at a time, so one
    prefill replica completes 8 / t(step of eight 1,024-token pieces) prompts per second; with
    half of each prompt cached, ⌊8,192 / 512⌋ = 16 pieces of 512 new tokens after 512 cached
    ones share a step."""
    spec = _spec(1.0)
    eight = replica.table.step_s(0, 0.0, [(1024.0, 0.0)] * 8)
    assert prefill_capacity(replica, spec) == pytest.approx(8 / eight, rel=1e-12)
    cached = dataclasses.replace(spec, prefix_cache_hit_rate=0.5)
    sixteen = replica.table.step_s(0, 0.0, [(512.0, 512.0)] * 16)
    assert prefill_capacity(replica, cached) == pytest.approx(16 / sixteen, rel=1e-12)
    assert PoolGroup(replica, Pools(3, 1)).capacities(spec)[0] == pytest.approx(
        3 * 8 / eight, rel=1e-12
    )


def test_the_pool_that_saturates_first_is_named(replica: Replica) -> None:
    """Long prompts and one-token answers load the prefill pool; short prompts and long answers
    the decode pool. Beyond the group's capacity the load factor exceeds one."""
    prompts = PoolGroup(replica, Pools(1, 1)).run_pools(_spec(2.0, 1024, 2, num_requests=100))
    assert prompts.bottleneck == "prefill"
    assert prompts.prefill.load_factor > prompts.decode.load_factor
    answers = PoolGroup(replica, Pools(1, 1)).run_pools(_spec(2.0, 64, 256, num_requests=100))
    assert answers.bottleneck == "decode"
    group = PoolGroup(replica, Pools(2, 1))
    assert group.capacity(_spec(1.0)) == pytest.approx(min(group.capacities(_spec(1.0))), rel=1e-12)


def test_pools_are_validated() -> None:
    for bad in (Pools(0, 1), Pools(1, 17), Pools(1, 1, "pcie"), Pools(True, 1)):  # type: ignore[arg-type]
        with pytest.raises(EngineError, match="disaggregation"):
            bad.validate()
    Pools(16, 16).validate()


def test_prefilled_requests_need_two_output_tokens(replica: Replica) -> None:
    from service.engine.traffic.scheduler import simulate

    with pytest.raises(EngineError, match="two output tokens"):
        simulate([0.0], [16], [1], replica.config, replica.table, prefilled=True)


def test_prefix_cache_hits_shorten_the_prefill_not_the_transfer(replica: Replica) -> None:
    """Half of each prompt cached: the prefill pool runs 512 new tokens after 512 cached ones,
    but the whole prompt's KV (1,024 tokens) still moves to the decode replica."""
    spec = _spec(0.01, num_requests=20, arrival_process="gamma", arrival_cv=0.01)
    cold = PoolGroup(replica, Pools(1, 1)).run_pools(spec)
    warm = PoolGroup(replica, Pools(1, 1)).run_pools(
        dataclasses.replace(spec, prefix_cache_hit_rate=0.5)
    )
    assert warm.transfer_ms.mean == pytest.approx(cold.transfer_ms.mean, rel=1e-12)
    half = replica.table.step_s(0, 0.0, [(512.0, 512.0)]) * 1e3
    assert warm.traffic.ttft_ms.p50 == pytest.approx(half + warm.transfer_ms.mean, rel=1e-6)
    assert np.isfinite(warm.traffic.tpot_ms.p50)


def test_decode_only_steps_keep_prompts_out_of_the_tpot(replica: Replica) -> None:
    """At 20 requests/s of 1,024/256 (about 0.4 of either pool's capacity), a colocated
    replica's decode steps carry prompt chunks (decode-first fills the B − R tokens left), so
    its TPOT is about twice the lone request's (over 1.8×); the 1P1D group's decode steps
    hold no prompt, so its TPOT stays within 50% of the lone one (batching alone: 1.33×), while its
    TTFT is a prefill step and the transfer plus a short queue."""
    spec = _spec(20.0, num_requests=300)
    lone = PoolGroup(replica, Pools(1, 1)).run_pools(_spec(0.01, num_requests=20))
    group = PoolGroup(replica, Pools(1, 1)).run_pools(spec)
    colocated = replica.run(spec)
    assert colocated.tpot_ms.p50 > 1.8 * lone.traffic.tpot_ms.p50
    assert group.traffic.tpot_ms.p50 < 1.5 * lone.traffic.tpot_ms.p50
    assert group.traffic.tpot_ms.p50 < colocated.tpot_ms.p50
    assert group.traffic.ttft_ms.p50 < colocated.ttft_ms.p50
