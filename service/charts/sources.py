"""Data behind each chart, from the same services the JSON endpoints use.

Roofline and sweep come from ``AnalysisService`` (POST /v1/intensity and /v1/estimates); the
frontier searches layouts with the engine until the planning service is available.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from service.engine.errors import InvalidLayoutError, UnsupportedDtypeError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.kernels import peak_flops_s
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape
from service.services.estimates import AnalysisService, AnalysisTarget, EstimateSpec, IntensitySpec


class Catalog(Protocol):
    """Where charts look up engine objects (CatalogService satisfies it)."""

    def accelerator(self, accelerator_id: str) -> Accelerator: ...

    def model_shape(self, model_id: str) -> ModelShape: ...


@dataclass(frozen=True, slots=True)
class RooflineData:
    """An accelerator's ceilings and one model's operators at the chosen phases and batches."""

    accelerator_id: str
    accelerator_name: str
    model_id: str
    memory_bandwidth_gb_s: float
    peak_tflops: dict[str, float]
    compute_dtype: str
    ridge_point_flop_per_byte: float
    operators: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class SweepData:
    """An estimate over batch sizes (API point dicts) and the largest batch that fits."""

    accelerator_id: str
    model_id: str
    mode: str
    input_tokens: int
    output_tokens: int
    max_batch_size: int | None
    points: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class FrontierData:
    """Per accelerator, the plan frontier: points of tokens/s per user vs tokens/s per GPU."""

    model_id: str
    frontier: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def roofline_data(
    analysis: AnalysisService,
    target: AnalysisTarget,
    *,
    phases: Sequence[str],
    batch_sizes: Sequence[int],
    context_tokens: int,
) -> RooflineData:
    """Tabulate operators per phase and batch size with POST /v1/intensity's service call."""
    accelerator = analysis.catalog.accelerator(target.accelerator)
    operators: list[dict[str, Any]] = []
    ridge = math.nan
    compute_dtype = target.precision.compute_dtype
    for phase in phases:
        for batch in batch_sizes:
            table = analysis.intensity(
                IntensitySpec(
                    target=target, phase=phase, batch_size=batch, context_tokens=context_tokens
                )
            )
            ridge = table["ridge_point_flop_per_byte"]
            compute_dtype = table["compute_dtype"]
            for row in (*table["operators"], table["total"]):
                values = dict(row)
                values["operator"] = values.pop("name")
                operators.append({"phase": phase, "batch_size": batch, **values})
    return RooflineData(
        accelerator_id=accelerator.id,
        accelerator_name=accelerator.name,
        model_id=target.model,
        memory_bandwidth_gb_s=accelerator.memory_bandwidth_gb_s,
        peak_tflops={k: float(v) for k, v in accelerator.peak_tflops.items() if v},
        compute_dtype=compute_dtype,
        ridge_point_flop_per_byte=ridge,
        operators=operators,
    )


def sweep_data(
    analysis: AnalysisService,
    target: AnalysisTarget,
    *,
    input_tokens: int,
    output_tokens: int,
    batch_sizes: Sequence[int],
    mode: str,
) -> SweepData:
    """Estimate every batch size (or concurrency) with POST /v1/estimates' service call."""
    answer = analysis.estimate(
        EstimateSpec(
            target=target,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            batch_sizes=tuple(batch_sizes),
            mode=mode,
        )
    )
    return SweepData(
        accelerator_id=answer["accelerator"],
        model_id=answer["model"],
        mode=answer["mode"],
        input_tokens=answer["input_tokens"],
        output_tokens=answer["output_tokens"],
        max_batch_size=answer.get("max_batch_size"),
        points=list(answer["points"]),
    )


# Tensor-parallel degrees and concurrencies a replica is searched over for the frontier.
_TP_OPTIONS = (1, 2, 4, 8)
_CONCURRENCY = tuple(2**i for i in range(11))


def pareto_frontier(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep points no other point beats on both tokens/s per user and tokens/s per GPU."""
    ordered = sorted(points, key=lambda p: -p["tokens_per_s_per_user"])
    kept: list[dict[str, Any]] = []
    best_gpu = -1.0
    for point in ordered:
        if point["output_tokens_per_s_per_gpu"] > best_gpu:
            kept.append(point)
            best_gpu = point["output_tokens_per_s_per_gpu"]
    return kept


def _frontier_for(
    accelerator: Accelerator,
    catalog: Catalog,
    model_id: str,
    *,
    input_tokens: int,
    output_tokens: int,
    precisions: Sequence[Precision],
    max_gpus_per_replica: int,
    ttft_ms_max: float | None,
    tpot_ms_max: float | None,
) -> list[dict[str, Any]]:
    model = catalog.model_shape(model_id)
    candidates: list[dict[str, Any]] = []
    for precision in precisions:
        try:
            peak_flops_s(accelerator, precision.compute_dtype)
        except UnsupportedDtypeError:
            continue
        for tp in (t for t in _TP_OPTIONS if t <= max_gpus_per_replica):
            layout = Parallelism(tp=tp)
            try:
                layout.check_divides(model)
            except InvalidLayoutError:
                continue
            result = estimate(
                model,
                accelerator,
                precision=precision,
                parallelism=layout,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                batch_sizes=_CONCURRENCY,
                mode="serving",
            )
            if result.max_batch_size < 1:
                continue
            for i, concurrency in enumerate(result.batch_size):
                ttft, tpot = float(result.ttft_ms[i]), float(result.tpot_ms[i])
                if ttft_ms_max is not None and ttft > ttft_ms_max:
                    continue
                if tpot_ms_max is not None and tpot > tpot_ms_max:
                    continue
                candidates.append(
                    {
                        "accelerator": accelerator.id,
                        "tp": tp,
                        "precision": precision.weights,
                        "concurrency": int(concurrency),
                        "ttft_ms": ttft,
                        "tpot_ms": tpot,
                        "tokens_per_s_per_user": 1e3 / tpot,
                        "output_tokens_per_s_per_gpu": float(result.output_tokens_per_s_per_gpu[i]),
                    }
                )
    return pareto_frontier(candidates)


def frontier_data(
    catalog: Catalog,
    *,
    model_id: str,
    accelerator_ids: Sequence[str],
    input_tokens: int,
    output_tokens: int,
    precisions: Sequence[Precision],
    max_gpus_per_replica: int,
    ttft_ms_max: float | None,
    tpot_ms_max: float | None,
) -> FrontierData:
    """Search layouts and concurrencies per accelerator and keep each one's Pareto frontier."""
    frontier: dict[str, list[dict[str, Any]]] = {}
    for accelerator_id in accelerator_ids:
        accelerator = catalog.accelerator(accelerator_id)
        frontier[accelerator.id] = _frontier_for(
            accelerator,
            catalog,
            model_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            precisions=precisions,
            max_gpus_per_replica=max_gpus_per_replica,
            ttft_ms_max=ttft_ms_max,
            tpot_ms_max=tpot_ms_max,
        )
    return FrontierData(model_id=catalog.model_shape(model_id).id, frontier=frontier)
