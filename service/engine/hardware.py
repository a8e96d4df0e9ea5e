"""Accelerator spec-sheet facts the estimator needs (dense peaks, HBM, links, power, price)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Every dtype name the API accepts, in order of decreasing width.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

# Storage bytes per element. int4/fp4 pack two values per byte.
DTYPE_BYTES: Mapping[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator (per device/chip), with dense peak compute per dtype in TFLOP/s."""

    id: str
    vendor: str
    name: str
    memory_gb: float
    memory_bandwidth_gb_s: float
    peak_tflops: Mapping[str, float]
    interconnect_gb_s: float = 0.0  # scale-up link bandwidth per device, per direction
    tdp_w: float = 0.0
    price_usd_per_hour: float | None = None
    memory_type: str = ""
    extra: Mapping[str, object] = field(default_factory=dict)
    # Measured max achievable matmul TFLOP/s per dtype (MAMF, accelerators.md §3a); may be empty.
    measured_matmul_tflops: Mapping[str, float] = field(default_factory=dict)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def memory_bandwidth_bytes_s(self) -> float:
        return self.memory_bandwidth_gb_s * 1e9

    def peak_flops_s(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype; raises KeyError when unsupported."""
        return self.peak_tflops[dtype] * 1e12

    def measured_matmul_fraction(self, dtype: str) -> float | None:
        """Return measured best-GEMM TFLOP/s over dense peak for a dtype, or None if unmeasured."""
        measured = self.measured_matmul_tflops.get(dtype)
        peak = self.peak_tflops.get(dtype)
        if measured is None or peak is None or not peak > 0:
            return None
        return measured / peak

    def ridge_point_flop_per_byte(self, dtype: str) -> float:
        """Peak FLOP/s over HBM bandwidth: the intensity above which a kernel is compute-bound."""
        return self.peak_flops_s(dtype) / self.memory_bandwidth_bytes_s
