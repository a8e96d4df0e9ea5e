"""Accelerator memory per GPU: weights (+ scales), KV cache, activation peak, runtime overhead."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.engine.accelerator_stack import AcceleratorStack
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray, Hardware, floor, minimum, values, where
from service.engine.mamba import (
    Mamba2Rank,
    conv_state_bytes_per_element,
    ssm_state_bytes_per_element,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

# Fraction of device memory the serving engine may use (vLLM's gpu_memory_utilization default).
DEFAULT_MEMORY_UTILIZATION = 0.90
# CUDA context, communication buffers and CUDA graphs per GPU. Engineering prior (not from the
# reference files): vLLM typically logs 1–2 GB of non-torch memory plus graph pools on H100.
RUNTIME_OVERHEAD_BYTES = 1.5e9
# Logits are produced in fp32.
_LOGIT_BYTES = 4.0


def hardware_capacity_bytes(hardware: Hardware) -> float | FloatArray:
    """Return device memory of one accelerator (decimal GB × 1e9), or per point of a stack."""
    if isinstance(hardware, AcceleratorStack):
        return hardware.capacity_bytes
    return hardware.memory_bytes


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Weight bytes held by one GPU, split by how they are stored."""

    quantized_bytes: float  # decoder-layer linear weights in the weights dtype, scales included
    unquantized_bytes: float  # embeddings, LM head, router, norms (16-bit)

    @property
    def total_bytes(self) -> float:
        return self.quantized_bytes + self.unquantized_bytes


def _attention_params(model: ModelShape, parallelism: Parallelism) -> tuple[float, float]:
    """Return (sharded, replicated) attention weights per layer on one TP rank."""
    m, tp = model, float(parallelism.tp)
    d = m.hidden_size
    if m.is_mla:
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        latent = m.kv_lora_rank + m.qk_rope_head_dim
        if m.q_lora_rank > 0:
            replicated = d * (m.q_lora_rank + latent)
            sharded = m.q_lora_rank * m.num_heads * qk_dim
        else:
            replicated = d * latent
            sharded = d * m.num_heads * qk_dim
        sharded += m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
        sharded += m.num_heads * m.v_head_dim * d
        return sharded / tp, float(replicated)
    q_o = 2.0 * d * m.num_heads * m.head_dim / tp
    kv = 2.0 * d * parallelism.kv_heads_per_gpu(model) * m.head_dim
    bias = 0.0
    if m.attention_bias:
        bias += (m.num_heads / tp + 2 * parallelism.kv_heads_per_gpu(model)) * m.head_dim
    if m.output_bias:
        bias += d
    return q_o + kv + bias, 0.0


def _ffn_params(model: ModelShape, width: float) -> float:
    """Return weights of one gated or plain MLP of ``width`` columns (biases when configured)."""
    d = model.hidden_size
    matrices = 3.0 if model.ffn_type == "glu" else 2.0
    bias = ((matrices - 1.0) * width + d) if model.mlp_bias else 0.0
    return matrices * d * width + bias


def _norm_params(model: ModelShape) -> float:
    """Return norm weights per layer (2 RMSNorms, q/k norms, MLA latent norms)."""
    m = model
    per_layer = 2.0 * m.hidden_size
    if m.qk_norm:
        per_layer += 2.0 * m.head_dim
    if m.is_mla:
        per_layer += m.kv_lora_rank + m.q_lora_rank
    return per_layer


def _mamba_params(model: ModelShape, parallelism: Parallelism) -> tuple[float, float]:
    """Return (projection, other) weights of one Mamba2 layer on one TP rank.

    in_proj (d × in_proj width) and out_proj (d_inner × d) are column/row sharded like
    attention (param_count.mamba2_mixer_parameters has the whole layer); the conv taps and bias,
    per-head A_log, D and dt_bias, the gated norm and the block's pre-norm stay 16-bit.
    """
    r, d = Mamba2Rank.of(model, parallelism), model.hidden_size
    projections = d * r.in_proj_width + r.inner * d
    other = r.conv_channels * (r.conv_kernel + 1) + 3 * r.heads + r.inner + d
    return float(projections), float(other)


