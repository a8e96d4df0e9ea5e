"""Model (architecture shape) request and response bodies."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    WithJsonSchema,
    field_validator,
)
from pydantic.config import JsonDict

from service.api.schemas.common import JSON_INTEGER, READ_ONLY, Dtype, Slug, SourceUrl
from service.engine.errors import InvalidShapeError
from service.engine.hf_import import SUPPORTED_MODEL_TYPES, shape_from_hf_config
from service.engine.shapes import FFN_TYPES


def count(low: int, high: int) -> Any:
    """Return a JSON-integer constraint ``low <= n <= high`` (no booleans, strings or 1.5)."""
    return Field(strict=True, ge=low, le=high)


# Upper bounds far above the reference catalog (largest: 126 layers, hidden 16,384, FFN 53,248,
# 256 experts, vocabulary 262,208, context 163,840) yet low enough that the parameter count of
# the largest accepted shape stays below 2**63 (the BIGINT column).
MAX_LAYERS = 1_024
MAX_WIDTH = 131_072
MAX_HEADS = 4_096
MAX_FFN_WIDTH = 1_048_576
MAX_EXPERTS = 4_096
MAX_VOCAB = 16_777_216
MAX_CONTEXT_TOKENS = 1_073_741_824

Layers = Annotated[int, count(1, MAX_LAYERS), JSON_INTEGER]
Width = Annotated[int, count(1, MAX_WIDTH), JSON_INTEGER]
Heads = Annotated[int, count(1, MAX_HEADS), JSON_INTEGER]
HeadDim = Annotated[int, count(1, MAX_HEADS), JSON_INTEGER]
FfnWidth = Annotated[int, count(0, MAX_FFN_WIDTH), JSON_INTEGER]
Vocab = Annotated[int, count(1, MAX_VOCAB), JSON_INTEGER]
OptionalLayers = Annotated[int, count(0, MAX_LAYERS), JSON_INTEGER]
OptionalExperts = Annotated[int, count(0, MAX_EXPERTS), JSON_INTEGER]
OptionalRank = Annotated[int, count(0, MAX_WIDTH), JSON_INTEGER]
OptionalHeadDim = Annotated[int, count(0, MAX_HEADS), JSON_INTEGER]
OptionalTokens = Annotated[int, count(0, MAX_CONTEXT_TOKENS), JSON_INTEGER]
StrictCount = Annotated[int, Field(strict=True, ge=0), JSON_INTEGER]
FfnType = Literal["glu", "mlp"]
assert get_args(FfnType) == FFN_TYPES  # one list of FFN types


def finite_json(value: Any, field: str) -> Any:
    """Return ``value`` unchanged; raise ValueError if it nests a NaN or infinite number."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{field} must not contain NaN or infinite numbers")
    if isinstance(value, dict):
        for item in value.values():
            finite_json(item, field)
    if isinstance(value, list):
        for item in value:
            finite_json(item, field)
    return value


# Shape rules JSON Schema can state (ModelShape.validate checks these and the ones it cannot,
# which compare two fields' values: num_kv_heads divides num_heads, experts_per_token <=
# num_experts, first_dense_layers below num_layers, num_sliding_layers at most num_layers).
SHAPE_RULES: JsonDict = {
    "allOf": [
        {
            # MoE with leading dense layers: those layers need a dense FFN width.
            "if": {
                "properties": {
                    "num_experts": {"minimum": 1},
                    "first_dense_layers": {"minimum": 1},
                },
                "required": ["num_experts", "first_dense_layers"],
            },
            "then": {
                "properties": {"intermediate_size": {"minimum": 1}},
                "required": ["intermediate_size"],
            },
        },
        {
            # Only an MoE checkpoint can quantize its experts alone.
            "if": {
                "properties": {"native_quantized_layers": {"const": "experts"}},
                "required": ["native_quantized_layers"],
            },
            "then": {"properties": {"num_experts": {"minimum": 1}}, "required": ["num_experts"]},
        },
        {
            # MLA (kv_lora_rank > 0) needs its rope and value head widths.
            "if": {"properties": {"kv_lora_rank": {"minimum": 1}}, "required": ["kv_lora_rank"]},
            "then": {
                "properties": {"qk_rope_head_dim": {"minimum": 1}, "v_head_dim": {"minimum": 1}},
                "required": ["qk_rope_head_dim", "v_head_dim"],
            },
        },
        {
            "if": {"properties": {"num_experts": {"const": 0}}},
            "then": {
                "properties": {"intermediate_size": {"minimum": 1}},
                "required": ["intermediate_size"],
            },
        },
        {
            "if": {"properties": {"num_experts": {"minimum": 1}}, "required": ["num_experts"]},
            "then": {
                "properties": {
                    "experts_per_token": {"minimum": 1},
                    "moe_intermediate_size": {"minimum": 1},
                },
                "required": ["experts_per_token", "moe_intermediate_size"],
            },
        },
        {
            "if": {
                "properties": {"num_sliding_layers": {"minimum": 1}},
                "required": ["num_sliding_layers"],
            },
            "then": {
                "properties": {"sliding_window_tokens": {"minimum": 1}},
                "required": ["sliding_window_tokens"],
            },
        },
    ]
}


