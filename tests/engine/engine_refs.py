"""Model shapes and accelerators typed in from the reference tables, for engine tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape


def make_h100() -> Accelerator:
    """H100 SXM5 80GB: docs/reference/accelerators.md §1 and §2 rows 'NVIDIA H100 SXM5 80GB'."""
    return Accelerator(
        id="h100-sxm",
        vendor="NVIDIA",
        name="H100 SXM5 80GB",
        memory_gb=80.0,
        memory_bandwidth_gb_s=3350.0,
        peak_tflops={
            "fp32": 67.0,
            "tf32": 494.5,
            "bf16": 989.5,
            "fp16": 989.5,
            "fp8": 1979.0,
            "int8": 1979.0,
        },
        interconnect_gb_s=450.0,
        tdp_w=700.0,
        price_usd_per_hour=2.99,  # §4, Lambda on-demand 2026-05-18
        memory_type="HBM3",
    )


def make_h200() -> Accelerator:
    """H200 SXM 141GB: docs/reference/accelerators.md §1 and §2, `h200-sxm` (H100 compute)."""
    return replace(
        make_h100(),
        id="h200-sxm",
        name="H200 SXM 141GB",
        memory_gb=141.0,
        memory_bandwidth_gb_s=4800.0,
        price_usd_per_hour=None,
        memory_type="HBM3e",
    )


def make_a100() -> Accelerator:
    """A100 SXM4 80GB: docs/reference/accelerators.md rows 'NVIDIA A100 SXM4 80GB' (no fp8)."""
    return Accelerator(
        id="a100-sxm-80gb",
        vendor="NVIDIA",
        name="A100 SXM4 80GB",
        memory_gb=80.0,
        memory_bandwidth_gb_s=2039.0,
        peak_tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        interconnect_gb_s=300.0,
        tdp_w=400.0,
        memory_type="HBM2e",
    )


def llama_31_8b() -> ModelShape:
    """docs/reference/models.md §1 row 'Llama-3.1-8B'."""
    return ModelShape(
        id="llama-3.1-8b",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=128256,
    )


def llama_31_70b() -> ModelShape:
    """docs/reference/models.md §1 row 'Llama-3.1-70B'."""
    return replace(
        llama_31_8b(),
        id="llama-3.1-70b",
        num_layers=80,
        hidden_size=8192,
        num_heads=64,
        intermediate_size=28672,
    )


def deepseek_v3() -> ModelShape:
    """docs/reference/models.md §1–§3, `deepseek-v3` (MLA, 256 routed experts, 3 dense layers)."""
    return ModelShape(
        id="deepseek-v3",
        num_layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        head_dim=192,
        intermediate_size=18432,
        vocab_size=129280,
        num_experts=256,
        experts_per_token=8,
        num_shared_experts=1,
        moe_intermediate_size=2048,
        shared_expert_intermediate_size=2048,
        first_dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        native_weights_dtype="fp8",
    )


def gemma_2_9b() -> ModelShape:
    """docs/reference/models.md §1 and §3, `gemma-2-9b` (21 of 42 layers windowed at 4096, tied)."""
    return ModelShape(
        id="gemma-2-9b",
        num_layers=42,
        hidden_size=3584,
        num_heads=16,
        num_kv_heads=8,
        head_dim=256,
        intermediate_size=14336,
        vocab_size=256000,
        tie_word_embeddings=True,
        sliding_window_tokens=4096,
        num_sliding_layers=21,
    )


def gemma_3_27b() -> ModelShape:
    """docs/reference/models.md §1 and §3, `gemma-3-27b` (52 of 62 layers windowed, 1024, tied)."""
    return ModelShape(
        id="gemma-3-27b",
        num_layers=62,
        hidden_size=5376,
        num_heads=32,
        num_kv_heads=16,
        head_dim=128,
        intermediate_size=21504,
        vocab_size=262208,
        tie_word_embeddings=True,
        qk_norm=True,
        sliding_window_tokens=1024,
        num_sliding_layers=52,
    )


def mixtral_8x7b() -> ModelShape:
    """docs/reference/models.md §1 and §2 rows 'Mixtral-8x7B-v0.1'."""
    return ModelShape(
        id="mixtral-8x7b",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        num_experts=8,
        experts_per_token=2,
        moe_intermediate_size=14336,
    )


# Calibration tests: benchmark files, spec-sheet H100 SXM and A100 SXM4 80GB
# (docs/reference/accelerators.md §1–2, dense peaks) and shapes from docs/reference/models.md §1.
BENCHMARK_DATA = Path(__file__).parents[1] / "data" / "benchmarks"
CALIBRATION_H100 = Accelerator(
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM5 80GB",
    memory_gb=80.0,
    memory_bandwidth_gb_s=3350.0,
    peak_tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    interconnect_gb_s=450.0,
)
CALIBRATION_A100 = Accelerator(
    id="a100-sxm-80gb",
    vendor="NVIDIA",
    name="A100 SXM4 80GB",
    memory_gb=80.0,
    memory_bandwidth_gb_s=2039.0,
    peak_tflops={"bf16": 312.0, "fp16": 312.0},
    interconnect_gb_s=300.0,
)
CALIBRATION_MODELS = {
    "llama-3-8b": ModelShape("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256),
    "llama-2-70b": ModelShape("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000),
    "qwen3-32b": ModelShape("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, qk_norm=True),
}