def _layer_elements(
    model: ModelShape, parallelism: Parallelism, weights_dtype: str
) -> tuple[float, float]:
    """Return (quantized, 16-bit) weights of all decoder layers on one TP rank (every stage).

    With a checkpoint that quantizes only its routed experts
    (``ModelShape.quantizes_only_experts``), the other linear weights count as 16-bit.
    """
    m, tp = model, float(parallelism.tp)
    attn_sharded, attn_replicated = _attention_params(m, parallelism)
    linear = m.num_attention_layers * (attn_sharded + attn_replicated)  # besides routed experts
    experts = 0.0
    if m.layer_pattern:
        # One pre-norm per attention or FFN block (Mamba2 blocks count theirs below).
        norms = _norm_params(m) - m.hidden_size
        unquantized = m.num_attention_layers * norms + m.num_ffn_layers * m.hidden_size
    else:
        unquantized = m.num_layers * _norm_params(m)
    if m.num_mamba_layers:
        projections, other = _mamba_params(m, parallelism)
        linear += m.num_mamba_layers * projections
        unquantized += m.num_mamba_layers * other
    if m.num_dense_ffn_layers:
        linear += m.num_dense_ffn_layers * _ffn_params(m, m.intermediate_size / tp)
    if m.is_moe:
        # ceil(E / ep) routed experts per GPU, each split (tp × attention_dp) / ep ways.
        split = parallelism.moe_group_gpus / parallelism.ep
        per_layer = parallelism.experts_per_gpu(m) * _ffn_params(m, m.moe_intermediate_size / split)
        experts = m.num_moe_layers * per_layer
        if m.num_shared_experts:
            shared = _ffn_params(m, m.num_shared_experts * m.shared_expert_width / tp)
            linear += m.num_moe_layers * shared
        unquantized += m.num_moe_layers * m.hidden_size * m.num_experts  # router, replicated
    if m.quantizes_only_experts(weights_dtype):
        return experts, unquantized + linear
    return linear + experts, unquantized


def weight_bytes_per_gpu(
    model: ModelShape, precision: Precision, parallelism: Parallelism = Parallelism()
) -> WeightBytes:
    """Return weight bytes on the most loaded GPU (largest pipeline stage, one TP rank).

    All experts stay resident. Embedding and LM head are vocab-parallel; with pp > 1 the first
    stage holds the embedding and the last the LM head, so a GPU holds one vocab matrix.
    MTP modules are not included (``mtp_weight_bytes_per_gpu``: only when they draft).
    """
    m, tp = model, float(parallelism.tp)
    stage_fraction = parallelism.layers_per_stage(m) / m.num_layers
    quantized, unquantized = _layer_elements(m, parallelism, precision.weights)
    vocab_matrix = m.vocab_size * m.hidden_size / tp
    vocab = vocab_matrix if parallelism.pp > 1 or m.tie_word_embeddings else 2.0 * vocab_matrix
    return WeightBytes(
        quantized_bytes=quantized * stage_fraction * precision.weight_bytes_per_element,
        unquantized_bytes=(unquantized * stage_fraction + vocab + m.hidden_size)
        * precision.unquantized_bytes_per_element,
    )


def mtp_weight_bytes_per_gpu(
    model: ModelShape, precision: Precision, parallelism: Parallelism = Parallelism()
) -> WeightBytes:
    """Return the weight bytes one GPU adds to hold the model's MTP modules as a drafter.

    Per module: its decoder block, sharded like a main layer (``ModelShape.mtp_block``), plus
    eh_proj (2·d × d) and three RMSNorms (enorm, hnorm, the head's norm) in 16 bits on every
    rank (vLLM's DeepSeekMultiTokenPredictorLayer builds eh_proj as a plain, unsharded
    nn.Linear: vllm/model_executor/models/deepseek_mtp.py). Embedding and output head are the
    main model's (arXiv:2412.19437 §2.2), so they are not held twice. The modules are counted
    whole on the most loaded GPU, whatever the pipeline stage they sit on.
    """
    if not model.mtp_layers:
        return WeightBytes(0.0, 0.0)
    quantized, unquantized = _layer_elements(model.mtp_block(), parallelism, precision.weights)
    d = model.hidden_size
    unquantized += 2.0 * d * d + 3.0 * d
    n = model.mtp_layers
    return WeightBytes(
        quantized_bytes=n * quantized * precision.weight_bytes_per_element,
        unquantized_bytes=n * unquantized * precision.unquantized_bytes_per_element,
    )


