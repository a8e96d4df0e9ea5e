"""Request and response bodies of GET /v1/workloads and POST /v1/plans."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema
from pydantic.config import JsonDict

from service.api.schemas.analysis import (
    Backend,
    Calibration,
    CalibrationOut,
    LayoutIn,
    LoadPattern,
    Mode,
    PrecisionIn,
    Replicas,
    Tokens,
)
from service.api.schemas.common import JSON_INTEGER, PATTERNED_KEYS_ONLY, Slug
from service.api.schemas.traffic import MAX_REQUEST_RATE_PER_S, PlanTrafficIn, PlanTrafficOut
from service.engine.workloads import WORKLOADS

MAX_MODELS = 8
MAX_ACCELERATORS = 64
MAX_PRECISIONS = 8
MAX_GPUS_PER_REPLICA = 576  # eight NVL72 racks: wide-EP replicas span racks

Objective = Literal[
    "max_throughput_per_gpu",
    "min_cost_per_million_tokens",
    "min_gpus_for_rate",
    "max_concurrency_under_slo",
]
LatencyMs = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
Degree = Annotated[int, Field(strict=True, ge=1, le=MAX_GPUS_PER_REPLICA), JSON_INTEGER]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]


def _known_workload(value: str) -> str:
    """Refuse a workload id that is not a preset."""
    if value not in WORKLOADS:
        raise ValueError(f"must be one of {', '.join(WORKLOADS)}")
    return value


WorkloadId = Annotated[
    str,
    AfterValidator(_known_workload),
    WithJsonSchema({"type": "string", "enum": list(WORKLOADS)}),
]
# What JSON Schema can say about the fields that depend on each other (the service checks the
# same): lengths come from the request or its workload; min_gpus_for_rate needs a rate.
PLAN_DEPENDENCIES: JsonDict = {
    "allOf": [
        {
            "anyOf": [
                {"required": ["workload"], "properties": {"workload": {"type": "string"}}},
                {
                    "required": ["input_tokens", "output_tokens"],
                    "properties": {
                        "input_tokens": {"type": "integer"},
                        "output_tokens": {"type": "integer"},
                    },
                },
            ]
        },
        {
            "if": {
                "required": ["objective"],
                "properties": {"objective": {"const": "min_gpus_for_rate"}},
            },
            "then": {
                "required": ["requests_per_s"],
                "properties": {"requests_per_s": {"type": "number"}},
            },
        },
    ]
}


class WorkloadLengthsOut(BaseModel):
    """A preset's length distribution in the traffic lengths format, and its mean."""

    percentiles: dict[str, float] = Field(description="Tokens at percentile levels.")
    min: int
    max: int
    mean: float = Field(
        description="Mean of the distribution (the piecewise-linear quantile function through "
        "min, the percentiles and max; docs/traffic.md)."
    )


class WorkloadOut(BaseModel):
    """A workload preset: lengths, latency targets (null: none) and planning defaults."""

    id: str
    input_tokens: int
    output_tokens: int
    ttft_ms_max: float | None
    tpot_ms_max: float | None
    objective: Objective
    mode: Mode
    description: str
    rationale: str
    input_lengths: WorkloadLengthsOut | None = Field(
        default=None,
        description="Prompt length distribution where a source gives one (null: none); "
        'traffic.input_tokens: {"workload": id} uses it.',
    )
    output_lengths: WorkloadLengthsOut | None = Field(
        default=None,
        description="Output length distribution where a source gives one (null: none); "
        'traffic.output_tokens: {"workload": id} uses it.',
    )
    source: str | None = Field(
        default=None, description="Where the length distributions come from (null: none)."
    )


class WorkloadList(BaseModel):
    """Body of GET /v1/workloads."""

    items: list[WorkloadOut]


class SloIn(BaseModel):
    """Latency targets; a field left out takes the workload's, an explicit null removes it."""

    model_config = ConfigDict(extra="forbid")

    ttft_ms_max: LatencyMs | None = None
    tpot_ms_max: LatencyMs | None = None
    use_interval_upper_bound: StrictBool = Field(
        default=False,
        description="Judge targets at the upper end of the calibration profile's 80% interval "
        "(point predictions where a profile has no intervals; the answer's notes say so).",
    )
    # Percentile targets: with requests_per_s, the fleet is sized by simulating open-loop
    # traffic (docs/traffic.md) and configurations are ranked by the fleet's cost.
    ttft_ms_p50_max: LatencyMs | None = None
    ttft_ms_p90_max: LatencyMs | None = None
    ttft_ms_p99_max: LatencyMs | None = None
    tpot_ms_p50_max: LatencyMs | None = None
    tpot_ms_p90_max: LatencyMs | None = None
    tpot_ms_p99_max: LatencyMs | None = None
    e2e_latency_ms_p50_max: LatencyMs | None = None
    e2e_latency_ms_p90_max: LatencyMs | None = None
    e2e_latency_ms_p99_max: LatencyMs | None = None


