"""Count a model's parameters (total and active per token) from its shape."""

from __future__ import annotations

from dataclasses import dataclass

from service.engine.shapes import ModelShape


@dataclass(frozen=True, slots=True)
class ParameterCount:
    """Parameter counts of a decoder-only transformer, with a per-component breakdown.

    ``active`` counts what one token touches: the input embedding row table, attention, norms,
    dense FFNs, routers, the top-k routed experts plus shared experts, and the LM head. It
    includes the input embedding (the convention of docs/reference/models.md §4, e.g. DeepSeek-V3
    37.55B);
    ``active_excluding_embedding`` drops the input-embedding table (OpenAI's convention for
    gpt-oss, 5.13B for 120b) but keeps a tied table, which the LM head still multiplies by.
    Not counted: learned position embeddings (OPT), attention sinks (gpt-oss), LayerNorm
    biases and Gemma's extra post-norms (each well below 0.01% of the total).
    Hybrid models (``ModelShape.layer_pattern``) have one pre-norm per block: half of
    ``norms_per_layer`` on an attention or FFN block; ``mamba_per_layer`` includes its own.
    """

    total: int
    active: int
    active_excluding_embedding: int
    embedding: int  # input embedding table, vocab x hidden
    lm_head: int  # 0 when tied to the embedding
    attention_per_layer: int  # projections, biases, QK/MLA norms
    norms_per_layer: int  # pre-attention and pre-FFN norms
    dense_ffn_per_layer: int  # one dense FFN (0 when no layer has one)
    expert: int  # one routed expert (0 for dense models)
    shared_experts_per_layer: int
    router_per_layer: int
    final_norm: int
    num_dense_ffn_layers: int
    num_moe_layers: int
    num_experts: int
    mamba_per_layer: int = 0  # one Mamba2 mixer and its pre-norm (0 without Mamba2 layers)
    num_mamba_layers: int = 0
    mtp_per_module: int = 0  # one MTP module without the shared embedding and output head
    num_mtp_modules: int = 0

    @property
    def checkpoint_total(self) -> int:
        """Return the checkpoint's parameters: the main model and every MTP module, each with
        its stored copies of the embedding and output head (vocab × hidden each)."""
        per_module = self.mtp_per_module + 2 * self.embedding
        return self.total + self.num_mtp_modules * per_module

    @property
    def moe_per_layer(self) -> int:
        """All parameters of one MoE FFN block (every routed expert, shared experts, router)."""
        return (
            self.router_per_layer + self.shared_experts_per_layer + self.num_experts * self.expert
        )


def _attention(shape: ModelShape) -> int:
    h = shape.hidden_size
    if shape.is_mla:
        qk_head = shape.qk_nope_head_dim + shape.qk_rope_head_dim
        if shape.q_lora_rank > 0:
            # down-projection, its RMSNorm, up-projection to all heads
            q = h * shape.q_lora_rank + shape.q_lora_rank
            q += shape.q_lora_rank * shape.num_heads * qk_head
        else:
            q = h * shape.num_heads * qk_head
        # joint KV down-projection (+ shared RoPE key), its norm, K_nope/V up-projection
        kv = h * (shape.kv_lora_rank + shape.qk_rope_head_dim) + shape.kv_lora_rank
        kv += shape.kv_lora_rank * shape.num_heads * (shape.qk_nope_head_dim + shape.v_head_dim)
        out = shape.num_heads * shape.v_head_dim * h
        return q + kv + out + (h if shape.output_bias else 0)
    q_width = shape.num_heads * shape.head_dim
    kv_width = shape.num_kv_heads * shape.head_dim
    params = h * q_width + 2 * h * kv_width + q_width * h
    if shape.attention_bias:
        params += q_width + 2 * kv_width
    if shape.output_bias:
        params += h
    if shape.qk_norm:
        params += 2 * shape.head_dim
    return params


