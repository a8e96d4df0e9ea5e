"""How a benchmark harness offered its load, read from the settings its result file records.

Every harness parser maps its settings to one ``LoadPattern``; the rules are the same for all:

- a request rate of infinity (or none) with a concurrency limit is a closed loop at that limit;
- a finite request rate is an open loop at that rate, whatever the limit;
- infinity with no limit releases every request at once: offline, ``concurrency`` = requests.

For an open loop the measurement's ``concurrency`` is the mean number of requests in flight,
by Little's law (completed requests per second × mean end-to-end latency in seconds) or as the
harness measured it, never above the harness's limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.engine.calibration.measurements import MeasurementError

# vLLM / SGLang ``--burstiness``: the shape of the gamma distribution of inter-arrival times;
# 1 is the exponential distribution, i.e. a Poisson process (vllm bench serve --help).
POISSON_BURSTINESS = 1.0


@dataclass(frozen=True, slots=True)
class LoadPattern:
    """The load fields of a ServingMeasurement."""

    load_pattern: str
    concurrency: int
    request_rate_per_s: float | None = None
    arrival_process: str = ""
    burstiness: float | None = None


def is_unbounded_rate(rate: object) -> bool:
    """True for a request rate that means "no pacing": None, ``"inf"`` or infinity."""
    if rate is None:
        return True
    if isinstance(rate, str):
        return rate.strip().lower() in ("inf", "infinity", "+inf")
    return isinstance(rate, int | float) and not isinstance(rate, bool) and math.isinf(rate)


def mean_in_flight(requests_per_s: float | None, mean_latency_ms: float | None) -> float | None:
    """Little's law: mean requests in flight = throughput × mean time in the system."""
    if requests_per_s is None or mean_latency_ms is None:
        return None
    if requests_per_s <= 0 or mean_latency_ms <= 0:
        return None
    return requests_per_s * mean_latency_ms / 1000.0


def gamma_arrival(burstiness: float | None) -> tuple[str, float | None]:
    """Arrival process and burstiness of a vLLM-style ``--burstiness`` (None: Poisson)."""
    if burstiness is None or burstiness == POISSON_BURSTINESS:
        return "poisson", None
    return "gamma", burstiness


def from_rate_and_limit(
    *,
    row: int,
    rate: object,
    rate_field: str,
    limit: float | None,
    requests: float,
    in_flight: float | None,
    in_flight_field: str,
    arrival: tuple[str, float | None] = ("", None),
) -> LoadPattern:
    """Map a harness's request rate and concurrency limit to a load pattern (rules above).

    ``requests``: how many requests the run sent (the concurrency of an offline run);
    ``in_flight``: the mean requests in flight if known (needed for an open loop without a
    limit). Errors name ``rate_field`` or ``in_flight_field``.
    """
    if is_unbounded_rate(rate):
        if limit is not None:
            return LoadPattern("closed_loop", max(round(limit), 1))
        return LoadPattern("offline", max(round(requests), 1))
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise MeasurementError(row, rate_field, f"not a number or 'inf': {rate!r}")
    if rate <= 0:
        raise MeasurementError(row, rate_field, f"must be positive, got {rate}")
    if in_flight is None and limit is None:
        raise MeasurementError(
            row,
            in_flight_field,
            "an open-loop run needs its mean latency and throughput (or a concurrency limit) "
            "to know how many requests were in flight",
        )
    mean = in_flight if in_flight is not None else float(limit or 1)
    if limit is not None:
        mean = min(mean, limit)
    process, burstiness = arrival
    return LoadPattern(
        "open_loop",
        max(round(mean), 1),
        request_rate_per_s=float(rate),
        arrival_process=process,
        burstiness=burstiness,
    )
