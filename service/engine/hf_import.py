"""Build a ModelShape from a Hugging Face ``config.json`` (decoder-only LLM families)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from service.engine.errors import InvalidShapeError
from service.engine.shapes import ModelShape

_MISSING: Any = object()

# model_types that exist but whose architecture this importer cannot represent faithfully.
# Hybrid families with MoE or other recurrent mixers: the engine models Mamba2 mixers (with a
# dense or MoE FFN on a pattern's FFN blocks), not these layer kinds, and no real config of
# them is among the fixtures (tests/data/hf_configs) to pin their keys.
_DSA = (
    "DeepSeek Sparse Attention (an indexer choosing index_topk KV tokens per query) "
    "on MLA, with MoE FFNs"
)
_GATED_DELTANET = (
    "Gated DeltaNet linear-attention layers (layer_types linear_attention) interleaved with "
    "gated full attention"
)
_KNOWN_UNSUPPORTED = {
    "gemma4": "per-layer head widths and shared K/V layers",
    # Jamba (arXiv:2403.19887 §2): Mamba-1 mixers (selective scan with a dt_rank projection,
    # not Mamba2's SSD), attention every attn_layer_period layers, MoE every
    # expert_layer_period layers (HF JambaConfig).
    "jamba": "Mamba-1 mixers (not Mamba2), attention every attn_layer_period layers and MoE "
    "FFNs every expert_layer_period layers",
    # Qwen3-Next (HF Qwen3NextConfig): Gated DeltaNet linear attention on 3 of 4 layers, gated
    # full attention on the 4th, an MoE FFN with a shared expert on every layer.
    "qwen3_next": "Gated DeltaNet linear-attention layers (layer_types linear_attention) and "
    "gated attention, with MoE FFNs",
    # Granite 4.0 (HF GraniteMoeHybridConfig): Mamba2 and attention blocks (layer_types), MoE
    # FFNs with a shared expert.
    "granitemoehybrid": "Mamba2/attention layer_types with MoE FFNs and shared experts",
    # Falcon-H1 (HF FalconH1Config): attention and Mamba2 heads side by side in every layer.
    "falcon_h1": "parallel attention and Mamba2 mixers within each layer",
    # GLM-5 (HF GlmMoeDsaConfig, transformers models/glm_moe_dsa/configuration_glm_moe_dsa.py):
    # every layer is DeepSeek Sparse Attention (layer_types deepseek_sparse_attention): an
    # indexer (index_n_heads × index_head_dim) picks index_topk KV tokens per query, on MLA
    # (q/kv LoRA ranks) with MoE FFNs after first_k_dense_replace dense layers.
    "glm_moe_dsa": _DSA,
    # Qwen3.5 (HF Qwen3_5MoeTextConfig / Qwen3_5TextConfig, transformers models/qwen3_5_moe
    # and models/qwen3_5): Gated DeltaNet linear attention on 3 of 4 layers (layer_types
    # linear_attention, full_attention_interval 4), gated full attention (attn_output_gate) on
    # the 4th; MoE FFNs with a shared expert (qwen3_5_moe) or dense FFNs (qwen3_5). The top
    # level is a vision-language wrapper with a nested text_config.
    "qwen3_5_moe": _GATED_DELTANET + ", with MoE FFNs and a shared expert",
    "qwen3_5_moe_text": _GATED_DELTANET + ", with MoE FFNs and a shared expert",
    "qwen3_5": _GATED_DELTANET + ", with dense FFNs",
    "qwen3_5_text": _GATED_DELTANET + ", with dense FFNs",
}


@dataclass(frozen=True, slots=True)
class _Config:
    """A config mapping that reports bad keys as InvalidShapeError with the key's full name."""

    data: Mapping[str, object]
    prefix: str = ""

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, default: Any = _MISSING, *, allow_zero: bool = False) -> int:
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise InvalidShapeError(self.name(key), "required key is missing")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidShapeError(self.name(key), f"must be an integer, got {value!r}")
        if value < 0 or (value == 0 and not allow_zero):
            raise InvalidShapeError(self.name(key), f"must be positive, got {value}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InvalidShapeError(self.name(key), f"must be true or false, got {value!r}")
        return value

    def str_list(self, key: str) -> list[str] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidShapeError(self.name(key), "must be a list of strings")
        return list(value)

    def int_list(self, key: str) -> list[int]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise InvalidShapeError(self.name(key), "must be a list of integers")
        return list(value)

    def sub(self, key: str) -> _Config:
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            raise InvalidShapeError(self.name(key), "required mapping is missing")
        return _Config(value, f"{self.prefix}{key}.")


def _attention_core(cfg: _Config) -> dict[str, int]:
    """Layers, widths, heads and vocabulary shared by every supported family."""
    hidden = cfg.integer("hidden_size")
    layers = cfg.integer("num_hidden_layers")
    heads = cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads", heads)
    if heads % kv_heads:
        raise InvalidShapeError(
            cfg.name("num_key_value_heads"),
            f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})",
        )
    if cfg.has("head_dim"):
        head_dim = cfg.integer("head_dim")
    elif hidden % heads:
        raise InvalidShapeError(cfg.name("head_dim"), "missing and hidden_size % heads != 0")
    else:
        head_dim = hidden // heads
    return {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": cfg.integer("vocab_size"),
        "max_context_tokens": cfg.integer("max_position_embeddings", 0, allow_zero=True),
    }


