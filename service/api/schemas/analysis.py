"""Request and response bodies of /v1/intensity, /v1/estimates and /v1/estimates/batch."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict

from service.api.schemas.common import JSON_INTEGER, NO_NUL_PATTERN, Dtype, Slug
from service.api.schemas.traffic import TrafficIn, TrafficOut
from service.engine.replicas import MAX_REPLICAS

# Limits of one request (api brief): batch sizes, points per sweep, tokens, parallel degrees.
MAX_BATCH_SIZE = 65_536
MAX_BATCH_SIZES = 1_024
MAX_TOKENS = 1_048_576
MAX_PARALLEL_DEGREE = 1_024
MAX_BATCH_ITEMS = 256

# Activation dtypes a GEMM can take (int4 activations are not a serving format).
ActivationDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
# Requested activations and KV cache: a dtype, or "auto" (what engines run the weights with on
# the accelerator, precision.default_activations and default_kv_cache).
ActivationDtypeIn = Literal["auto", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
KvCacheDtypeIn = Literal["auto", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
# Weights dtypes: every Dtype, or "native" (the model's shipped format).
WeightsDtype = Literal["native", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
# Mamba2 SSM state dtypes (vLLM --mamba-ssm-cache-dtype; engine/precision.py SSM_STATE_DTYPES).
SsmStateDtype = Literal["auto", "fp32", "fp16", "bf16"]
Phase = Literal["prefill", "decode"]
Mode = Literal["static", "serving"]
LoadPattern = Literal["closed_loop", "open_loop", "offline"]
Bound = Literal["memory", "compute", "communication"]
# JSON integers only: true, "8" or 1.5 are refused, not read as numbers.
BatchSize = Annotated[int, Field(strict=True, ge=1, le=MAX_BATCH_SIZE), JSON_INTEGER]
Tokens = Annotated[int, Field(strict=True, ge=1, le=MAX_TOKENS), JSON_INTEGER]
Degree = Annotated[int, Field(strict=True, ge=1, le=MAX_PARALLEL_DEGREE), JSON_INTEGER]
Replicas = Annotated[int, Field(strict=True, ge=1, le=MAX_REPLICAS), JSON_INTEGER]
Calibration = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=NO_NUL_PATTERN)
]
BACKEND_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Backend = Annotated[str, StringConstraints(pattern=BACKEND_PATTERN, max_length=50)]


class PrecisionIn(BaseModel):
    """Storage dtypes of weights, activations and KV cache.

    ``weights`` defaults to ``native``: the model's shipped format (``native_weights_dtype``:
    fp8 for DeepSeek-V3, fp4 (MXFP4) for gpt-oss, bf16 for most others). ``activations``
    defaults to ``auto``: fp8 beside fp8 weights and fp4 beside fp4 weights on an accelerator
    with that peak (engines run fp8 checkpoints as W8A8 and NVFP4 ones as W4A4 there), else
    16-bit (weight-only quantisation; ``precision.default_activations``). ``kv_cache`` defaults
    to ``auto``: the cache the request's backend keeps, fp8 beside fp8 or fp4 activations on
    TensorRT-LLM for weights quantized below the model's own dtype, else 16-bit
    (``precision.default_kv_cache``). An explicit dtype always wins.
    """

    model_config = ConfigDict(extra="forbid")

    weights: WeightsDtype = "native"
    activations: ActivationDtypeIn = "auto"
    kv_cache: KvCacheDtypeIn = "auto"
    ssm_state: SsmStateDtype | None = Field(
        default="auto",
        description="Dtype of the recurrent SSM state of Mamba2 layers (hybrid models such as "
        "Nemotron-H), like vLLM's --mamba-ssm-cache-dtype: auto (the model dtype, bf16) or "
        "fp32, fp16, bf16; null reads as auto (so an answer's precision can be sent back). "
        "The conv state stays in the model dtype. Ignored for models without Mamba2 layers "
        "(the answer's precision.ssm_state is then null).",
    )
    # Read-only (answers carry it), accepted and ignored so an answer's precision can be sent back.
    weights_source: Literal["native", "request"] | None = Field(default=None, exclude=True)


class PrecisionOut(BaseModel):
    """The precision an answer used (``native`` resolved to the model's dtype)."""

    weights: Dtype
    activations: ActivationDtype
    kv_cache: Dtype
    weights_source: Literal["native", "request"] = Field(
        description="native: the model's native_weights_dtype (no weights dtype was asked for)."
    )
    ssm_state: Literal["fp32", "fp16", "bf16"] | None = Field(
        default=None,
        description="The dtype the Mamba2 SSM state was held in (auto resolved to the model "
        "dtype); null for a model without Mamba2 layers, which ignores the request's value.",
    )


class LayoutIn(BaseModel):
    """Tensor, pipeline, expert and attention-data parallel degrees of one replica.

    A replica spans tp × attention_dp × pp GPUs. attention_dp (MoE models) replicates attention
    on attention_dp ranks of tp GPUs and shards the MoE layers over all tp × attention_dp GPUs;
    ep (≤ num_experts, dividing tp × attention_dp) may then exceed tp (wide EP).
    """

    model_config = ConfigDict(extra="forbid")

    tp: Degree = 1
    pp: Degree = 1
    ep: Degree = 1
    attention_dp: Degree = 1
    pp_virtual_stages: Degree = Field(
        default=1,
        description="Interleaved pipeline (Megatron-LM virtual stages): v chunks of layers per "
        "GPU, pp·v − 1 stage sends per pass (pp·v ≤ num_layers, v > 1 needs pp > 1). One "
        "batch's pipeline bubble stays (pp − 1)/pp: interleaving shortens it only for batches "
        "split into micro-batches.",
    )


class ParallelismIn(LayoutIn):
    """One replica's layout (see LayoutIn) and dp, the independent replicas of it deployed."""

    dp: Replicas = Field(
        default=1,
        description="Data-parallel replicas of the whole layout: latency per request is one "
        "replica's; rates, GPUs and fleet_usd_per_hour are dp times one replica's (intensity "
        "tables are per replica).",
    )


class AnalysisRequest(BaseModel):
    """Fields shared by the analysis requests."""

    model_config = ConfigDict(extra="forbid")

    model: Slug
    accelerator: Slug
    precision: PrecisionIn = Field(default_factory=PrecisionIn)
    parallelism: ParallelismIn = Field(default_factory=ParallelismIn)
    backend: Backend | None = Field(default=None, description="e.g. vllm, sglang, trtllm.")
    calibration: Calibration = Field(
        default="auto",
        description='"auto" (the newest profile for the accelerator and the request backend, '
        "else one fitted without a backend; with no backend named, only profiles fitted "
        'without one; else none), "none" (spec-sheet roofline) or a calibration profile id.',
    )


class IntensityRequest(AnalysisRequest):
    """Body of POST /v1/intensity: one prefill or decode step."""

    phase: Phase = "decode"
    batch_size: BatchSize = 1
    context_tokens: Tokens = Field(
        description="Prefill: prompt tokens per sequence; decode: tokens already cached."
    )


# Estimate rules JSON Schema can state (services/estimates.py checks them, naming the field).
_GIVEN_TRAFFIC: JsonDict = {"required": ["traffic"], "properties": {"traffic": {"type": "object"}}}
ESTIMATE_RULES: JsonDict = {
    # Points need batch sizes; a traffic-only request needs none.
    "anyOf": [
        {"required": ["batch_sizes"], "properties": {"batch_sizes": {"type": "array"}}},
        _GIVEN_TRAFFIC,
    ],
    "allOf": [
        {
            # The simulation runs one replica.
            "if": _GIVEN_TRAFFIC,
            "then": {"properties": {"parallelism": {"properties": {"dp": {"const": 1}}}}},
        },
        {
            # Open-loop and offline loads are serving questions (mode defaults to static).
            "if": {
                "required": ["load_pattern"],
                "properties": {"load_pattern": {"enum": ["open_loop", "offline"]}},
            },
            "then": {"required": ["mode"], "properties": {"mode": {"const": "serving"}}},
        },
    ],
}


class EstimateRequest(AnalysisRequest):
    """Body of POST /v1/estimates (and one item of POST /v1/estimates/batch)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=ESTIMATE_RULES)

    input_tokens: Tokens
    output_tokens: Tokens
    batch_sizes: list[BatchSize] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_BATCH_SIZES,
        description="Static: requests per batch; serving: concurrent requests in flight. "
        "Required unless `traffic` is given.",
    )
    mode: Mode = "static"
    load_pattern: LoadPattern = Field(
        default="closed_loop",
        description="Serving only: closed_loop (batch_sizes are concurrent clients, each "
        "sending its next request when the last ends), open_loop (requests arrive on their "
        "own, as a service's users send them; batch_sizes are the requests in flight on "
        "average, and each point's requests_per_s is the arrival rate that holds them) or "
        "offline (batch_sizes are requests queued at once; the engine runs as many as fit). "
        "Open-loop and offline answers use the engine's own terms only, not a profile's "
        "closed-loop harness terms.",
    )
    price_usd_per_hour: float | None = Field(
        default=None,
        strict=True,
        ge=0,
        allow_inf_nan=False,
        description="Per-GPU price overriding the catalog's indicative price.",
    )
    traffic: TrafficIn | None = Field(
        default=None,
        description="Open-loop traffic at a request rate: the answer adds percentiles, the "
        "saturation rate and, with `traffic.slo`, the goodput (docs/traffic.md).",
    )


class EstimateBatchRequest(BaseModel):
    """Body of POST /v1/estimates/batch; items are validated one by one."""

    model_config = ConfigDict(extra="forbid")

    items: list[Any] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class OperatorOut(BaseModel):
    """One operator row (or the total) of a step, per GPU, summed over its layers."""

    name: str
    kind: str
    flops: float
    bytes: float
    arithmetic_intensity_flop_per_byte: float
    bound: Bound
    time_ms: float


class WideningOut(BaseModel):
    """The interval widening of one extrapolation item, measured on held-out extrapolations.

    A band of half-width h (log) becomes √(h² + (1.2816·σ)²), σ the quadrature sum over the
    kinds a request extrapolates in, each once at its largest amount (per doubling:
    ``log_sigma`` × ``doublings``)."""

    kind: str = Field(
        description="Widening kind: model, model_kind, backend, mode, accelerator, "
        "concurrency_above/_below, length_above/_below, gpus_above/_below, load_pattern."
    )
    per_doubling: bool = Field(description="The spread is per doubling outside the range.")
    doublings: float | None = Field(
        description="log2 distance of `requested` outside the fitted range (numeric items)."
    )
    ttft_ms_log_sigma: float | None = Field(
        description="Log-spread added to the TTFT band (null: nothing measures this kind, "
        "which then does not widen it)."
    )
    ttft_ms_source: Literal["profile", "default", "transfer"] | None = Field(
        description="profile: measured on the profile's own runs; default: on the shipped "
        "benchmark (benchmarks/results/accuracy.md §11a); transfer: the accelerator transfer "
        "spread."
    )
    tpot_ms_log_sigma: float | None
    tpot_ms_source: Literal["profile", "default", "transfer"] | None


class ExtrapolationOut(BaseModel):
    """One dimension of the request outside what the profile was fitted on."""

    dimension: str = Field(
        description="accelerator, backend, mode, load_pattern, model, model_kind, hidden_size, "
        "layers, precision, batch_size or concurrency, input_tokens, output_tokens, gpus."
    )
    requested: float | str = Field(
        description="The requested value (for a sweep, the one farthest outside)."
    )
    fitted_low: float | None = Field(default=None, description="Fitted range, numeric dimensions.")
    fitted_high: float | None = None
    fitted_values: list[str] = Field(
        default_factory=list, description="Fitted values, categorical dimensions."
    )
    widening: WideningOut | None = Field(
        default=None,
        description="How far this item widens the 80% intervals (null: a profile stored "
        "before extrapolation spreads were measured).",
    )


class CalibrationOut(BaseModel):
    """The calibration profile an answer used."""

    id: str
    name: str
    backend: str | None = Field(
        default=None, description="The backend the profile was fitted on (null: none named)."
    )
    transferred_from: str | None = None
    reason: str | None = Field(
        default=None,
        description='Why this profile: named by id, or how "auto" chose it (a profile of the '
        "request's backend, else one fitted without a backend; a request naming no backend "
        "uses only profiles fitted without one; among those, one fitted on the request's "
        "model, else on a model of its kind (dense, MoE, MLA), else the newest).",
    )
    extrapolation: list[ExtrapolationOut] = Field(
        default_factory=list,
        description="What of this request lies outside the profile's fitted domain; the 80% "
        "intervals are widened by spreads measured on held-out extrapolations of each kind.",
    )


EfficiencyPrior = Literal["measured_matmul", "default"] | None
EFFICIENCY_PRIOR_FIELD: Any = Field(
    default=None,
    description="GEMM compute-efficiency prior: the accelerator's measured matmul fraction "
    "(MAMF / peak; also when it scaled a transferred profile), the H100-derived default, "
    "or null when a profile fitted on this accelerator supplies it.",
)
CALIBRATION_NOTE_FIELD: Any = Field(
    default=None,
    description="With calibration auto and no profile to take: why, and how many stored profiles "
    "it did not consider (other backends' for this accelerator; ones it could take, stored for "
    "other accelerators) with how to use them; null when a profile applies or the request "
    "asked for none.",
)


class IntensityResponse(BaseModel):
    """Answer of POST /v1/intensity."""

    model: str
    accelerator: str
    phase: Phase
    batch_size: int
    context_tokens: int
    precision: PrecisionOut
    parallelism: ParallelismIn
    compute_dtype: Dtype
    calibration: CalibrationOut | None
    calibration_note: str | None = CALIBRATION_NOTE_FIELD
    efficiency_prior: EfficiencyPrior = EFFICIENCY_PRIOR_FIELD
    ridge_point_flop_per_byte: float
    critical_batch_size: int | None = Field(
        description="Smallest decode batch whose weight GEMMs are compute-bound; null if none."
    )
    overhead_ms: float = Field(description="Fixed per-layer and per-step costs, in total.time_ms.")
    operators: list[OperatorOut]
    total: OperatorOut


class PhaseOut(BaseModel):
    """Arithmetic intensity and limiting term of one phase."""

    arithmetic_intensity_flop_per_byte: float
    bound: Bound


class MemoryOut(BaseModel):
    """Memory per GPU (decimal GB)."""

    weights_gb: float
    kv_cache_gb: float
    activations_gb: float
    runtime_overhead_gb: float
    total_gb: float
    capacity_gb: float
    usable_gb: float
    fits: bool


class CostOut(BaseModel):
    """Dollars per million tokens; null when no price is known."""

    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None


class EnergyOut(BaseModel):
    """Joules per token at full board power; null without a TDP."""

    per_output_token_j: float | None
    per_token_j: float | None


class PointOut(BaseModel):
    """Estimate at one batch size (static) or concurrency (serving) per replica.

    Latencies, memory, per-GPU rates and costs are one replica's; output_tokens_per_s,
    total_tokens_per_s and requests_per_s are of all parallelism.dp replicas (one's when dp=1).
    """

    batch_size: int
    running_batch_size: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    ttft_ms_p10: float | None = Field(
        default=None, description="Calibrated answers: 80% interval low end of ttft_ms."
    )
    ttft_ms_p90: float | None = Field(default=None, description="80% interval high end.")
    tpot_ms_p10: float | None = Field(
        default=None, description="Calibrated answers: 80% interval low end of tpot_ms."
    )
    tpot_ms_p90: float | None = Field(default=None, description="80% interval high end.")
    e2e_latency_ms: float | None
    queue_wait_ms: float | None
    admission_wait_ms: float | None = Field(
        description=(
            "Serving: part of ttft_ms spent waiting for the engine to take the prompt, "
            "admission_wait_steps decode steps: ½ at the prior (a request arrives mid-step), "
            "which open-loop and offline answers use; a calibrated closed-loop answer uses the "
            "wait fitted to its runs' load generator (fit.harness_terms). 0 for static batches "
            "and a lone client."
        )
    )
    prompts_ahead_ms: float | None = Field(
        description=(
            "Serving: part of ttft_ms spent on other requests' prompts that run before this "
            "request's first token. ttft_ms = queue_wait_ms + admission_wait_ms + "
            "prompts_ahead_ms + the request's own prompt."
        )
    )
    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    requests_per_s: float | None
    output_tokens_per_s_per_gpu: float | None
    decode: PhaseOut
    prefill: PhaseOut
    memory: MemoryOut
    cost: CostOut
    energy: EnergyOut


class EstimateResponse(BaseModel):
    """Answer of POST /v1/estimates: one point per requested batch size, in request order."""

    model: str
    accelerator: str
    mode: Mode
    load_pattern: LoadPattern
    backend: str | None
    precision: PrecisionOut
    parallelism: ParallelismIn
    compute_dtype: Dtype
    input_tokens: int
    output_tokens: int
    gpus_per_replica: int
    calibration: CalibrationOut | None
    calibration_note: str | None = CALIBRATION_NOTE_FIELD
    efficiency_prior: EfficiencyPrior = EFFICIENCY_PRIOR_FIELD
    ridge_point_flop_per_byte: float
    critical_batch_size: int | None
    max_batch_size: int = Field(description="Sequences whose KV cache fits beside the weights.")
    price_usd_per_hour: float | None = Field(description="Per-GPU price used for cost.")
    usd_per_hour: float | None = Field(description="Price of one replica.")
    gpus: int = Field(description="GPUs of all dp replicas (dp × gpus_per_replica).")
    fleet_usd_per_hour: float | None = Field(description="Price of all dp replicas.")
    points: list[PointOut]
    traffic: TrafficOut | None = Field(
        default=None, description="Present when the request gave `traffic`."
    )


class ProblemOut(BaseModel):
    """An RFC 9457 problem for one batch item."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, str]] | None = None


class EstimateBatchResponse(BaseModel):
    """Answer of POST /v1/estimates/batch: one result per item, in request order."""

    items: list[EstimateResponse | ProblemOut]
