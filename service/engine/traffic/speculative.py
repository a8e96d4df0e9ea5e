"""Speculative decoding: tokens gained per verify step from the draft length and acceptance.

A drafter (a small model, or MTP/EAGLE heads) proposes k tokens; the target model runs all
k + 1 positions in one step and keeps the accepted prefix plus one token of its own. With each
drafted token accepted independently with probability α, the expected tokens per step are

    E = (1 − α^(k+1)) / (1 − α)        (E = k + 1 at α = 1)

(Leviathan, Kalman and Matias, "Fast inference from transformers via speculative decoding",
ICML 2023, eq. 1). The verify step costs a decode step with k + 1 tokens per sequence
(the GEMMs see R·(k+1) rows, attention k + 1 queries, the LM head k + 1 logit rows).

Drafters (``DRAFTERS``):
- ``generic``: the drafter's own time and memory are not modelled (small for EAGLE heads, not
  for a separate draft model).
- ``mtp``: the model's own multi-token-prediction module drafts (DeepSeek-V3 ships one:
  arXiv:2412.19437 §2.2; vLLM ``speculative_config={"method": "mtp",
  "num_speculative_tokens": k}``, SGLang ``--speculative-algorithm EAGLE`` with the NextN
  module). Draft token i comes from one forward pass of the MTP block over the previous
  token, so a step of R decoding sequences at mean context c costs

      t_step = t_verify(R, k + 1, c) + k · t_mtp(R, c)

  where t_mtp is one decode step of the MTP block as a one-layer model (``ModelShape.mtp_block``:
  embedding lookup, the block's attention and MoE at R tokens, its decode attention over c,
  the shared LM head on R rows, per-layer and per-sequence host overheads; not the per-step
  overhead, which the target's step pays once). Not priced: eh_proj (2·d × d per token, 0.10B
  of DeepSeek-V3's 11.6B MTP weights) and the MTP block's pass over prompt tokens during
  prefill. Its weights (``memory.mtp_weight_bytes_per_gpu``) and its KV cache (one more
  attention layer) are held beside the model's.
"""

from __future__ import annotations

from service.engine.errors import EngineError

MAX_DRAFT_TOKENS = 16
GENERIC, MTP = "generic", "mtp"
DRAFTERS = (GENERIC, MTP)


def check_drafter(drafter: str, mtp_layers: int) -> None:
    """Raise EngineError unless ``drafter`` is known and, for ``mtp``, the model has MTP layers."""
    if drafter not in DRAFTERS:
        raise EngineError(f"speculative.drafter must be one of {', '.join(DRAFTERS)}")
    if drafter == MTP and mtp_layers <= 0:
        raise EngineError(
            "speculative.drafter mtp needs a model with MTP layers (mtp_layers > 0, "
            "num_nextn_predict_layers in its config); this model has none"
        )


def tokens_per_step(draft_tokens: int, acceptance_rate: float) -> float:
    """Return E = (1 − α^(k+1)) / (1 − α), the expected tokens per verify step."""
    if not 0 <= draft_tokens <= MAX_DRAFT_TOKENS:
        raise EngineError(f"speculative.draft_tokens must be between 0 and {MAX_DRAFT_TOKENS}")
    if not 0.0 <= acceptance_rate <= 1.0:
        raise EngineError("speculative.acceptance_rate must be in [0, 1]")
    if acceptance_rate == 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance_rate ** (draft_tokens + 1)) / (1.0 - acceptance_rate)