class PlanRequest(BaseModel):
    """Body of POST /v1/plans."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=PLAN_DEPENDENCIES)

    models: list[Slug] = Field(min_length=1, max_length=MAX_MODELS)
    accelerators: list[Slug] | None = Field(
        default=None, max_length=MAX_ACCELERATORS, description="Default: the whole catalog."
    )
    workload: WorkloadId | None = Field(
        default=None,
        description="A preset id (GET /v1/workloads) filling what is left out; without one, "
        "input_tokens and output_tokens are required.",
    )
    input_tokens: Tokens | None = None
    output_tokens: Tokens | None = None
    slo: SloIn | None = None
    objective: Objective | None = Field(
        default=None, description="Default: the workload's, else max_throughput_per_gpu."
    )
    requests_per_s: float | None = Field(
        default=None,
        strict=True,
        gt=0,
        le=MAX_REQUEST_RATE_PER_S,
        allow_inf_nan=False,
        description="Traffic to size the fleet for (required by min_gpus_for_rate; at most "
        "1e6, the traffic rate limit).",
    )
    precisions: list[PrecisionIn] = Field(
        default_factory=lambda: [
            PrecisionIn(),
            PrecisionIn(weights="fp8", activations="fp8"),
        ],
        min_length=1,
        max_length=MAX_PRECISIONS,
    )
    max_gpus_per_replica: Degree = 8
    tp: list[Degree] | None = Field(
        default=None, max_length=16, description="Default: powers of two up to the GPU limit."
    )
    pp: list[Degree] | None = Field(default=None, max_length=16, description="Default: [1].")
    ep: list[Degree] | None = Field(
        default=None,
        max_length=16,
        description="Default for MoE models: [1, tp] without attention DP, [1, tp × "
        "attention_dp] with it; [1] for dense models.",
    )
    attention_dp: list[Degree] | None = Field(
        default=None,
        max_length=16,
        description="Attention data-parallel ranks. Default for MoE models: powers of two and "
        "max_gpus_per_replica (tp × attention_dp within it); [1] for dense models.",
    )
    dp: Replicas = Field(
        default=1,
        description="Data-parallel replicas of each layout at least: replicas is max(dp, what "
        "requests_per_s needs); gpus and usd_per_hour count them all, latency is one replica's.",
    )
    mode: Mode | None = Field(default=None, description="Default: the workload's, else serving.")
    load_pattern: LoadPattern | None = Field(
        default=None,
        description="Serving plans: how requests arrive (a static plan has none and ignores "
        "it). Default open_loop: a deployment's users send them on their own, concurrency is "
        "the requests in flight, and a profile's closed-loop harness terms are not applied. "
        "closed_loop (clients that each send their next request when the last ends, as "
        "benchmark harnesses do) and offline (requests queued at once) answer as POST "
        "/v1/estimates does.",
    )
    price_usd_per_hour: dict[Slug, Price] = Field(
        default_factory=dict,
        json_schema_extra=PATTERNED_KEYS_ONLY,
        description="Per-GPU price per accelerator id, over the catalog's.",
    )
    backend: Backend | None = None
    calibration: Calibration = Field(
        default="auto",
        description='"auto" (per accelerator, newest profile), "none", or a profile id.',
    )
    concurrency_levels: Annotated[int, JSON_INTEGER] = Field(
        default=64,
        strict=True,
        ge=1,
        le=1024,
        description="Levels per candidate, up to the memory limit.",
    )
    traffic: PlanTrafficIn | None = Field(
        default=None,
        description="Stream and scheduler of the percentile sizing (default: Poisson arrivals "
        "of the fixed lengths, the backend's scheduler).",
    )


class PlanWorkloadOut(BaseModel):
    """The request shape and targets the plan used after filling from the preset."""

    id: str | None
    input_tokens: int
    output_tokens: int
    ttft_ms_max: float | None
    tpot_ms_max: float | None
    use_interval_upper_bound: bool
    mode: Mode
    load_pattern: LoadPattern | None = Field(
        default=None,
        description="How the serving plan's requests arrive (null for a static plan).",
    )


class ConfigurationOut(BaseModel):
    """A feasible deployment at its best concurrency; costs are null without a price."""

    rank: int
    model: str
    accelerator: str
    parallelism: LayoutIn
    precision: PrecisionIn
    mode: Mode
    concurrency: int
    max_concurrency: int = Field(description="Memory limit on running requests per replica.")
    ttft_ms: float
    tpot_ms: float
    ttft_ms_upper: float | None = Field(description="80% interval upper end, when known.")
    tpot_ms_upper: float | None
    e2e_latency_ms: float
    tokens_per_s_per_user: float = Field(description="1000 / tpot_ms.")
    requests_per_s_per_replica: float
    output_tokens_per_s_per_replica: float
    output_tokens_per_s_per_gpu: float
    gpus_per_replica: int
    replicas: int = Field(description="ceil(requests_per_s / requests_per_s_per_replica), or 1.")
    gpus: int
    usd_per_gpu_hour: float | None
    usd_per_hour: float | None = Field(description="The whole fleet: replicas × GPUs × price.")
    usd_per_hour_per_replica: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_million_tokens: float | None = Field(
        description="All replica time over input + output tokens (the cost objective)."
    )
    energy_per_output_token_j: float | None
    energy_per_token_j: float | None
    memory_gb_per_gpu: float
    calibration: CalibrationOut | None
    traffic: PlanTrafficOut | None = Field(
        default=None,
        description="Percentile targets given: replicas, gpus and usd_per_hour come from it.",
    )


class FrontierPointOut(BaseModel):
    """A Pareto-optimal operating point: tokens/s per user against output tokens/s per GPU."""

    model: str
    parallelism: LayoutIn
    precision: PrecisionIn
    concurrency: int
    tokens_per_s_per_user: float
    output_tokens_per_s_per_gpu: float
    ttft_ms: float
    tpot_ms: float
    meets_slo: bool


class RejectedOut(BaseModel):
    """A candidate with no configuration and the reason."""

    model: str
    accelerator: str
    parallelism: LayoutIn
    precision: PrecisionIn
    code: str
    reason: str


class PlanResponse(BaseModel):
    """Body of the POST /v1/plans answer."""

    objective: Objective
    requests_per_s: float | None
    workload: PlanWorkloadOut
    configurations: list[ConfigurationOut]
    frontier: dict[str, list[FrontierPointOut]]
    rejected: list[RejectedOut]
    notes: list[str]
    candidates_evaluated: int
    points_evaluated: int
