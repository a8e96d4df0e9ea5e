"""GET /v1/workloads and POST /v1/plans."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from service.api.deps import ReadAccess, SessionDep, SettingsDep, Viewer
from service.api.heavy_calls import run_heavy
from service.api.routers.analysis import ERROR_RESPONSES, json_within_budget, stream_fields
from service.api.schemas.planning import PlanRequest, PlanResponse, WorkloadList
from service.api.schemas.traffic import PlanTrafficIn
from service.engine.precision import Precision
from service.engine.traffic.disaggregation import SEARCH_RATIOS
from service.services.planning import PlanningService, PlanSpec, list_workloads
from service.services.traffic import TrafficRequest, slo_pairs

router = APIRouter(prefix="/v1", tags=["planning"])


def get_planning(session: SessionDep) -> PlanningService:
    """Return the planning service bound to this request's session."""
    return PlanningService(session)


PlanningDep = Annotated[PlanningService, Depends(get_planning, scope="function")]


def plan_spec(body: PlanRequest, max_points: int | None = None) -> PlanSpec:
    """Translate the request body into the service's terms (``max_points``: the work budget)."""
    slo = body.slo
    given = slo.model_fields_set if slo is not None else set()

    def ints(values: list[int] | None) -> tuple[int, ...] | None:
        return tuple(values) if values else None

    return PlanSpec(
        models=tuple(body.models),
        accelerators=tuple(body.accelerators) if body.accelerators is not None else None,
        workload=body.workload,
        input_tokens=body.input_tokens,
        output_tokens=body.output_tokens,
        ttft_ms_max=slo.ttft_ms_max if slo is not None else None,
        ttft_given="ttft_ms_max" in given,
        tpot_ms_max=slo.tpot_ms_max if slo is not None else None,
        tpot_given="tpot_ms_max" in given,
        use_interval_upper_bound=slo.use_interval_upper_bound if slo is not None else False,
        objective=body.objective,
        requests_per_s=body.requests_per_s,
        precisions=tuple(
            Precision(
                weights=p.weights,
                activations=p.activations,
                kv_cache=p.kv_cache,
                ssm_state=p.ssm_state or "auto",
            )
            for p in body.precisions
        ),
        max_gpus_per_replica=body.max_gpus_per_replica,
        tp=ints(body.tp),
        pp=ints(body.pp),
        ep=ints(body.ep),
        attention_dp=ints(body.attention_dp),
        dp=body.dp,
        mode=body.mode,
        load_pattern=body.load_pattern,
        price_usd_per_hour=dict(body.price_usd_per_hour),
        backend=body.backend,
        calibration=body.calibration,
        concurrency_levels=body.concurrency_levels,
        max_points=max_points,
        percentile_slo=slo_pairs(
            {k: v for k, v in slo.model_dump().items() if k in PERCENTILE_TARGETS}
        )
        if slo is not None
        else (),
        traffic=plan_traffic(body.traffic, body.requests_per_s),
        headroom=body.traffic.headroom if body.traffic is not None else 0.2,
    )


PERCENTILE_TARGETS = {
    f"{metric}_p{level}_max"
    for metric in ("ttft_ms", "tpot_ms", "e2e_latency_ms")
    for level in (50, 90, 99)
}


def plan_traffic(traffic: PlanTrafficIn | None, rate: float | None) -> TrafficRequest | None:
    """Translate a plan's traffic object (its rate is the plan's requests_per_s)."""
    if traffic is None:
        return None
    ratios = traffic.disaggregation
    if ratios == "search":
        pools = tuple((x, y, "auto") for x, y in SEARCH_RATIOS)
    else:
        pools = tuple((r.prefill_replicas, r.decode_replicas, r.kv_link) for r in ratios or [])
    return TrafficRequest(
        request_rate_per_s=rate or 1.0,
        num_requests=traffic.num_requests,
        disaggregation=pools,
        **stream_fields(traffic),
    )


@router.get("/workloads", response_model=WorkloadList, dependencies=[ReadAccess])
def get_workloads() -> dict[str, Any]:
    """List the workload presets with their lengths, targets and reasoning."""
    return {"items": list_workloads()}


def plan_answer(session: Session, work: tuple[PlanSpec, int, str]) -> Response:
    """Answer a plan (a heavy call: run by ``run_heavy``); ``work`` = (spec, response budget,
    the caller's key prefix whose private calibration profiles the plan may use)."""
    spec, max_response_bytes, viewer = work
    answer = PlanningService(session, viewer=viewer).plan(spec)
    return json_within_budget(answer, max_response_bytes)


@router.post(
    "/plans",
    response_model=PlanResponse,
    responses=ERROR_RESPONSES,
    dependencies=[ReadAccess],
)
async def post_plan(
    body: PlanRequest, request: Request, settings: SettingsDep, viewer: Viewer
) -> Response:
    """Rank feasible deployments for a question, with the frontier and every rejection's reason.

    An infeasible question answers 200 with no configuration and the reasons. Candidates x
    concurrency levels may not exceed the work budget (``max_plan_points``, 65,536 by default;
    422 past it). The candidates depend on the catalog (every accelerator when `accelerators`
    is left out, the MoE layouts of each model), so whether a schema-valid question fits the
    budget does too. The plan runs in a heavy-work slot (503 + Retry-After when they are all
    taken).
    """
    work = (plan_spec(body, settings.max_plan_points), settings.max_response_bytes, viewer)
    return await run_heavy(request, plan_answer, work)