@dataclass(frozen=True, slots=True)
class KvBytesPerToken:
    """KV-cache bytes per token on one GPU: full-context layers and window-capped layers, plus
    the fixed recurrent state a sequence holds whatever its length (Mamba2 layers)."""

    full_bytes: float
    windowed_bytes: float
    window_tokens: int
    state_bytes_per_sequence: float = 0.0

    @property
    def per_token_bytes(self) -> float:
        """Return bytes per token while the context is below the window."""
        return self.full_bytes + self.windowed_bytes

    def for_context(self, context_tokens: npt.ArrayLike) -> FloatArray:
        """Return KV (and recurrent-state) bytes of one sequence holding ``context_tokens``."""
        s = values(context_tokens)
        windowed = minimum(s, float(self.window_tokens)) if self.window_tokens > 0 else s
        return values(
            self.full_bytes * s + self.windowed_bytes * windowed + self.state_bytes_per_sequence,
        )


def kv_cache_bytes_per_token(
    model: ModelShape, precision: Precision, parallelism: Parallelism = Parallelism()
) -> KvBytesPerToken:
    """Return KV-cache bytes per token on one GPU.

    GQA/MHA: 2·n_kv·d_h·b_kv per layer (KV heads split by tp, at least one per rank).
    MLA: (kv_lora_rank + qk_rope_head_dim)·b_kv per layer, replicated on every TP rank.
    Only attention layers cache K/V; each Mamba2 layer holds a fixed state per sequence instead
    (``mamba_state_bytes_per_sequence``).
    """
    m = model
    b = precision.kv_bytes_per_element
    stage_fraction = parallelism.layers_per_stage(m) / m.num_layers
    if m.is_mla:
        per_layer = (m.kv_lora_rank + m.qk_rope_head_dim) * b
    else:
        per_layer = 2.0 * parallelism.kv_heads_per_gpu(m) * m.head_dim * b
    return KvBytesPerToken(
        full_bytes=per_layer * m.num_full_attention_layers * stage_fraction,
        windowed_bytes=per_layer * m.num_sliding_layers * stage_fraction,
        window_tokens=m.sliding_window_tokens if m.num_sliding_layers else 0,
        state_bytes_per_sequence=mamba_state_bytes_per_sequence(m, precision, parallelism),
    )


def mamba_state_bytes_per_sequence(
    model: ModelShape, precision: Precision, parallelism: Parallelism = Parallelism()
) -> float:
    """Return the recurrent state one sequence holds on one GPU, whatever its length.

    Per Mamba2 layer on a TP rank: the SSM state (H/tp)·P·N in ``precision.ssm_state``
    (mamba.ssm_state_bytes_per_element) plus the conv state (K − 1)·(d_inner/tp + 2·G_rank·N)
    in the model dtype (mamba.conv_state_bytes_per_element).
    """
    if not model.num_mamba_layers:
        return 0.0
    r = Mamba2Rank.of(model, parallelism)
    layers = model.num_mamba_layers * parallelism.layers_per_stage(model) / model.num_layers
    per_layer = r.ssm_state_elements * ssm_state_bytes_per_element(
        precision
    ) + r.conv_state_elements * conv_state_bytes_per_element(precision)
    return float(layers * per_layer)


