"""Calibrated parameter values: EfficiencyParams plus per-dtype GEMM terms, mapped back to it.

The engine's GEMM model has one bandwidth fraction, one launch latency and one row half-point
for every dtype, and no dependence on the output width ``n``. The H100 tables need both: fp8
CUTLASS kernels stream weights and launch differently from bf16 ones, and fp8 GEMMs with few
output columns reach far less of peak (n = 1024: ~0.4 of the n = 16384 rate). Calibration keeps,
per GEMM dtype group ``g`` (``bf16`` for 16-bit, ``fp8`` for 8-bit and narrower):

- ``gemm_rows_half_efficiency_{g}``, ``gemm_memory_bandwidth_efficiency_{g}``,
  ``gemm_kernel_latency_us_{g}`` — the engine fields, per dtype;
- ``gemm_cols_half_efficiency_{g}`` — compute efficiency × n / (n + n_half).

Attention likewise: FA3 decode streams an fp8 KV cache at a lower fraction of HBM bandwidth
than a bf16 one (``kv_bandwidth_efficiency_{g}`` by KV dtype group), and causal prefill reaches
a compute fraction that grows with the prompt: × T / (T + ``attention_seq_half_efficiency``).

End-to-end runs add ``sequence_overhead_us``: host work per running sequence per step
(scheduling, sampling, detokenisation), which the engine's per-step overhead lacks; for a batch
of B it is applied as ``step_overhead_us + B · sequence_overhead_us``.

They are applied as a transformation of EfficiencyParams: for one kernel shape, or for a whole
model (the FLOP-weighted harmonic mean of the width factor over the model's GEMMs at its TP,
and the prompt length for attention).
"""

from __future__ import annotations

from collections.abc import Mapping

from service.engine.efficiency import (
    LOW_PRECISION_COMPUTE,
    PARAMETER_BOUNDS,
    EfficiencyParams,
)
from service.engine.shapes import ModelShape

GEMM_GROUPS: tuple[str, ...] = ("bf16", "fp8")


def gemm_group(compute_dtype: str) -> str:
    """GEMM dtype group: ``fp8`` for 8-bit and narrower compute, else ``bf16``."""
    return "fp8" if compute_dtype in LOW_PRECISION_COMPUTE else "bf16"


def gemm_names(group: str) -> tuple[str, ...]:
    """Names of the GEMM parameters fitted per dtype group."""
    return (
        f"gemm_compute_efficiency_{group}",
        f"gemm_rows_half_efficiency_{group}",
        f"gemm_cols_half_efficiency_{group}",
        f"gemm_memory_bandwidth_efficiency_{group}",
        f"gemm_kernel_latency_us_{group}",
    )


EXTRA_BOUNDS: Mapping[str, tuple[float, float]] = {
    **{
        f"gemm_rows_half_efficiency_{g}": PARAMETER_BOUNDS["gemm_rows_half_efficiency"]
        for g in GEMM_GROUPS
    },
    **{f"gemm_cols_half_efficiency_{g}": (0.0, 65536.0) for g in GEMM_GROUPS},
    **{
        f"gemm_memory_bandwidth_efficiency_{g}": PARAMETER_BOUNDS["memory_bandwidth_efficiency"]
        for g in GEMM_GROUPS
    },
    **{f"gemm_kernel_latency_us_{g}": PARAMETER_BOUNDS["kernel_latency_us"] for g in GEMM_GROUPS},
    **{
        f"kv_bandwidth_efficiency_{g}": PARAMETER_BOUNDS["kv_bandwidth_efficiency"]
        for g in GEMM_GROUPS
    },
    "attention_seq_half_efficiency": (0.0, 65536.0),
    "sequence_overhead_us": (0.0, 1000.0),
}
BOUNDS: Mapping[str, tuple[float, float]] = {**PARAMETER_BOUNDS, **EXTRA_BOUNDS}


def initial_values(base: EfficiencyParams) -> dict[str, float]:
    """Every parameter's starting value: the base params, extras copied from their engine field."""
    values = base.to_dict()
    for g in GEMM_GROUPS:
        values[f"gemm_rows_half_efficiency_{g}"] = base.gemm_rows_half_efficiency
        values[f"gemm_cols_half_efficiency_{g}"] = 0.0
        values[f"gemm_memory_bandwidth_efficiency_{g}"] = base.memory_bandwidth_efficiency
        values[f"gemm_kernel_latency_us_{g}"] = base.kernel_latency_us
        values[f"kv_bandwidth_efficiency_{g}"] = base.kv_bandwidth_efficiency
    values["attention_seq_half_efficiency"] = 0.0
    values["sequence_overhead_us"] = 0.0
    return values