def _sliding_from_layer_types(cfg: _Config, layers: int) -> int | None:
    """Count sliding-attention layers from ``layer_types`` when the config lists them."""
    types = cfg.str_list("layer_types")
    if types is None:
        return None
    if len(types) != layers:
        raise InvalidShapeError(
            cfg.name("layer_types"), f"has {len(types)} entries for {layers} layers"
        )
    unknown = set(types) - {"sliding_attention", "full_attention"}
    if unknown:
        raise InvalidShapeError(cfg.name("layer_types"), f"unsupported types {sorted(unknown)}")
    return types.count("sliding_attention")


def _window_on_all_layers(cfg: _Config, layers: int) -> dict[str, int]:
    """Mistral/Phi-3 style: a non-null ``sliding_window`` applies to every layer."""
    if not cfg.has("sliding_window"):
        return {}
    return {"sliding_window_tokens": cfg.integer("sliding_window"), "num_sliding_layers": layers}


def _qwen_window(cfg: _Config, layers: int) -> dict[str, int]:
    """Qwen2/3: layers from ``max_window_layers`` on use the window, only if enabled."""
    if not cfg.flag("use_sliding_window", False) or not cfg.has("sliding_window"):
        return {}
    sliding = _sliding_from_layer_types(cfg, layers)
    if sliding is None:
        full = min(cfg.integer("max_window_layers", layers, allow_zero=True), layers)
        sliding = layers - full
    if sliding == 0:
        return {}
    return {"sliding_window_tokens": cfg.integer("sliding_window"), "num_sliding_layers": sliding}


def _weights_dtype(cfg: _Config) -> str:
    """FP8 checkpoints (DeepSeek-V3, Kimi-K2) ship 1-byte weights, MXFP4 ones (gpt-oss) 4-bit
    weights with 8-bit block scales; everything else is BF16 here."""
    quant = cfg.data.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, Mapping) else None
    return {"fp8": "fp8", "mxfp4": "fp4"}.get(str(method), "bf16")


def _attention_not_quantized(cfg: _Config) -> bool:
    """Whether a quantized checkpoint keeps its attention weights out of the quantization
    (``quantization_config.modules_to_not_convert`` names them: gpt-oss's MXFP4 lists
    ``model.layers.*.self_attn``), so only the routed experts are stored quantized."""
    quant = cfg.data.get("quantization_config")
    skipped = quant.get("modules_to_not_convert") if isinstance(quant, Mapping) else None
    if not isinstance(skipped, list):
        return False
    return any(
        isinstance(m, str) and m.rsplit(".", 1)[-1] in ("self_attn", "attn") for m in skipped
    )


def _experts(cfg: _Config, count_key: str, topk_key: str) -> dict[str, int]:
    experts = cfg.integer(count_key)
    top_k = cfg.integer(topk_key)
    if top_k > experts:
        raise InvalidShapeError(
            cfg.name(topk_key), f"{top_k} experts per token exceeds {count_key} ({experts})"
        )
    return {"num_experts": experts, "experts_per_token": top_k}


