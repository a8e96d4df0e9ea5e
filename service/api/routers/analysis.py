"""/v1/intensity, /v1/estimates (JSON or CSV) and /v1/estimates/batch.

Intensity and single estimates are ``async``: the target is checked against the process-local
caches with one indexed freshness query on the event loop (sub-millisecond; SQLite runs in WAL
mode, so a reader never waits for a writer), only a cache miss loads rows in a worker thread,
and the engine runs inline unless the sweep is large. Batches stay sync (they can be heavy).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from service.api.budgets import check_estimate_points, check_response_bytes, estimate_points
from service.api.deps import ReadAccess, SessionDep, SettingsDep, Viewer
from service.api.heavy import HeavyWork
from service.api.heavy_calls import run_heavy
from service.api.input_guard import NUL_MESSAGE, nul_path
from service.api.problems import (
    error_problem,
    problem_response,
    pydantic_errors,
    validation_body,
)
from service.api.schemas.analysis import (
    AnalysisRequest,
    EstimateBatchRequest,
    EstimateBatchResponse,
    EstimateRequest,
    EstimateResponse,
    IntensityRequest,
    IntensityResponse,
    ProblemOut,
)
from service.api.schemas.traffic import LengthDistributionIn, StreamIn, TrafficIn
from service.engine.errors import EngineError
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.services.errors import FieldError, NotFoundError
from service.services.estimates import (
    AnalysisService,
    AnalysisTarget,
    CatalogLookup,
    EstimateSpec,
    IntensitySpec,
)
from service.services.traffic import LengthRequest, TrafficRequest, slo_pairs

router = APIRouter(prefix="/v1", tags=["analysis"])

CSV_MEDIA_TYPE = "text/csv"
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ProblemOut, "description": "Unknown model, accelerator or calibration."},
    422: {"model": ProblemOut, "description": "Invalid request; `errors` names the fields."},
    503: {
        "model": ProblemOut,
        "description": "Heavy-work queue full or database unreachable; see Retry-After.",
    },
}
# Sweeps with more points than this run in a worker thread, not on the event loop.
INLINE_POINTS = 256


class FastJSONResponse(JSONResponse):
    """JSON encoded with orjson (a 1,024-point sweep encodes ~30x faster than with json)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def get_analysis(session: SessionDep) -> AnalysisService:
    """Return the analysis service bound to this request's session."""
    return AnalysisService(session)


AnalysisDep = Annotated[AnalysisService, Depends(get_analysis, scope="function")]


async def loaded_analysis(
    request: Request, target: AnalysisTarget, viewer: str = ""
) -> AnalysisService:
    """Return a session-less service holding ``target`` as ``viewer`` sees it (the caller's
    key prefix chooses among its private profiles too); NotFoundError if a row is absent."""
    lookup = CatalogLookup(request.app.state.engine)
    tokens, loaded = lookup.fresh(target, request.app.state.reader, viewer)
    if loaded is None:
        factory = request.app.state.session_factory
        loaded = await run_in_threadpool(lookup.load_in_session, factory, tokens, target)
    return AnalysisService(None, viewer=viewer, loaded={target: loaded})


AcceptHeader = Annotated[str | None, Header()]


def _problem(exc: Exception) -> dict[str, Any]:
    """The problem object of an analysis error (a shape error is about the request's model)."""
    return error_problem(exc, shape_field="model")


def _target(body: AnalysisRequest) -> AnalysisTarget:
    p, layout = body.precision, body.parallelism
    return AnalysisTarget(
        model=body.model,
        accelerator=body.accelerator,
        precision=Precision(
            weights=p.weights,
            activations=p.activations,
            kv_cache=p.kv_cache,
            ssm_state=p.ssm_state or "auto",
        ),
        parallelism=Parallelism(
            tp=layout.tp,
            pp=layout.pp,
            ep=layout.ep,
            attention_dp=layout.attention_dp,
            pp_virtual_stages=layout.pp_virtual_stages,
        ),
        backend=body.backend,
        calibration=body.calibration,
        dp=layout.dp,
    )


def lengths_request(value: int | LengthDistributionIn | None) -> int | LengthRequest | None:
    if value is None or isinstance(value, int):
        return value
    histogram = value.histogram
    return LengthRequest(
        percentiles=tuple(sorted((value.percentiles or {}).items())),
        mean=value.mean,
        minimum=value.min,
        maximum=value.max,
        bin_edges_tokens=tuple(histogram.bin_edges_tokens) if histogram else (),
        shares=tuple(histogram.shares) if histogram else (),
        workload=value.workload,
    )


