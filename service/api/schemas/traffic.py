"""Request and response parts of open-loop traffic in POST /v1/estimates (and /v1/plans)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic.config import JsonDict

from service.api.schemas.common import JSON_INTEGER, PATTERNED_KEYS_ONLY
from service.engine.workloads import LENGTH_PRESETS

MAX_REQUEST_RATE_PER_S = 1e6
MAX_TRAFFIC_TOKENS = 1_048_576
MIN_SIMULATED_REQUESTS = 100
MAX_SIMULATED_REQUESTS = 2000
DEFAULT_SIMULATED_REQUESTS = 600

Rate = Annotated[float, Field(gt=0, le=MAX_REQUEST_RATE_PER_S, allow_inf_nan=False, strict=True)]
TokenCount = Annotated[int, Field(ge=1, le=MAX_TRAFFIC_TOKENS, strict=True), JSON_INTEGER]
TokenFloat = Annotated[float, Field(ge=1, le=MAX_TRAFFIC_TOKENS, allow_inf_nan=False, strict=True)]
StepTokens = Annotated[int, Field(ge=64, le=MAX_TRAFFIC_TOKENS, strict=True), JSON_INTEGER]
RunningCap = Annotated[int, Field(ge=1, le=65_536, strict=True), JSON_INTEGER]
SimulatedRequests = Annotated[
    int, Field(ge=MIN_SIMULATED_REQUESTS, le=MAX_SIMULATED_REQUESTS, strict=True), JSON_INTEGER
]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)]
PercentileName = Annotated[str, StringConstraints(pattern=r"^p(?:[1-9][0-9]?)(?:\.[0-9]{1,2})?$")]
LatencyTarget = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
Scheduling = Literal["decode_first", "prefill_first"]


# Poisson gaps have cv 1: a Poisson stream (the default process) takes no other cv
# (services/traffic.py refuses it with a 422 naming traffic.arrival.cv).
POISSON_CV_RULE: JsonDict = {
    "if": {"properties": {"process": {"const": "poisson"}}},
    "then": {"properties": {"cv": {"enum": [1, None]}}},
}


class ArrivalIn(BaseModel):
    """How requests arrive: Poisson, or a gamma renewal process with coefficient of variation."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=POISSON_CV_RULE)

    process: Literal["poisson", "gamma"] = "poisson"
    cv: float | None = Field(
        default=None,
        gt=0,
        le=10,
        allow_inf_nan=False,
        strict=True,
        description="Gamma only: standard deviation ÷ mean of the gaps between arrivals (1 is "
        "Poisson-like, above 1 burstier; with poisson only 1 or null). vllm bench serve's "
        "--burstiness is 1 / cv².",
    )


class SpeculativeIn(BaseModel):
    """Speculative decoding: drafted tokens per step and the chance each is accepted."""

    model_config = ConfigDict(extra="forbid")

    draft_tokens: Annotated[int, Field(ge=1, le=16, strict=True), JSON_INTEGER]
    acceptance_rate: Share
    drafter: Literal["generic", "mtp"] = Field(
        default="generic",
        description="generic: the drafter's time and memory are not modelled. mtp: the "
        "model's own multi-token-prediction module drafts (the model needs mtp_layers > 0, "
        "e.g. DeepSeek-V3): each step adds draft_tokens decode steps of one MTP block, and "
        "its weights and KV cache are held beside the model's.",
    )


class HistogramIn(BaseModel):
    """Lengths uniform within bins; ``shares`` are the bins' probabilities and sum to 1."""

    model_config = ConfigDict(extra="forbid")

    bin_edges_tokens: list[TokenCount] = Field(min_length=2, max_length=257)
    shares: list[Share] = Field(min_length=1, max_length=256)


def _known_length_preset(value: str) -> str:
    """Refuse a workload id that has no length distributions."""
    if value not in LENGTH_PRESETS:
        raise ValueError(f"must be one of {', '.join(LENGTH_PRESETS)} (presets with lengths)")
    return value


LengthPresetId = Annotated[
    str,
    AfterValidator(_known_length_preset),
    WithJsonSchema({"type": "string", "enum": list(LENGTH_PRESETS)}),
]


