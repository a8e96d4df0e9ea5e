"""Hybrid attention + Mamba2 models (Nemotron-H): shape, parameters, state memory, step work.

Hand calculations use the Nemotron-H-56B-Base-8K config (tests/data/hf_configs): d = 8192,
118 blocks (54 Mamba2, 10 attention, 54 MLP), 64 query / 8 KV heads of 128, MLP 32768 (plain
up/down), vocab 131072 untied; Mamba2 H = 256 heads of P = 64 (d_inner 16384), G = 8 groups,
N = 256, conv K = 4, chunk Q = 128.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from engine_refs import make_h100

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import InvalidLayoutError, InvalidShapeError, UnsupportedDtypeError
from service.engine.hf_import import shape_from_hf_config
from service.engine.kernels import collective_cost
from service.engine.memory import (
    kv_budget,
    kv_cache_bytes_per_token,
    mamba_state_bytes_per_sequence,
    max_batch_size,
    weight_bytes_per_gpu,
)
from service.engine.operators import OperatorRow, StepCost, decode_step, prefill_step
from service.engine.parallel import Parallelism
from service.engine.param_count import count_parameters
from service.engine.precision import BF16, Precision
from service.engine.shapes import ModelShape
from service.engine.traffic.model import scheduler_config
from service.engine.traffic.scheduler import simulate

CONFIG = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
NAME = "nvidia--Nemotron-H-56B-Base-8K"
TP8 = Parallelism(tp=8)
Rows = dict[str, OperatorRow]


def _config() -> dict[str, object]:
    data = json.loads((CONFIG / f"{NAME}.json").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture
def nemotron() -> ModelShape:
    return shape_from_hf_config("nemotron-h-56b", _config())


def _rows(model: ModelShape, step_fn: Callable[..., StepCost], **kwargs: Any) -> Rows:
    step = step_fn(
        model,
        make_h100(),
        precision=BF16,
        params=DEFAULT_EFFICIENCY,
        **kwargs,
    )
    return {r.name: r for r in step.rows}


def test_import_reads_the_pattern_and_mamba2_dims(nemotron: ModelShape) -> None:
    m = nemotron
    assert (m.num_mamba_layers, m.num_attention_layers, m.num_ffn_layers) == (54, 10, 54)
    assert (m.num_dense_ffn_layers, m.num_full_attention_layers) == (54, 10)
    assert (m.mamba_num_heads, m.mamba_head_dim, m.mamba_inner_size) == (256, 64, 16384)
    assert (m.ssm_state_size, m.mamba_n_groups, m.mamba_conv_kernel) == (256, 8, 4)
    assert (m.mamba_chunk_size, m.head_dim, m.ffn_type) == (128, 128, "mlp")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hybrid_override_pattern", "ME*-", "unsupported block letters ['E'] (E: MoE FFN"),
        ("hybrid_override_pattern", "M*-", "has 3 letters for num_hidden_layers 118"),
        ("mamba_num_heads", 128, "must equal expand × hidden_size (16384)"),
    ],
)
def test_import_refuses_what_it_cannot_model(key: str, value: object, message: str) -> None:
    config = {**_config(), key: value}
    with pytest.raises(InvalidShapeError, match=re.escape(message)):
        shape_from_hf_config("bad", config)


def test_parameter_count_by_hand(nemotron: ModelShape) -> None:
    # Mamba2 block: in_proj 8192·(2·16384 + 2·8·256 + 256) = 304,087,040; conv over
    # 16384 + 4096 = 20480 channels, 4 taps + bias = 102,400; A_log, D, dt_bias 3·256 = 768;
    # gated norm 16384; out_proj 16384·8192 = 134,217,728; pre-norm 8192 → 438,432,512.
    mamba = 8192 * (2 * 16384 + 2 * 8 * 256 + 256) + 20480 * 5 + 3 * 256 + 16384
    mamba += 16384 * 8192 + 8192
    assert mamba == 438_432_512
    # Attention block: q and o 2·8192·8192, k and v 2·8192·1024, pre-norm → 151,003,136.
    attention = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 8192
    # MLP block: up and down 2·8192·32768 + pre-norm → 536,879,104.
    mlp = 2 * 8192 * 32768 + 8192
    # Embedding and untied head 2·131072·8192, final norm 8192.
    by_hand = 54 * mamba + 10 * attention + 54 * mlp + 2 * 131072 * 8192 + 8192
    count = count_parameters(nemotron)
    assert count.total == count.active == by_hand == 56_324_350_464  # NVIDIA: "56B"
    assert count.mamba_per_layer == mamba


def test_weights_per_gpu_at_tp8_by_hand(nemotron: ModelShape) -> None:
    # Per TP8 rank (bf16): attention q/o 2·8192·8·128 + one KV head k/v 2·8192·128, ×10;
    # Mamba2 in_proj 8192·(2·2048 + 2·1·256 + 32) + out_proj 2048·8192, ×54; MLP 2·8192·4096,
    # ×54. 16-bit: 10 + 54 pre-norms, per Mamba2 block conv 2560·5 + 3·32 + 2048 + 8192,
    # vocab-parallel embedding and head 2·131072·8192/8, final norm 8192.
    quantized = 10 * (2 * 8192 * 1024 + 2 * 8192 * 128)
    quantized += 54 * (8192 * 4640 + 2048 * 8192) + 54 * 2 * 8192 * 4096
    other = 64 * 8192 + 54 * (2560 * 5 + 96 + 2048 + 8192) + 2 * 131072 * 8192 // 8 + 8192
    weights = weight_bytes_per_gpu(nemotron, BF16, TP8)
    assert weights.quantized_bytes == 2 * quantized
    assert weights.unquantized_bytes == 2 * other
    assert weights.total_bytes == 14_082_793_600


def test_kv_cache_and_state_bytes_per_sequence(nemotron: ModelShape) -> None:
    # KV: only the 10 attention layers, 2·8 KV heads·128·2 B = 4096 B each per token (TP1).
    # State per sequence per Mamba2 layer: SSM 256·64·256 + conv 3·(16384 + 2·8·256), 2 B
    # each (vLLM keeps both in the model dtype by default).
    kv = kv_cache_bytes_per_token(nemotron, BF16)
    assert kv.per_token_bytes == 10 * 2 * 8 * 128 * 2 == 40_960
    assert kv.state_bytes_per_sequence == 54 * (256 * 64 * 256 + 3 * 20480) * 2 == 459_620_352
    # TP8: one KV head per rank; 32 heads and 1 group per rank.
    kv8 = kv_cache_bytes_per_token(nemotron, BF16, TP8)
    state8 = 54 * (32 * 64 * 256 + 3 * (2048 + 512)) * 2
    assert kv8.per_token_bytes == 10 * 2 * 128 * 2 == 5120
    assert mamba_state_bytes_per_sequence(nemotron, BF16, TP8) == state8 == 57_452_544
    assert float(kv8.for_context(8192)) == 5120 * 8192 + state8


def test_ssm_state_dtype_fp32_vs_bf16_by_hand(nemotron: ModelShape) -> None:
    """State bytes per sequence of Nemotron-H-56B (TP1), from its config.json.

    Per Mamba2 layer: SSM state mamba_num_heads × mamba_head_dim × ssm_state_size
    = 256 × 64 × 256 = 4,194,304 elements; conv state (conv_kernel − 1) × (d_inner + 2 ×
    n_groups × ssm_state_size) = 3 × (16384 + 2 × 8 × 256) = 3 × 20480 = 61,440 elements; 54
    Mamba2 layers (the M letters of hybrid_override_pattern).
    - bf16 (``auto``: the model dtype, vLLM's default): 54 × (4,194,304 + 61,440) × 2 B
      = 459,620,352 B.
    - fp32 SSM state (vLLM --mamba-ssm-cache-dtype float32; the conv state stays bf16):
      54 × (4,194,304 × 4 + 61,440 × 2) = 54 × 16,900,096 = 912,605,184 B.
    """
    ssm, conv, layers = 256 * 64 * 256, 3 * (16384 + 2 * 8 * 256), 54
    assert (ssm, conv) == (4_194_304, 61_440)
    auto = mamba_state_bytes_per_sequence(nemotron, BF16)
    bf16 = mamba_state_bytes_per_sequence(nemotron, Precision(ssm_state="bf16"))
    fp32 = mamba_state_bytes_per_sequence(nemotron, Precision(ssm_state="fp32"))
    assert auto == bf16 == layers * (ssm + conv) * 2 == 459_620_352
    assert fp32 == layers * (ssm * 4 + conv * 2) == 912_605_184
    # The per-sequence constant of the KV budget follows it.
    kv = kv_cache_bytes_per_token(nemotron, Precision(ssm_state="fp32"))
    assert kv.state_bytes_per_sequence == 912_605_184
    assert kv.per_token_bytes == 40_960  # attention KV is unchanged


def test_ssm_state_dtype_sets_the_decode_state_traffic(nemotron: ModelShape) -> None:
    # TP8 decode, B = 4 cached sequences, per Mamba2 layer: the scan reads and writes the SSM
    # state 32·64·256 elements at 4 B (fp32) instead of 2 B; x, B, C, dt and y stay 2 B:
    # (2·2048 + 512 + 32)·2 + 2·32·64·256·4 = 9,280 + 4,194,304 = 4,203,584 B per sequence.
    # The conv state 3·2560 stays in the model dtype (2 B), so conv1d bytes do not change.
    rows = {
        r.name: r
        for r in decode_step(
            nemotron,
            make_h100(),
            precision=Precision(ssm_state="fp32"),
            params=DEFAULT_EFFICIENCY,
            batch_size=4.0,
            context_tokens=1024.0,
            parallelism=TP8,
        ).rows
    }
    scan = float(rows["mamba_ssm_scan"].bytes) / 54
    assert scan == pytest.approx(4 * ((2 * 2048 + 512 + 32) * 2 + 2 * 32 * 64 * 256 * 4))
    assert scan == pytest.approx(4 * 4_203_584)
    conv = float(rows["mamba_conv1d"].bytes) / 54
    assert conv == pytest.approx(4 * (2 * 2560 * 2 + 2 * 3 * 2560 * 2))


@pytest.mark.parametrize("dtype", ["fp8", "int8", "float32", "tf32"])
def test_ssm_state_dtype_outside_the_engines_choices_is_refused(dtype: str) -> None:
    with pytest.raises(UnsupportedDtypeError, match=f"ssm_state dtype '{dtype}'"):
        Precision(ssm_state=dtype).validate()


def test_an_automatic_ssm_state_beside_tf32_activations_is_stored_as_fp32() -> None:
    # tf32 is a compute mode of fp32 values: the state is 4-byte fp32, a dtype the answer names
    auto = Precision(weights="fp32", activations="tf32", kv_cache="fp32")
    assert auto.ssm_state_dtype == "fp32" and auto.ssm_state_bytes_per_element == 4.0
    assert Precision(activations="tf32", ssm_state="bf16").ssm_state_dtype == "bf16"


def test_models_without_mamba_layers_ignore_the_ssm_state_dtype() -> None:
    llama = ModelShape(
        id="l", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=14336, vocab_size=128256,
    )  # fmt: skip
    fp32 = kv_cache_bytes_per_token(llama, Precision(ssm_state="fp32"))
    assert fp32 == kv_cache_bytes_per_token(llama, BF16)
    assert fp32.state_bytes_per_sequence == 0.0


def test_max_batch_on_8x_h100_counts_the_state(nemotron: ModelShape) -> None:
    # free = 0.9·80 GB − 14,082,793,600 weights − 1.5 GB runtime − activations of an 8192-token
    # step: (2·8192 + 65536/8)·2 B = 49,152 B per token → 402,653,184 → 56,014,553,216 B.
    # Per sequence at 8192 tokens: KV 5120·8192 + state 57,452,544 + one fp32 logit row
    # 131072/8·4 = 99,461,120 B → 563 sequences (1333 if the state were left out).
    free = 72e9 - 14_082_793_600 - 1.5e9 - 8192 * 49_152
    per_sequence = 5120 * 8192 + 57_452_544 + 131072 // 8 * 4
    expected = int(free // per_sequence)
    assert expected == 563
    got = max_batch_size(
        nemotron,
        make_h100(),
        precision=BF16,
        parallelism=TP8,
        context_tokens=8192,
        step_tokens=8192,
    )
    assert got == expected
    # bf16 weights (112.6 GB) do not fit one H100.
    one = max_batch_size(
        nemotron,
        make_h100(),
        precision=BF16,
        parallelism=Parallelism(),
        context_tokens=8192,
        step_tokens=8192,
    )
    assert one == 0


def test_decode_work_of_one_mamba_layer(nemotron: ModelShape) -> None:
    batch = 4.0
    rows = _rows(nemotron, decode_step, batch_size=batch, context_tokens=1024.0, parallelism=TP8)
    per_layer = {name: rows[name].cost.scaled(1.0 / 54) for name in rows if "mamba" in name}
    # in_proj 8192 → 4640 columns per rank, out_proj 2048 → 8192: 2·B·k·n FLOPs.
    assert float(per_layer["mamba_in_proj"].flops) == pytest.approx(2 * batch * 8192 * 4640)
    assert float(per_layer["mamba_out_proj"].flops) == pytest.approx(2 * batch * 2048 * 8192)
    # Recurrent step per sequence: 2·(G·N + H·(P + 2·N·P)) at G = 1, H = 32 per rank.
    scan_flops = 2 * (256 + 32 * (64 + 2 * 256 * 64))
    assert float(per_layer["mamba_ssm_scan"].flops) == pytest.approx(batch * scan_flops)
    # Bytes: the scan's inputs x, B, C, dt and its output y (2·2048 + 512 + 32)·2 B, plus the
    # SSM state 32·64·256·2 B read and written.
    scan_bytes = (2 * 2048 + 512 + 32) * 2 + 2 * 32 * 64 * 256 * 2
    assert float(per_layer["mamba_ssm_scan"].bytes) == pytest.approx(batch * scan_bytes)
    # Conv over 2560 channels: 2·4 FLOPs each; input read + output write, and the conv state
    # 3·2560 read and written, all 2 B.
    assert float(per_layer["mamba_conv1d"].flops) == pytest.approx(batch * 2 * 4 * 2560)
    conv_bytes = 2 * 2560 * 2 + 2 * 3 * 2560 * 2
    assert float(per_layer["mamba_conv1d"].bytes) == pytest.approx(batch * conv_bytes)


def test_attention_and_mlp_run_only_in_their_layers(nemotron: ModelShape) -> None:
    tokens = 4096.0
    rows = _rows(
        nemotron, prefill_step, batch_size=1.0, input_tokens=tokens, parallelism=Parallelism()
    )
    flops = {name: float(row.flops) for name, row in rows.items()}
    # qkv: 10 layers × 2·T·8192·(64 + 16)·128; MLP: 54 layers × 2·T·2·8192·32768.
    assert flops["qkv_projection"] == pytest.approx(10 * 2 * tokens * 8192 * 80 * 128)
    assert flops["ffn"] == pytest.approx(54 * 2 * tokens * 2 * 8192 * 32768)
    # Chunked scan at Q = 128: 2·(8·128·256 + 256·(128·64 + 2·256·64)) per token per layer,
    # ∝ tokens × d_inner × N (+ the chunk terms).
    per_token = 2 * (8 * 128 * 256 + 256 * (128 * 64 + 2 * 256 * 64))
    assert per_token == 21_495_808
    assert flops["mamba_ssm_scan"] == pytest.approx(54 * tokens * per_token)


def test_tp_all_reduces_once_per_block(nemotron: ModelShape) -> None:
    rows = _rows(nemotron, decode_step, batch_size=16.0, context_tokens=512.0, parallelism=TP8)
    one = collective_cost(
        "all_reduce", 8, 16.0 * 8192 * 2, accelerator=make_h100(), params=DEFAULT_EFFICIENCY
    )
    assert float(rows["tp_all_reduce"].cost.time_s) == pytest.approx(118 * float(one.time_s))


def test_tp_must_divide_mamba_heads(nemotron: ModelShape) -> None:
    odd = dataclasses.replace(nemotron, mamba_num_heads=264, mamba_n_groups=8)
    with pytest.raises(InvalidLayoutError, match="mamba_num_heads=264"):
        Parallelism(tp=16).check_divides(odd)
    Parallelism(tp=8).check_divides(odd)
    # One group (tp does not divide it) is replicated on every rank.
    one_group = dataclasses.replace(nemotron, mamba_n_groups=1)
    assert Parallelism(tp=8).mamba_groups_per_gpu(one_group) == 1
    assert Parallelism(tp=8).mamba_groups_per_gpu(nemotron) == 1  # 8 groups over 8 ranks


def test_pattern_validation(nemotron: ModelShape) -> None:
    with pytest.raises(InvalidShapeError, match="needs at least one attention layer"):
        dataclasses.replace(nemotron, layer_pattern="M-" * 59).validate()
    with pytest.raises(InvalidShapeError, match="must be positive for Mamba2 layers"):
        dataclasses.replace(nemotron, ssm_state_size=0).validate()


class _ConstantSteps:
    """Every step takes 1 ms (the admission limit, not the timing, is under test)."""

    def step_s(
        self, decode_sequences: float, context_sum: float, pieces: Sequence[tuple[float, float]]
    ) -> float:
        return 1e-3

    def decode_s(self, sequences: int, context_sum: float) -> float:
        return 1e-3

    def decode_leap(self, sequences: int, context_sum: float) -> tuple[float, float]:
        return 1e-3, 0.0


def test_traffic_admits_requests_with_their_mamba_state_on_one_h100(
    nemotron: ModelShape,
) -> None:
    """Nemotron-H-56B, fp8 weights on one H100 (80 GB), 8192-token steps, requests of
    1024 + 1024 tokens.

    Weights: fp8 decoder linears 10·(2·8192·8192 + 2·8192·1024) + 54·(8192·37120 +
    16384·8192) + 54·2·8192·32768 = 54,169,436,160 × (1 + 4/16384 block scales)
    = 54,182,661,120 B; bf16 norms, conv, embedding and head 2,154,914,304 × 2
    = 4,309,828,608 B → 58,492,489,728 B. Activations of 8192 tokens: (2·8192 + 2·32768) × 2 B
    = 163,840 B per token → 1,342,177,280 B. Free = 0.9·80e9 − 58,492,489,728 − 1.5e9
    − 1,342,177,280 = 10,665,332,992 B.
    Per request: KV of the 10 attention layers 40,960 B/token × 2048 = 83,886,080 B, plus the
    Mamba2 state 459,620,352 B (54 layers, test_ssm_state_dtype_fp32_vs_bf16_by_hand) =
    543,506,432 B → ⌊19.6⌋ = 19 requests (127 if the state were left out: free / 83,886,080).
    The state is 459,620,352 / 40,960 = 11,221.2 tokens' worth of KV cache per request.
    With an fp32 SSM state (912,605,184 B) a request takes 996,491,264 B → 10.
    """
    fp8 = Precision(weights="fp8")
    free = 0.9 * 80e9 - 58_492_489_728 - 1.5e9 - 8192 * 163_840
    assert free == 10_665_332_992
    budget = kv_budget(nemotron, make_h100(), precision=fp8, parallelism=Parallelism(),
                       step_tokens=8192)  # fmt: skip
    assert budget.free_bytes == pytest.approx(free)
    assert budget.per_token_bytes == 40_960
    assert budget.state_tokens_per_request == pytest.approx(459_620_352 / 40_960)
    assert budget.requests(2048) == int(free // (40_960 * 2048 + 459_620_352)) == 19
    assert int(free // (40_960 * 2048)) == 127
    config = scheduler_config(
        nemotron,
        make_h100(),
        precision=fp8,
        parallelism=Parallelism(),
        max_num_batched_tokens=8192,
        max_running_requests=None,
        scheduling="decode_first",
    )
    assert config.requests_held(2048) == 19
    # Sixty requests arriving at once: the scheduler runs at most 19 of them together.
    timeline = simulate([0.0] * 60, [1024] * 60, [1024] * 60, config, _ConstantSteps())
    assert timeline.peak_running == 19
    fp32 = scheduler_config(
        nemotron,
        make_h100(),
        precision=Precision(weights="fp8", ssm_state="fp32"),
        parallelism=Parallelism(),
        max_num_batched_tokens=8192,
        max_running_requests=None,
        scheduling="decode_first",
    )
    assert fp32.requests_held(2048) == int(free // (40_960 * 2048 + 912_605_184)) == 10


def test_moe_ffn_blocks_of_a_hybrid_pattern_by_hand(nemotron: ModelShape) -> None:
    """A hybrid shape whose FFN blocks are MoE (what the importer refuses to guess from a
    config's E letters): Nemotron-H-56B with 4 experts of width 4096, 2 per token, on its 54
    FFN blocks (TP1, bf16).

    Dense MLP block: up + down 2·8192·32768 = 536,870,912 weights; MoE block: 4 experts ×
    2·8192·4096 = 268,435,456 quantized weights plus a 8192 × 4 router (16-bit) = 32,768.
    Weights drop by 54 × 268,435,456 × 2 B = 28,991,029,248 B and the routers add
    54 × 32,768 × 2 B = 3,538,944 B. Active parameters leave out 2 idle experts per block:
    total − 54 × 2 × 67,108,864 = 41,830,605,312 − 7,247,757,312 = 34,582,848,000.
    """
    moe = dataclasses.replace(
        nemotron, num_experts=4, experts_per_token=2, moe_intermediate_size=4096,
        intermediate_size=0,
    )  # fmt: skip
    moe.validate()
    assert (moe.num_moe_layers, moe.num_dense_ffn_layers) == (54, 0)
    dense_w, moe_w = weight_bytes_per_gpu(nemotron, BF16), weight_bytes_per_gpu(moe, BF16)
    assert dense_w.quantized_bytes - moe_w.quantized_bytes == 54 * 268_435_456 * 2
    assert moe_w.unquantized_bytes - dense_w.unquantized_bytes == 54 * 32_768 * 2
    count = count_parameters(moe)
    assert count.total == 56_324_350_464 - 54 * 268_435_456 + 54 * 32_768 == 41_830_605_312
    assert count.active == count.total - 54 * 2 * 67_108_864 == 34_582_848_000
