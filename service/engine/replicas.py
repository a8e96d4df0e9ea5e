"""Data-parallel replicas (dp): independent copies of one whole layout behind a load balancer.

Each replica serves its own requests, so a request's latency (TTFT, TPOT, end-to-end) is that
of one replica; rates (tokens/s, requests/s), GPUs and the hourly price are dp times one
replica's; per-GPU rates and per-token costs are unchanged.
"""

from __future__ import annotations

from service.engine.errors import InvalidLayoutError

# Largest replica count accepted (far above any fleet one estimate describes).
MAX_REPLICAS = 4_096
# Per-point rates that add up over replicas (everything else in a point is per replica).
REPLICATED_RATES: tuple[str, ...] = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")


def check_replicas(dp: int) -> None:
    """Raise InvalidLayoutError (naming ``dp``) unless 1 ≤ dp ≤ MAX_REPLICAS."""
    if isinstance(dp, bool) or not isinstance(dp, int) or not 1 <= dp <= MAX_REPLICAS:
        raise InvalidLayoutError(f"dp must be an integer from 1 to {MAX_REPLICAS}, got {dp!r}")


def fleet_gpus(gpus_per_replica: int, dp: int) -> int:
    """Return the GPUs of dp replicas."""
    check_replicas(dp)
    return gpus_per_replica * dp


def fleet_usd_per_hour(usd_per_hour_per_replica: float | None, dp: int) -> float | None:
    """Return the hourly price of dp replicas (None without a price)."""
    check_replicas(dp)
    return None if usd_per_hour_per_replica is None else usd_per_hour_per_replica * dp
