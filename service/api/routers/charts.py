"""/v1/charts: roofline, sweep, traffic and frontier charts as SVG, PNG or Vega-Lite JSON."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy.orm import Session

from service.api.deps import ReadAccess, get_viewer
from service.api.heavy_calls import run_heavy
from service.api.problems import error_problem, problem_response
from service.api.query_patterns import SLUG, comma_list, int_list, slug_list
from service.api.routers.planning import plan_spec
from service.api.schemas.analysis import (
    BACKEND_PATTERN,
    MAX_BATCH_SIZE,
    MAX_TOKENS,
    ActivationDtypeIn,
    KvCacheDtypeIn,
    LoadPattern,
    SsmStateDtype,
)
from service.api.schemas.common import NO_NUL_PATTERN, Dtype
from service.api.schemas.planning import (
    MAX_ACCELERATORS,
    MAX_GPUS_PER_REPLICA,
    MAX_PRECISIONS,
    PlanRequest,
    WorkloadId,
)
from service.api.schemas.traffic import MAX_REQUEST_RATE_PER_S
from service.charts.frontier import frontier_chart
from service.charts.render import MEDIA_TYPES, ChartFormat, render
from service.charts.roofline import roofline_chart
from service.charts.sources import frontier_data, roofline_data, sweep_data, traffic_sweep_data
from service.charts.style import to_spec
from service.charts.sweep import sweep_chart
from service.charts.traffic import traffic_chart
from service.engine.errors import EngineError
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.services.errors import FieldError
from service.services.estimates import AnalysisService, AnalysisTarget
from service.services.planning import PlanningService

router = APIRouter(prefix="/v1/charts", tags=["charts"])

MAX_ROOFLINE_BATCHES = 8
MAX_SWEEP_POINTS = 64
MAX_TRAFFIC_RATES = 16
MAX_FRONTIER_MODELS = 4
MAX_FRONTIER_TP = 16
MAX_DEGREE = 1024
_DTYPE = "(?:fp32|tf32|bf16|fp16|fp8|int8|int4|fp4)"
_ACTIVATION_DTYPE = "(?:fp32|tf32|bf16|fp16|fp8|int8|fp4)"
_SSM_STATE_DTYPE = "(?:auto|fp32|fp16|bf16)"
PRECISION_LIST = comma_list(
    f"{_DTYPE}(?:/{_ACTIVATION_DTYPE}(?:/{_DTYPE}(?:/{_SSM_STATE_DTYPE})?)?)?", MAX_PRECISIONS
)
DEFAULT_SWEEP_BATCHES = ",".join(str(2**i) for i in range(11))
# A positive rate below 1e6 requests/s: a non-zero integer part, or a fraction with a non-zero
# digit.
RATE_LIST = comma_list(
    r"(?:[1-9][0-9]{0,5}(?:\.[0-9]{1,6})?|0?\.[0-9]{0,5}[1-9][0-9]{0,5})", MAX_TRAFFIC_RATES
)

Slug = Annotated[str, Query(min_length=1, max_length=100, pattern=f"^{SLUG}$")]
Format = Annotated[ChartFormat, Query(alias="format", description="svg, png or vega (JSON).")]
Tokens = Annotated[int, Query(ge=1, le=MAX_TOKENS)]
Degree = Annotated[int, Query(ge=1, le=MAX_DEGREE)]
CalibrationQuery = Annotated[str, Query(min_length=1, max_length=100, pattern=NO_NUL_PATTERN)]
BackendQuery = Annotated[str | None, Query(max_length=50, pattern=BACKEND_PATTERN)]
SsmStateQuery = Annotated[
    SsmStateDtype,
    Query(
        description="precision.ssm_state: the Mamba2 SSM state dtype of hybrid models (auto: "
        "the model dtype); models without Mamba2 layers ignore it."
    ),
]
VirtualStages = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_DEGREE,
        description="parallelism.pp_virtual_stages: interleaved pipeline chunks per GPU "
        "(needs pp > 1, pp·v ≤ num_layers).",
    ),
]
AttentionDp = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_DEGREE,
        description="parallelism.attention_dp: attention data-parallel ranks (MoE models).",
    ),
]


def batch_sizes_query(most: int, default: str) -> Any:
    """Return the Query of a comma-separated batch-size list (1..MAX_BATCH_SIZE, ``most`` items)."""
    return Query(
        pattern=int_list(1, MAX_BATCH_SIZE, most),
        description=f"Comma-separated, 1 to {most} integers in 1..{MAX_BATCH_SIZE} ({default}).",
    )


CHART_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {media: {} for media in MEDIA_TYPES.values()},
        "description": "The chart as SVG, PNG or a Vega-Lite specification.",
    },
    404: {"description": "Unknown model or accelerator (problem+json)."},
    422: {"description": "Invalid query parameter (problem+json naming it)."},
    503: {"description": "Heavy-work queue full; retry after Retry-After (problem+json)."},
}


def parse_int_list(field: str, raw: str, *, low: int, high: int, most: int) -> list[int]:
    """Parse ``"1,64,512"`` into distinct ascending ints within [low, high]; FieldError if not."""
    try:
        values = sorted({int(part) for part in raw.split(",") if part.strip()})
    except ValueError as exc:
        raise FieldError(field, f"expected comma-separated integers, got {raw!r}") from exc
    if not values:
        raise FieldError(field, "give at least one value")
    if len(values) > most:
        raise FieldError(field, f"at most {most} values")
    if values[0] < low or values[-1] > high:
        raise FieldError(field, f"values must lie within {low}..{high}")
    return values


def parse_slug_list(field: str, raw: str, *, most: int) -> list[str]:
    """Parse ``"a,b"`` into distinct ids in their given order; FieldError when empty or too long."""
    ids = list(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not ids or len(ids) > most:
        raise FieldError(field, f"give 1 to {most} comma-separated ids")
    return ids


def chart_response(spec: dict[str, Any], fmt: ChartFormat) -> Response:
    """Render the specification in the requested format with its media type."""
    return Response(
        render(spec, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={"Cache-Control": "no-cache"},
    )


def _engine_problem(exc: EngineError) -> Response:
    """The 422 of an engine error, naming the query parameter it is about (tp/pp/ep,
    precision, model)."""
    return problem_response(error_problem(exc, shape_field="model", in_query=True))


def _target(
    model: str,
    accelerator: str,
    precision: Precision,
    parallelism: Parallelism,
    calibration: str,
    backend: str | None,
) -> AnalysisTarget:
    return AnalysisTarget(
        model=model,
        accelerator=accelerator,
        precision=precision,
        parallelism=parallelism,
        backend=backend,
        calibration=calibration,
    )


def roofline_chart_body(
    analysis: AnalysisService,
    accelerator: Slug,
    model: Slug,
    batch_sizes: Annotated[str, batch_sizes_query(MAX_ROOFLINE_BATCHES, "1,64,512")] = "1,64,512",
    phase: Literal["prefill", "decode", "both"] = "decode",
    context_tokens: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_TOKENS,
            description="Prefill: prompt tokens per sequence; decode: tokens already cached.",
        ),
    ] = 2048,
    weights: Dtype = "bf16",
    activations: ActivationDtypeIn = "auto",
    kv_cache: KvCacheDtypeIn = "auto",
    ssm_state: SsmStateQuery = "auto",
    tp: Degree = 1,
    pp: Degree = 1,
    ep: Degree = 1,
    attention_dp: AttentionDp = 1,
    pp_virtual_stages: VirtualStages = 1,
    calibration: CalibrationQuery = "auto",
    backend: BackendQuery = None,
    fmt: Format = "svg",
) -> Response:
    """Draw the accelerator's roofline with the model's operators at the chosen batch sizes.

    422, naming the parameter, for what the stored model or accelerator cannot run (the rules
    of POST /v1/intensity: tp, pp and ep against the model's heads, layers and experts;
    context_tokens within the model's context window; the accelerator needs a peak for the
    dtypes asked for).
    """
    batches = parse_int_list(
        "batch_sizes", batch_sizes, low=1, high=MAX_BATCH_SIZE, most=MAX_ROOFLINE_BATCHES
    )
    target = _target(
        model,
        accelerator,
        Precision(weights=weights, activations=activations, kv_cache=kv_cache, ssm_state=ssm_state),
        Parallelism(
            tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, pp_virtual_stages=pp_virtual_stages
        ),
        calibration,
        backend,
    )
    phases = ("prefill", "decode") if phase == "both" else (phase,)
    try:
        data = roofline_data(
            analysis, target, phases=phases, batch_sizes=batches, context_tokens=context_tokens
        )
    except EngineError as exc:
        return _engine_problem(exc)
    return chart_response(to_spec(roofline_chart(data)), fmt)


def sweep_chart_body(
    analysis: AnalysisService,
    accelerator: Slug,
    model: Slug,
    input_tokens: Tokens = 1024,
    output_tokens: Tokens = 256,
    mode: Literal["static", "serving"] = "serving",
    load_pattern: LoadPattern = "closed_loop",
    batch_sizes: Annotated[
        str, batch_sizes_query(MAX_SWEEP_POINTS, "1,2,4,8")
    ] = DEFAULT_SWEEP_BATCHES,
    weights: Dtype = "bf16",
    activations: ActivationDtypeIn = "auto",
    kv_cache: KvCacheDtypeIn = "auto",
    ssm_state: SsmStateQuery = "auto",
    tp: Degree = 1,
    pp: Degree = 1,
    ep: Degree = 1,
    attention_dp: AttentionDp = 1,
    pp_virtual_stages: VirtualStages = 1,
    calibration: CalibrationQuery = "auto",
    backend: BackendQuery = None,
    fmt: Format = "svg",
) -> Response:
    """Draw TTFT, TPOT and throughput against batch size or concurrency, memory limit marked.

    422, naming the parameter, for what the stored model or accelerator cannot run (the rules
    of POST /v1/estimates: tp, pp and ep against the model's heads, layers and experts; the
    context window; the accelerator needs a peak for the dtypes asked for; a load_pattern other
    than closed_loop needs mode serving).
    """
    batches = parse_int_list(
        "batch_sizes", batch_sizes, low=1, high=MAX_BATCH_SIZE, most=MAX_SWEEP_POINTS
    )
    target = _target(
        model,
        accelerator,
        Precision(weights=weights, activations=activations, kv_cache=kv_cache, ssm_state=ssm_state),
        Parallelism(
            tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, pp_virtual_stages=pp_virtual_stages
        ),
        calibration,
        backend,
    )
    try:
        data = sweep_data(
            analysis,
            target,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            batch_sizes=batches,
            mode=mode,
            load_pattern=load_pattern,
        )
    except EngineError as exc:
        return _engine_problem(exc)
    return chart_response(to_spec(sweep_chart(data)), fmt)


def parse_rates(raw: str) -> list[float]:
    """Parse ``"0.5,2,4"`` into distinct ascending rates in (0, MAX_REQUEST_RATE_PER_S]."""
    rates = sorted({float(part) for part in raw.split(",")})
    if rates[0] <= 0 or rates[-1] > MAX_REQUEST_RATE_PER_S:
        raise FieldError("rates", f"rates must lie within (0, {MAX_REQUEST_RATE_PER_S:g}]")
    return rates


def traffic_chart_body(
    analysis: AnalysisService,
    accelerator: Slug,
    model: Slug,
    input_tokens: Tokens = 1024,
    output_tokens: Tokens = 256,
    rates: Annotated[
        str | None,
        Query(
            pattern=RATE_LIST,
            description=f"Comma-separated requests/s (1 to {MAX_TRAFFIC_RATES}). Default: "
            "10% to 95% of the replica's saturation rate.",
        ),
    ] = None,
    arrival_cv: Annotated[
        float | None,
        Query(gt=0, le=10, allow_inf_nan=False, description="Gamma arrivals (else Poisson)."),
    ] = None,
    weights: Dtype = "bf16",
    activations: ActivationDtypeIn = "auto",
    kv_cache: KvCacheDtypeIn = "auto",
    ssm_state: SsmStateQuery = "auto",
    tp: Degree = 1,
    pp: Degree = 1,
    ep: Degree = 1,
    attention_dp: AttentionDp = 1,
    pp_virtual_stages: VirtualStages = 1,
    calibration: CalibrationQuery = "auto",
    backend: BackendQuery = None,
    fmt: Format = "svg",
) -> Response:
    """Draw p50 TTFT, TPOT and e2e against open-loop request rate, with p50–p99 bands."""
    target = _target(
        model,
        accelerator,
        Precision(weights=weights, activations=activations, kv_cache=kv_cache, ssm_state=ssm_state),
        Parallelism(
            tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, pp_virtual_stages=pp_virtual_stages
        ),
        calibration,
        backend,
    )
    try:
        data = traffic_sweep_data(
            analysis,
            target,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            rates_per_s=parse_rates(rates) if rates is not None else None,
            arrival_cv=arrival_cv,
        )
    except EngineError as exc:
        return _engine_problem(exc)
    return chart_response(to_spec(traffic_chart(data)), fmt)


def _precision_list(raw: str) -> list[dict[str, str]]:
    """Parse ``"bf16,fp8/fp8"``: each item is weights[/activations[/kv_cache[/ssm_state]]]."""
    roles = ("weights", "activations", "kv_cache", "ssm_state")
    items = []
    for token in (t.strip() for t in raw.split(",")):
        parts = token.split("/") if token else []
        if not 1 <= len(parts) <= len(roles):
            raise FieldError(
                "precisions",
                f"expected weights[/activations[/kv_cache[/ssm_state]]], got {token!r}",
            )
        items.append(dict(zip(roles, parts, strict=False)))
    return items


MODEL_LIST = slug_list(MAX_FRONTIER_MODELS)
ACCELERATOR_LIST = slug_list(MAX_ACCELERATORS)
# `model` and `accelerator` are documented by hand (below) so that `model` can be required in
# the document while the older names `models` / `accelerators` keep working as hidden aliases.
FRONTIER_PARAMETERS: dict[str, Any] = {
    "parameters": [
        {
            "name": "model",
            "in": "query",
            "required": True,
            "description": f"Comma-separated model ids (1 to {MAX_FRONTIER_MODELS}); also "
            "accepted as `models`.",
            "schema": {"type": "string", "pattern": MODEL_LIST},
        },
        {
            "name": "accelerator",
            "in": "query",
            "required": False,
            "description": f"Comma-separated accelerator ids (up to {MAX_ACCELERATORS}; default: "
            "the catalog); also accepted as `accelerators`.",
            "schema": {"type": "string", "pattern": ACCELERATOR_LIST},
        },
    ]
}
DEFAULT_FRONTIER_WORKLOAD = "chat"
FrontierObjective = Literal[
    "max_throughput_per_gpu", "min_cost_per_million_tokens", "max_concurrency_under_slo"
]
HiddenModels = Annotated[str | None, Query(pattern=MODEL_LIST, include_in_schema=False)]
HiddenAccelerators = Annotated[str | None, Query(pattern=ACCELERATOR_LIST, include_in_schema=False)]


def _one_of(field: str, value: str | None, alias: str, alias_value: str | None) -> str | None:
    """Return the value given under ``field`` or its older name ``alias`` (not both)."""
    if value is not None and alias_value is not None:
        raise FieldError(field, f"give {field} or its older name {alias}, not both")
    return value if value is not None else alias_value


def frontier_chart_body(
    planning: PlanningService,
    max_plan_points: int,
    model: HiddenModels = None,
    models: HiddenModels = None,
    accelerator: HiddenAccelerators = None,
    accelerators: HiddenAccelerators = None,
    workload: Annotated[
        WorkloadId | None,
        Query(
            description="A preset id (GET /v1/workloads). Default: chat when input_tokens or "
            "output_tokens is left out."
        ),
    ] = None,
    input_tokens: Tokens | None = None,
    output_tokens: Tokens | None = None,
    ttft_ms_max: Annotated[float | None, Query(gt=0, allow_inf_nan=False)] = None,
    tpot_ms_max: Annotated[float | None, Query(gt=0, allow_inf_nan=False)] = None,
    objective: Annotated[
        FrontierObjective | None,
        Query(description="min_gpus_for_rate is a plan (POST /v1/plans), not a frontier."),
    ] = None,
    requests_per_s: Annotated[
        float | None, Query(gt=0, le=MAX_REQUEST_RATE_PER_S, allow_inf_nan=False)
    ] = None,
    precisions: Annotated[
        str | None,
        Query(
            pattern=PRECISION_LIST,
            description="Comma-separated weights[/activations[/kv_cache[/ssm_state]]] dtypes, "
            "e.g. bf16,fp8/fp8 or bf16/bf16/bf16/fp32.",
        ),
    ] = None,
    max_gpus_per_replica: Annotated[int | None, Query(ge=1, le=MAX_GPUS_PER_REPLICA)] = None,
    tp: Annotated[
        str | None,
        Query(
            pattern=int_list(1, MAX_GPUS_PER_REPLICA, MAX_FRONTIER_TP),
            description=f"Comma-separated tensor-parallel degrees in 1..{MAX_GPUS_PER_REPLICA}, "
            "e.g. 1,2,4,8.",
        ),
    ] = None,
    mode: Literal["static", "serving"] | None = None,
    load_pattern: LoadPattern | None = None,
    backend: BackendQuery = None,
    calibration: Annotated[
        str | None, Query(min_length=1, max_length=100, pattern=NO_NUL_PATTERN)
    ] = None,
    fmt: Format = "svg",
) -> Response:
    """Draw tokens/s per user against tokens/s per GPU from the plan's frontier.

    The frontier is a plan (POST /v1/plans): 422 past the plan work budget, which the number
    of catalog accelerators and layouts considered decides.
    """
    model_ids = _one_of("model", model, "models", models)
    if model_ids is None:
        raise FieldError("model", "required: comma-separated model ids")
    accelerator_ids = _one_of("accelerator", accelerator, "accelerators", accelerators)
    if workload is None and (input_tokens is None or output_tokens is None):
        workload = DEFAULT_FRONTIER_WORKLOAD
    body: dict[str, Any] = {
        "models": parse_slug_list("model", model_ids, most=MAX_FRONTIER_MODELS),
        "workload": workload,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "objective": objective,
        "requests_per_s": requests_per_s,
        "max_gpus_per_replica": max_gpus_per_replica,
        "mode": mode,
        "load_pattern": load_pattern,
        "backend": backend,
        "calibration": calibration,
    }
    if accelerator_ids is not None:
        body["accelerators"] = parse_slug_list(
            "accelerator", accelerator_ids, most=MAX_ACCELERATORS
        )
    if precisions is not None:
        body["precisions"] = _precision_list(precisions)
    if tp is not None:
        body["tp"] = parse_int_list(
            "tp", tp, low=1, high=MAX_GPUS_PER_REPLICA, most=MAX_FRONTIER_TP
        )
    slo = {
        name: value
        for name, value in (("ttft_ms_max", ttft_ms_max), ("tpot_ms_max", tpot_ms_max))
        if value is not None
    }
    if slo:
        body["slo"] = slo
    try:
        request = PlanRequest.model_validate({k: v for k, v in body.items() if v is not None})
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    try:
        data = frontier_data(planning, plan_spec(request, max_plan_points))
    except EngineError as exc:
        return _engine_problem(exc)
    return chart_response(to_spec(frontier_chart(data)), fmt)


ANALYSIS_CHARTS: dict[str, Callable[..., Response]] = {
    "roofline": roofline_chart_body,
    "sweep": sweep_chart_body,
    "traffic": traffic_chart_body,
}
_SERVICE_PARAMETERS = frozenset({"analysis", "planning", "max_plan_points"})


def chart_answer(session: Session, work: tuple[str, dict[str, Any], str]) -> Response:
    """Draw a chart (a heavy call: run by ``run_heavy``); ``work`` = (chart, parameters, the
    caller's key prefix whose private calibration profiles the chart may use)."""
    name, params, viewer = work
    if name == "frontier":
        return frontier_chart_body(PlanningService(session, viewer=viewer), **params)
    body = ANALYSIS_CHARTS[name]
    return body(AnalysisService(session, viewer=viewer), **params)


def _heavy_route(name: str, body: Callable[..., Response]) -> Callable[..., Any]:
    """An async route with ``body``'s query parameters that draws the chart in a heavy slot."""
    signature = inspect.signature(body)
    query = [p for n, p in signature.parameters.items() if n not in _SERVICE_PARAMETERS]
    wants_budget = "max_plan_points" in signature.parameters

    async def route(request: Request, **params: Any) -> Response:
        if wants_budget:
            params["max_plan_points"] = request.app.state.settings.max_plan_points
        viewer = await get_viewer(request, request.headers.get("x-api-key"))
        return await run_heavy(request, chart_answer, (name, params, viewer))

    first = inspect.Parameter(
        "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request
    )
    route.__signature__ = signature.replace(parameters=[first, *query])  # type: ignore[attr-defined]
    route.__name__ = name
    route.__doc__ = body.__doc__
    return route


# The frontier documents `model` / `accelerator` by hand (FRONTIER_PARAMETERS).
for _name, _body, _extra in (
    ("roofline", roofline_chart_body, None),
    ("sweep", sweep_chart_body, None),
    ("traffic", traffic_chart_body, None),
    ("frontier", frontier_chart_body, FRONTIER_PARAMETERS),
):
    router.get(
        f"/{_name}", responses=CHART_RESPONSES, dependencies=[ReadAccess], openapi_extra=_extra
    )(_heavy_route(_name, _body))
