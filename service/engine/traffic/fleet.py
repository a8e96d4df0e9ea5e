"""Fleet sizing from percentile targets: the fewest replicas whose share of the rate meets them.

Each replica takes total ÷ n of the traffic (a load balancer spreading Poisson arrivals gives
each replica a Poisson stream of that rate). With headroom h, the targets must hold at
(1 + h) · total ÷ n per replica, so a burst of h above the planned rate still meets them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from service.engine.traffic.model import (
    GOODPUT_CEILING,
    GOODPUT_FLOOR_SHARE,
    Replica,
    SloTarget,
    TrafficResult,
    TrafficSpec,
    meets,
)


class Runner(Protocol):
    """What serves a stream: a replica, or a group of disaggregated pools."""

    def run(self, spec: TrafficSpec) -> TrafficResult:
        """Simulate the stream at its rate."""
        ...


MAX_SIZING_RUNS = 6  # simulations per candidate: +1 replica three times, then +50% each


@dataclass(frozen=True, slots=True)
class FleetSize:
    """Replicas for the rate (None: targets missed even lightly loaded), and the stream seen."""

    replicas: int | None
    requests_per_s_per_replica: float  # the planned share, headroom included
    result: TrafficResult | None
    simulations: int


def fewest_replicas_bound(total_per_s: float, headroom: float, capacity_per_s: float) -> int:
    """Return the fewest replicas that could serve the rate: none can exceed the bracket."""
    return max(1, math.ceil(total_per_s * (1.0 + headroom) / (GOODPUT_CEILING * capacity_per_s)))


def size_fleet(
    replica: Replica | Runner,
    spec: TrafficSpec,
    targets: Sequence[SloTarget],
    *,
    total_per_s: float,
    headroom: float,
    capacity_per_s: float,
) -> FleetSize:
    """Search upwards from the bound for the fewest replicas meeting every target.

    ``replica`` may be a group of disaggregated pools (``disaggregation.PoolGroup``): the
    count is then of groups, each taking total ÷ n, and ``capacity_per_s`` is the group's.
    """
    need = total_per_s * (1.0 + headroom)
    replicas = fewest_replicas_bound(total_per_s, headroom, capacity_per_s)
    for run in range(1, MAX_SIZING_RUNS + 1):
        share = need / replicas
        result = replica.run(dataclasses.replace(spec, request_rate_per_s=share))
        if meets(result, targets):
            return FleetSize(replicas, share, result, run)
        if share <= GOODPUT_FLOOR_SHARE * capacity_per_s:
            break  # lightly loaded and still missing: more replicas will not help
        replicas = replicas + 1 if run < 3 else math.ceil(replicas * 1.5)
    return FleetSize(None, need / replicas, None, MAX_SIZING_RUNS)
