"""Mamba2 layer widths on one tensor-parallel rank, its recurrent state and its scan FLOPs.

Shapes follow the Mamba2 block (Dao & Gu, "Transformers are SSMs", arXiv:2405.21060 §7.1) as
HF's NemotronHMamba2Mixer and vLLM's MambaMixer2 build it from the config fields
(mamba_num_heads H, mamba_head_dim P, ssm_state_size N, n_groups G, conv_kernel K).
"""

from __future__ import annotations

from dataclasses import dataclass

from service.engine.kernels import FloatArray, maximum, minimum, values
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape


@dataclass(frozen=True, slots=True)
class Mamba2Rank:
    """One Mamba2 layer's widths on one TP rank (heads split by tp, groups when tp divides G)."""

    heads: int  # H / tp
    head_dim: int  # P
    groups: int  # G / tp, or G replicated
    state_size: int  # N
    conv_kernel: int  # K
    chunk_tokens: int  # Q, the SSD chunk length

    @classmethod
    def of(cls, model: ModelShape, parallelism: Parallelism) -> Mamba2Rank:
        return cls(
            heads=parallelism.mamba_heads_per_gpu(model),
            head_dim=model.mamba_head_dim,
            groups=parallelism.mamba_groups_per_gpu(model),
            state_size=model.ssm_state_size,
            conv_kernel=model.mamba_conv_kernel,
            chunk_tokens=model.mamba_chunk_size,
        )

    @property
    def inner(self) -> int:
        """d_inner on this rank: H/tp × P."""
        return self.heads * self.head_dim

    @property
    def bc_width(self) -> int:
        """B and C projections: 2·G·N."""
        return 2 * self.groups * self.state_size

    @property
    def conv_channels(self) -> int:
        """The causal conv runs over x, B and C: d_inner + 2·G·N channels."""
        return self.inner + self.bc_width

    @property
    def in_proj_width(self) -> int:
        """in_proj output [z, x, B, C, dt]: 2·d_inner + 2·G·N + H columns."""
        return 2 * self.inner + self.bc_width + self.heads

    @property
    def ssm_state_elements(self) -> int:
        """Recurrent state per sequence: H × P × N."""
        return self.heads * self.head_dim * self.state_size

    @property
    def conv_state_elements(self) -> int:
        """Conv state per sequence: the last K − 1 inputs of every channel (vLLM
        MambaStateShapeCalculator.mamba2_state_shape: (conv_kernel − 1, conv_dim))."""
        return (self.conv_kernel - 1) * self.conv_channels

    def scan_flops_per_token(self, new_tokens: FloatArray) -> FloatArray:
        """FLOPs per token of the SSD chunked scan (arXiv:2405.21060 §6), chunk Q = min(Q, T).

        Per chunk of Q tokens: C·Bᵀ per group (Q·N MACs per token), the masked scores times
        x per head (Q·P), the chunk's states Bᵀ·x per head (N·P) and the states read out
        through C per head (N·P): 2·(G·Q·N + H·(Q·P + 2·N·P)). One new token (decode) is the
        recurrence h ← a·h + B·xᵀ, y = C·h: the same formula at Q = 1, ≈ 4·d_inner·N.
        """
        q = minimum(maximum(new_tokens, 1.0), float(self.chunk_tokens))
        n, p = float(self.state_size), float(self.head_dim)
        macs = self.groups * q * n + self.heads * (q * p + 2.0 * n * p)
        return values(2.0 * macs)


def conv_state_bytes_per_element(precision: Precision) -> float:
    """Bytes per conv state element: the model dtype.

    vLLM's MambaStateDtypeCalculator keeps the conv state in the model dtype unless
    --mamba-cache-dtype says otherwise (default "auto");
    https://docs.vllm.ai/en/v0.11.2/api/vllm/model_executor/layers/mamba/mamba_utils/
    """
    return precision.unquantized_bytes_per_element


def ssm_state_bytes_per_element(precision: Precision) -> float:
    """Bytes per SSM state element: ``precision.ssm_state``, the model dtype when ``auto``.

    vLLM's --mamba-ssm-cache-dtype (auto, float32, float16, bfloat16) sets the SSM state's
    dtype alone, the conv state keeping its own (CacheConfig.mamba_ssm_cache_dtype,
    https://docs.vllm.ai/en/latest/api/vllm/config/cache.html; MambaStateDtypeCalculator,
    https://docs.vllm.ai/en/v0.11.2/api/vllm/model_executor/layers/mamba/mamba_utils/).
    """
    return precision.ssm_state_bytes_per_element