def _dense(cfg: _Config) -> dict[str, object]:
    core = _attention_core(cfg)
    model_type = cfg.data["model_type"]
    fields: dict[str, object] = {**core, "intermediate_size": cfg.integer("intermediate_size")}
    layers = core["num_layers"]
    if model_type == "llama":
        bias = cfg.flag("attention_bias", False)  # HF Llama applies it to q, k, v and o
        fields.update(attention_bias=bias, output_bias=bias, mlp_bias=cfg.flag("mlp_bias", False))
    elif model_type == "qwen2":
        fields.update(attention_bias=True, **_qwen_window(cfg, layers))  # q/k/v bias, no o bias
    elif model_type == "qwen3":
        bias = cfg.flag("attention_bias", False)
        fields.update(attention_bias=bias, output_bias=bias, qk_norm=True)
        fields.update(_qwen_window(cfg, layers))
    else:  # mistral, phi3
        fields.update(_window_on_all_layers(cfg, layers))
    return fields


def _mixtral(cfg: _Config) -> dict[str, object]:
    core = _attention_core(cfg)
    return {
        **core,
        "intermediate_size": 0,
        "moe_intermediate_size": cfg.integer("intermediate_size"),  # Mixtral: per-expert width
        **_experts(cfg, "num_local_experts", "num_experts_per_tok"),
        **_window_on_all_layers(cfg, core["num_layers"]),
    }


def _qwen3_moe(cfg: _Config) -> dict[str, object]:
    core = _attention_core(cfg)
    layers = core["num_layers"]
    if cfg.integer("decoder_sparse_step", 1) != 1:
        raise InvalidShapeError(cfg.name("decoder_sparse_step"), "only 1 (every layer MoE)")
    dense_layers = cfg.int_list("mlp_only_layers")
    if dense_layers != list(range(len(dense_layers))) or len(dense_layers) >= layers:
        raise InvalidShapeError(
            cfg.name("mlp_only_layers"), "only a leading run of dense layers is supported"
        )
    bias = cfg.flag("attention_bias", False)
    return {
        **core,
        # The dense width is used by no layer unless mlp_only_layers is non-empty.
        "intermediate_size": cfg.integer("intermediate_size") if dense_layers else 0,
        "first_dense_layers": len(dense_layers),
        "moe_intermediate_size": cfg.integer("moe_intermediate_size"),
        **_experts(cfg, "num_experts", "num_experts_per_tok"),
        "attention_bias": bias,
        "output_bias": bias,
        "qk_norm": True,
        **_qwen_window(cfg, layers),
    }


def _deepseek(cfg: _Config) -> dict[str, object]:
    core = _attention_core(cfg)
    if cfg.integer("moe_layer_freq", 1) != 1:
        raise InvalidShapeError(
            cfg.name("moe_layer_freq"), "only 1 (every layer after the dense ones)"
        )
    nope = cfg.integer("qk_nope_head_dim")
    rope = cfg.integer("qk_rope_head_dim")
    shared = cfg.integer("n_shared_experts", 0, allow_zero=True)
    expert_width = cfg.integer("moe_intermediate_size")
    first_dense = cfg.integer("first_k_dense_replace", 0, allow_zero=True)
    if first_dense >= core["num_layers"]:
        raise InvalidShapeError(
            cfg.name("first_k_dense_replace"), "must be below num_hidden_layers"
        )
    return {
        **core,
        "head_dim": nope + rope,  # query/key head width; the cache holds the latent instead
        "intermediate_size": cfg.integer("intermediate_size") if first_dense else 0,
        "first_dense_layers": first_dense,
        **_experts(cfg, "n_routed_experts", "num_experts_per_tok"),
        "num_shared_experts": shared,
        "moe_intermediate_size": expert_width,
        "shared_expert_intermediate_size": expert_width if shared else 0,
        "q_lora_rank": cfg.integer("q_lora_rank", 0, allow_zero=True),
        "kv_lora_rank": cfg.integer("kv_lora_rank"),
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": cfg.integer("v_head_dim"),
        "attention_bias": cfg.flag("attention_bias", False),
        # MTP modules shipped in the checkpoint (DeepSeek-V3 README_WEIGHTS.md; Kimi-K2 has 0)
        "mtp_layers": cfg.integer("num_nextn_predict_layers", 0, allow_zero=True),
    }


