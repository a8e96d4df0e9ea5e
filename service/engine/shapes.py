"""Model shapes: every architecture field the FLOP, byte and KV-cache formulas need."""

from __future__ import annotations

from dataclasses import dataclass, replace

from service.engine.errors import InvalidShapeError

FFN_TYPES = ("glu", "mlp")  # gated 3-matrix (SwiGLU/GeGLU) or plain 2-matrix
QUANTIZED_LAYERS = ("all", "experts")  # native_quantized_layers: what the checkpoint quantizes
# Hybrid layer pattern letters (Nemotron-H ``hybrid_override_pattern``, HF NemotronHConfig):
# one block per letter, each a pre-norm and one mixer.
MAMBA, ATTENTION, MLP = "M", "*", "-"
LAYER_LETTERS = (MAMBA, ATTENTION, MLP)


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
    - Hybrid models (Nemotron-H) set ``layer_pattern``, one letter per layer: ``M`` a Mamba2
      mixer, ``*`` attention alone, ``-`` an FFN alone (each block has one pre-norm). Without a
      pattern every layer is attention followed by an FFN. Formulas use the counts only, not
      where the letters sit. A Mamba2 layer (arXiv:2405.21060 §7) has ``mamba_num_heads`` heads
      of ``mamba_head_dim`` (d_inner = heads × head_dim), ``mamba_n_groups`` groups of B/C
      projections of ``ssm_state_size`` (N), a causal depthwise conv of ``mamba_conv_kernel``
      taps over x, B and C, and a chunked scan of ``mamba_chunk_size`` tokens per chunk.
    - ``mtp_layers`` multi-token-prediction modules ship beside the main model (DeepSeek-V3
      ``num_nextn_predict_layers``; arXiv:2412.19437 §2.2). Each is one more decoder block of
      the last layer's kind (full attention, MoE when the model is MoE), the RMSNorms ``enorm``
      and ``hnorm`` of its two inputs, the projection ``eh_proj`` (2·hidden → hidden) and the
      norm of its output head; embedding and LM head are the main model's. They are not in
      ``num_layers`` and run only as a speculative drafter.
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
    # Which linear weights the shipped checkpoint stores in native_weights_dtype: "all", or
    # "experts" (only the routed experts; attention, shared experts and dense FFNs stay 16-bit,
    # as gpt-oss's MXFP4 checkpoints list them in quantization_config.modules_to_not_convert).
    native_quantized_layers: str = "all"
    # Hybrid attention + Mamba2 (Nemotron-H)
    layer_pattern: str = ""
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    ssm_state_size: int = 0
    mamba_n_groups: int = 0
    mamba_conv_kernel: int = 0
    mamba_chunk_size: int = 0
    # Multi-token prediction modules (DeepSeek-V3), used only as a speculative drafter
    mtp_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def quantizes_only_experts(self, weights_dtype: str) -> bool:
        """Whether weights in ``weights_dtype`` are the shipped checkpoint's, which holds only the
        routed experts in that dtype (``native_quantized_layers``): the other linear weights
        of the decoder layers then stay 16-bit. Another dtype is a requantisation of every
        linear weight."""
        return (
            self.native_quantized_layers == "experts" and weights_dtype == self.native_weights_dtype
        )

    @property
    def shared_expert_width(self) -> int:
        """Intermediate width of one shared expert (a routed expert's when not given)."""
        return self.shared_expert_intermediate_size or self.moe_intermediate_size

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_mamba_layers(self) -> int:
        return self.layer_pattern.count(MAMBA)

    @property
    def num_attention_layers(self) -> int:
        """Layers with an attention mixer (every layer unless a hybrid pattern says otherwise)."""
        return self.layer_pattern.count(ATTENTION) if self.layer_pattern else self.num_layers

    @property
    def num_ffn_layers(self) -> int:
        """Layers with an FFN (dense or MoE): every layer, or a hybrid pattern's ``-`` layers."""
        return self.layer_pattern.count(MLP) if self.layer_pattern else self.num_layers

    @property
    def num_moe_layers(self) -> int:
        return self.num_ffn_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.num_ffn_layers - self.num_moe_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_attention_layers - self.num_sliding_layers

    @property
    def mamba_inner_size(self) -> int:
        """d_inner = mamba_num_heads × mamba_head_dim (= expand × hidden_size in the config)."""
        return self.mamba_num_heads * self.mamba_head_dim

    def mtp_block(self) -> ModelShape:
        """Return one MTP module's decoder block as a one-layer model (same widths, shared
        vocabulary): MoE when the main model is, full attention."""
        return replace(
            self,
            id=f"{self.id}-mtp",
            num_layers=1,
            first_dense_layers=0,
            num_sliding_layers=0,
            sliding_window_tokens=0,
            mtp_layers=0,
        )

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
        if self.layer_pattern:
            self._validate_hybrid()
        if not 0 <= self.mtp_layers <= self.num_layers:
            raise InvalidShapeError("mtp_layers", "must be between 0 and num_layers")
        if self.mtp_layers and self.layer_pattern:
            raise InvalidShapeError("mtp_layers", "MTP modules of hybrid models are not modelled")
        if not 0 <= self.num_sliding_layers <= self.num_attention_layers:
            raise InvalidShapeError(
                "num_sliding_layers", "must be between 0 and the number of attention layers"
            )
        if self.num_sliding_layers and self.sliding_window_tokens <= 0:
            raise InvalidShapeError("sliding_window_tokens", "sliding layers need a window")
        if self.native_quantized_layers not in QUANTIZED_LAYERS:
            raise InvalidShapeError(
                "native_quantized_layers", f"must be one of {', '.join(QUANTIZED_LAYERS)}"
            )
        if self.native_quantized_layers == "experts" and not self.is_moe:
            raise InvalidShapeError("native_quantized_layers", "experts needs an MoE model")

    def _validate_hybrid(self) -> None:
        pattern = self.layer_pattern
        unknown = sorted(set(pattern) - set(LAYER_LETTERS))
        if unknown:
            raise InvalidShapeError(
                "layer_pattern",
                f"unsupported letters {unknown}; M (Mamba2), * (attention) and - (MLP) only",
            )
        if len(pattern) != self.num_layers:
            raise InvalidShapeError(
                "layer_pattern", f"has {len(pattern)} letters for {self.num_layers} layers"
            )
        if self.num_attention_layers == 0:
            raise InvalidShapeError("layer_pattern", "needs at least one attention layer (*)")
        if self.is_moe and not 0 <= self.first_dense_layers < self.num_ffn_layers:
            raise InvalidShapeError("first_dense_layers", "must be below the FFN layers")
        if self.num_mamba_layers:
            for name in (
                "mamba_num_heads",
                "mamba_head_dim",
                "ssm_state_size",
                "mamba_n_groups",
                "mamba_conv_kernel",
                "mamba_chunk_size",
            ):
                if getattr(self, name) <= 0:
                    raise InvalidShapeError(name, "must be positive for Mamba2 layers")
            if self.mamba_num_heads % self.mamba_n_groups:
                raise InvalidShapeError(
                    "mamba_n_groups",
                    f"must divide mamba_num_heads ({self.mamba_num_heads})",
                )
