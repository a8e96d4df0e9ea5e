"""Model (architecture shape) request and response bodies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.api.schemas.common import Dtype, Slug, SourceUrl

NonNegative = Field(default=0, ge=0)


class ModelFields(BaseModel):
    """Editable model facts: the transformer shape fields of ``ModelShape`` plus provenance."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    family: str = Field(default="", max_length=100)
    hf_repo: str | None = Field(default=None, max_length=200)
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    ffn_type: str = Field(default="glu", description="`glu` (gated, 3 matrices) or `mlp`.")
    attention_bias: bool = False
    output_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    num_experts: int = NonNegative
    experts_per_token: int = NonNegative
    num_shared_experts: int = NonNegative
    moe_intermediate_size: int = NonNegative
    shared_expert_intermediate_size: int = NonNegative
    first_dense_layers: int = NonNegative
    q_lora_rank: int = NonNegative
    kv_lora_rank: int = NonNegative
    qk_nope_head_dim: int = NonNegative
    qk_rope_head_dim: int = NonNegative
    v_head_dim: int = NonNegative
    sliding_window_tokens: int = NonNegative
    num_sliding_layers: int = NonNegative
    max_context_tokens: int = NonNegative
    native_weights_dtype: Dtype = "bf16"
    vendor_stated_params: Any = None
    notes: str = ""
    sources: list[SourceUrl] = Field(default_factory=list)
    field_sources: dict[str, list[str]] = Field(default_factory=dict)
    # Read-only fields, accepted (and ignored) so a GET body can be sent back on PUT.
    total_params: int | None = Field(default=None, exclude=True)
    active_params: int | None = Field(default=None, exclude=True)
    origin: str | None = Field(default=None, exclude=True)
    version: int | None = Field(default=None, exclude=True)
    created_at: str | None = Field(default=None, exclude=True)
    updated_at: str | None = Field(default=None, exclude=True)


class ModelCreate(ModelFields):
    """Body of POST /v1/models."""

    id: Slug


class ModelReplace(ModelFields):
    """Body of PUT /v1/models/{id}; ``id`` may be omitted but must match if given."""

    id: Slug | None = None


class ModelImport(BaseModel):
    """Body of POST /v1/models/import: a Hugging Face config.json and the id to store it under."""

    model_config = ConfigDict(extra="forbid")

    id: Slug
    hf_config: dict[str, Any]
    name: str | None = Field(default=None, max_length=200)
    hf_repo: str | None = Field(default=None, max_length=200)
    sources: list[SourceUrl] | None = None


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
