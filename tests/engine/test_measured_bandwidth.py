"""Measured DRAM read bandwidth caps the HBM streaming fractions (spec sheet and transfer)."""

from __future__ import annotations

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
    HBM_STREAMING_TERMS,
    VENDOR_KERNEL_PRIORS,
    spec_sheet_efficiency,
    transfer_efficiency,
)
from service.engine.estimate import estimate

ACCELERATORS = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
LLAMA_8B = next(model_from_record(r) for r in load_model_records() if r["id"] == "llama-3.1-8b")
H200_FRACTION = 3889 / 4800  # gpu-benches' H200 SXM DRAM read over the 4.8 TB/s spec sheet

# An H100 SXM profile's HBM fractions (kernel-table fits, benchmarks/results/accuracy.md)
H100_FITTED = DEFAULT_EFFICIENCY.replace(
    gemm_memory_bandwidth_efficiency_bf16=0.864,
    gemm_memory_bandwidth_efficiency_fp8=0.786,
    kv_bandwidth_efficiency_bf16=0.885,
    kv_bandwidth_efficiency_fp8=0.707,
)


def _hbm(params: object) -> dict[str, float]:
    return {name: getattr(params, name) for name in HBM_STREAMING_TERMS}


def test_h200_spec_sheet_streams_no_faster_than_its_measured_read() -> None:
    h200 = spec_sheet_efficiency(ACCELERATORS["h200-sxm"])
    nvidia = DEFAULT_EFFICIENCY.replace(**VENDOR_KERNEL_PRIORS["nvidia"])
    capped = {name: min(value, H200_FRACTION) for name, value in _hbm(nvidia).items()}
    assert _hbm(h200) == pytest.approx(capped)
    assert h200.gemm_memory_bandwidth_efficiency_bf16 == pytest.approx(H200_FRACTION)
    assert h200.gemm_memory_bandwidth_efficiency_fp8 == 0.79  # NVIDIA's fp8 prior, below 0.81
    # unmeasured (H100 SXM) or measured faster than the priors stream (A100 40 GB: 0.958)
    for part in ("h100-sxm", "a100-sxm-40gb", "gh200"):
        assert _hbm(spec_sheet_efficiency(ACCELERATORS[part])) == _hbm(nvidia)
    a100_80 = spec_sheet_efficiency(ACCELERATORS["a100-sxm-80gb"])
    assert a100_80.kv_bandwidth_efficiency_bf16 == pytest.approx(1769 / 2039)  # prior 0.90
    assert a100_80.gemm_memory_bandwidth_efficiency_bf16 == 0.85  # below 0.868: kept


def test_a_transferred_h100_profile_is_capped_on_h200_only() -> None:
    h100 = ACCELERATORS["h100-sxm"]
    on_h200 = transfer_efficiency(H100_FITTED, h100, ACCELERATORS["h200-sxm"])
    assert on_h200.gemm_memory_bandwidth_efficiency_bf16 == pytest.approx(H200_FRACTION)
    assert on_h200.kv_bandwidth_efficiency_bf16 == pytest.approx(H200_FRACTION)
    assert on_h200.gemm_memory_bandwidth_efficiency_fp8 == 0.786  # already below 0.81
    assert on_h200.kv_bandwidth_efficiency_fp8 == 0.707
    for part in ("a100-sxm-40gb", "gh200"):
        moved = transfer_efficiency(H100_FITTED, h100, ACCELERATORS[part])
        assert _hbm(moved) == _hbm(H100_FITTED)


def test_h200_batch_one_decode_is_slower_by_the_streaming_cap() -> None:
    """One sequence's decode streams the weights: capping 0.85 at 0.81 slows the step by up to
    0.85 / 0.81 = 1.049 (less where latencies and the KV cache's 0.90 → 0.81 weigh in)."""
    h200 = ACCELERATORS["h200-sxm"]
    capped = spec_sheet_efficiency(h200)
    uncapped = capped.replace(**_hbm(DEFAULT_EFFICIENCY))
    tpot = [
        float(
            estimate(
                LLAMA_8B, h200, input_tokens=1024, output_tokens=256,
                batch_sizes=np.array([1.0]), params=p,
            ).tpot_ms[0]
        )
        for p in (uncapped, capped)
    ]  # fmt: skip
    assert 1.03 < tpot[1] / tpot[0] < 0.85 / H200_FRACTION + 1e-9
