"""Measured matmul (MAMF) priors: spec-sheet efficiency and transfer between accelerators."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    PARAMETER_BOUNDS,
    VENDOR_KERNEL_PRIORS,
    EfficiencyParams,
    spec_sheet_efficiency,
    transfer_efficiency,
)
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import analyze_intensity

ACCELERATORS = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
MODELS = {str(r["id"]): model_from_record(r) for r in load_model_records()}


def _with(accelerator: Accelerator, **measured: float) -> Accelerator:
    return dataclasses.replace(accelerator, measured_matmul_tflops=measured)


def _at_mamf_size(params: EfficiencyParams, group: str) -> float:
    """The fraction of peak ``params`` reach on a 16,384² GEMM of ``group``, roll-offs applied."""
    size = 16384.0
    rows = getattr(params, f"gemm_half_efficiency_rows_{group}")
    columns = getattr(params, f"gemm_half_efficiency_columns_{group}")
    efficiency = getattr(params, f"gemm_compute_efficiency_{group}")
    return float(efficiency * size / (size + rows) * size / (size + columns))


def test_mi300x_uses_its_mamf_fraction() -> None:
    params = spec_sheet_efficiency(ACCELERATORS["mi300x"])
    assert _at_mamf_size(params, "bf16") == pytest.approx(668.4 / 1307.4)
    assert params.gemm_compute_efficiency_fp8 == DEFAULT_EFFICIENCY.gemm_compute_efficiency_fp8
    moved = params.replace(
        gemm_compute_efficiency_bf16=DEFAULT_EFFICIENCY.gemm_compute_efficiency_bf16
    )
    assert moved == DEFAULT_EFFICIENCY  # another vendor: the generic kernel priors


def test_unmeasured_accelerator_keeps_base() -> None:
    base = DEFAULT_EFFICIENCY.replace(gemm_compute_efficiency_bf16=0.6)
    assert spec_sheet_efficiency(ACCELERATORS["tpu-v5e"]) is DEFAULT_EFFICIENCY
    assert spec_sheet_efficiency(ACCELERATORS["tpu-v5e"], base) is base
    # an unmeasured NVIDIA part takes NVIDIA's fp8 GEMM shape and nothing else
    assert spec_sheet_efficiency(ACCELERATORS["l4"], base) == base.replace(
        **VENDOR_KERNEL_PRIORS["nvidia"]
    )
    gh200 = spec_sheet_efficiency(ACCELERATORS["gh200"], base)
    assert _at_mamf_size(gh200, "bf16") == pytest.approx(828.6 / 989.4)
    assert _at_mamf_size(gh200, "fp8") == pytest.approx(1535.0 / 1978.9)


def test_nvidia_fp8_gemms_take_the_h100_table_shape() -> None:
    # H100's fp8 table (benchmarks/data/h100/gemm.csv): a decode GEMM (4 rows, 1,280 columns,
    # a tp 8 slice of Llama-3.1-70B's QKV) runs at well under the large-shape rate, so the
    # spec sheet prices it above the generic prior's weight streaming, while the MAMF size
    # keeps the measured rate
    h100, tpu = ACCELERATORS["h100-sxm"], ACCELERATORS["tpu-v5p"]
    nvidia, generic = spec_sheet_efficiency(h100), DEFAULT_EFFICIENCY
    assert _at_mamf_size(nvidia, "fp8") == pytest.approx(1402.6 / 1978.9, rel=1e-3)
    assert nvidia.gemm_half_efficiency_columns_fp8 == 2600.0
    assert nvidia.gemm_half_efficiency_columns_bf16 == generic.gemm_half_efficiency_columns_bf16
    assert spec_sheet_efficiency(tpu).gemm_half_efficiency_columns_fp8 == 0.0
    fp8 = Precision(weights="fp8", activations="fp8")
    tpot = {
        name: float(
            estimate(
                MODELS["llama-3.1-70b"], h100, precision=fp8, parallelism=Parallelism(tp=8),
                input_tokens=1024, output_tokens=256, batch_sizes=np.array([4.0]), params=p,
            ).tpot_ms[0]
        )
        for name, p in (("nvidia", nvidia), ("generic", generic))
    }  # fmt: skip
    assert 1.05 < tpot["nvidia"] / tpot["generic"] < 1.4


def test_uncalibrated_mi300x_prefill_slower_by_mamf_ratio() -> None:
    mi300x, model = ACCELERATORS["mi300x"], MODELS["llama-3.1-8b"]
    ratio = DEFAULT_EFFICIENCY.gemm_compute_efficiency_bf16 / (668.4 / 1307.4)
    old, new = (
        analyze_intensity(
            model, mi300x, phase="prefill", batch_size=4, context_tokens=8192, params=p
        )
        for p in (DEFAULT_EFFICIENCY, spec_sheet_efficiency(mi300x))
    )
    gemms = [(a, b) for a, b in zip(old.operators, new.operators, strict=True) if a.kind == "gemm"]
    compute_bound = [(a, b) for a, b in gemms if a.bound == "compute"]
    assert len(compute_bound) >= 3
    for before, after in compute_bound:
        assert after.bound == "compute"
        assert after.time_ms / before.time_ms == pytest.approx(ratio, rel=0.01)
    ttft_old, ttft_new = (
        float(
            estimate(
                model, mi300x, input_tokens=8192, output_tokens=1,
                batch_sizes=np.array([1.0]), params=p,
            ).ttft_ms[0]
        )
        for p in (DEFAULT_EFFICIENCY, spec_sheet_efficiency(mi300x))
    )  # fmt: skip
    # Attention and overheads keep their priors, so the whole prefill moves less than GEMMs.
    assert 1.2 < ttft_new / ttft_old < ratio


def test_transfer_scales_compute_by_measured_fraction_ratio() -> None:
    h100, mi300x = ACCELERATORS["h100-sxm"], ACCELERATORS["mi300x"]
    fitted = DEFAULT_EFFICIENCY.replace(
        gemm_compute_efficiency_bf16=0.70, gemm_compute_efficiency_fp8=0.60, step_overhead_us=77.0
    )
    moved = transfer_efficiency(fitted, h100, mi300x)
    expected = 0.70 * (668.4 / 1307.4) / (794.5 / 989.4)
    assert moved.gemm_compute_efficiency_bf16 == pytest.approx(expected)
    # MI300X fp8 not measured: another vendor's kernels, so the prior
    assert moved.gemm_compute_efficiency_fp8 == DEFAULT_EFFICIENCY.gemm_compute_efficiency_fp8
    assert moved.step_overhead_us == 77.0
    back = transfer_efficiency(moved, mi300x, h100)
    assert back.gemm_compute_efficiency_bf16 == pytest.approx(0.70)
    assert transfer_efficiency(fitted, ACCELERATORS["l4"], h100) is fitted


# H100 kernel-table fits of vLLM's fp8 CUTLASS GEMM (benchmarks/results/accuracy.md, section 1)
H100_FP8_KERNELS = {
    "gemm_half_efficiency_rows_fp8": 150.0,
    "gemm_half_efficiency_columns_fp8": 2600.0,
    "gemm_kernel_latency_us_fp8": 5.7,
    "kv_bandwidth_efficiency_fp8": 0.71,
}


def test_kernel_shape_fits_stay_with_their_vendor() -> None:
    h100 = ACCELERATORS["h100-sxm"]
    fitted = DEFAULT_EFFICIENCY.replace(**H100_FP8_KERNELS, sequence_layer_overhead_us=0.7)
    to_h200 = transfer_efficiency(fitted, h100, ACCELERATORS["h200-sxm"])
    assert to_h200.gemm_half_efficiency_columns_fp8 == 2600.0  # same kernels on an NVIDIA part
    for target in ("tpu-v5p", "mi355x", "trainium"):
        moved = transfer_efficiency(fitted, h100, ACCELERATORS[target])
        prior = spec_sheet_efficiency(ACCELERATORS[target])
        assert {k: getattr(moved, k) for k in H100_FP8_KERNELS} == {
            k: getattr(prior, k) for k in H100_FP8_KERNELS
        }
        assert moved.sequence_layer_overhead_us == 0.7  # the engine's host cost is kept


def test_fp8_decode_on_a_tpu_is_not_compute_bound_under_h100_roll_offs() -> None:
    # One fp8 sequence's decode is weight streaming on any chip. Carried to a TPU v5p (fp8 peak
    # no higher than bf16) the H100 fp8 roll-offs made it compute-bound at 1.87x the spec sheet.
    h100, tpu = ACCELERATORS["h100-sxm"], ACCELERATORS["tpu-v5p"]
    fitted = DEFAULT_EFFICIENCY.replace(**H100_FP8_KERNELS)
    tpot_spec, tpot_moved = (
        float(
            estimate(
                MODELS["llama-3.1-8b"], tpu, precision=Precision(weights="fp8", activations="fp8"),
                input_tokens=1024, output_tokens=256, batch_sizes=np.array([1.0]), params=p,
            ).tpot_ms[0]
        )
        for p in (spec_sheet_efficiency(tpu), transfer_efficiency(fitted, h100, tpu))
    )  # fmt: skip
    assert tpot_moved == pytest.approx(tpot_spec, rel=0.01)


def test_transfer_clips_to_bounds() -> None:
    h100 = ACCELERATORS["h100-sxm"]
    low, high = PARAMETER_BOUNDS["gemm_compute_efficiency_bf16"]
    slow = _with(h100, bf16=h100.peak_tflops["bf16"] * 0.2)
    fitted = DEFAULT_EFFICIENCY.replace(gemm_compute_efficiency_bf16=0.9)
    assert transfer_efficiency(fitted, slow, h100).gemm_compute_efficiency_bf16 == high
    tiny = _with(h100, bf16=h100.peak_tflops["bf16"] * 0.001)
    assert transfer_efficiency(fitted, h100, tiny).gemm_compute_efficiency_bf16 == low
