"""Dollar cost and energy per token from the replica's price, power and token rates."""

from __future__ import annotations

import math

import numpy as np

from service.engine.kernels import FloatArray, is_scalar, values

_SECONDS_PER_HOUR = 3600.0


def usd_per_million_tokens(
    usd_per_gpu_hour: float | FloatArray | None, gpus: int, busy_s: FloatArray, tokens: FloatArray
) -> FloatArray:
    """Return $ per million tokens: price · GPUs · busy seconds / 3600 / tokens · 10^6.

    Equivalent to docs/physics.md's price × GPUs ÷ (3600 × tokens/s) × 10^6 with tokens/s =
    tokens ÷ busy seconds. NaN when no price is known (None, or NaN per point) or no tokens.
    """
    if usd_per_gpu_hour is None:
        return values(math.nan) if is_scalar(tokens) else np.full(np.shape(tokens), np.nan)
    usd = usd_per_gpu_hour * gpus * busy_s / _SECONDS_PER_HOUR
    if is_scalar(tokens) and is_scalar(usd):
        return values(usd / tokens * 1e6 if tokens > 0 else math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(tokens > 0, usd / tokens * 1e6, np.nan), dtype=np.float64)


def energy_per_token_j(
    tdp_w: float | FloatArray, gpus: int, tokens_per_s: FloatArray
) -> FloatArray:
    """Return joules per token at full board power (TDP · GPUs ÷ tokens/s); NaN without a TDP."""
    if is_scalar(tdp_w) and is_scalar(tokens_per_s):
        tdp_f = float(tdp_w)
        return values(tdp_f * gpus / tokens_per_s if tokens_per_s > 0 and tdp_f > 0 else math.nan)
    tdp = np.asarray(tdp_w, dtype=np.float64)
    if tdp.ndim == 0 and tdp <= 0:
        return np.full(np.shape(tokens_per_s), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(
            np.where((tokens_per_s > 0) & (tdp > 0), tdp * gpus / tokens_per_s, np.nan),
            dtype=np.float64,
        )
