"""Attention data parallel, wide expert parallel: memory by hand, validation, estimability."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import InvalidLayoutError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.kernels import collective_cost
from service.engine.memory import memory_breakdown
from service.engine.operators import decode_step, prefill_step
from service.engine.parallel import Parallelism
from service.engine.precision import NATIVE, Precision
from service.engine.shapes import ModelShape

NATIVE_PRECISION = Precision(weights=NATIVE)


@pytest.fixture(scope="module")
def accelerators() -> dict[str, Accelerator]:
    return {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}


@pytest.fixture(scope="module")
def models() -> dict[str, ModelShape]:
    return {str(r["id"]): model_from_record(r) for r in load_model_records()}


def test_deepseek_attention_dp8_ep8_weights_by_hand(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    ds = models["deepseek-v3"]
    layout = Parallelism(tp=1, attention_dp=8, ep=8)
    r = estimate(
        ds,
        accelerators["h200-sxm"],
        precision=NATIVE_PRECISION,
        parallelism=layout,
        input_tokens=1000,
        output_tokens=1000,
        batch_sizes=[64],
    )
    assert r.gpus_per_replica == 8
    # Routed experts: 58 layers × 256 × 44.04M = 653.9B over 8 GPUs; attention (61 × 187.1M),
    # 3 dense FFNs (396.4M each) and 58 shared experts (44.04M) replicated on every rank,
    # all fp8 (+ 4/16384 B of block scales); embeddings + LM head (2 × 0.927B) and routers
    # (0.106B) whole in bf16.
    experts = 58 * 256 * 44.04e6 / 8
    replicated = 61 * 187.1e6 + 3 * 396.4e6 + 58 * 44.04e6
    hand = (experts + replicated) * (1 + 4 / 16384) + (2 * 0.927e9 + 0.106e9) * 2
    assert r.weights_gb[0] == pytest.approx(hand / 1e9, rel=0.005)
    assert r.fits[0]
    # Each rank caches its own 1/8 of the sequences: the replica holds 8 × one rank's room.
    assert r.max_batch_size % 8 == 0


def test_ep72_on_nvl72_is_estimable_and_holds_four_experts_per_gpu(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    ds = models["deepseek-v3"]
    layout = Parallelism(tp=1, attention_dp=72, ep=72)
    assert layout.experts_per_gpu(ds) == 4  # ceil(256 / 72): 288 slots
    r = estimate(
        ds,
        accelerators["gb200"],
        precision=NATIVE_PRECISION,
        parallelism=layout,
        input_tokens=1000,
        output_tokens=1000,
        batch_sizes=[512],
        mode="serving",
    )
    assert r.gpus_per_replica == 72
    experts = 58 * 4 * 44.04e6
    replicated = 61 * 187.1e6 + 3 * 396.4e6 + 58 * 44.04e6
    hand = (experts + replicated) * (1 + 4 / 16384) + (2 * 0.927e9 + 0.106e9) * 2
    assert r.weights_gb[0] == pytest.approx(hand / 1e9, rel=0.005)
    assert r.fits[0] and r.tpot_ms[0] > 0


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (Parallelism(tp=8, ep=16), "ep=16 must divide tp × attention_dp = 8"),
        (Parallelism(tp=72), "tp=72 must divide num_heads=128"),
        (Parallelism(tp=1, attention_dp=8, ep=512), "ep=512 exceeds num_experts=256"),
    ],
)
def test_impossible_layouts_name_the_degree_and_limit(
    models: dict[str, ModelShape], layout: Parallelism, message: str
) -> None:
    with pytest.raises(InvalidLayoutError, match=message.replace("×", ".")):
        layout.check_divides(models["deepseek-v3"])


def test_attention_dp_needs_an_moe_model(models: dict[str, ModelShape]) -> None:
    with pytest.raises(InvalidLayoutError, match="attention_dp=2 needs an MoE model"):
        Parallelism(attention_dp=2).check_divides(models["llama-3.1-8b"])


@pytest.mark.parametrize(
    ("pp", "virtual", "micro", "bubble"),
    [
        (4, 1, 1, 3 / 4),  # one batch: (p − 1)/(m + p − 1) = 3/4, each GPU busy a quarter
        (4, 1, 8, 3 / 11),  # 8 micro-batches: 3/(8 + 3)
        (4, 2, 8, 3 / 19),  # interleaved, v = 2: 3/(2·8 + 3)
        (4, 4, 4, 3 / 19),  # v = 4, m = 4: 3/(16 + 3)
        (1, 1, 1, 0.0),  # no pipeline, no bubble
    ],
)
def test_pipeline_bubble_fraction_by_hand(pp: int, virtual: int, micro: int, bubble: float) -> None:
    """Megatron-LM (Narayanan et al., SC'21, arXiv:2104.04473 §2.2): bubble / ideal time is
    (p − 1)/(v·m), so the idle share of the total is (p − 1)/(v·m + p − 1)."""
    layout = Parallelism(pp=pp, pp_virtual_stages=virtual)
    assert layout.pipeline_bubble_fraction(micro) == pytest.approx(bubble)


def test_interleaving_needs_micro_batches_and_layers(models: dict[str, ModelShape]) -> None:
    interleaved = Parallelism(pp=4, pp_virtual_stages=2)
    # One batch (m = 1) cannot fill an interleaved schedule: m must be a multiple of p.
    with pytest.raises(InvalidLayoutError, match="multiple of pp=4 micro-batches"):
        interleaved.pipeline_bubble_fraction(1)
    llama = models["llama-3.1-8b"]  # 32 layers
    interleaved.check_divides(llama)
    Parallelism(pp=4, pp_virtual_stages=8).check_divides(llama)  # 32 virtual stages of 1 layer
    with pytest.raises(InvalidLayoutError, match="pp_virtual_stages=16 × pp=4 exceeds"):
        Parallelism(pp=4, pp_virtual_stages=16).check_divides(llama)
    with pytest.raises(InvalidLayoutError, match="pp_virtual_stages=2 needs pp > 1"):
        Parallelism(pp_virtual_stages=2).check_divides(llama)


def test_interleaving_adds_stage_sends_to_a_step(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    # A step crosses pp·v − 1 stage boundaries: pp = 2 sends once, with v = 2 three times
    # (GPU0 chunk 1 → GPU1 chunk 1 → GPU0 chunk 2 → GPU1 chunk 2); everything else is equal.
    llama, h100 = models["llama-3.1-8b"], accelerators["h100-sxm"]

    def rows(layout: Parallelism) -> dict[str, float]:
        step = decode_step(
            llama, h100, precision=Precision(), params=DEFAULT_EFFICIENCY, batch_size=8.0,
            context_tokens=1024.0, parallelism=layout,
        )  # fmt: skip
        return {r.name: float(r.cost.time_s) for r in step.rows}

    plain, interleaved = rows(Parallelism(pp=2)), rows(Parallelism(pp=2, pp_virtual_stages=2))
    assert interleaved["pp_send"] == pytest.approx(3 * plain["pp_send"])
    assert {k: v for k, v in interleaved.items() if k != "pp_send"} == {
        k: v for k, v in plain.items() if k != "pp_send"
    }


def test_a_stage_send_between_nodes_goes_over_the_network(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    """Llama-3.1-70B decode at batch 64 on H100 SXM (8-GPU NVSwitch nodes, one 50 GB/s
    ConnectX-7 per GPU between nodes): the stage send carries 64 tokens × 8192 × 2 B =
    1,048,576 B. tp 4 × pp 2 keeps both stages in one node: NVLink, 450 GB/s × 0.85 →
    1,048,576 / 382.5e9 s + (5 + 0.8) µs = 8.541 µs. tp 8 × pp 2 puts them on two nodes:
    1,048,576 / (50e9 × 0.85) s + 5.8 µs = 30.472 µs. With tp 4 × pp 4 the boundaries are
    0→4 (node 0), 4→8 (nodes 0→1) and 8→12 (node 1): two over NVLink, one over the network."""
    llama, h100 = models["llama-3.1-70b"], accelerators["h100-sxm"]

    def send_us(layout: Parallelism) -> float:
        step = decode_step(
            llama, h100, precision=Precision(), params=DEFAULT_EFFICIENCY, batch_size=64.0,
            context_tokens=1024.0, parallelism=layout,
        )  # fmt: skip
        return {r.name: float(r.cost.time_s) for r in step.rows}["pp_send"] * 1e6

    nvlink = 1_048_576 / (450e9 * 0.85) * 1e6 + 5.8
    network = 1_048_576 / (50e9 * 0.85) * 1e6 + 5.8
    assert send_us(Parallelism(tp=4, pp=2)) == pytest.approx(nvlink, rel=1e-6)
    assert send_us(Parallelism(tp=8, pp=2)) == pytest.approx(network, rel=1e-6)
    assert send_us(Parallelism(tp=4, pp=4)) == pytest.approx(2 * nvlink + network, rel=1e-6)


@pytest.mark.parametrize(
    ("sequences", "busiest"),
    [(0.0, 0.0), (0.3, 0.3), (1.0, 1.0), (5.0, 1.0), (8.0, 1.0), (8.5, 1.5), (9.0, 2.0),
     (16.0, 2.0), (17.0, 3.0), (64.0, 8.0)],
)  # fmt: skip
def test_the_busiest_attention_dp_rank_holds_ceil_n_over_ranks(
    sequences: float, busiest: float
) -> None:
    """Requests balanced by count over 8 ranks: the busiest holds ceil(n / 8) of n whole
    requests, linearly in between (a mean 0.3 prompts per step is 0.3 of a prompt on one rank).
    Without attention DP a rank holds them all."""
    assert Parallelism(attention_dp=8, ep=8).sequences_on_busiest_dp_rank(sequences) == busiest
    as_array = Parallelism(attention_dp=8, ep=8).sequences_on_busiest_dp_rank(np.array([sequences]))
    assert as_array.tolist() == [busiest]
    assert Parallelism().sequences_on_busiest_dp_rank(sequences) == sequences


ATTENTION_RANK_OPERATORS = ("qkv_projection", "attention", "output_projection", "lm_head")


def test_a_lone_prompt_runs_whole_on_one_attention_dp_rank(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    """DeepSeek-V3 on 8 H200s, attention_dp 8 × ep 8: one 2,000-token prompt is prefilled by
    one rank, which does all of its attention-side work while the other ranks wait in the MoE
    exchange, so those operators cost what they cost with one rank (attention_dp 1, the same
    tp 1 GPU per rank); 9 prompts put 2 on the busiest rank, as 2 prompts on one rank do."""
    ds, h200 = models["deepseek-v3"], accelerators["h200-sxm"]
    fp8 = NATIVE_PRECISION.resolved(ds, h200)

    def rows(batch: float, layout: Parallelism) -> dict[str, float]:
        step = prefill_step(
            ds, h200, precision=fp8, params=DEFAULT_EFFICIENCY, batch_size=batch,
            input_tokens=2000.0, parallelism=layout,
        )  # fmt: skip
        return {r.name: float(r.cost.time_s) for r in step.rows}

    wide, one_rank = Parallelism(tp=1, attention_dp=8, ep=8), Parallelism(tp=1, ep=1)
    for batch, per_rank in ((1.0, 1.0), (9.0, 2.0)):
        spread, alone = rows(batch, wide), rows(per_rank, one_rank)
        for name in ATTENTION_RANK_OPERATORS:
            assert spread[name] == pytest.approx(alone[name], rel=1e-12), (batch, name)


def test_memory_per_gpu_is_the_busiest_attention_dp_rank_s(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    """9 sequences over 8 ranks: the busiest rank's GPU caches 2 sequences' KV, as many as
    16 sequences put there; 8 sequences put one on each."""
    ds, h200 = models["deepseek-v3"], accelerators["h200-sxm"]
    layout = Parallelism(tp=1, attention_dp=8, ep=8)
    fp8 = NATIVE_PRECISION.resolved(ds, h200)

    def kv_gb(sequences: float) -> float:
        memory = memory_breakdown(
            ds, h200, precision=fp8, parallelism=layout, sequences=sequences,
            context_tokens=4096.0, step_tokens=2048.0,
        )  # fmt: skip
        return float(memory.kv_cache_bytes) / 1e9

    assert kv_gb(9.0) == pytest.approx(kv_gb(16.0))
    assert kv_gb(9.0) == pytest.approx(2 * kv_gb(8.0))


def test_the_expert_exchange_waits_for_the_busiest_rank_s_picks(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    """DeepSeek-V3 decode of one token over ep 8 (32 of 256 experts per rank): its 8 picks
    land on a rank with probability 1/8 each, mean 1 and sd sqrt(8 · 1/8 · 7/8); the busiest
    of 8 ranks gets 1 + 1.4236 · 0.9354 = 2.331 of them, and dispatch and combine (two
    all-to-alls per MoE layer, 58 layers) carry that many 7,168-wide bf16 rows."""
    ds, h200 = models["deepseek-v3"], accelerators["h200-sxm"]
    fp8 = NATIVE_PRECISION.resolved(ds, h200)
    step = decode_step(
        ds, h200, precision=fp8, params=DEFAULT_EFFICIENCY, batch_size=1.0,
        context_tokens=1024.0, parallelism=Parallelism(tp=1, attention_dp=8, ep=8),
    )  # fmt: skip
    busiest_picks = 1.0 + 1.4236 * math.sqrt(8 * (1 / 8) * (7 / 8))
    one = collective_cost(
        "alltoall", 8, busiest_picks * 7168 * 2.0, accelerator=h200, params=DEFAULT_EFFICIENCY
    )
    exchange = {r.name: float(r.cost.time_s) for r in step.rows}["ep_all_to_all"]
    assert exchange == pytest.approx(2 * 58 * float(one.time_s), rel=1e-4)