def engine_params(values: Mapping[str, float], base: EfficiencyParams) -> EfficiencyParams:
    """EfficiencyParams from the engine-named entries of ``values``."""
    own = {k: v for k, v in values.items() if k in PARAMETER_BOUNDS}
    return EfficiencyParams.from_dict(own, base=base)


def attention_params(
    values: Mapping[str, float],
    base: EfficiencyParams,
    kv_dtype: str,
    prefill_tokens: float | None,
    params: EfficiencyParams | None = None,
) -> EfficiencyParams:
    """EfficiencyParams for attention over a ``kv_dtype`` cache after a prompt of that length."""
    start = params if params is not None else engine_params(values, base)
    factor = 1.0
    if prefill_tokens is not None:
        factor = width_factor(prefill_tokens, values["attention_seq_half_efficiency"])
    return start.replace(
        kv_bandwidth_efficiency=values[f"kv_bandwidth_efficiency_{gemm_group(kv_dtype)}"],
        attention_compute_efficiency=values["attention_compute_efficiency"] * factor,
    )


def width_factor(n: float, cols_half: float) -> float:
    """Fraction of the best compute efficiency a GEMM with ``n`` output columns reaches."""
    return n / (n + cols_half) if n > 0 else 1.0


def gemm_params(
    values: Mapping[str, float], base: EfficiencyParams, compute_dtype: str, factor: float
) -> EfficiencyParams:
    """EfficiencyParams for GEMMs of one dtype whose width factor is ``factor``."""
    g = gemm_group(compute_dtype)
    return engine_params(values, base).replace(
        **{
            f"gemm_compute_efficiency_{g}": values[f"gemm_compute_efficiency_{g}"] * factor,
            "gemm_rows_half_efficiency": values[f"gemm_rows_half_efficiency_{g}"],
            "memory_bandwidth_efficiency": values[f"gemm_memory_bandwidth_efficiency_{g}"],
            "kernel_latency_us": values[f"gemm_kernel_latency_us_{g}"],
        }
    )


def model_gemm_widths(model: ModelShape, tp: int) -> list[tuple[float, float]]:
    """(output columns n per GPU, FLOP weight n·k) of one layer's GEMMs plus the LM head."""
    d = model.hidden_size
    q = model.q_width
    kv = 2 * model.num_kv_heads * model.head_dim
    ffn = model.moe_intermediate_size if model.is_moe else model.intermediate_size
    gates = 2 if model.ffn_type == "glu" else 1
    gemms = [
        ((q + kv) / tp, d),  # fused QKV, column-parallel
        (d, q / tp),  # output projection, row-parallel
        (gates * ffn / tp, d),  # gate+up, column-parallel
        (d, ffn / tp),  # down, row-parallel
    ]
    out = [(n, n * k * model.num_layers) for n, k in gemms]
    out.append((model.vocab_size / tp, model.vocab_size / tp * d))
    return out


def model_width_factor(model: ModelShape, tp: int, cols_half: float) -> float:
    """FLOP-weighted harmonic mean of the width factor over a model's GEMMs."""
    widths = model_gemm_widths(model, max(tp, 1))
    total = sum(w for _, w in widths)
    slowed = sum(w / width_factor(n, cols_half) for n, w in widths)
    return total / slowed if slowed > 0 else 1.0


def params_for(
    values: Mapping[str, float],
    base: EfficiencyParams,
    compute_dtype: str,
    model: ModelShape | None = None,
    tp: int = 1,
    kv_dtype: str = "bf16",
    prefill_tokens: float | None = None,
    batch_size: float | None = None,
) -> EfficiencyParams:
    """EfficiencyParams to run the engine with for one precision (and model/TP/prompt/batch)."""
    g = gemm_group(compute_dtype)
    factor = (
        model_width_factor(model, tp, values[f"gemm_cols_half_efficiency_{g}"])
        if model is not None
        else 1.0
    )
    gemm = gemm_params(values, base, compute_dtype, factor)
    out = attention_params(values, base, kv_dtype, prefill_tokens, gemm)
    if batch_size is not None and values.get("sequence_overhead_us", 0.0):
        step = values["step_overhead_us"] + batch_size * values["sequence_overhead_us"]
        out = out.replace(step_overhead_us=min(step, BOUNDS["step_overhead_us"][1]))
    return out