class ModelFields(BaseModel):
    """Editable model facts: the transformer shape fields of ``ModelShape`` plus provenance."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    family: str = Field(default="", max_length=100)
    hf_repo: str | None = Field(default=None, max_length=200)
    num_layers: Layers
    hidden_size: Width
    num_heads: Heads
    num_kv_heads: Heads
    head_dim: HeadDim
    intermediate_size: FfnWidth
    vocab_size: Vocab
    tie_word_embeddings: StrictBool = False
    ffn_type: FfnType = Field(default="glu", description="`glu` (gated, 3 matrices) or `mlp`.")
    attention_bias: StrictBool = False
    output_bias: StrictBool = False
    mlp_bias: StrictBool = False
    qk_norm: StrictBool = False
    num_experts: OptionalExperts = 0
    experts_per_token: OptionalExperts = 0
    num_shared_experts: OptionalExperts = 0
    moe_intermediate_size: FfnWidth = 0
    shared_expert_intermediate_size: FfnWidth = 0
    first_dense_layers: OptionalLayers = 0
    q_lora_rank: OptionalRank = 0
    kv_lora_rank: OptionalRank = 0
    qk_nope_head_dim: OptionalHeadDim = 0
    qk_rope_head_dim: OptionalHeadDim = 0
    v_head_dim: OptionalHeadDim = 0
    sliding_window_tokens: OptionalTokens = 0
    num_sliding_layers: OptionalLayers = 0
    max_context_tokens: OptionalTokens = 0
    native_weights_dtype: Dtype = "bf16"
    native_quantized_layers: Literal["all", "experts"] = Field(
        default="all",
        description="Which linear weights the shipped checkpoint stores in native_weights_dtype: "
        "`all`, or `experts` (only the routed experts; attention, shared experts and dense FFNs "
        "stay 16-bit, as in gpt-oss's MXFP4 checkpoints). Applies when an estimate's weights "
        "are that dtype; any other weights dtype quantizes every linear weight.",
    )
    layer_pattern: str = Field(
        default="",
        max_length=MAX_LAYERS,
        pattern=r"^[M*-]*$",
        description="Hybrid models: one letter per layer, `M` Mamba2, `*` attention, `-` FFN "
        "(Nemotron-H hybrid_override_pattern); empty: every layer is attention + FFN.",
    )
    mamba_num_heads: OptionalRank = 0
    mamba_head_dim: OptionalHeadDim = 0
    ssm_state_size: OptionalHeadDim = 0
    mamba_n_groups: OptionalHeadDim = 0
    mamba_conv_kernel: OptionalHeadDim = 0
    mamba_chunk_size: OptionalTokens = 0
    mtp_layers: OptionalLayers = Field(
        default=0,
        description="Multi-token-prediction modules shipped beside the main model (DeepSeek-V3 "
        "num_nextn_predict_layers): one decoder block each, used only as a speculative drafter.",
    )
    vendor_stated_params: Any = None
    notes: str = ""
    sources: list[SourceUrl] = Field(default_factory=list)
    field_sources: dict[str, list[str]] = Field(default_factory=dict)
    # Read-only fields (readOnly in the document), accepted and ignored so that a GET body
    # can be sent back on PUT.
    total_params: StrictCount | None = Field(
        default=None, exclude=True, json_schema_extra=READ_ONLY
    )
    active_params: StrictCount | None = Field(
        default=None, exclude=True, json_schema_extra=READ_ONLY
    )
    origin: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    version: StrictCount | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    created_at: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    updated_at: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)

    @field_validator("vendor_stated_params")
    @classmethod
    def _finite_stated_params(cls, value: Any) -> Any:
        """Refuse NaN or infinity, which no JSON response can carry."""
        return finite_json(value, "vendor_stated_params")


class ModelCreate(ModelFields):
    """Body of POST /v1/models."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=SHAPE_RULES)

    id: Slug


class ModelReplace(ModelFields):
    """Body of PUT /v1/models/{id}; ``id`` may be omitted but must match if given."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=SHAPE_RULES)

    id: Slug | None = Field(
        default=None, json_schema_extra=READ_ONLY, description="The id in the path, if given."
    )


class ModelImport(BaseModel):
    """Body of POST /v1/models/import: a Hugging Face config.json and the id to store it under."""

    model_config = ConfigDict(extra="forbid")

    id: Slug
    hf_config: Annotated[
        dict[str, Any],
        WithJsonSchema(
            {
                "type": "object",
                "description": "The config.json contents; the importer reads the keys of its "
                "model_type's family and ignores the others.",
                "required": ["model_type"],
                "properties": {
                    "model_type": {"type": "string", "enum": list(SUPPORTED_MODEL_TYPES)}
                },
            }
        ),
    ]
    name: str | None = Field(default=None, max_length=200)
    hf_repo: str | None = Field(default=None, max_length=200)
    sources: list[SourceUrl] | None = None

    @field_validator("hf_config")
    @classmethod
    def _bounded_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Refuse a readable config whose shape exceeds the bounds (the config is not stored)."""
        try:
            shape = shape_from_hf_config("import", value)
        except (InvalidShapeError, TypeError, ValueError, OverflowError):
            return value  # the catalog reports why the config cannot be read
        fields = {f.name: getattr(shape, f.name) for f in dataclasses.fields(shape)}
        bounded = {k: v for k, v in fields.items() if k in ModelFields.model_fields}
        try:
            ModelFields.model_validate(bounded)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"gives {name} = {first['input']!r}: {first['msg']}") from None
        return value


class Model(ModelFields):
    """A model as the API returns it, with parameter counts computed from the shape."""

    model_config = ConfigDict(extra="allow")

    id: str
    sources: list[str] = Field(default_factory=list)
    total_params: int | None = None
    active_params: int | None = None
    origin: str | None = None
    version: int | None = None
    created_at: str | None = None
    updated_at: str | None = None