def mamba2_mixer_parameters(shape: ModelShape) -> int:
    """Parameters of one Mamba2 mixer (arXiv:2405.21060 §7.1; HF NemotronHMamba2Mixer).

    in_proj d → [z, x, B, C, dt] = 2·d_inner + 2·G·N + H columns; a depthwise causal conv of K
    taps (plus bias) over x, B and C (d_inner + 2·G·N channels); per head A_log, D and dt_bias;
    the gated RMSNorm over d_inner; out_proj d_inner → d. Nemotron-H has no projection biases.
    """
    d, inner = shape.hidden_size, shape.mamba_inner_size
    bc = 2 * shape.mamba_n_groups * shape.ssm_state_size
    heads = shape.mamba_num_heads
    in_proj = d * (2 * inner + bc + heads)
    conv = (inner + bc) * (shape.mamba_conv_kernel + 1)
    return in_proj + conv + 3 * heads + inner + inner * d


def _ffn(hidden: int, width: int, ffn_type: str, bias: bool) -> int:
    """Parameters of one FFN: GLU has gate, up and down matrices; a plain MLP has up and down."""
    if width <= 0:
        return 0
    if ffn_type == "glu":
        return 3 * hidden * width + ((2 * width + hidden) if bias else 0)
    return 2 * hidden * width + ((width + hidden) if bias else 0)


def count_parameters(shape: ModelShape) -> ParameterCount:
    """Count total and per-token active parameters of a model shape."""
    h = shape.hidden_size
    embedding = shape.vocab_size * h
    lm_head = 0 if shape.tie_word_embeddings else shape.vocab_size * h
    attention = _attention(shape)
    norms = 2 * h
    num_moe = shape.num_moe_layers
    num_dense = shape.num_dense_ffn_layers
    dense_ffn = _ffn(h, shape.intermediate_size, shape.ffn_type, shape.mlp_bias) if num_dense else 0
    expert = 0
    shared = 0
    router = 0
    if shape.is_moe:
        expert = _ffn(h, shape.moe_intermediate_size, shape.ffn_type, shape.mlp_bias)
        shared_width = shape.shared_expert_width
        shared = shape.num_shared_experts * _ffn(h, shared_width, shape.ffn_type, shape.mlp_bias)
        router = h * shape.num_experts + (shape.num_experts if shape.mlp_bias else 0)
    final_norm = h
    mamba = mamba2_mixer_parameters(shape) + h if shape.num_mamba_layers else 0
    if shape.layer_pattern:
        # One pre-norm per block: attention blocks and FFN blocks each carry one.
        blocks = shape.num_attention_layers * (attention + h) + shape.num_ffn_layers * h
        blocks += shape.num_mamba_layers * mamba
    else:
        blocks = shape.num_layers * (attention + norms)
    common = embedding + lm_head + blocks + final_norm
    common += num_dense * dense_ffn
    total = common + num_moe * (router + shared + shape.num_experts * expert)
    active = common + num_moe * (router + shared + shape.experts_per_token * expert)
    tied_head = embedding if shape.tie_word_embeddings else 0
    # One MTP module (arXiv:2412.19437 §2.2): a decoder block of the last layer's kind, enorm
    # and hnorm (h each), eh_proj (2h × h) and its output head's norm (h).
    block_ffn = router + shared + shape.num_experts * expert if shape.is_moe else dense_ffn
    mtp = attention + norms + block_ffn + 2 * h * h + 3 * h if shape.mtp_layers else 0
    return ParameterCount(
        total=total,
        active=active,
        active_excluding_embedding=active - embedding + tied_head,
        embedding=embedding,
        lm_head=lm_head,
        attention_per_layer=attention,
        norms_per_layer=norms,
        dense_ffn_per_layer=dense_ffn,
        expert=expert,
        shared_experts_per_layer=shared,
        router_per_layer=router,
        final_norm=final_norm,
        num_dense_ffn_layers=num_dense,
        num_moe_layers=num_moe,
        num_experts=shape.num_experts,
        mamba_per_layer=mamba,
        num_mamba_layers=shape.num_mamba_layers,
        mtp_per_module=mtp,
        num_mtp_modules=shape.mtp_layers,
    )