def stream_fields(traffic: StreamIn) -> dict[str, Any]:
    """The TrafficRequest fields an estimate's and a plan's traffic objects share."""
    return {
        "process": traffic.arrival.process,
        "cv": traffic.arrival.cv,
        "input_tokens": lengths_request(traffic.input_tokens),
        "output_tokens": lengths_request(traffic.output_tokens),
        "max_num_batched_tokens": traffic.max_num_batched_tokens,
        "max_running_requests": traffic.max_running_requests,
        "scheduling": traffic.scheduling,
        "seed": traffic.seed,
        "prefix_cache_hit_rate": traffic.prefix_cache_hit_rate,
        "draft_tokens": traffic.speculative.draft_tokens if traffic.speculative else 0,
        "acceptance_rate": traffic.speculative.acceptance_rate if traffic.speculative else 0.0,
        "drafter": traffic.speculative.drafter if traffic.speculative else "generic",
    }


def traffic_request(traffic: TrafficIn | None) -> TrafficRequest | None:
    """Translate the traffic object into the service's terms (None when absent)."""
    if traffic is None:
        return None
    return TrafficRequest(
        request_rate_per_s=traffic.request_rate_per_s,
        num_requests=traffic.num_requests,
        slo=slo_pairs(traffic.slo.model_dump()) if traffic.slo is not None else (),
        disaggregation=(
            (
                (
                    traffic.disaggregation.prefill_replicas,
                    traffic.disaggregation.decode_replicas,
                    traffic.disaggregation.kv_link,
                ),
            )
            if traffic.disaggregation is not None
            else ()
        ),
        **stream_fields(traffic),
    )


def estimate_spec(body: EstimateRequest) -> EstimateSpec:
    """Translate a validated request into the service's spec."""
    return EstimateSpec(
        target=_target(body),
        input_tokens=body.input_tokens,
        output_tokens=body.output_tokens,
        batch_sizes=tuple(body.batch_sizes or ()),
        mode=body.mode,
        load_pattern=body.load_pattern,
        price_usd_per_hour=body.price_usd_per_hour,
        traffic=traffic_request(body.traffic),
    )


def _media_quality(accept: str, media_type: str) -> float:
    """Return the q-value Accept gives ``media_type`` by name (wildcards do not count)."""
    best = 0.0
    for entry in accept.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        if name.lower() != media_type:
            continue
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        best = max(best, quality)
    return best


def wants_csv(accept: str | None) -> bool:
    """Return True when Accept names text/csv at least as highly as application/json."""
    if not accept:
        return False
    csv_quality = _media_quality(accept, CSV_MEDIA_TYPE)
    return csv_quality > 0 and csv_quality >= _media_quality(accept, "application/json")


_CSV_HEAD = ("model", "accelerator", "mode", "input_tokens", "output_tokens", "gpus_per_replica")


def _cell(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool) else value


def estimate_csv(answer: dict[str, Any]) -> str:
    """Render an estimate as CSV: one row per batch size, nested objects flattened with prefixes.

    Nulls are empty cells; booleans are ``true``/``false`` as in JSON.
    """
    points = answer["points"]
    columns = [
        (key, tuple(value) if isinstance(value, dict) else None) for key, value in points[0].items()
    ]
    header = list(_CSV_HEAD)
    for key, inner in columns:
        header += [f"{key}_{name}" for name in inner] if inner else [key]
    lead = [answer[name] for name in _CSV_HEAD]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for point in points:
        row = list(lead)
        for key, inner in columns:
            value = point[key]
            if inner:
                row += [_cell(value[name]) for name in inner]
            else:
                row.append(_cell(value))
        writer.writerow(row)
    return out.getvalue()


@router.post(
    "/intensity",
    response_model=IntensityResponse,
    responses=ERROR_RESPONSES,
    dependencies=[ReadAccess],
)
async def post_intensity(body: IntensityRequest, request: Request, viewer: Viewer) -> Response:
    """Tabulate one step's operators: FLOPs, bytes, intensity, bound and time, per GPU.

    422 for a request the stored model or accelerator cannot run (rules that depend on the
    catalog, so the schema cannot state them): tp must divide the model's num_heads (and
    mamba_num_heads) and divide num_kv_heads or be a multiple of it; pp at most num_layers;
    ep > 1 and attention_dp > 1 need an MoE model, ep at most its num_experts and dividing
    tp × attention_dp; the tokens within the model's context window; the accelerator needs a
    peak for the precision's dtypes. The error names the field.
    """
    spec = IntensitySpec(
        target=_target(body),
        phase=body.phase,
        batch_size=body.batch_size,
        context_tokens=body.context_tokens,
    )
    try:
        analysis = await loaded_analysis(request, spec.target, viewer)
        return FastJSONResponse(analysis.intensity(spec))
    except (NotFoundError, FieldError, EngineError) as exc:
        return problem_response(_problem(exc))