class LengthDistributionIn(BaseModel):
    """A length mix: percentiles (with ``max`` or ``mean`` for the top), a histogram, or a
    workload preset's distribution (``workload``, alone)."""

    model_config = ConfigDict(extra="forbid")

    workload: LengthPresetId | None = Field(
        default=None,
        description="A GET /v1/workloads preset with length distributions (input_lengths, "
        "output_lengths, from a cited source): traffic.input_tokens takes its input lengths, "
        "traffic.output_tokens its output lengths. Not with the other fields.",
    )

    percentiles: (
        Annotated[
            dict[PercentileName, TokenFloat],
            Field(max_length=16, json_schema_extra=PATTERNED_KEYS_ONLY),
        ]
        | None
    ) = Field(
        default=None,
        description='Tokens at percentile levels, e.g. {"p50": 200, "p90": 800, "p99": 1500}.',
    )
    mean: TokenFloat | None = None
    min: TokenCount = 1
    max: TokenCount | None = None
    histogram: HistogramIn | None = None


Lengths = TokenCount | LengthDistributionIn


class TrafficSloIn(BaseModel):
    """Percentile targets for the goodput search (milliseconds; leave out what has none)."""

    model_config = ConfigDict(extra="forbid")

    ttft_ms_p50_max: LatencyTarget | None = None
    ttft_ms_p90_max: LatencyTarget | None = None
    ttft_ms_p99_max: LatencyTarget | None = None
    tpot_ms_p50_max: LatencyTarget | None = None
    tpot_ms_p90_max: LatencyTarget | None = None
    tpot_ms_p99_max: LatencyTarget | None = None
    e2e_latency_ms_p50_max: LatencyTarget | None = None
    e2e_latency_ms_p90_max: LatencyTarget | None = None
    e2e_latency_ms_p99_max: LatencyTarget | None = None


class StreamIn(BaseModel):
    """Lengths, arrivals and scheduler of a simulated request stream (estimates and plans)."""

    model_config = ConfigDict(extra="forbid")

    arrival: ArrivalIn = Field(default_factory=ArrivalIn)
    input_tokens: Lengths | None = Field(
        default=None,
        description="Tokens per prompt: a number or a distribution (default: the "
        "request's input_tokens, fixed).",
    )
    output_tokens: Lengths | None = Field(
        default=None, description="Tokens generated per request (default: output_tokens, fixed)."
    )
    max_num_batched_tokens: StepTokens | None = Field(
        default=None,
        description="Token budget of one step (chunk size). Default: the backend's (docs).",
    )
    max_running_requests: RunningCap | None = Field(
        default=None,
        description="Cap on running requests. Default: the backend's, else the KV-cache limit.",
    )
    scheduling: Scheduling | None = Field(
        default=None, description="decode_first (vLLM, TensorRT-LLM) or prefill_first (SGLang)."
    )
    seed: Annotated[int, Field(ge=0, le=2**32 - 1, strict=True), JSON_INTEGER] = 0
    prefix_cache_hit_rate: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        strict=True,
        description="Share of each prompt found in the prefix cache: not prefilled again.",
    )
    speculative: SpeculativeIn | None = Field(
        default=None,
        description="Each step verifies draft_tokens + 1 tokens per sequence and keeps "
        "(1 − α^(k+1)) / (1 − α) on average; drafter mtp also prices the MTP module's drafts.",
    )


MAX_PLAN_RATIOS = 12
PoolReplicas = Annotated[int, Field(ge=1, le=16, strict=True), JSON_INTEGER]
KvLink = Literal["auto", "scale_up", "scale_out"]


class DisaggregationIn(BaseModel):
    """Disaggregated prefill and decode pools (xPyD) of the estimate's layout (docs/traffic.md)."""

    model_config = ConfigDict(extra="forbid")

    prefill_replicas: PoolReplicas = Field(
        description="Replicas that run prompts only (prefill-only steps), each its own queue."
    )
    decode_replicas: PoolReplicas = Field(
        description="Replicas that decode only, after the prompt's KV cache is transferred."
    )
    kv_link: KvLink = Field(
        default="auto",
        description="Where the KV travels: auto (the group's GPUs together: the scale-up link "
        "when they fit its domain, else the host link in a node, else the network), scale_up "
        "(NVLink/xGMI) or scale_out (the inter-node network per GPU).",
    )


