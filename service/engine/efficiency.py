"""Achieved-efficiency parameters of the roofline model: the physical factors calibration fits."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from service.engine.hardware import Accelerator

# Compute dtypes that run on the low-precision (8-bit and narrower) tensor-core path; KV caches
# in these dtypes are read by the 8-bit attention kernels.
LOW_PRECISION_COMPUTE = frozenset({"fp8", "int8", "fp4", "int4"})
DTYPE_GROUPS: tuple[str, ...] = ("bf16", "fp8")


def dtype_group(dtype: str) -> str:
    """Return the kernel family of a dtype: ``fp8`` for 8-bit and narrower, else ``bf16``."""
    return "fp8" if dtype in LOW_PRECISION_COMPUTE else "bf16"


@dataclass(frozen=True, slots=True)
class EfficiencyParams:
    """Fractions of spec-sheet peaks and fixed latencies that real kernels and engines reach.

    Defaults are priors, each with its source; a calibration profile replaces them. Fields ending
    in ``_bf16`` / ``_fp8`` apply to 16-bit and to 8-bit-or-narrower kernels respectively.
    """

    # Best-shape dense GEMM as a fraction of dense peak: H100 SXM MAMF 794.5/989 = 0.80 (bf16),
    # 1402.6/1979 = 0.71 (fp8) — docs/reference/accelerators.md §3a, docs/physics.md "Time".
    # The fields below are vendor-neutral priors; an NVIDIA part's spec sheet takes the H100
    # fp8 table's shape for its 8-bit GEMMs (``VENDOR_KERNEL_PRIORS``).
    gemm_compute_efficiency_bf16: float = 0.80
    gemm_compute_efficiency_fp8: float = 0.71
    # GEMM rows (m = tokens) at which compute efficiency is half its maximum: × m / (m + m_half).
    # Prior: the H100 bf16 table (benchmarks/data/h100/gemm.csv) reaches within ~10% of the best
    # efficiency from m ≈ 512 rows, which m_half = 32 reproduces; same prior for fp8.
    gemm_half_efficiency_rows_bf16: float = 32.0
    gemm_half_efficiency_rows_fp8: float = 32.0
    # GEMM output columns (n per GPU) at which compute efficiency is half: × n / (n + n_half).
    # Prior 0 (no width penalty); H100 fp8 fits ≈ 2600 (fp8 n = 1024 reaches ~0.4 of the
    # n = 16384 rate in gemm.csv), bf16 ≈ 0.
    gemm_half_efficiency_columns_bf16: float = 0.0
    gemm_half_efficiency_columns_fp8: float = 0.0
    # GEMM weight/activation streaming as a fraction of HBM bandwidth (docs/reference/notes.md A9:
    # 0.85–0.90);
    # H100 fits 0.86 (bf16) and 0.79 (fp8 CUTLASS kernels).
    gemm_memory_bandwidth_efficiency_bf16: float = 0.85
    gemm_memory_bandwidth_efficiency_fp8: float = 0.85
    # Fixed cost of one GEMM launch: ~3–4 µs for m = 1, 1024×1024 bf16 on H100 (gemm.csv);
    # H100 fits 3.6 µs (bf16) and 5.4 µs (fp8).
    gemm_kernel_latency_us_bf16: float = 3.0
    gemm_kernel_latency_us_fp8: float = 3.0
    # Other streaming kernels (embedding gather) as a fraction of HBM bandwidth
    # (docs/reference/notes.md A9).
    memory_bandwidth_efficiency: float = 0.85
    # Decode attention KV-cache reads, by KV dtype: FA3 decode on H100 reaches 3.1 TB/s = 0.93 of
    # 3.35 TB/s on large batches (benchmarks/data/h100/decode_attention.csv); prior 0.90 for both.
    # H100 fits 0.89 (bf16 cache) and 0.71 (fp8 cache, dequantised in the kernel).
    kv_bandwidth_efficiency_bf16: float = 0.90
    kv_bandwidth_efficiency_fp8: float = 0.90
    # Causal prefill flash attention: ~670 TFLOP/s = 0.68 of 989 at 16k tokens
    # (benchmarks/data/h100/prefill_attention.csv; FlashAttention-3 reports a similar 75%).
    attention_compute_efficiency: float = 0.65
    # Attention length (keys seen by the last query) at which attention compute efficiency is
    # half: × L / (L + L_half). Prior 0 (no length penalty); H100 prefill tables fit ≈ 940.
    attention_half_efficiency_tokens: float = 0.0
    # Fixed cost of one attention kernel (split-KV + combine): ~11–13 µs floor
    # in benchmarks/data/h100/decode_attention.csv.
    attention_kernel_latency_us: float = 12.0
    # Per (sequence × KV head) work item of one attention kernel (each is a thread block with
    # its own Q load, softmax set-up and output write): at one cached token the H100 FA3 decode
    # table stays at its ~11.5 µs floor up to ~256 items, then grows by 25–27 ns per item
    # (kv heads 2–8, 512 → 2,048 items: 24.4–26.3 → 37.4–38.9 → 65.2 µs,
    # benchmarks/data/h100/decode_attention.csv). Priced as a third roofline limit beside
    # compute and KV bytes: max(compute, bytes, items · this) + attention_kernel_latency_us.
    attention_work_item_us: float = 0.026
    # Elementwise kernels per layer (2 norms, rotary, activation, residual): ~4 launches × 2 µs.
    layer_overhead_us: float = 8.0
    # Per-step scheduling, sampling and host work of a serving engine; prior, to be calibrated.
    step_overhead_us: float = 300.0
    # Host work per sequence in a step, independent of depth (sampling, detokenisation). Prior
    # 0 and not fitted: on the shipped H100 serving runs the per-sequence cost scales with the
    # layer count (next field), and a per-step-only term fitted on a 64-layer model doubled the
    # cost of a 32-layer one. Kept so stored profiles and explicit overrides still apply.
    sequence_overhead_us: float = 0.0
    # Per running sequence per layer per step (per-sequence work inside each layer: KV-cache
    # writes, paged-attention metadata, rotary/norm rows of small kernels). Generic prior 0;
    # fitted per model on benchmarks/data/h100 it is about the same per layer on 64-layer
    # Qwen3-32B and 32-layer Llama-3.1-8B (TensorRT-LLM: 41.7 and 22.0 µs per sequence when
    # first fitted per step), so the count it scales with is layers × sequences. The vLLM and
    # TensorRT-LLM priors take those fits (calibration/priors.py has the values).
    sequence_layer_overhead_us: float = 0.0
    # The share of that per-sequence, per-layer work that runs on the GPUs and is split over
    # the tensor-parallel ranks, charged as this / tp. Fitted per TP degree, the shipped serving
    # runs' per-sequence cost falls with TP about as a + b / tp (vLLM Qwen3-32B: 1.15, 0.72,
    # 0.50 µs at tp 2, 4, 8; SGLang 0.67, 0.35, 0.20; benchmarks/results/accuracy.md §7g),
    # which one TP-independent term applies wrongly to every other TP degree. Prior 0 (the
    # uncalibrated answer keeps the engines' one-term priors); fitted where runs span TP degrees.
    sequence_layer_sharded_us: float = 0.0
    # Running sequences up to which a step pays the per-sequence terms above in full; the
    # n-th sequence beyond it costs full_batch / n of one within it (half per doubling, the rule
    # calibration/reach.py applies beyond a parameter's evidence), so R > full_batch sequences
    # cost as many as full_batch · (1 + ln(R / full_batch)) (``operators.charged_sequences``).
    # Generic prior 128: the largest concurrency at which the shipped H100 serving runs measure
    # the per-sequence cost (benchmarks/data/h100/serving_*.csv; one Qwen3-32B set reaches 224).
    # The cost the runs imply per sequence already falls with load within that range and is
    # about none above it (benchmarks/results/accuracy.md, section 7b). Set per engine
    # (calibration/priors.py: TensorRT-LLM 32) and not fitted.
    sequence_overhead_full_batch: float = 128.0
    # Host time to launch one decoder layer's kernels in a step that runs outside a CUDA graph.
    # TensorRT-LLM's PyTorch backend replays CUDA graphs for generation-only iterations and runs
    # context and mixed context+generation iterations eagerly unless piecewise CUDA graphs are
    # switched on (TensorRT-LLM docs, "Torch Compile & Piecewise CUDA Graph"), so a serving step
    # that carries a prompt chunk lasts at least layers · this, however little GPU work it
    # holds (serving.py). vLLM V1 captures piecewise graphs for mixed batches by default. Generic
    # prior 0; per-engine priors, and their evidence, in calibration/priors.py; fitted on
    # serving runs.
    eager_layer_launch_us: float = 0.0
    # Collective latency = collective_latency_us + hops · collective_hop_latency_us; NCCL small
    # messages on H100 NVLink: all_reduce 6.3 µs at 2 GPUs, 15.5 µs at 8
    # (benchmarks/data/h100/nccl.csv).
    collective_latency_us: float = 5.0
    collective_hop_latency_us: float = 0.8
    # Serving engines (vLLM, SGLang, TensorRT-LLM) reduce small tensor-parallel activations with a
    # custom one-shot NVLink all-reduce (every GPU reads its peers' buffers in one step) instead of
    # NCCL's ring, so its launch cost is one flat latency with no per-hop term; an engine
    # all-reduce takes the cheapest of one-shot, two-shot and ring (kernels.collective_cost), so
    # no size threshold is read: one_shot_allreduce_max_bytes is kept only so stored profiles and
    # overrides that carry it still load. The latency is a fixed prior, not fitted: the 2-GPU NCCL
    # small-message all-reduce floor (6.2–6.4 µs for 2 KiB fp16 in benchmarks/data/h100/nccl.csv),
    # where ring and one-shot both do a single exchange. The NCCL table measures NCCL, not the
    # custom kernel, so this is an assumption that it stays flat in TP.
    one_shot_allreduce_max_bytes: float = 524288.0
    one_shot_allreduce_latency_us: float = 6.3
    # Bus bandwidth as a fraction of the per-direction link rate (docs/reference/notes.md A9:
    # ~80–88%).
    collective_bandwidth_efficiency: float = 0.85
    # Prefill tokens one serving step takes (vLLM max_num_batched_tokens, SGLang
    # chunked_prefill_size): 8192 is the common default on 80 GB-class GPUs.
    prefill_chunk_tokens: float = 8192.0
    # Decode-only steps a newly arrived request waits before the scheduler admits it (0.5:
    # it arrives mid-step).
    admission_wait_steps: float = 0.5
    # Share of the other running requests' prompts (one each per cycle of a slot) that run
    # before a new request's first token (in its TTFT); the rest run while it decodes (TPOT).
    # 0 when arrivals spread evenly over the decode cycle (each finds the prefill queue empty);
    # ½ when closed-loop clients with equal lengths arrive in lockstep waves (half the wave is
    # ahead on average), which a prefill-first scheduler keeps in step. Set by the engine's
    # scheduler (calibration/priors.py: SGLang ½, the others 0) and not fitted (SCHEDULER_TERMS).
    prefill_queue_share: float = 0.0
    # Other prompts ahead of a new closed-loop request besides that share, per unit of ln R
    # (R running requests): clients that are partly in step, more with more clients but far
    # from a whole wave. The runs' own TTFT shows it (benchmarks/results/accuracy.md, section
    # 7f): beyond the engine's own prefill, the closed-loop vLLM runs' TTFT holds about
    # ln(C) prompts at concurrency 4–64 on both models (gpt-oss-120b and Qwen3-32B), where a
    # share would need q ≈ 0.3 at C = 8 and 0.07 at C = 64. Prior 0; bounded by 1 (then
    # ln R ≤ R − 1 prompts, never more than there are); fitted per profile.
    prefill_queue_ln_prompts: float = 0.0

    def gemm_compute_efficiency(self, compute_dtype: str) -> float:
        """Return the best-shape GEMM efficiency for a compute dtype (8-bit and below use fp8's)."""
        return float(getattr(self, f"gemm_compute_efficiency_{dtype_group(compute_dtype)}"))

    def gemm_half_efficiency_rows(self, compute_dtype: str) -> float:
        """Return the GEMM row half-point for a compute dtype."""
        return float(getattr(self, f"gemm_half_efficiency_rows_{dtype_group(compute_dtype)}"))

    def gemm_half_efficiency_columns(self, compute_dtype: str) -> float:
        """Return the GEMM output-column half-point for a compute dtype."""
        return float(getattr(self, f"gemm_half_efficiency_columns_{dtype_group(compute_dtype)}"))

    def gemm_memory_bandwidth_efficiency(self, compute_dtype: str) -> float:
        """Return the GEMM streaming bandwidth fraction for a compute dtype."""
        name = f"gemm_memory_bandwidth_efficiency_{dtype_group(compute_dtype)}"
        return float(getattr(self, name))

    def gemm_kernel_latency_us(self, compute_dtype: str) -> float:
        """Return the GEMM launch latency in µs for a compute dtype."""
        return float(getattr(self, f"gemm_kernel_latency_us_{dtype_group(compute_dtype)}"))

    def kv_bandwidth_efficiency(self, kv_dtype: str) -> float:
        """Return the KV-cache read bandwidth fraction for a KV-cache dtype."""
        return float(getattr(self, f"kv_bandwidth_efficiency_{dtype_group(kv_dtype)}"))

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


def _per_group(name: str, bounds: tuple[float, float]) -> dict[str, tuple[float, float]]:
    return {f"{name}_{g}": bounds for g in DTYPE_GROUPS}


# Physical bounds (inclusive) of every parameter, for fitting and validation. Efficiencies are
# fractions of a spec-sheet figure; collective bandwidth may exceed 1 because NVLink SHARP
# reductions beat the ring formula's bytes on the wire.
PARAMETER_BOUNDS: Mapping[str, tuple[float, float]] = {
    **_per_group("gemm_compute_efficiency", (0.05, 1.0)),
    **_per_group("gemm_half_efficiency_rows", (0.0, 4096.0)),
    **_per_group("gemm_half_efficiency_columns", (0.0, 65536.0)),
    **_per_group("gemm_memory_bandwidth_efficiency", (0.05, 1.0)),
    **_per_group("gemm_kernel_latency_us", (0.0, 100.0)),
    "memory_bandwidth_efficiency": (0.05, 1.0),
    **_per_group("kv_bandwidth_efficiency", (0.05, 1.0)),
    "attention_compute_efficiency": (0.05, 1.0),
    "attention_half_efficiency_tokens": (0.0, 65536.0),
    "attention_kernel_latency_us": (0.0, 200.0),
    "attention_work_item_us": (0.0, 10.0),
    "layer_overhead_us": (0.0, 1000.0),
    "step_overhead_us": (0.0, 100_000.0),
    "sequence_overhead_us": (0.0, 1000.0),
    "sequence_layer_overhead_us": (0.0, 100.0),
    "sequence_layer_sharded_us": (0.0, 100.0),
    "sequence_overhead_full_batch": (1.0, 1_000_000.0),
    "eager_layer_launch_us": (0.0, 100_000.0),
    "collective_latency_us": (0.0, 1000.0),
    "collective_hop_latency_us": (0.0, 100.0),
    "collective_bandwidth_efficiency": (0.05, 2.0),
    "one_shot_allreduce_max_bytes": (0.0, 1_073_741_824.0),
    "one_shot_allreduce_latency_us": (0.0, 1000.0),
    "prefill_chunk_tokens": (64.0, 1_048_576.0),
    "admission_wait_steps": (0.0, 100.0),
    "prefill_queue_share": (0.0, 1.0),
    "prefill_queue_ln_prompts": (0.0, 1.0),
}

DEFAULT_EFFICIENCY = EfficiencyParams()

# Queue share of a lockstep wave of equal-length requests that start together: half of the
# others' prompts are ahead of a request on average (SGLang's prefill-first closed loops, and
# any engine's offline batch; serving.py).
LOCKSTEP_QUEUE_SHARE = 0.5

# Terms that describe how a closed-loop load generator released requests (waves of equal-length
# clients), not how the engine runs: fitted on closed-loop serving runs and applied only to
# closed-loop serving estimates (``mode: serving``). Static batches never use them; an estimate
# for any other load pattern takes them at their priors (``engine_only``).
HARNESS_TERMS: tuple[str, ...] = (
    "admission_wait_steps",
    "prefill_queue_share",
    "prefill_queue_ln_prompts",
)
# Of those, the ones the engine's scheduling policy sets: whether a closed loop's waves stay in
# step depends on whether the scheduler runs new prompts before decoding (prefill-first keeps
# them in lockstep: share ½) or beside it (decode-first spreads them: share 0). They follow the
# backend (priors.py) and no fit moves them, while the admission wait and the prompts ahead per
# ln R describe the load generator and are fitted.
SCHEDULER_TERMS: tuple[str, ...] = ("prefill_queue_share",)


def engine_only(params: EfficiencyParams) -> EfficiencyParams:
    """``params`` with the closed-loop harness terms reset to their priors (engine terms kept)."""
    return params.replace(**{n: getattr(DEFAULT_EFFICIENCY, n) for n in HARNESS_TERMS})


PARAMETER_NAMES: tuple[str, ...] = tuple(PARAMETER_BOUNDS)


def _compute_name(group: str) -> str:
    return f"gemm_compute_efficiency_{group}"


def _clip(name: str, value: float) -> float:
    low, high = PARAMETER_BOUNDS[name]
    return min(max(value, low), high)


# The GEMM size a measured matmul rate (MAMF) stands for: a large square GEMM, the largest
# shape of the H100 table, where the row and column roll-offs still cost a little.
MAMF_GEMM_SIZE = 16384.0


def _full_shape_efficiency(params: EfficiencyParams, group: str, best_fraction: float) -> float:
    """The efficiency at the full shape that gives ``best_fraction`` of peak at MAMF's size
    under the group's roll-offs: best / (S / (S + rows_half) · S / (S + columns_half))."""
    size = MAMF_GEMM_SIZE
    rows = float(getattr(params, f"gemm_half_efficiency_rows_{group}"))
    columns = float(getattr(params, f"gemm_half_efficiency_columns_{group}"))
    return best_fraction * (size + rows) / size * (size + columns) / size


# NVIDIA's 8-bit GEMM kernels as the H100 fp8 table measures them (CUTLASS scaled-mm,
# benchmarks/data/h100/gemm.csv; the kernel-only fit, benchmarks/results/accuracy.md §1): they
# reach their peak only with many rows and wide outputs (half efficiency at 150 rows and at
# 2,600 output columns, where the bf16 kernels roll off at about 0 of each), launch in 5.4 µs
# and stream weights at 0.79 of HBM bandwidth (bf16 0.86). The spec sheet of an NVIDIA part
# takes this shape for its 8-bit GEMMs; other vendors' kernels are not measured here and keep
# the generic priors. The efficiency at the full shape is the generic best-shape prior (H100's
# fp8 MAMF fraction, 0.71) under these roll-offs at MAMF's size: 0.83 (the table's own fit
# gives 0.84).
_NVIDIA_FP8_SHAPE: Mapping[str, float] = {
    "gemm_half_efficiency_rows_fp8": 150.0,
    "gemm_half_efficiency_columns_fp8": 2600.0,
    "gemm_memory_bandwidth_efficiency_fp8": 0.79,
    "gemm_kernel_latency_us_fp8": 5.4,
}
_NVIDIA_FP8_GEMM: Mapping[str, float] = {
    **_NVIDIA_FP8_SHAPE,
    "gemm_compute_efficiency_fp8": _full_shape_efficiency(
        DEFAULT_EFFICIENCY.replace(**_NVIDIA_FP8_SHAPE),
        "fp8",
        DEFAULT_EFFICIENCY.gemm_compute_efficiency_fp8,
    ),
}
VENDOR_KERNEL_PRIORS: Mapping[str, Mapping[str, float]] = {"nvidia": _NVIDIA_FP8_GEMM}


def spec_sheet_efficiency(
    accelerator: Accelerator, base: EfficiencyParams = DEFAULT_EFFICIENCY
) -> EfficiencyParams:
    """Return ``base`` with the accelerator vendor's kernel priors (``VENDOR_KERNEL_PRIORS``),
    GEMM compute efficiency from the measured MAMF / peak where measured, and its HBM
    streaming fractions capped at the measured DRAM read bandwidth's.

    MAMF (maximum achievable matmul FLOP/s, docs/reference/accelerators.md §3a) is the best large
    dense GEMM rate found on that accelerator: the fraction of peak that
    ``gemm_compute_efficiency_<dtype>`` reaches at that size once the row and column roll-offs
    apply (``_full_shape_efficiency``); dtype groups without a measurement keep the prior.
    """
    vendor = VENDOR_KERNEL_PRIORS.get(accelerator.vendor.lower(), {})
    params = base.replace(**vendor) if vendor else base
    changes: dict[str, float] = {}
    for group in DTYPE_GROUPS:
        fraction = accelerator.measured_matmul_fraction(group)
        if fraction is not None:
            name = _compute_name(group)
            changes[name] = _clip(name, _full_shape_efficiency(params, group, fraction))
    return within_measured_bandwidth(params.replace(**changes) if changes else params, accelerator)


# Fractions of the spec-sheet HBM bandwidth that memory-bound kernels stream at.
HBM_STREAMING_TERMS: tuple[str, ...] = (
    *(f"gemm_memory_bandwidth_efficiency_{g}" for g in DTYPE_GROUPS),
    *(f"kv_bandwidth_efficiency_{g}" for g in DTYPE_GROUPS),
    "memory_bandwidth_efficiency",
)


def within_measured_bandwidth(
    params: EfficiencyParams, accelerator: Accelerator
) -> EfficiencyParams:
    """Return ``params`` with every HBM streaming fraction at most the accelerator's measured
    DRAM read bandwidth over its spec sheet's (``Accelerator.measured_bandwidth_fraction``).

    No kernel reads HBM faster than the best streaming benchmark on the part does, whatever
    fraction a prior or a profile fitted on another part says: H200 SXM reads 3,889 of its
    4,800 GB/s (0.81) where the priors stream at 0.85–0.90 and an H100 profile at ~0.86
    (hardware_catalog, source B1). Parts without a measurement keep ``params``.
    """
    fraction = accelerator.measured_bandwidth_fraction()
    if fraction is None:
        return params
    changes = {name: fraction for name in HBM_STREAMING_TERMS if getattr(params, name) > fraction}
    return params.replace(**changes) if changes else params


def uses_measured_matmul(accelerator: Accelerator) -> bool:
    """Return whether any dtype group's compute prior comes from a MAMF measurement."""
    return any(accelerator.measured_matmul_fraction(g) is not None for g in DTYPE_GROUPS)


# Parameters that describe one vendor's kernel libraries (GEMM, attention and collective
# kernels: their efficiencies, shape roll-offs and launch latencies), as opposed to the serving
# engine's host overheads and the load generator's terms.
KERNEL_TERMS: tuple[str, ...] = tuple(
    name
    for name in PARAMETER_BOUNDS
    if name.startswith(("gemm_", "attention_", "kv_", "collective_", "one_shot_"))
    or name == "memory_bandwidth_efficiency"
)


def crosses_vendor(source: Accelerator, target: Accelerator) -> bool:
    """Whether a transfer from ``source`` to ``target`` leaves the source vendor's kernels."""
    return source.vendor.lower() != target.vendor.lower()


def transfer_efficiency(
    params: EfficiencyParams, source: Accelerator, target: Accelerator
) -> EfficiencyParams:
    """Move parameters fitted on ``source`` to ``target``: scale GEMM compute efficiencies.

    Per dtype group measured on both accelerators, the fitted efficiency is multiplied by
    target MAMF fraction / source MAMF fraction and clipped to its bounds; HBM streaming
    fractions are capped at the target's measured DRAM read bandwidth
    (``within_measured_bandwidth``). Onto another vendor's
    accelerator the other kernel parameters (``KERNEL_TERMS``) take the target's spec-sheet
    priors: they were measured on the source vendor's kernels (CUTLASS, FlashAttention, NCCL
    tables on H100), which the target does not run, so the H100 fp8 GEMM's row and column
    roll-offs would otherwise make one-sequence decode compute-bound on a TPU. The engine's
    overheads and the load generator's terms are kept.
    """
    changes: dict[str, float] = {}
    if crosses_vendor(source, target):
        prior = spec_sheet_efficiency(target)
        changes = {name: float(getattr(prior, name)) for name in KERNEL_TERMS}
    for group in DTYPE_GROUPS:
        source_fraction = source.measured_matmul_fraction(group)
        target_fraction = target.measured_matmul_fraction(group)
        if source_fraction is None or target_fraction is None or not source_fraction > 0:
            continue
        name = _compute_name(group)
        changes[name] = _clip(name, getattr(params, name) * target_fraction / source_fraction)
    return within_measured_bandwidth(params.replace(**changes) if changes else params, target)
