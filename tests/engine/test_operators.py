"""Roofline physics of the operator table: ridge points, intensities, bounds, FLOP counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_refs import deepseek_v3, llama_31_8b, mixtral_8x7b

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.hardware import Accelerator
from service.engine.operators import (
    AttentionGroup,
    busiest_rank_sd,
    decode_step,
    expected_experts_touched,
    prefill_step,
    step_cost,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import (
    analyze_intensity,
    critical_batch_size,
)
from service.engine.shapes import ModelShape

BF16 = Precision()


def test_ridge_points(h100: Accelerator, h200: Accelerator) -> None:
    assert h100.ridge_point_flop_per_byte("bf16") == pytest.approx(295, abs=1)
    assert h200.ridge_point_flop_per_byte("bf16") == pytest.approx(206, abs=1)


def _row(model: ModelShape, acc: Accelerator, batch: int, name: str, phase: str = "decode"):  # type: ignore[no-untyped-def]
    result = analyze_intensity(model, acc, phase=phase, batch_size=batch, context_tokens=2048)
    return next(r for r in result.operators if r.name == name)


def test_decode_ffn_intensity_tracks_batch(llama70b: ModelShape, h100: Accelerator) -> None:
    assert 0.9 <= _row(llama70b, h100, 1, "ffn").arithmetic_intensity_flop_per_byte <= 1.1
    assert _row(llama70b, h100, 64, "ffn").arithmetic_intensity_flop_per_byte == pytest.approx(
        64, rel=0.10
    )


def test_decode_memory_bound_prefill_compute_bound(llama70b: ModelShape, h100: Accelerator) -> None:
    for batch in (1, 2, 8, 16, 32, 64):
        result = analyze_intensity(
            llama70b, h100, phase="decode", batch_size=batch, context_tokens=2048
        )
        assert result.total.bound == "memory", batch
        assert all(r.bound == "memory" for r in result.operators if r.kind == "gemm")
    prefill = analyze_intensity(llama70b, h100, phase="prefill", batch_size=1, context_tokens=2048)
    assert prefill.total.bound == "compute"
    assert prefill.total.arithmetic_intensity_flop_per_byte > prefill.ridge_point_flop_per_byte


def test_total_row_is_sum_of_operators(llama70b: ModelShape, h100: Accelerator) -> None:
    result = analyze_intensity(
        llama70b,
        h100,
        phase="decode",
        batch_size=8,
        context_tokens=1024,
        parallelism=Parallelism(tp=4),
    )
    names = [r.name for r in result.operators]
    assert "tp_all_reduce" in names
    assert result.total.flops == pytest.approx(sum(r.flops for r in result.operators))
    assert result.total.time_ms == pytest.approx(
        sum(r.time_ms for r in result.operators) + result.overhead_ms
    )


def test_critical_batch_size(llama70b: ModelShape, h100: Accelerator) -> None:
    # Compute-bound when a GEMM's compute time 2nk(B + m_half)/(eff_c·P) reaches its weight
    # time b_w·nk/(eff_m·W): B + 32 = 2·eff_c·P / (b_w·eff_m·W) (the spec ridge P/W scaled by
    # the efficiencies); the input/output rows add about B·(1/n + 1/k) ≈ 4% to the bytes.
    ridge = 989.4e12 / 3350e9  # 295.3 FLOP/byte
    bf16 = critical_batch_size(llama70b, h100, precision=BF16, parallelism=Parallelism())
    hand_bf16 = (0.80 / 0.85 * ridge) * 1.04 - 32  # ≈ 257
    assert bf16 == pytest.approx(hand_bf16, rel=0.03)
    # int4 weights (0.531 B) with bf16 math: B + 32 = 0.941·295.3·0.531/2 ≈ 74 → B ≈ 45.
    int4 = critical_batch_size(
        llama70b, h100, precision=Precision(weights="int4"), parallelism=Parallelism()
    )
    hand_int4 = 0.80 / 0.85 * ridge * (0.5 + 1 / 32) / 2 * 1.04 - 32
    assert int4 == pytest.approx(hand_int4, rel=0.10)
    # fp8 × fp8: P doubles (eff 0.71), bytes halve: B + 32 = 0.71/0.85·590.7/2 = 246.7 → ≈ 225.
    fp8 = critical_batch_size(
        llama70b, h100, precision=Precision("fp8", "fp8"), parallelism=Parallelism()
    )
    hand_fp8 = 0.71 / 0.85 * (1978.9e12 / 3350e9) / 2 * 1.04 - 32
    assert fp8 == pytest.approx(hand_fp8, rel=0.03)


@pytest.mark.parametrize("precision", [BF16, Precision(weights="int4"), Precision("fp8", "fp8")])
def test_decode_bound_label_flips_at_the_critical_batch(
    llama70b: ModelShape, h100: Accelerator, precision: Precision
) -> None:
    critical = critical_batch_size(llama70b, h100, precision=precision, parallelism=Parallelism())
    assert critical is not None
    at = analyze_intensity(
        llama70b, h100, phase="decode", batch_size=critical, context_tokens=1, precision=precision
    )
    below = analyze_intensity(
        llama70b,
        h100,
        phase="decode",
        batch_size=critical - 1,
        context_tokens=1,
        precision=precision,
    )
    assert (below.total.bound, at.total.bound) == ("memory", "compute")
    assert at.critical_batch_size == critical


def _dense_active_params_without_embedding(m: ModelShape) -> float:
    """Count by hand: attention + gated FFN per layer, plus the untied LM head."""
    attn = m.hidden_size * (m.num_heads + 2 * m.num_kv_heads) * m.head_dim
    attn += m.num_heads * m.head_dim * m.hidden_size
    ffn = 3 * m.hidden_size * m.intermediate_size
    return m.num_layers * (attn + ffn) + m.vocab_size * m.hidden_size


def test_decode_flops_match_independent_count_dense(h100: Accelerator) -> None:
    m = llama_31_8b()
    context = 4096.0
    step = decode_step(
        m,
        h100,
        batch_size=1.0,
        context_tokens=context,
        precision=BF16,
        parallelism=Parallelism(),
        params=DEFAULT_EFFICIENCY,
    )
    attention = 4 * m.num_heads * m.head_dim * (context + 1) * m.num_layers
    expected = 2 * _dense_active_params_without_embedding(m) + attention
    assert float(step.total.flops) == pytest.approx(expected, rel=1e-3)
    # docs/reference/models.md §4: Llama-3.1-8B 8.030B total; minus the 0.525B input embedding and
    # norms.
    assert _dense_active_params_without_embedding(m) == pytest.approx(8.030e9 - 0.525e9, rel=0.002)


@pytest.mark.parametrize(
    ("model", "active_params", "attention_per_token_per_context"),
    [
        # docs/reference/models.md §4: Mixtral 12.88B active incl. embedding (32000·4096); GQA
        # attention term.
        (mixtral_8x7b(), 12.88e9 - 32000 * 4096, 4 * 32 * 128 * 32),
        # docs/reference/models.md §4: DeepSeek-V3 37.55B active incl. embedding (129280·7168);
        # absorbed MLA
        # attention: 2·n_h·((kv_lora + rope) + kv_lora) per layer per cached token.
        (deepseek_v3(), 37.55e9 - 129280 * 7168, 2 * 128 * (576 + 512) * 61),
    ],
)
def test_decode_flops_match_active_params_moe(
    h100: Accelerator,
    model: ModelShape,
    active_params: float,
    attention_per_token_per_context: float,
) -> None:
    context = 2048.0
    step = decode_step(
        model,
        h100,
        batch_size=1.0,
        context_tokens=context,
        precision=BF16,
        parallelism=Parallelism(),
        params=DEFAULT_EFFICIENCY,
    )
    expected = 2 * active_params + attention_per_token_per_context * (context + 1)
    assert float(step.total.flops) == pytest.approx(expected, rel=0.01)


def test_moe_weight_bytes_grow_toward_all_experts(h100: Accelerator) -> None:
    m = mixtral_8x7b()
    touched = expected_experts_touched(8, 2, np.array([1.0, 4.0, 64.0]))
    assert touched[0] == pytest.approx(2.0)
    assert touched[-1] == pytest.approx(8.0, rel=1e-3)
    step = decode_step(
        m,
        h100,
        batch_size=np.array([1.0, 64.0]),
        context_tokens=128.0,
        precision=BF16,
        parallelism=Parallelism(),
        params=DEFAULT_EFFICIENCY,
    )
    experts = next(r for r in step.rows if r.name == "experts")
    expert_matrix_bytes = 3 * 4096 * 14336 * 2 * 32
    assert experts.bytes[0] == pytest.approx(2 * expert_matrix_bytes, rel=0.01)
    assert experts.bytes[1] == pytest.approx(8 * expert_matrix_bytes, rel=0.01)


def test_a_batch_of_copies_reads_only_the_experts_one_sequence_picks(h100: Accelerator) -> None:
    """Copies of one prompt decoded greedily route alike: at batch 64 a decode step reads the 2
    experts one token picks per layer, not the ~8 that 64 independently routed tokens hit."""
    m = mixtral_8x7b()
    group = [AttentionGroup.of(64.0, 1.0, 128.0)]
    plain, copies = (
        step_cost(m, h100, precision=BF16, parallelism=Parallelism(), groups=group,
                  params=DEFAULT_EFFICIENCY, phase="decode", identical_sequences=same)
        for same in (False, True)
    )  # fmt: skip
    expert_matrix_bytes = 3 * 4096 * 14336 * 2 * 32
    experts = {
        s: next(r for r in c.rows if r.name == "experts")
        for s, c in (("plain", plain), ("copies", copies))
    }
    assert float(experts["plain"].bytes) == pytest.approx(8 * expert_matrix_bytes, rel=0.03)
    assert float(experts["copies"].bytes) == pytest.approx(2 * expert_matrix_bytes, rel=0.03)
    # the 64 rows still run (FLOPs as before): only the weights read shrink
    assert float(experts["copies"].flops) == pytest.approx(float(experts["plain"].flops))


def test_fp8_experts_decode_faster_than_bf16_under_a_column_roll_off(
    dsv3: ModelShape, h100: Accelerator
) -> None:
    """Decode reads the touched experts' weights: fp8 halves those bytes, so an fp8 MoE step is
    faster than a bf16 one even where a profile's fp8 GEMMs roll off steeply with narrow outputs
    (the H100 table fits ~2,600 columns; DeepSeek-V3's expert slice at tp 8 is 256 wide). The
    roll-off is the fused kernel's, over all touched experts (``kernels.gemm_cost``)."""
    params = DEFAULT_EFFICIENCY.replace(
        gemm_half_efficiency_columns_fp8=2600.0, gemm_half_efficiency_rows_fp8=150.0
    )
    fp8 = Precision(weights="fp8", activations="fp8")

    def experts_s(precision: Precision) -> float:
        step = decode_step(
            dsv3,
            h100,
            batch_size=16.0,
            context_tokens=1024.0,
            precision=precision,
            parallelism=Parallelism(tp=8),
            params=params,
        )
        return float(next(r for r in step.rows if r.name == "experts").cost.time_s)

    assert experts_s(fp8) < 0.75 * experts_s(BF16)


def test_prefill_lm_head_runs_on_last_token_only(llama70b: ModelShape, h100: Accelerator) -> None:
    step = prefill_step(
        llama70b,
        h100,
        batch_size=4.0,
        input_tokens=512.0,
        precision=BF16,
        parallelism=Parallelism(),
        params=DEFAULT_EFFICIENCY,
    )
    head = next(r for r in step.rows if r.name == "lm_head")
    assert float(head.flops) == pytest.approx(2 * 4 * llama70b.vocab_size * llama70b.hidden_size)


def test_tensor_parallel_splits_work(llama70b: ModelShape, h100: Accelerator) -> None:
    def flops(tp: int) -> float:
        step = decode_step(
            llama70b,
            h100,
            batch_size=8.0,
            context_tokens=512.0,
            precision=BF16,
            parallelism=Parallelism(tp=tp),
            params=DEFAULT_EFFICIENCY,
        )
        return float(step.total.flops)

    assert flops(4) == pytest.approx(flops(1) / 4, rel=1e-6)


def test_sliding_window_caps_attention(h100: Accelerator) -> None:
    from engine_refs import gemma_2_9b

    m = gemma_2_9b()

    def attention_flops(context: float) -> float:
        step = decode_step(
            m,
            h100,
            batch_size=1.0,
            context_tokens=context,
            precision=BF16,
            parallelism=Parallelism(),
            params=DEFAULT_EFFICIENCY,
        )
        return float(next(r for r in step.rows if r.name == "attention").flops)

    per_token_all_layers = 4 * 16 * 256 * 42
    per_token_global = 4 * 16 * 256 * 21
    assert attention_flops(2000) - attention_flops(1000) == pytest.approx(
        1000 * per_token_all_layers
    )
    assert attention_flops(9000) - attention_flops(8000) == pytest.approx(1000 * per_token_global)


def test_mla_prefill_runs_un_absorbed_and_decode_absorbed(
    dsv3: ModelShape, h200: Accelerator
) -> None:
    tp, t = 8, 8192.0
    heads = 128 / tp
    layers = 61
    prefill = prefill_step(
        dsv3,
        h200,
        batch_size=1.0,
        input_tokens=t,
        precision=Precision(weights="fp8"),
        parallelism=Parallelism(tp=tp),
        params=DEFAULT_EFFICIENCY,
    )
    attention = next(r for r in prefill.rows if r.name == "attention")
    # Un-absorbed: 2 · n_h/tp · (qk_nope + rope + v_head = 128 + 64 + 128) · T(T+1)/2 per layer.
    pairs = t * (t + 1) / 2
    assert float(attention.flops) == pytest.approx(2 * heads * 320 * pairs * layers, rel=1e-12)
    # (The absorbed form, 576 + 512 = 1088 wide, would have been 3.4× these FLOPs.)
    # No earlier chunk, so no cached latent to up-project.
    up = next(r for r in prefill.rows if r.name == "mla_context_up_projection")
    assert float(up.flops) == 0.0
    decode = decode_step(
        dsv3,
        h200,
        batch_size=4.0,
        context_tokens=1000.0,
        precision=Precision(weights="fp8"),
        parallelism=Parallelism(tp=tp),
        params=DEFAULT_EFFICIENCY,
    )
    attention = next(r for r in decode.rows if r.name == "attention")
    # Absorbed decode: 2 · B · n_h/tp · (576 + 512) · (S + 1) keys, reading the 576-value latent.
    assert float(attention.flops) == pytest.approx(2 * 4 * heads * 1088 * 1001 * layers)


def _streamed_bytes(model: ModelShape, acc: Accelerator, tokens: float, par: Parallelism) -> float:
    step = decode_step(
        model,
        acc,
        batch_size=tokens,
        context_tokens=512.0,
        precision=Precision(weights="fp8", activations="fp8"),
        parallelism=par,
        params=DEFAULT_EFFICIENCY,
    )
    return float(next(r for r in step.rows if r.name == "activation_streaming").bytes)


def test_activation_streaming_counts_norms_on_every_rank_and_the_ffn_share(
    h100: Accelerator,
) -> None:
    """Llama-3.1-8B, 64 tokens: per layer two fused residual-add + RMSNorms of 4·4,096 elements
    (replicated on each TP rank) and a SiLU·up of 3·14,336 / tp, 16-bit at any weight dtype."""
    model = llama_31_8b()
    for tp in (1, 4):
        expected = 64 * 32 * (2 * 4 * 4096 + 3 * 14336 / tp) * 2
        got = _streamed_bytes(model, h100, 64.0, Parallelism(tp=tp))
        assert got == pytest.approx(expected, rel=1e-12)


def test_activation_streaming_of_moe_experts_split_by_tp_or_ep(h100: Accelerator) -> None:
    """Mixtral-8x7B on 4 GPUs, 64 tokens: each token's 2 experts stream 3·14,336 elements in
    all. With tp 4 each GPU holds a quarter of every expert and streams a quarter of them; with
    ep 4 each holds 2 whole experts and the step waits for the rank the most picks land on:
    of the 128 picks each lands on a rank with probability 1/4, so 32 + 1.0294 · √(128 · ¼ · ¾)
    = 37.04 on the busiest of 4 (1.0294: the expected largest of 4 standard normal draws)."""
    model = mixtral_8x7b()
    norms = 32 * 64 * 2 * 4 * 4096 * 2
    per_pick = 32 * 3 * 14336 * 2
    tp4 = _streamed_bytes(model, h100, 64.0, Parallelism(tp=4))
    assert tp4 == pytest.approx(norms + 128 / 4 * per_pick, rel=1e-12)
    busiest = 32 + 1.0294 * math.sqrt(128 * 0.25 * 0.75)
    ep4 = _streamed_bytes(model, h100, 64.0, Parallelism(tp=4, ep=4))
    assert ep4 == pytest.approx(norms + busiest * per_pick, rel=1e-4)


def test_busiest_rank_sd_is_the_expected_largest_normal_draw() -> None:
    """The expected largest of n standard normal draws (tables of normal order statistics:
    0.5642, 1.0294, 1.4236, 1.7660 for n = 2, 4, 8, 16); none above the mean for one rank."""
    assert busiest_rank_sd(1) == 0.0
    for n, expected in ((2, 0.5642), (4, 1.0294), (8, 1.4236), (16, 1.7660)):
        assert busiest_rank_sd(n) == pytest.approx(expected, abs=2e-4)
    assert math.isclose(busiest_rank_sd(2), 1 / math.sqrt(math.pi), rel_tol=1e-4)


def _simulated_busiest_rank(
    experts: int, per_token: int, ranks: int, tokens: int, trials: int = 4000
) -> tuple[float, float]:
    """Mean over random top-k routings of the largest touched-expert count and the largest
    pick count over ``ranks`` GPUs holding consecutive blocks of the experts."""
    rng = np.random.default_rng(7)
    held = experts // ranks
    # Each token's top-k: the k smallest of independent uniform keys, one per expert.
    chosen = np.argsort(rng.random((trials, tokens, experts)), axis=-1)[..., :per_token]
    picked = np.zeros((trials, tokens, experts), dtype=np.int64)
    np.put_along_axis(picked, chosen, 1, axis=-1)
    by_rank = picked.reshape(trials, tokens, ranks, held)
    touched = by_rank.max(axis=1).sum(axis=-1)  # distinct experts touched, per rank
    picks = by_rank.sum(axis=(1, 3))  # token picks received, per rank
    return float(touched.max(axis=-1).mean()), float(picks.max(axis=-1).mean())


@pytest.mark.parametrize(("tokens", "ranks"), [(1, 4), (8, 4), (64, 4), (1, 2), (16, 2)])
def test_expert_parallel_step_waits_for_the_busiest_rank(
    h100: Accelerator, tokens: int, ranks: int
) -> None:
    """Mixtral-8x7B with ep = tp: each GPU holds 8 / ep whole experts, and the MoE layer lasts
    as long as the rank with the most touched experts (weights read) and the most token picks
    (rows computed). The engine's normal approximation stays within 6% of random top-2 routing
    simulated pick by pick; at one token and 4 ranks a rank holds a touched expert's whole
    weights (mean 1.14 experts) where a quarter of each of the 2 (0.5) is the tp-only mean."""
    m = mixtral_8x7b()
    step = decode_step(
        m,
        h100,
        batch_size=float(tokens),
        context_tokens=128.0,
        precision=BF16,
        parallelism=Parallelism(tp=ranks, ep=ranks),
        params=DEFAULT_EFFICIENCY,
    )
    experts = next(r for r in step.rows if r.name == "experts")
    expert_weight_bytes = 3 * 4096 * 14336 * 2 * 32
    pick_flops = 2 * 3 * 4096 * 14336 * 32
    touched, picks = _simulated_busiest_rank(8, 2, ranks, tokens)
    assert float(experts.bytes) / expert_weight_bytes == pytest.approx(touched, rel=0.06)
    assert float(experts.flops) / pick_flops == pytest.approx(picks, rel=0.06)
    if (tokens, ranks) == (1, 4):
        assert touched == pytest.approx(8 / 7, abs=0.03)  # P(both picks on one rank) = 1/7