class TrafficIn(StreamIn):
    """Open-loop traffic: requests arrive at a rate, whatever the replica's state."""

    model_config = ConfigDict(extra="forbid")

    request_rate_per_s: Rate
    num_requests: SimulatedRequests = Field(
        default=DEFAULT_SIMULATED_REQUESTS,
        description="Requests in the simulated stream (more: steadier tails, slower answer).",
    )
    slo: TrafficSloIn | None = Field(
        default=None, description="Percentile targets: the answer adds the goodput."
    )
    disaggregation: DisaggregationIn | None = Field(
        default=None,
        description="Serve the stream with prefill_replicas prefill-only and decode_replicas "
        "decode-only replicas of this layout and a KV transfer between them (with slo, the "
        "goodput is per group).",
    )


class PlanTrafficIn(StreamIn):
    """Traffic of a plan: its rate is the plan's requests_per_s, its targets the slo's
    percentile fields; this object shapes the stream and the scheduler."""

    num_requests: SimulatedRequests = Field(
        default=300,
        description="Requests per sizing run (fewer than an estimate's 600: a plan runs many).",
    )
    headroom: float = Field(
        default=0.2,
        ge=0,
        le=4,
        allow_inf_nan=False,
        strict=True,
        description="Targets must hold at (1 + headroom) × the planned per-replica rate.",
    )
    disaggregation: (
        Literal["search"]
        | Annotated[list[DisaggregationIn], Field(min_length=1, max_length=MAX_PLAN_RATIOS)]
        | None
    ) = Field(
        default=None,
        description='Size each configuration as groups of xPyD pools: "search" tries 1P1D, '
        "1P2D, 2P1D, 1P3D, 3P1D, 2P3D, 3P2D, 1P4D and 4P1D; a list tries those given. The "
        "cheapest fleet at the rate wins.",
    )


class PercentilesOut(BaseModel):
    """Mean and percentiles of one per-request metric, milliseconds (null: no sample)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class SchedulerOut(BaseModel):
    """The scheduler knobs the simulation used."""

    max_num_batched_tokens: int
    max_running_requests: int
    scheduling: Scheduling
    kv_cache_tokens: int = Field(description="Tokens of KV cache beside weights and activations.")
    decode_tokens_per_step: int = Field(description="Tokens run per decoding sequence per step.")
    tokens_per_decode_step: float = Field(description="Tokens gained per decode step (mean).")
    defaults_from: str = Field(description="Where knobs left out took their values from.")


class PoolOut(BaseModel):
    """One pool of a disaggregated group."""

    replicas: int
    utilization: float = Field(description="Share of time each replica runs steps (mean).")
    capacity_requests_per_s: float = Field(description="The pool's, with a full queue.")
    load_factor: float = Field(description="request_rate_per_s ÷ capacity_requests_per_s.")
    queue_wait_ms: PercentilesOut = Field(
        description="Arrival at the pool to the request's first step there."
    )


class KvTransferOut(BaseModel):
    """The KV cache's trip from a prefill replica to a decode replica."""

    link: KvLink
    link_gb_s: float = Field(description="Per GPU, per direction (Accelerator links).")
    bytes_per_gpu: float = Field(description="Mean over requests: each GPU's KV shard.")
    transfer_ms: PercentilesOut = Field(description="One request's send, queue excluded.")
    link_wait_ms: PercentilesOut = Field(description="Waiting for the replica's link to free.")
    utilization: float = Field(description="Share of time a prefill replica's link sends.")
    capacity_requests_per_s: float


class DisaggregationOut(BaseModel):
    """How the group's pools and link are loaded, and which saturates first."""

    prefill_replicas: int
    decode_replicas: int
    gpus: int = Field(description="(prefill + decode replicas) × GPUs per replica.")
    prefill: PoolOut
    decode: PoolOut
    kv_transfer: KvTransferOut
    bottleneck: Literal["prefill", "decode", "kv_transfer"] = Field(
        description="What saturates first: the least capacity."
    )