def activation_bytes(
    model: ModelShape,
    precision: Precision,
    parallelism: Parallelism,
    *,
    step_tokens: npt.ArrayLike,
    logit_rows: npt.ArrayLike,
) -> FloatArray:
    """Return the activation peak of a step on one GPU.

    Per token in flight: residual + normed hidden state (2·d) and the widest intermediate (gate and
    up outputs of the FFN or the routed experts, 2·F/tp) in the activation dtype; plus fp32 logits
    for one row per sequence (vocab/tp wide).
    """
    m, tp = model, float(parallelism.tp)
    if m.is_moe:
        shared = m.num_shared_experts * m.shared_expert_width
        widest = m.experts_per_token * m.moe_intermediate_size + shared
        widest = max(widest, m.intermediate_size if m.num_dense_ffn_layers else 0)
    else:
        widest = m.intermediate_size
    qkv = m.q_width + 2 * m.num_kv_heads * m.head_dim
    if m.num_mamba_layers:
        qkv = max(qkv, Mamba2Rank.of(m, Parallelism()).in_proj_width)  # in_proj output
    per_token = (2.0 * m.hidden_size + max(2.0 * widest, qkv) / tp) * max(
        precision.activation_bytes_per_element, 2.0
    )
    logits = values(logit_rows) * m.vocab_size / tp * _LOGIT_BYTES
    return values(values(step_tokens) * per_token + logits)


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Memory per GPU, in bytes, and whether it fits the usable capacity."""

    weights_bytes: float
    kv_cache_bytes: FloatArray
    activations_bytes: FloatArray
    runtime_overhead_bytes: float
    capacity_bytes: float | FloatArray
    usable_bytes: float | FloatArray

    @property
    def total_bytes(self) -> FloatArray:
        return values(
            self.weights_bytes
            + self.kv_cache_bytes
            + self.activations_bytes
            + self.runtime_overhead_bytes
        )

    @property
    def fits(self) -> npt.NDArray[np.bool_]:
        fits = self.total_bytes <= self.usable_bytes
        return fits if isinstance(fits, bool) else np.asarray(fits)


def memory_breakdown(
    model: ModelShape,
    accelerator: Hardware,
    *,
    precision: Precision,
    parallelism: Parallelism,
    sequences: npt.ArrayLike,
    context_tokens: npt.ArrayLike,
    step_tokens: npt.ArrayLike,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> MemoryBreakdown:
    """Return memory per GPU for ``sequences`` holding ``context_tokens`` each.

    With attention_dp ranks the GPUs of the busiest rank hold the KV cache and activations of
    its ceil(sequences / attention_dp) sequences (``Parallelism.sequences_on_busiest_dp_rank``)
    and their share of the step tokens.
    """
    weights, kv_per_token = _weights_and_kv(model, precision, parallelism)
    all_sequences = values(sequences)
    per_rank = parallelism.sequences_on_busiest_dp_rank(all_sequences)
    some = all_sequences > 0
    rank_share = where(some, per_rank / where(some, all_sequences, 1.0), 0.0)
    kv = per_rank * kv_per_token.for_context(context_tokens)
    act = activation_bytes(
        model,
        precision,
        parallelism,
        step_tokens=values(step_tokens) * rank_share,
        logit_rows=per_rank,
    )
    capacity = hardware_capacity_bytes(accelerator)
    return MemoryBreakdown(
        weights_bytes=weights,
        kv_cache_bytes=kv,
        activations_bytes=act,
        runtime_overhead_bytes=RUNTIME_OVERHEAD_BYTES,
        capacity_bytes=capacity,
        usable_bytes=capacity * memory_utilization,
    )


@functools.lru_cache(maxsize=1024)
def _weights_and_kv(
    model: ModelShape, precision: Precision, parallelism: Parallelism
) -> tuple[float, KvBytesPerToken]:
    """Return (weight bytes per GPU, KV bytes per token): they depend on the layout only."""
    weights = weight_bytes_per_gpu(model, precision, parallelism).total_bytes
    return weights, kv_cache_bytes_per_token(model, precision, parallelism)


@functools.lru_cache(maxsize=1024)
def _per_replica_constants(
    model: ModelShape, precision: Precision, parallelism: Parallelism, step_tokens: float
) -> tuple[float, float, KvBytesPerToken, float]:
    """Return (weights, activations at ``step_tokens``, KV bytes per token, one logit row)."""
    weights = weight_bytes_per_gpu(model, precision, parallelism).total_bytes
    act = float(
        activation_bytes(model, precision, parallelism, step_tokens=step_tokens, logit_rows=0.0)
    )
    kv = kv_cache_bytes_per_token(model, precision, parallelism)
    logit_row = float(
        activation_bytes(model, precision, parallelism, step_tokens=0.0, logit_rows=1.0)
    )
    return weights, act, kv, logit_row


@dataclass(frozen=True, slots=True)
class KvBudget:
    """KV-cache room of one GPU beside weights, a step's activations and runtime memory, and
    what one request takes of it: KV bytes per token (attention layers only; the share in
    sliding-window layers stops growing past the window) and a fixed recurrent state per
    request whatever its length (Mamba2 layers)."""

    free_bytes: float
    per_token_bytes: float
    state_bytes_per_request: float = 0.0
    windowed_bytes_per_token: float = 0.0  # of per_token_bytes, in window-capped layers
    window_tokens: int = 0

    @property
    def windowed_share(self) -> float:
        """Return the share of a token's KV bytes held in sliding-window layers."""
        return self.windowed_bytes_per_token / self.per_token_bytes

    @property
    def tokens(self) -> float:
        """Return the tokens of KV cache that fit (no request's state counted)."""
        return max(self.free_bytes, 0.0) / self.per_token_bytes

    @property
    def state_tokens_per_request(self) -> float:
        """Return a request's fixed state in tokens of KV cache (0 without Mamba2 layers)."""
        return self.state_bytes_per_request / self.per_token_bytes

    def requests(self, tokens_per_request: float) -> int:
        """Return how many requests of ``tokens_per_request`` tokens each fit, state included."""
        if self.free_bytes <= 0:
            return 0
        need = self.per_token_bytes * tokens_per_request + self.state_bytes_per_request
        return math.floor(self.free_bytes / need)


