"""Speculative decoding: tokens gained per verify step from the draft length and acceptance.

A drafter (a small model, or MTP/EAGLE heads) proposes k tokens; the target model runs all
k + 1 positions in one step and keeps the accepted prefix plus one token of its own. With each
drafted token accepted independently with probability α, the expected tokens per step are

    E = (1 − α^(k+1)) / (1 − α)        (E = k + 1 at α = 1)

(Leviathan, Kalman and Matias, "Fast inference from transformers via speculative decoding",
ICML 2023, eq. 1). The verify step costs a decode step with k + 1 tokens per sequence
(the GEMMs see R·(k+1) rows, attention k + 1 queries, the LM head k + 1 logit rows); the
drafter's own time is not modelled (small for MTP/EAGLE heads, not for a separate draft model).
"""

from __future__ import annotations

from service.engine.errors import EngineError

MAX_DRAFT_TOKENS = 16


def tokens_per_step(draft_tokens: int, acceptance_rate: float) -> float:
    """Return E = (1 − α^(k+1)) / (1 − α), the expected tokens per verify step."""
    if not 0 <= draft_tokens <= MAX_DRAFT_TOKENS:
        raise EngineError(f"speculative.draft_tokens must be between 0 and {MAX_DRAFT_TOKENS}")
    if not 0.0 <= acceptance_rate <= 1.0:
        raise EngineError("speculative.acceptance_rate must be in [0, 1]")
    if acceptance_rate == 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance_rate ** (draft_tokens + 1)) / (1.0 - acceptance_rate)