class PlanColocatedOut(BaseModel):
    """The colocated fleet of the same configuration, against the chosen pools."""

    replicas: int | None = Field(description="At least dp; null: the targets are missed.")
    gpus: int | None
    usd_per_hour: float | None
    cheaper: bool = Field(
        description="Whether the colocated fleet costs less than the pools ($/h; GPUs unpriced)."
    )
    saving_gpus: int | None = Field(description="The pools' GPUs less the colocated fleet's.")
    saving_usd_per_hour: float | None = Field(
        description="The pools' $/h less the colocated fleet's (positive: colocated cheaper)."
    )


class PlanDisaggregationOut(BaseModel):
    """The pool ratio a plan chose for a configuration, and the ratios it tried."""

    prefill_replicas: int
    decode_replicas: int
    groups: int
    tried: list[dict[str, int | float | str | None]] = Field(
        description="Each ratio tried: ratio, groups (null: targets missed), gpus, usd_per_hour; "
        'the last, ratio "colocated", is the colocated fleet (groups: its replicas), '
        "compared but never chosen."
    )
    colocated: PlanColocatedOut | None = Field(
        default=None,
        description="The colocated fleet of the same configuration and whether it is cheaper.",
    )


class GoodputOut(BaseModel):
    """The largest request rate per replica (per group of pools) meeting every target."""

    requests_per_s: float
    limited_by: Literal["saturation", "slo", "unloaded_latency"]
    slo: dict[str, float]
    ttft_ms: PercentilesOut | None
    tpot_ms: PercentilesOut | None
    e2e_latency_ms: PercentilesOut | None
    simulations: int


class PlanTrafficOut(BaseModel):
    """How a configuration's fleet was sized from the percentile targets."""

    requests_per_s_per_replica: float = Field(
        description="Planned share, headroom included (per group with disaggregation)."
    )
    headroom: float
    capacity_requests_per_s: float = Field(
        description="Closed-loop capacity of one replica (of one group with disaggregation)."
    )
    scheduler: SchedulerOut
    ttft_ms: PercentilesOut
    tpot_ms: PercentilesOut
    e2e_latency_ms: PercentilesOut
    usd_per_million_tokens_at_rate: float | None = Field(
        description="Fleet price over the tokens of requests_per_s (input + output)."
    )
    simulations: int
    disaggregation: PlanDisaggregationOut | None = Field(
        default=None,
        description="With traffic.disaggregation: the winning ratio; replicas are groups × "
        "(prefill + decode replicas).",
    )


class TrafficOut(BaseModel):
    """What an open-loop stream sees on one replica."""

    request_rate_per_s: float
    arrival: ArrivalIn
    mean_input_tokens: float
    mean_output_tokens: float
    prefix_cache_hit_rate: float
    scheduler: SchedulerOut
    ttft_ms: PercentilesOut
    tpot_ms: PercentilesOut = Field(
        description="Per request (e2e − TTFT) / (output tokens − 1), as benchmark clients do."
    )
    e2e_latency_ms: PercentilesOut
    queue_wait_ms: PercentilesOut = Field(
        description="Arrival to the step that runs the request's first prompt chunk."
    )
    achieved_requests_per_s: float
    output_tokens_per_s: float
    utilization: float = Field(
        description="Share of the steady-state stretch (first to last measured arrival) the "
        "replica runs steps: near 1 whenever requests overlap; load_factor is the load."
    )
    saturation_requests_per_s: float = Field(
        description="Requests/s the replica completes with a full queue."
    )
    load_factor: float = Field(description="request_rate_per_s ÷ saturation_requests_per_s.")
    saturated: bool = Field(description="True when the replica cannot keep up with the rate.")
    overload_factor: float | None = Field(
        description="When saturated: how many times more than it can sustain is offered."
    )
    message: str | None
    simulated_requests: int
    measured_requests: int
    peak_running_requests: int
    goodput: GoodputOut | None = None
    disaggregation: DisaggregationOut | None = Field(
        default=None,
        description="With traffic.disaggregation: the pools; the percentiles are the group's, "
        "utilization the mean over its replicas, saturation the group's.",
    )
