"""Data behind each chart, from the same services the JSON endpoints use.

Roofline, sweep and traffic come from ``AnalysisService`` (POST /v1/intensity and
/v1/estimates), the frontier from ``PlanningService`` (POST /v1/plans).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from service.services.estimates import AnalysisService, AnalysisTarget, EstimateSpec, IntensitySpec
from service.services.planning import PlanningService, PlanSpec
from service.services.traffic import TrafficRequest

# Without chosen rates the traffic chart runs at these shares of the replica's saturation rate.
DEFAULT_LOAD_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
# The saturation rate does not depend on the offered rate: the probe learning it runs any rate
# on the shortest stream the API allows.
PROBE_RATE_PER_S, PROBE_REQUESTS = 1.0, 100


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
class TrafficSweepData:
    """Open-loop traffic answers (the API's ``traffic`` objects) at several request rates."""

    accelerator_id: str
    model_id: str
    input_tokens: int
    output_tokens: int
    arrival: str
    saturation_requests_per_s: float
    answers: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class FrontierData:
    """Per accelerator, the plan frontier: points of tokens/s per user vs tokens/s per GPU."""

    model_ids: list[str]
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
    compute_dtype = ""  # each table sets it (the chart asks for at least one phase and batch)
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
    load_pattern: str = "closed_loop",
) -> SweepData:
    """Estimate every batch size (or concurrency) with POST /v1/estimates' service call."""
    answer = analysis.estimate(
        EstimateSpec(
            target=target,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            batch_sizes=tuple(batch_sizes),
            mode=mode,
            load_pattern=load_pattern,
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


def traffic_sweep_data(
    analysis: AnalysisService,
    target: AnalysisTarget,
    *,
    input_tokens: int,
    output_tokens: int,
    rates_per_s: Sequence[float] | None,
    arrival_cv: float | None = None,
) -> TrafficSweepData:
    """Simulate the traffic at each rate (default: shares of the saturation rate, learnt first)."""

    def at(rate: float, **stream: Any) -> dict[str, Any]:
        process = "poisson" if arrival_cv is None else "gamma"
        traffic = TrafficRequest(rate, process=process, cv=arrival_cv, **stream)
        spec = EstimateSpec(target, input_tokens, output_tokens, (), "serving", traffic=traffic)
        return analysis.estimate(spec)

    if rates_per_s is None:
        probe = at(PROBE_RATE_PER_S, num_requests=PROBE_REQUESTS)["traffic"]
        saturation = probe["saturation_requests_per_s"]
        rates_per_s = [saturation * share for share in DEFAULT_LOAD_FRACTIONS]
    answers = [at(rate) for rate in rates_per_s]
    first = answers[0]
    return TrafficSweepData(
        accelerator_id=first["accelerator"],
        model_id=first["model"],
        input_tokens=first["input_tokens"],
        output_tokens=first["output_tokens"],
        arrival="Poisson" if arrival_cv is None else f"gamma (cv {arrival_cv:g})",
        saturation_requests_per_s=first["traffic"]["saturation_requests_per_s"],
        answers=[a["traffic"] for a in answers],
    )


def frontier_data(planning: PlanningService, spec: PlanSpec) -> FrontierData:
    """Answer the plan with POST /v1/plans' service call and keep its frontier."""
    answer = planning.plan(spec)
    return FrontierData(model_ids=list(spec.models), frontier=dict(answer["frontier"]))
