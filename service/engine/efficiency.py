"""Achieved-efficiency parameters of the roofline model: the physical factors calibration fits."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

# Compute dtypes that run on the low-precision (8-bit and narrower) tensor-core path.
LOW_PRECISION_COMPUTE = frozenset({"fp8", "int8", "fp4", "int4"})


@dataclass(frozen=True, slots=True)
class EfficiencyParams:
    """Fractions of spec-sheet peaks and fixed latencies that real kernels and engines reach.

    Defaults are priors, each with its source; a calibration profile replaces them.
    """

    # Best-shape dense GEMM as a fraction of dense peak: H100 SXM MAMF 794.5/989 = 0.80 (bf16),
    # 1402.6/1979 = 0.71 (fp8) — accelerators.md §3a, physics.md "Time".
    gemm_compute_efficiency_bf16: float = 0.80
    gemm_compute_efficiency_fp8: float = 0.71
    # GEMM rows (m = tokens) at which achieved compute efficiency is half its maximum:
    # eff(m) = eff_max · m / (m + m_half). Prior: the H100 bf16 table (benchmarks/h100/gemm.csv)
    # reaches within ~10% of the best efficiency from m ≈ 512 rows, which m_half = 32 reproduces.
    gemm_rows_half_efficiency: float = 32.0
    # Streaming weights/activations as a fraction of HBM bandwidth (notes.md A9: 0.85–0.90).
    memory_bandwidth_efficiency: float = 0.85
    # Decode attention KV-cache reads: FA3 decode on H100 reaches 3.1 TB/s = 0.93 of 3.35 TB/s on
    # large batches (benchmarks/h100/decode_attention.csv); prior set a little lower, 0.90.
    kv_bandwidth_efficiency: float = 0.90
    # Causal prefill flash attention: ~670 TFLOP/s = 0.68 of 989 at 16k tokens
    # (benchmarks/h100/prefill_attention.csv; FlashAttention-3 reports a similar 75%).
    attention_compute_efficiency: float = 0.65
    # Fixed cost of one GEMM launch: ~3–4 µs for m = 1, 1024×1024 bf16 on H100 (gemm.csv).
    kernel_latency_us: float = 3.0
    # Fixed cost of one attention kernel (split-KV + combine): ~11–13 µs floor
    # in benchmarks/h100/decode_attention.csv.
    attention_kernel_latency_us: float = 12.0
    # Elementwise kernels per layer (2 norms, rotary, activation, residual): ~4 launches × 2 µs.
    layer_overhead_us: float = 8.0
    # Per-step scheduling, sampling and host work of a serving engine; prior, to be calibrated.
    step_overhead_us: float = 300.0
    # Collective latency = collective_latency_us + hops · collective_hop_latency_us; NCCL small
    # messages on H100 NVLink: all_reduce 6.3 µs at 2 GPUs, 15.5 µs at 8 (benchmarks/h100/nccl.csv).
    collective_latency_us: float = 5.0
    collective_hop_latency_us: float = 0.8
    # Bus bandwidth as a fraction of the per-direction link rate (notes.md A9: ~80–88%).
    collective_bandwidth_efficiency: float = 0.85
    # Prefill tokens one serving step takes (vLLM max_num_batched_tokens, SGLang
    # chunked_prefill_size): 8192 is the common default on 80 GB-class GPUs.
    prefill_chunk_tokens: float = 8192.0
    # Steps a newly arrived request waits before the scheduler admits it (0.5: arrives mid-step).
    admission_wait_steps: float = 0.5

    def gemm_compute_efficiency(self, compute_dtype: str) -> float:
        """Return the best-shape GEMM efficiency for a compute dtype (8-bit and below use fp8's)."""
        if compute_dtype in LOW_PRECISION_COMPUTE:
            return self.gemm_compute_efficiency_fp8
        return self.gemm_compute_efficiency_bf16

    def to_dict(self) -> dict[str, float]:
        """Return parameters by name (the calibration parameter vector order)."""
        return {f.name: float(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(
        cls, values: Mapping[str, float], *, base: EfficiencyParams | None = None
    ) -> EfficiencyParams:
        """Build parameters from a mapping; names absent keep ``base`` (default: the priors)."""
        unknown = set(values) - set(PARAMETER_BOUNDS)
        if unknown:
            raise KeyError(f"unknown efficiency parameters: {', '.join(sorted(unknown))}")
        start = base if base is not None else cls()
        return dataclasses.replace(start, **{k: float(v) for k, v in values.items()})

    def replace(self, **changes: float) -> EfficiencyParams:
        """Return a copy with some parameters changed."""
        return self.from_dict(changes, base=self)

    def check_bounds(self) -> None:
        """Raise ValueError naming the first parameter outside its physical bounds."""
        for name, value in self.to_dict().items():
            low, high = PARAMETER_BOUNDS[name]
            if not low <= value <= high:
                raise ValueError(f"{name}={value} outside its physical bounds [{low}, {high}]")


# Physical bounds (inclusive) of every parameter, for fitting and validation. Efficiencies are
# fractions of a spec-sheet figure; collective bandwidth may exceed 1 because NVLink SHARP
# reductions beat the ring formula's bytes on the wire.
PARAMETER_BOUNDS: Mapping[str, tuple[float, float]] = {
    "gemm_compute_efficiency_bf16": (0.05, 1.0),
    "gemm_compute_efficiency_fp8": (0.05, 1.0),
    "gemm_rows_half_efficiency": (0.0, 4096.0),
    "memory_bandwidth_efficiency": (0.05, 1.0),
    "kv_bandwidth_efficiency": (0.05, 1.0),
    "attention_compute_efficiency": (0.05, 1.0),
    "kernel_latency_us": (0.0, 100.0),
    "attention_kernel_latency_us": (0.0, 200.0),
    "layer_overhead_us": (0.0, 1000.0),
    "step_overhead_us": (0.0, 100_000.0),
    "collective_latency_us": (0.0, 1000.0),
    "collective_hop_latency_us": (0.0, 100.0),
    "collective_bandwidth_efficiency": (0.05, 2.0),
    "prefill_chunk_tokens": (64.0, 1_048_576.0),
    "admission_wait_steps": (0.0, 100.0),
}

DEFAULT_EFFICIENCY = EfficiencyParams()

PARAMETER_NAMES: tuple[str, ...] = tuple(PARAMETER_BOUNDS)