def _gemma(cfg: _Config) -> dict[str, object]:
    model_type = cfg.data["model_type"]
    if model_type == "gemma3":
        text = cfg.sub("text_config")
        tie_default = cfg.flag("tie_word_embeddings", True)
    else:
        text = cfg
        tie_default = True
    gemma3 = model_type != "gemma2"
    if gemma3:
        # Gemma3TextConfig defaults, used when real Gemma-3 configs omit the key.
        text = _Config(
            {"vocab_size": 262208, "max_position_embeddings": 131072, **text.data}, text.prefix
        )
    core = _attention_core(text)
    layers = core["num_layers"]
    sliding = _sliding_from_layer_types(text, layers)
    if sliding is None and gemma3:
        pattern = text.integer("sliding_window_pattern", 6)  # every pattern-th layer is global
        sliding = layers - layers // pattern
    elif sliding is None:
        sliding = (layers + 1) // 2  # Gemma-2 alternates local/global, starting local
    return {
        **core,
        "intermediate_size": text.integer("intermediate_size"),
        "tie_word_embeddings": text.flag("tie_word_embeddings", tie_default),
        "qk_norm": gemma3,
        "attention_bias": text.flag("attention_bias", False),
        "output_bias": text.flag("attention_bias", False),
        "sliding_window_tokens": text.integer("sliding_window") if sliding else 0,
        "num_sliding_layers": sliding,
    }


def _gpt_oss(cfg: _Config) -> dict[str, object]:
    core = _attention_core(cfg)
    layers = core["num_layers"]
    sliding = _sliding_from_layer_types(cfg, layers)
    if sliding is None:
        sliding = (layers + 1) // 2  # alternating, starting with a sliding layer
    bias = cfg.flag("attention_bias", True)
    return {
        **core,
        "intermediate_size": 0,
        "moe_intermediate_size": cfg.integer("intermediate_size"),  # per-expert width
        **_experts(cfg, "num_local_experts", "num_experts_per_tok"),
        "attention_bias": bias,
        "output_bias": bias,
        "mlp_bias": True,  # expert gate_up/down projections carry biases
        "sliding_window_tokens": cfg.integer("sliding_window") if sliding else 0,
        "num_sliding_layers": sliding,
    }


def _llama4(cfg: _Config) -> dict[str, object]:
    """Llama 4 (Scout, Maverick): MoE every ``interleave_moe_layer_step`` layers with one shared
    expert, dense layers of ``intermediate_size_mlp`` between them, and chunked local attention
    (``attention_chunk_size``) on the RoPE layers (3 of 4 by default; the 4th is global NoPE).

    Approximations: chunked attention (a query sees the keys of its own chunk) is priced as a
    sliding window of the chunk size, an upper bound on the keys read; the formulas do not
    depend on where the dense layers sit, so they are counted as ``first_dense_layers``; the
    qk L2 norm has no weights.
    """
    text = cfg.sub("text_config") if cfg.has("text_config") else cfg
    core = _attention_core(text)
    layers = core["num_layers"]
    step = text.integer("interleave_moe_layer_step", 1)
    moe_layers = layers // step  # layers step−1, 2·step−1, … are MoE (HF Llama4TextConfig)
    rope_flags = text.int_list("no_rope_layers")
    if rope_flags and len(rope_flags) != layers:
        raise InvalidShapeError(text.name("no_rope_layers"), f"must list {layers} layers")
    chunked = sum(rope_flags) if rope_flags else sum(1 for i in range(layers) if (i + 1) % 4)
    chunk = text.integer("attention_chunk_size", 0, allow_zero=True)
    expert_width = text.integer("intermediate_size")
    dense_layers = layers - moe_layers
    return {
        **core,
        "intermediate_size": text.integer("intermediate_size_mlp") if dense_layers else 0,
        "first_dense_layers": dense_layers,
        "moe_intermediate_size": expert_width,
        **_experts(text, "num_local_experts", "num_experts_per_tok"),
        "num_shared_experts": 1,
        "shared_expert_intermediate_size": expert_width,
        "attention_bias": text.flag("attention_bias", False),
        "output_bias": text.flag("attention_bias", False),
        "sliding_window_tokens": chunk if chunk and chunked else 0,
        "num_sliding_layers": chunked if chunk else 0,
        "tie_word_embeddings": text.flag("tie_word_embeddings", False),
    }