def kv_budget(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    step_tokens: float,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
    mtp: bool = False,
) -> KvBudget:
    """Return the KV cache one GPU holds beside weights, step activations and runtime memory.

    free = usable − weights − activations of a ``step_tokens`` step − runtime overhead (as
    ``max_batch_size``, without its per-sequence logit row, which the step's activations
    cover). KV bytes per token count the attention layers only; those of sliding-window layers
    stop growing past the window (``KvBudget.windowed_share``: vLLM's hybrid KV-cache manager,
    SGLang's SWA pool and TensorRT-LLM's cyclic cache keep a window's pages per request in
    those layers). Each request also holds its Mamba2 state
    (``mamba_state_bytes_per_sequence``), a fixed cost whatever its length, taken from the
    same pool: vLLM's hybrid KV-cache manager carves attention pages and Mamba state pages
    out of one block pool (https://docs.vllm.ai/en/latest/design/hybrid_kv_cache_manager/).
    With ``mtp`` the MTP modules draft: their weights are held too and each token also caches
    their attention.
    """
    weights, act, kv, _ = _per_replica_constants(model, precision, parallelism, float(step_tokens))
    per_token = kv.per_token_bytes
    if mtp:
        weights += mtp_weight_bytes_per_gpu(model, precision, parallelism).total_bytes
        block = kv_cache_bytes_per_token(model.mtp_block(), precision, parallelism)
        per_token += model.mtp_layers * block.per_token_bytes
    usable = float(accelerator.memory_bytes) * memory_utilization
    free = usable - weights - act - RUNTIME_OVERHEAD_BYTES
    return KvBudget(
        free, per_token, kv.state_bytes_per_sequence, kv.windowed_bytes, kv.window_tokens
    )


def max_batch_size(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    context_tokens: float,
    step_tokens: float,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> int:
    """Return floor((usable − weights − activations − overhead) / bytes per sequence), at least 0.

    Activations are taken at ``step_tokens`` (the largest step the engine runs, per
    attention-DP rank); each sequence costs its KV cache at ``context_tokens`` plus one fp32
    logit row; attention_dp ranks each hold that many.
    """
    _, _, kv, logit_row = _per_replica_constants(model, precision, parallelism, float(step_tokens))
    free = kv_budget(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        step_tokens=step_tokens,
        memory_utilization=memory_utilization,
    ).free_bytes
    if free <= 0:
        return 0
    s = float(context_tokens)
    windowed = min(s, float(kv.window_tokens)) if kv.window_tokens > 0 else s
    per_sequence = (
        kv.full_bytes * s + kv.windowed_bytes * windowed + kv.state_bytes_per_sequence + logit_row
    )
    # Each attention-DP rank holds its own sequences' caches.
    return math.floor(free / per_sequence) * parallelism.attention_dp


def max_batch_sizes(
    model: ModelShape,
    accelerator: Hardware,
    *,
    precision: Precision,
    parallelism: Parallelism,
    context_tokens: npt.ArrayLike,
    step_tokens: float,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> FloatArray:
    """Return ``max_batch_size`` elementwise over contexts (and a stack's points), as floats."""
    weights, act, kv, logit_row = _per_replica_constants(
        model, precision, parallelism, float(step_tokens)
    )
    capacity = hardware_capacity_bytes(accelerator) * memory_utilization
    free = capacity - weights - act - RUNTIME_OVERHEAD_BYTES
    per_sequence = kv.for_context(context_tokens) + logit_row
    per_rank = where(free > 0, floor(free / per_sequence), 0.0)
    return values(per_rank * parallelism.attention_dp)
