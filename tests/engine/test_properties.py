"""Hypothesis invariants of the engine: monotonicity and scaling laws over random shapes."""

from __future__ import annotations

import dataclasses

import numpy as np
from engine_refs import make_h100
from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine.estimate import estimate
from service.engine.memory import weight_bytes_per_gpu
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

H100 = make_h100()


@st.composite
def shapes(draw: st.DrawFn) -> ModelShape:
    """Draw a consistent dense or MoE decoder shape (kv heads divide heads, tp=2 divides both)."""
    kv_heads = draw(st.sampled_from([2, 4, 8, 16]))
    group = draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128, 256]))
    hidden = draw(st.integers(8, 64)) * 128
    layers = draw(st.integers(1, 64))
    moe = draw(st.booleans())
    sliding = draw(st.integers(0, layers)) if draw(st.booleans()) else 0
    experts = draw(st.sampled_from([8, 16, 64])) if moe else 0
    return ModelShape(
        id="random",
        num_layers=layers,
        hidden_size=hidden,
        num_heads=kv_heads * group,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=draw(st.integers(1, 32)) * 512,
        vocab_size=draw(st.integers(1000, 200_000)),
        ffn_type=draw(st.sampled_from(["glu", "mlp"])),
        tie_word_embeddings=draw(st.booleans()),
        num_experts=experts,
        experts_per_token=draw(st.integers(1, 4)) if moe else 0,
        moe_intermediate_size=draw(st.integers(1, 8)) * 256 if moe else 0,
        num_shared_experts=draw(st.integers(0, 1)) if moe else 0,
        sliding_window_tokens=draw(st.sampled_from([128, 1024, 4096])) if sliding else 0,
        num_sliding_layers=sliding,
    )


batches = st.lists(st.integers(1, 2048), min_size=2, max_size=12).map(
    lambda xs: np.array(sorted(set(xs)), dtype=float)
)
lengths = st.integers(1, 8192)
modes = st.sampled_from(["static", "serving"])
FAST = settings(max_examples=40, deadline=None)


@FAST
@given(shapes(), batches, lengths, st.integers(1, 2048), modes)
def test_tpot_non_decreasing_in_batch(
    model: ModelShape, b: np.ndarray, s_in: int, s_out: int, mode: str
) -> None:
    r = estimate(model, H100, input_tokens=s_in, output_tokens=s_out, batch_sizes=b, mode=mode)
    assert np.all(np.diff(r.tpot_ms) >= -1e-9 * r.tpot_ms[1:])


@FAST
@given(shapes(), batches, lengths, st.integers(1, 2048), modes)
def test_throughput_non_decreasing_while_it_fits(
    model: ModelShape, b: np.ndarray, s_in: int, s_out: int, mode: str
) -> None:
    r = estimate(model, H100, input_tokens=s_in, output_tokens=s_out, batch_sizes=b, mode=mode)
    fitting = r.output_tokens_per_s[r.fits]
    assert np.all(np.diff(fitting) >= -1e-9 * fitting[1:])


@FAST
@given(shapes(), batches, lengths, st.floats(1.01, 4.0))
def test_more_bandwidth_never_slows_decode(
    model: ModelShape, b: np.ndarray, context: int, factor: float
) -> None:
    faster = dataclasses.replace(H100, memory_bandwidth_gb_s=H100.memory_bandwidth_gb_s * factor)
    slow = estimate(model, H100, input_tokens=context, output_tokens=16, batch_sizes=b)
    fast = estimate(model, faster, input_tokens=context, output_tokens=16, batch_sizes=b)
    assert np.all(fast.tpot_ms <= slow.tpot_ms)


@FAST
@given(shapes())
def test_tp2_halves_weight_bytes(model: ModelShape) -> None:
    one = weight_bytes_per_gpu(model, Precision(), Parallelism(tp=1))
    two = weight_bytes_per_gpu(model, Precision(), Parallelism(tp=2))
    # Only norms and the MoE router are replicated; they are < 1% of any drawn shape.
    assert abs(two.total_bytes / one.total_bytes - 0.5) < 0.01


@FAST
@given(shapes())
def test_fp8_weights_halve_weight_bytes(model: ModelShape) -> None:
    bf16 = weight_bytes_per_gpu(model, Precision())
    fp8 = weight_bytes_per_gpu(model, Precision("fp8", "fp8"))
    # Decoder linear weights halve (plus 128×128 block scales); embeddings stay 16-bit.
    assert abs(fp8.quantized_bytes / bf16.quantized_bytes - 0.5) < 1e-3
    assert fp8.unquantized_bytes == bf16.unquantized_bytes
