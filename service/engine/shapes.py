"""Model shapes: every architecture field the FLOP, byte and KV-cache formulas need."""

from __future__ import annotations

from dataclasses import dataclass

from service.engine.errors import InvalidShapeError

FFN_TYPES = ("glu", "mlp")  # gated 3-matrix (SwiGLU/GeGLU) or plain 2-matrix


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A decoder-only transformer's shape.

    Conventions:
    - ``head_dim`` is the attention head width; q/o projection width is ``num_heads * head_dim``,
      which differs from ``hidden_size`` for Gemma-2/3, Qwen3 and gpt-oss.
    - Dense models have ``num_experts == 0``. For MoE models ``moe_intermediate_size`` is the width
      of one routed expert, ``num_shared_experts`` experts of ``shared_expert_intermediate_size``
      run for every token, and the first ``first_dense_layers`` layers use a dense FFN of
      ``intermediate_size``.
    - MLA (DeepSeek-V2/V3) is on when ``kv_lora_rank > 0``; the KV cache then stores
      ``kv_lora_rank + qk_rope_head_dim`` values per token per layer.
    - ``num_sliding_layers`` layers attend to at most ``sliding_window_tokens`` past tokens;
      the other layers attend to the full context.
    """

    id: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    name: str = ""
    family: str = ""
    tie_word_embeddings: bool = False
    ffn_type: str = "glu"
    attention_bias: bool = False  # bias on q/k/v projections (Qwen2, gpt-oss)
    output_bias: bool = False  # bias on the attention output projection (gpt-oss)
    mlp_bias: bool = False  # biases on FFN/expert matrices (OPT, gpt-oss experts)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma-3)
    # Mixture of experts
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    first_dense_layers: int = 0
    # Multi-head latent attention (DeepSeek)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # Sliding-window attention
    sliding_window_tokens: int = 0
    num_sliding_layers: int = 0
    max_context_tokens: int = 0
    native_weights_dtype: str = "bf16"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    @property
    def q_width(self) -> int:
        """Width of the query (and attention output) projection."""
        if self.is_mla:
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    def validate(self) -> None:
        """Raise InvalidShapeError naming the first inconsistent field."""
        for name in (
            "num_layers",
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "vocab_size",
        ):
            if getattr(self, name) <= 0:
                raise InvalidShapeError(name, "must be a positive integer")
        if self.intermediate_size < 0:
            raise InvalidShapeError("intermediate_size", "must not be negative")
        if self.num_heads % self.num_kv_heads:
            raise InvalidShapeError(
                "num_kv_heads",
                f"num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})",
            )
        if self.ffn_type not in FFN_TYPES:
            raise InvalidShapeError("ffn_type", f"must be one of {', '.join(FFN_TYPES)}")
        if self.is_moe:
            if not 0 < self.experts_per_token <= self.num_experts:
                raise InvalidShapeError(
                    "experts_per_token",
                    f"must be between 1 and num_experts ({self.num_experts})",
                )
            if self.moe_intermediate_size <= 0:
                raise InvalidShapeError("moe_intermediate_size", "must be positive for MoE")
            if not 0 <= self.first_dense_layers < self.num_layers:
                raise InvalidShapeError("first_dense_layers", "must be below num_layers")
        elif self.intermediate_size <= 0:
            raise InvalidShapeError("intermediate_size", "must be positive for a dense model")
        if self.num_dense_ffn_layers > 0 and self.intermediate_size <= 0:
            raise InvalidShapeError("intermediate_size", "dense FFN layers need a width")
        if self.is_mla and (self.qk_rope_head_dim <= 0 or self.v_head_dim <= 0):
            raise InvalidShapeError("qk_rope_head_dim", "MLA needs qk_rope_head_dim and v_head_dim")
        if not 0 <= self.num_sliding_layers <= self.num_layers:
            raise InvalidShapeError("num_sliding_layers", "must be between 0 and num_layers")
        if self.num_sliding_layers and self.sliding_window_tokens <= 0:
            raise InvalidShapeError("sliding_window_tokens", "sliding layers need a window")
