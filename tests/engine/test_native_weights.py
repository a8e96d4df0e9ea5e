"""Native weight dtypes: no weights dtype asked → the model's shipped format (issue 13, 1)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.errors import InvalidShapeError, UnsupportedDtypeError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.hf_import import shape_from_hf_config
from service.engine.parallel import Parallelism
from service.engine.precision import AUTO_ACTIVATIONS, AUTO_KV_CACHE, NATIVE, Precision
from service.engine.roofline import analyze_intensity
from service.engine.shapes import ModelShape

NATIVE_PRECISION = Precision(weights=NATIVE)


@pytest.fixture(scope="module")
def accelerators() -> dict[str, Accelerator]:
    return {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}


@pytest.fixture(scope="module")
def models() -> dict[str, ModelShape]:
    return {str(r["id"]): model_from_record(r) for r in load_model_records()}


def test_deepseek_v3_fp8_fits_on_8_h200(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    ds, h200 = models["deepseek-v3"], accelerators["h200-sxm"]
    kwargs = {"parallelism": Parallelism(tp=8), "input_tokens": 1000, "output_tokens": 1000}
    native = estimate(ds, h200, precision=NATIVE_PRECISION, batch_sizes=[1], **kwargs)
    assert native.precision.weights == "fp8"
    # By hand: 671.03B parameters − 2 × 0.927B vocab − 0.106B routers − norms = 669.07B
    # quantized; of these the MLA down-projections 61 × 7168 × (1536 + 576) = 0.922B are
    # replicated on every rank, the rest split 8 ways; × (1 + 4/16384) for the 128×128 fp8
    # block scales; plus the 16-bit vocab shard (2 × 0.927B / 8) and routers (0.106B) × 2 B.
    quantized = ((669.07e9 - 0.922e9) / 8 + 0.922e9) * (1 + 4 / 16384)
    unquantized = (2 * 0.927e9 / 8 + 0.106e9) * 2
    assert native.weights_gb[0] == pytest.approx((quantized + unquantized) / 1e9, rel=0.005)
    assert native.weights_gb[0] == pytest.approx(85.1, abs=0.1)
    assert native.fits[0]  # 85.1 + 1.5 GB runtime < 0.9 × 141 = 126.9 GB usable
    # An explicit dtype still wins: bf16 needs ~169.6 GB per GPU, more than an H200 holds.
    bf16 = estimate(ds, h200, precision=Precision(weights="bf16"), batch_sizes=[1], **kwargs)
    assert bf16.precision.weights == "bf16"
    assert bf16.weights_gb[0] == pytest.approx(169.6, abs=0.2)
    assert not bf16.fits[0]


def test_gpt_oss_120b_mxfp4_fits_one_h100(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    model, h100 = models["gpt-oss-120b"], accelerators["h100-sxm"]
    native = estimate(
        model, h100, precision=NATIVE_PRECISION, input_tokens=1000, output_tokens=1000,
        batch_sizes=[1],
    )  # fmt: skip
    assert native.precision.weights == "fp4"
    assert native.compute_dtype == "bf16"  # Hopper dequantises 4-bit weights into bf16 math
    # By hand: 116.83B − 2 × 0.579B vocab − 36 × 0.369M routers − norms = 115.66B linear
    # weights, of which attention is 36 × (2880 × (4096 + 2 × 512) + 4096 × 2880 + biases
    # 8000) = 0.956B and stays BF16 (the checkpoint's modules_to_not_convert); the experts'
    # 114.70B are 0.5 + 1/32 B (MXFP4: one 8-bit scale per 32 values) = 60.94 GB, + (1.158B
    # vocab + 0.013B routers and norms + 0.956B attention) × 2 B.
    attention = 36 * (2880 * (4096 + 2 * 512) + 4096 * 2880 + 8000)
    hand_gb = ((115.66e9 - attention) * (0.5 + 1 / 32) + (1.171e9 + attention) * 2) / 1e9
    assert native.weights_gb[0] == pytest.approx(hand_gb, rel=0.005)
    assert native.fits[0]  # 65.2 + 1.5 GB < 0.9 × 80 = 72 GB usable
    bf16 = estimate(
        model, h100, precision=Precision(), input_tokens=1000, output_tokens=1000,
        batch_sizes=[1],
    )  # fmt: skip
    assert not bf16.fits[0]
    # fp8 is a requantisation of every linear weight, attention included.
    fp8 = estimate(
        model, h100, precision=Precision(weights="fp8"), input_tokens=1000, output_tokens=1000,
        batch_sizes=[1],
    )  # fmt: skip
    assert fp8.weights_gb[0] == pytest.approx((115.66e9 * 1.0 + 1.171e9 * 2) / 1e9, rel=0.005)


def test_native_resolves_to_bf16_for_a_bf16_model(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    llama, h100 = models["llama-3.1-8b"], accelerators["h100-sxm"]
    assert NATIVE_PRECISION.resolved(llama, h100) == Precision()
    assert NATIVE_PRECISION.weights_source == "native"
    assert Precision(weights="fp8").resolved(llama, h100).weights == "fp8"
    assert Precision(weights="fp8").weights_source == "request"


@pytest.mark.parametrize(
    ("weights", "accelerator", "activations"),
    [
        ("fp8", "h100-sxm", "fp8"),  # W8A8, as engines run fp8 checkpoints on Hopper
        ("fp8", "l40s", "fp8"),  # Ada has fp8 tensor cores too
        ("fp8", "a100-sxm-80gb", "bf16"),  # no fp8 peak: weight-only (Marlin)
        ("native", "h200-sxm", "fp8"),  # DeepSeek-V3's shipped fp8
        ("int8", "h100-sxm", "bf16"),  # GPTQ-style weight-only unless W8A8 is asked for
        ("int4", "h100-sxm", "bf16"),
        ("fp4", "b200", "fp4"),  # NVFP4 checkpoints run W4A4 on Blackwell
        ("fp4", "h100-sxm", "bf16"),  # and weight-only on Hopper
        ("bf16", "h100-sxm", "bf16"),
        ("fp16", "v100-sxm2-32gb", "fp16"),  # no bf16 peak
    ],
)
def test_auto_activations_follow_what_engines_run(
    models: dict[str, ModelShape],
    accelerators: dict[str, Accelerator],
    weights: str,
    accelerator: str,
    activations: str,
) -> None:
    """``activations="auto"`` (the API's default) resolves with the weights and the part;
    an explicit activations dtype is kept."""
    ds = models["deepseek-v3"]
    acc = accelerators[accelerator]
    asked = Precision(weights=weights, activations=AUTO_ACTIVATIONS, kv_cache=AUTO_KV_CACHE)
    assert asked.resolved(ds, acc).activations == activations
    # no engine named: the cache stays in the model dtype (vLLM's and SGLang's default)
    assert asked.resolved(ds, acc).kv_cache == (
        "bf16" if activations in ("fp8", "fp4") else activations
    )
    explicit = Precision(weights=weights, activations="bf16")
    assert explicit.resolved(ds, acc).activations == "bf16"


@pytest.mark.parametrize(
    ("model", "weights", "accelerator", "backend", "kv_cache"),
    [
        # quantized for TensorRT-LLM by Model Optimizer, whose checkpoints carry an fp8 cache
        ("llama-3.1-70b", "fp8", "h100-sxm", "trtllm", "fp8"),
        ("llama-3.1-70b", "fp8", "h100-sxm", "TensorRT-LLM", "fp8"),
        ("llama-3.1-70b", "fp4", "b200", "trtllm", "fp8"),
        # vLLM and SGLang keep the model dtype unless asked
        ("llama-3.1-70b", "fp8", "h100-sxm", "vllm", "bf16"),
        ("llama-3.1-70b", "fp8", "h100-sxm", "sglang", "bf16"),
        ("llama-3.1-70b", "fp8", "h100-sxm", None, "bf16"),
        # a natively fp8 checkpoint carries no cache quantization, whatever the engine
        ("deepseek-v3", NATIVE, "h200-sxm", "trtllm", "bf16"),
        ("deepseek-v3", "fp8", "h200-sxm", "trtllm", "bf16"),
        # weight-only fp8 (no fp8 peak) and 16-bit weights keep the 16-bit activations' dtype
        ("llama-3.1-70b", "fp8", "a100-sxm-80gb", "trtllm", "bf16"),
        ("llama-3.1-8b", "fp16", "v100-sxm2-32gb", "trtllm", "fp16"),
    ],
)
def test_auto_kv_cache_is_what_the_backend_keeps(
    models: dict[str, ModelShape],
    accelerators: dict[str, Accelerator],
    model: str,
    weights: str,
    accelerator: str,
    backend: str | None,
    kv_cache: str,
) -> None:
    asked = Precision(weights=weights, activations=AUTO_ACTIVATIONS, kv_cache=AUTO_KV_CACHE)
    got = asked.resolved(models[model], accelerators[accelerator], backend)
    assert got.kv_cache == kv_cache
    # a named cache is kept
    named = Precision(weights=weights, activations=AUTO_ACTIVATIONS, kv_cache="fp8")
    assert named.resolved(models[model], accelerators[accelerator], "vllm").kv_cache == "fp8"


def test_auto_activations_keep_an_experts_only_checkpoint_weight_only(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    """gpt-oss ships MXFP4 experts for weight-only kernels: at its native fp4 (named or not)
    it keeps bf16 activations even on a B200, while fp4 for every linear weight of another
    model runs W4A4 there."""
    oss, b200 = models["gpt-oss-120b"], accelerators["b200"]
    for weights in (NATIVE, "fp4"):
        asked = Precision(weights=weights, activations=AUTO_ACTIVATIONS)
        assert asked.resolved(oss, b200).activations == "bf16"
    llama = Precision(weights="fp4", activations=AUTO_ACTIVATIONS)
    assert llama.resolved(models["llama-3.1-70b"], b200).compute_dtype == "fp4"


def test_native_bf16_weights_load_as_fp16_where_the_part_has_no_bf16(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    llama, v100 = models["llama-3.1-8b"], accelerators["v100-sxm2-32gb"]
    native = Precision(weights=NATIVE, activations=AUTO_ACTIVATIONS, kv_cache=AUTO_KV_CACHE)
    got = native.resolved(llama, v100)
    assert (got.weights, got.activations, got.kv_cache) == ("fp16", "fp16", "fp16")
    assert native.resolved(llama, accelerators["h100-sxm"]).weights == "bf16"
    # weights named bf16 stay as asked
    named = Precision(weights="bf16", activations=AUTO_ACTIVATIONS).resolved(llama, v100)
    assert named.weights == "bf16"


def test_auto_activations_must_be_resolved_before_use() -> None:
    with pytest.raises(UnsupportedDtypeError, match="activations dtype 'auto'"):
        Precision(activations=AUTO_ACTIVATIONS).validate()


def test_gpt_oss_checkpoint_streams_attention_weights_in_bf16(
    models: dict[str, ModelShape], accelerators: dict[str, Accelerator]
) -> None:
    model, h100 = models["gpt-oss-120b"], accelerators["h100-sxm"]
    assert model.quantizes_only_experts("fp4") and not model.quantizes_only_experts("fp8")

    def projection_bytes(weights: str) -> float:
        rows = analyze_intensity(
            model, h100, phase="decode", batch_size=1, context_tokens=1000,
            precision=Precision(weights=weights), parallelism=Parallelism(tp=2),
        ).operators  # fmt: skip
        return sum(r.bytes for r in rows if r.name in ("qkv_projection", "output_projection"))

    # One decode token on 2 GPUs: 36 layers × (2880 × 5120 + 4096 × 2880) / 2 weights per GPU,
    # 2 bytes each in the MXFP4 checkpoint (attention stays BF16), 1 byte requantised to fp8;
    # the activations add a few kB.
    weights_per_gpu = 36 * (2880 * 5120 + 4096 * 2880) / 2
    assert projection_bytes("fp4") == pytest.approx(2 * weights_per_gpu, rel=0.01)
    assert projection_bytes("fp8") == pytest.approx(weights_per_gpu, rel=0.01)


def test_import_reads_which_layers_a_checkpoint_quantizes() -> None:
    configs = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
    oss = json.loads((configs / "openai--gpt-oss-120b.json").read_text())
    assert shape_from_hf_config("g", oss).native_quantized_layers == "experts"
    ds = json.loads((configs / "deepseek-ai--DeepSeek-V3.json").read_text())
    assert shape_from_hf_config("d", ds).native_quantized_layers == "all"
    quant = oss["quantization_config"]
    quant["modules_to_not_convert"] = ["model.embed_tokens", "lm_head"]
    assert shape_from_hf_config("g", oss).native_quantized_layers == "all"


def test_experts_only_quantization_needs_experts(models: dict[str, ModelShape]) -> None:
    with pytest.raises(InvalidShapeError, match="MoE"):
        replace(models["llama-3.1-8b"], native_quantized_layers="experts").validate()
    with pytest.raises(InvalidShapeError, match="one of"):
        replace(models["gpt-oss-120b"], native_quantized_layers="attention").validate()