def _nemotron_h(cfg: _Config) -> dict[str, object]:
    """Nemotron-H (HF NemotronHConfig): ``hybrid_override_pattern`` names each block's mixer
    (M = Mamba2, * = attention, - = MLP); the MLP is a plain up/down pair (relu²); attention
    heads are ``attention_head_dim`` wide."""
    pattern = cfg.data.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern:
        raise InvalidShapeError(cfg.name("hybrid_override_pattern"), "required string is missing")
    unknown = sorted(set(pattern) - {"M", "*", "-"})
    if unknown:
        # Nemotron-3 configs add E (MoE blocks); no real Nemotron-3 config.json is among the
        # fixtures to pin its expert keys, so the importer refuses it rather than guess them.
        moe = " (E: MoE FFN blocks, whose expert keys are not read)" if "E" in unknown else ""
        raise InvalidShapeError(
            cfg.name("hybrid_override_pattern"),
            f"unsupported block letters {unknown}{moe}; M (Mamba2), * (attention), - (MLP) "
            "only; a model shape may give its MoE blocks as - with num_experts (every FFN "
            "block after first_dense_layers is then MoE)",
        )
    data = dict(cfg.data)
    if cfg.has("attention_head_dim"):
        data.setdefault("head_dim", data["attention_head_dim"])
    core = _attention_core(_Config(data, cfg.prefix))
    if len(pattern) != core["num_layers"]:
        raise InvalidShapeError(
            cfg.name("hybrid_override_pattern"),
            f"has {len(pattern)} letters for num_hidden_layers {core['num_layers']}",
        )
    heads = cfg.integer("mamba_num_heads")
    head_dim = cfg.integer("mamba_head_dim")
    expand = cfg.integer("expand", 2)
    if heads * head_dim != expand * core["hidden_size"]:
        raise InvalidShapeError(
            cfg.name("mamba_num_heads"),
            f"mamba_num_heads × mamba_head_dim ({heads * head_dim}) must equal expand × "
            f"hidden_size ({expand * core['hidden_size']})",
        )
    if cfg.flag("mamba_proj_bias", False) or cfg.flag("mlp_bias", False):
        raise InvalidShapeError(cfg.name("mamba_proj_bias"), "projection biases are not modelled")
    return {
        **core,
        "intermediate_size": cfg.integer("intermediate_size"),
        "ffn_type": "mlp",
        "attention_bias": cfg.flag("attention_bias", False),
        "output_bias": cfg.flag("attention_bias", False),
        "layer_pattern": pattern,
        "mamba_num_heads": heads,
        "mamba_head_dim": head_dim,
        "ssm_state_size": cfg.integer("ssm_state_size"),
        "mamba_n_groups": cfg.integer("n_groups"),
        "mamba_conv_kernel": cfg.integer("conv_kernel"),
        "mamba_chunk_size": cfg.integer("chunk_size"),
        **_window_on_all_layers(cfg, pattern.count("*")),
    }


_FAMILIES: dict[str, Callable[[_Config], dict[str, object]]] = {
    "llama": _dense,
    "mistral": _dense,
    "qwen2": _dense,
    "qwen3": _dense,
    "phi3": _dense,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek,
    "kimi_k2": _deepseek,  # Kimi-K2 uses the DeepSeek-V3 architecture
    "gemma2": _gemma,
    "gemma3": _gemma,
    "gemma3_text": _gemma,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "nemotron_h": _nemotron_h,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))


def _unsupported_reason(model_type: str) -> str:
    """Say what of a refused architecture the engine does not model."""
    return _KNOWN_UNSUPPORTED.get(model_type, "unknown architecture")


def shape_from_hf_config(model_id: str, config: Mapping[str, object]) -> ModelShape:
    """Translate a Hugging Face config.json mapping into a validated ModelShape."""
    if not isinstance(config, Mapping):
        raise InvalidShapeError("config", "must be a JSON object")
    model_type = config.get("model_type")
    if model_type is None:
        raise InvalidShapeError("model_type", "required key is missing")
    if not isinstance(model_type, str):
        raise InvalidShapeError("model_type", f"must be a string, got {model_type!r}")
    builder = _FAMILIES.get(model_type)
    if builder is None:
        reason = _unsupported_reason(model_type)
        raise InvalidShapeError(
            "model_type",
            f"unsupported model_type {model_type!r} ({reason}); "
            f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}",
        )
    cfg = _Config(config)
    fields = builder(cfg)
    fields.setdefault("tie_word_embeddings", cfg.flag("tie_word_embeddings", False))
    fields.setdefault("native_weights_dtype", _weights_dtype(cfg))
    if fields.get("num_experts") and _attention_not_quantized(cfg):
        fields.setdefault("native_quantized_layers", "experts")
    shape = ModelShape(id=model_id, name=model_id, family=model_type, **fields)  # type: ignore[arg-type]
    shape.validate()
    return shape