@router.post(
    "/estimates",
    response_model=EstimateResponse,
    responses={
        **ERROR_RESPONSES,
        200: {"content": {CSV_MEDIA_TYPE: {}}, "description": "JSON, or CSV on Accept: text/csv"},
    },
    dependencies=[ReadAccess],
)
async def post_estimates(
    body: EstimateRequest, request: Request, viewer: Viewer, accept: AcceptHeader = None
) -> Response:
    """Estimate latency, throughput, memory and cost per batch size (CSV on Accept: text/csv).

    422 for what the stored model or accelerator cannot run, as for POST /v1/intensity (layout
    against the model's heads, layers and experts; context window; the dtypes' peaks), and for
    traffic that contradicts itself (max_running_requests above the step's token budget,
    percentiles that decrease, histogram shares that do not sum to 1).
    """
    spec = estimate_spec(body)
    try:
        analysis = await loaded_analysis(request, spec.target, viewer)
        if len(spec.batch_sizes) > INLINE_POINTS or spec.traffic is not None:
            heavy: HeavyWork = request.app.state.heavy
            async with heavy.slot():
                answer = await run_in_threadpool(analysis.estimate, spec)
        else:
            answer = analysis.estimate(spec)
    except (NotFoundError, FieldError, EngineError) as exc:
        return problem_response(_problem(exc))
    if wants_csv(accept) and answer["points"]:
        return Response(estimate_csv(answer), media_type=CSV_MEDIA_TYPE)
    return FastJSONResponse(answer)


@dataclass(frozen=True, slots=True)
class BatchWork:
    """What a batch's heavy call needs: the raw items, the budgets and who asks."""

    items: list[Any]
    max_points: int
    max_response_bytes: int
    viewer: str = ""


def batch_answer(session: Session, work: BatchWork) -> Response:
    """Answer a batch (a heavy call: run by ``run_heavy``, in a child process or a thread)."""
    check_estimate_points(estimate_points(work.items), work.max_points)
    analysis = AnalysisService(session, viewer=work.viewer)
    results: list[dict[str, Any] | None] = [None] * len(work.items)
    specs: list[EstimateSpec] = []
    positions: list[int] = []
    for index, raw in enumerate(work.items):
        nul_field = nul_path(raw)
        if nul_field is not None:  # the guard left items to us: this one alone is refused
            field = "item" if nul_field == "body" else nul_field
            results[index] = validation_body([{"field": field, "message": NUL_MESSAGE}])
            continue
        try:
            request = EstimateRequest.model_validate(raw)
        except ValidationError as exc:
            results[index] = validation_body(pydantic_errors(exc.errors(), root="item"))
            continue
        specs.append(estimate_spec(request))
        positions.append(index)
    for index, answer in zip(positions, analysis.estimate_many(specs), strict=True):
        results[index] = _problem(answer) if isinstance(answer, Exception) else answer
    encoded = orjson.dumps({"items": results})
    check_response_bytes(len(encoded), work.max_response_bytes)
    return Response(encoded, media_type="application/json")


def json_within_budget(content: Any, max_response_bytes: int) -> Response:
    """Encode ``content`` with orjson; FieldError (422) when it exceeds the response budget."""
    encoded = orjson.dumps(content)
    check_response_bytes(len(encoded), max_response_bytes)
    return Response(encoded, media_type="application/json")


@router.post(
    "/estimates/batch",
    response_model=EstimateBatchResponse,
    responses={422: ERROR_RESPONSES[422], 503: ERROR_RESPONSES[503]},
    dependencies=[ReadAccess],
)
async def post_estimates_batch(
    body: EstimateBatchRequest, request: Request, settings: SettingsDep, viewer: Viewer
) -> Response:
    """Estimate up to 256 requests; each item is an estimate or a problem object of its own.

    An item that is not a valid estimate request (a NUL character anywhere in it included) is
    answered with its own 422 problem; the batch itself is refused only for its own fields.

    The items' batch sizes together may not exceed the work budget (``max_estimate_points``);
    the batch runs in a heavy-work slot (503 + Retry-After when they are all taken).
    """
    work = BatchWork(
        list(body.items), settings.max_estimate_points, settings.max_response_bytes, viewer
    )
    return await run_heavy(request, batch_answer, work)
