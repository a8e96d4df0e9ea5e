"""JSON shaping of analysis answers: engine results as JSON-ready dicts.

Every non-finite number becomes None (never NaN or inf); columns are converted once per
answer, not per value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from service.engine.estimate import EstimateResult
from service.engine.hardware import Accelerator
from service.engine.precision import Precision
from service.engine.replicas import REPLICATED_RATES, fleet_gpus, fleet_usd_per_hour
from service.engine.roofline import IntensityRow
from service.engine.shapes import ModelShape
from service.services.analysis_specs import AnalysisTarget, EstimateSpec
from service.services.efficiency_lookup import (
    ResolvedEfficiency,
    choice_reason,
    uncalibrated_note,
)


def finite_or_none(value: float | None) -> float | None:
    """Return ``value`` as a float, or None when it is missing, NaN or infinite."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def json_floats(values: npt.ArrayLike) -> list[Any]:
    """Return an array as (nested) lists of floats with None in place of NaN and infinities."""
    array = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(array)
    if finite.all():
        return list(array.tolist())
    cleaned = array.astype(object)
    cleaned[~finite] = None
    return list(cleaned.tolist())


def calibration_json(
    target: AnalysisTarget,
    resolved: ResolvedEfficiency,
    model: ModelShape,
    extrapolation: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The answer's ``calibration`` object: the profile used, why, and (estimates) what of the
    request lies outside its domain; None for the spec sheet."""
    if resolved.calibration is None:
        return None
    reason = choice_reason(target.calibration, target.backend, resolved, model)
    out = {**resolved.calibration, "reason": reason}
    return out if extrapolation is None else {**out, "extrapolation": extrapolation}


def target_echo(target: AnalysisTarget, used: Precision, model: ModelShape) -> dict[str, Any]:
    """Return the precision the engine used (``native`` and the SSM state's ``auto`` resolved;
    no SSM state dtype for a model without Mamba2 layers) and the layout."""
    layout = target.parallelism
    return {
        "precision": {
            "weights": used.weights,
            "activations": used.activations,
            "kv_cache": used.kv_cache,
            "weights_source": target.precision.weights_source,
            "ssm_state": used.ssm_state_dtype if model.num_mamba_layers else None,
        },
        "parallelism": {
            "tp": layout.tp,
            "pp": layout.pp,
            "ep": layout.ep,
            "attention_dp": layout.attention_dp,
            "pp_virtual_stages": layout.pp_virtual_stages,
            "dp": target.dp,
        },
    }


def operator_json(row: IntensityRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "flops": finite_or_none(row.flops),
        "bytes": finite_or_none(row.bytes),
        "arithmetic_intensity_flop_per_byte": finite_or_none(
            row.arithmetic_intensity_flop_per_byte
        ),
        "bound": row.bound,
        "time_ms": finite_or_none(row.time_ms),
    }


_POINT_FLOATS = (
    "running_batch_size",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_ms",
    "queue_wait_ms",
    "admission_wait_ms",
    "prompts_ahead_ms",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "requests_per_s",
    "output_tokens_per_s_per_gpu",
    "decode_arithmetic_intensity_flop_per_byte",
    "prefill_arithmetic_intensity_flop_per_byte",
    "weights_gb",
    "kv_cache_gb",
    "activations_gb",
    "runtime_overhead_gb",
    "total_gb",
    "capacity_gb",
    "usable_gb",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "energy_per_output_token_j",
    "energy_per_token_j",
)


_REPLICATED_ROWS = [_POINT_FLOATS.index(name) for name in REPLICATED_RATES]


def point_json(
    result: EstimateResult, batch_sizes: Sequence[int], dp: int = 1
) -> list[dict[str, Any]]:
    """Turn the engine's columns into one JSON object per batch size (columns converted once).

    The engine answers for one replica; with ``dp`` replicas the rates add up (REPLICATED_RATES).
    """
    # np.vstack of the 1-D columns in one np.array call (vstack costs a call per column).
    stacked = np.array([getattr(result, name) for name in _POINT_FLOATS], dtype=np.float64)
    if dp != 1:
        stacked[_REPLICATED_ROWS] *= dp
    columns = json_floats(stacked)
    return [
        {
            "batch_size": batch,
            "running_batch_size": running,
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "e2e_latency_ms": e2e,
            "queue_wait_ms": queue,
            "admission_wait_ms": admission,
            "prompts_ahead_ms": ahead,
            "output_tokens_per_s": output_tps,
            "total_tokens_per_s": total_tps,
            "requests_per_s": rps,
            "output_tokens_per_s_per_gpu": output_tps_gpu,
            "decode": {"arithmetic_intensity_flop_per_byte": decode_ai, "bound": decode_bound},
            "prefill": {"arithmetic_intensity_flop_per_byte": prefill_ai, "bound": prefill_bound},
            "memory": {
                "weights_gb": weights,
                "kv_cache_gb": kv,
                "activations_gb": activations,
                "runtime_overhead_gb": runtime,
                "total_gb": total,
                "capacity_gb": capacity,
                "usable_gb": usable,
                "fits": fits,
            },
            "cost": {
                "usd_per_million_output_tokens": usd_out,
                "usd_per_million_input_tokens": usd_in,
            },
            "energy": {"per_output_token_j": j_out, "per_token_j": j_all},
        }
        for (  # batch size, then _POINT_FLOATS in order, then the bounds and fits
            batch,
            running,
            ttft,
            tpot,
            e2e,
            queue,
            admission,
            ahead,
            output_tps,
            total_tps,
            rps,
            output_tps_gpu,
            decode_ai,
            prefill_ai,
            weights,
            kv,
            activations,
            runtime,
            total,
            capacity,
            usable,
            usd_out,
            usd_in,
            j_out,
            j_all,
            decode_bound,
            prefill_bound,
            fits,
        ) in zip(
            batch_sizes,
            *columns,
            result.decode_bound.tolist(),
            result.prefill_bound.tolist(),
            result.fits.tolist(),
            strict=True,
        )
    ]


# EstimateResult columns joined back together when stacked results are shaped as points.
STACKED_COLUMNS = (*_POINT_FLOATS, "batch_size", "decode_bound", "prefill_bound", "fits")


def split_answers(
    header: dict[str, Any], points: list[dict[str, Any]], specs: Sequence[EstimateSpec]
) -> list[dict[str, Any]]:
    """Give each spec the header and its own slice of the points, in order."""
    answers: list[dict[str, Any]] = []
    start = 0
    for spec in specs:
        end = start + len(spec.batch_sizes)
        answers.append({**header, "points": points[start:end]})
        start = end
    return answers


def estimate_header(
    target: AnalysisTarget,
    model: ModelShape,
    accelerator: Accelerator,
    resolved: ResolvedEfficiency,
    result: EstimateResult,
    first: EstimateSpec,
    extrapolation: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Return the fields an estimate answer carries besides its points (one header per group)."""
    price = (
        first.price_usd_per_hour
        if first.price_usd_per_hour is not None
        else accelerator.price_usd_per_hour
    )
    return {
        "model": model.id,
        "accelerator": accelerator.id,
        "mode": result.mode,
        "load_pattern": first.load_pattern,
        "backend": target.backend,
        **target_echo(target, result.precision, model),
        "compute_dtype": result.compute_dtype,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "gpus_per_replica": result.gpus_per_replica,
        "gpus": fleet_gpus(result.gpus_per_replica, target.dp),
        "calibration": calibration_json(target, resolved, model, extrapolation or []),
        "calibration_note": uncalibrated_note(
            target.calibration, target.backend, resolved, accelerator.id
        ),
        "efficiency_prior": resolved.efficiency_prior,
        "ridge_point_flop_per_byte": finite_or_none(result.ridge_point_flop_per_byte),
        "critical_batch_size": result.critical_batch_size,
        "max_batch_size": result.max_batch_size,
        "price_usd_per_hour": finite_or_none(price),
        "usd_per_hour": finite_or_none(result.usd_per_hour),
        "fleet_usd_per_hour": finite_or_none(
            fleet_usd_per_hour(finite_or_none(result.usd_per_hour), target.dp)
        ),
        "traffic": None,
    }
