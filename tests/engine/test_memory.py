"""Memory per GPU: weights, KV cache (MLA, windows), capacity and the largest batch."""

from __future__ import annotations

import numpy as np
import pytest
from engine_refs import gemma_2_9b, gemma_3_27b, make_a100

from service.engine.errors import InvalidLayoutError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.memory import (
    kv_cache_bytes_per_token,
    max_batch_size,
    weight_bytes_per_gpu,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

BF16 = Precision()


def test_kv_bytes_per_token(llama8b: ModelShape, llama70b: ModelShape, dsv3: ModelShape) -> None:
    assert kv_cache_bytes_per_token(llama8b, BF16).per_token_bytes == 131_072
    assert kv_cache_bytes_per_token(llama70b, BF16).per_token_bytes == 320 * 1024
    assert kv_cache_bytes_per_token(dsv3, BF16).per_token_bytes == (512 + 64) * 61 * 2 == 70_272
    fp8_kv = Precision(kv_cache="fp8")
    assert kv_cache_bytes_per_token(llama8b, fp8_kv).per_token_bytes == 65_536


def test_kv_split_by_tp_and_replicated_past_kv_heads(llama8b: ModelShape, dsv3: ModelShape) -> None:
    per_gpu = kv_cache_bytes_per_token(llama8b, BF16, Parallelism(tp=4)).per_token_bytes
    assert per_gpu == 131_072 / 4
    # tp = 16 > 8 KV heads: each rank keeps one (replicated) KV head.
    assert (
        kv_cache_bytes_per_token(llama8b, BF16, Parallelism(tp=16)).per_token_bytes == 131_072 / 8
    )
    # MLA latent is shared by all heads and held by every rank.
    assert kv_cache_bytes_per_token(dsv3, BF16, Parallelism(tp=8)).per_token_bytes == 70_272


@pytest.mark.parametrize(
    ("model", "global_layers", "local_layers", "window"),
    [(gemma_2_9b(), 21, 21, 4096), (gemma_3_27b(), 10, 52, 1024)],
)
def test_windowed_layers_are_capped(
    model: ModelShape, global_layers: int, local_layers: int, window: int
) -> None:
    kv = kv_cache_bytes_per_token(model, BF16)
    per_layer = 2 * model.num_kv_heads * model.head_dim * 2  # 8,192 B (docs/reference/models.md §3)
    assert per_layer == 8192
    below = kv.for_context(np.array([window // 2, window]))
    assert below[1] - below[0] == (window // 2) * (global_layers + local_layers) * per_layer
    above = kv.for_context(np.array([window, 3 * window]))
    assert above[1] - above[0] == 2 * window * global_layers * per_layer


def test_llama_70b_weights_and_fit(llama70b: ModelShape, h100: Accelerator) -> None:
    weights = weight_bytes_per_gpu(llama70b, BF16)
    assert weights.total_bytes == pytest.approx(141e9, rel=0.01)  # 70.55B params × 2 B
    one = estimate(llama70b, h100, input_tokens=1024, output_tokens=128, batch_sizes=[1])
    assert not one.fits[0]
    # TP2: 70.5 GB of weights + 1.5 GB runtime already reach 0.9 × 80 GB = 72 GB usable.
    two = estimate(
        llama70b,
        h100,
        parallelism=Parallelism(tp=2),
        input_tokens=1024,
        output_tokens=128,
        batch_sizes=[1],
    )
    assert two.weights_gb[0] == pytest.approx(141 / 2, rel=0.01)
    assert two.usable_gb[0] == pytest.approx(72.0)
    assert not two.fits[0]
    four = estimate(
        llama70b,
        h100,
        parallelism=Parallelism(tp=4),
        input_tokens=1024,
        output_tokens=128,
        batch_sizes=[1, 4],
    )
    assert four.fits.all()
    assert four.weights_gb[0] == pytest.approx(141 / 4, rel=0.01)


def test_quantized_weight_bytes(llama70b: ModelShape) -> None:
    bf16 = weight_bytes_per_gpu(llama70b, BF16)
    fp8 = weight_bytes_per_gpu(llama70b, Precision("fp8", "fp8"))
    int4 = weight_bytes_per_gpu(llama70b, Precision(weights="int4"))
    assert fp8.quantized_bytes == pytest.approx(bf16.quantized_bytes / 2, rel=1e-3)
    assert fp8.unquantized_bytes == bf16.unquantized_bytes  # embeddings and head stay 16-bit
    # int4 with one 8-bit scale per 32 weights: 0.5 + 1/32 bytes per weight.
    assert int4.quantized_bytes == pytest.approx(bf16.quantized_bytes * (0.5 + 1 / 32) / 2)


def test_capacity_is_decimal_gb_with_no_second_conversion(h100: Accelerator) -> None:
    # The project rule is 1 GB = 1e9 bytes: memory_gb 80 is 80e9 bytes, not 80 GiB (85.9e9).
    assert h100.memory_bytes == 80e9
    # A part whose GiB label the catalog already converted (Trainium: 32 GiB = 34.36 GB) is
    # read once: 34.36e9 bytes, not 34.36 × 2^30 (36.9e9, the old double conversion).
    trainium = Accelerator(
        id="trainium",
        vendor="AWS",
        name="Trainium",
        memory_gb=34.36,
        memory_bandwidth_gb_s=880.5,
        peak_tflops={"bf16": 190.0},
        memory_type="HBM",
    )
    assert trainium.memory_bytes == pytest.approx(34.36e9)
    gddr = Accelerator(
        id="l40s",
        vendor="NVIDIA",
        name="L40S",
        memory_gb=48.0,
        memory_bandwidth_gb_s=864.0,
        peak_tflops={"bf16": 362.0},
        memory_type="GDDR6",
    )
    assert gddr.memory_bytes == 48e9


def test_max_batch_matches_fits(llama8b: ModelShape, h100: Accelerator) -> None:
    largest = max_batch_size(
        llama8b,
        h100,
        precision=BF16,
        parallelism=Parallelism(),
        context_tokens=2048 + 512,
        step_tokens=8192,
    )
    assert largest > 100
    result = estimate(
        llama8b, h100, input_tokens=2048, output_tokens=512, batch_sizes=[largest, largest + 1]
    )
    assert result.fits.tolist() == [True, False]
    assert result.max_batch_size == largest
    roomier = max_batch_size(
        llama8b,
        h100,
        precision=BF16,
        parallelism=Parallelism(),
        context_tokens=2048 + 512,
        step_tokens=8192,
        memory_utilization=0.95,
    )
    assert roomier > largest


def test_layout_checks(llama8b: ModelShape, dsv3: ModelShape) -> None:
    with pytest.raises(InvalidLayoutError, match="num_heads"):
        Parallelism(tp=3).check_divides(llama8b)
    with pytest.raises(InvalidLayoutError, match="pp"):
        Parallelism(pp=64).check_divides(llama8b)
    with pytest.raises(InvalidLayoutError, match="MoE"):
        Parallelism(tp=2, ep=2).check_divides(llama8b)
    Parallelism(tp=8, ep=8).check_divides(dsv3)
    with pytest.raises(InvalidLayoutError, match="divide tp"):
        Parallelism(tp=2, ep=4).check_divides(dsv3)
    assert Parallelism(tp=4, pp=2).gpus_per_replica == 8


def test_pipeline_splits_layers(llama70b: ModelShape) -> None:
    whole = weight_bytes_per_gpu(llama70b, BF16)
    half = weight_bytes_per_gpu(llama70b, BF16, Parallelism(pp=2))
    assert half.quantized_bytes == pytest.approx(whole.quantized_bytes / 2)


def test_a100_has_no_fp8_but_runs_weight_only_fp8(llama8b: ModelShape) -> None:
    a100 = make_a100()
    result = estimate(
        llama8b,
        a100,
        precision=Precision(weights="fp8"),
        input_tokens=128,
        output_tokens=16,
        batch_sizes=[1],
    )
    assert result.compute_dtype == "bf16"
    assert result.weights_gb[0] < 10
