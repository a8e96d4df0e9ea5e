"""The traffic scheduler against queueing theory, with deterministic (synthetic) step times.

Every step takes STEP_S whatever it holds, so a request of one prompt token and n output tokens
is served in exactly n steps: with one request at a time the replica is an M/D/1 queue, with c
at a time (decode-first, all running requests advance each step) an M/D/c queue whose starts
are rounded up to the next step boundary (≤ one step, here 1/1000 of the service time).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from traffic_theory import fcfs_waits_s, mdc_mean_wait_s

from service.engine.traffic.arrivals import unit_gaps
from service.engine.traffic.model import steady_window_s, summarise
from service.engine.traffic.scheduler import SchedulerConfig, simulate

STEP_S = 1e-4
OUTPUT_TOKENS = 1000
SERVICE_S = STEP_S * OUTPUT_TOKENS


class ConstantSteps:
    """Every step costs STEP_S."""

    def step_s(
        self, decode_sequences: float, context_sum: float, pieces: Sequence[tuple[float, float]]
    ) -> float:
        return STEP_S

    def decode_s(self, sequences: int, context_sum: float) -> float:
        return STEP_S

    def decode_leap(self, sequences: int, context_sum: float) -> tuple[float, float]:
        return STEP_S, 0.0


def _arrivals(rate: float, requests: int, seed: int) -> np.ndarray:
    gaps = unit_gaps("poisson", 1.0, requests, np.random.default_rng(seed)) / rate
    return np.concatenate([[0.0], np.cumsum(gaps[1:])])


def _simulated_waits(arrivals: np.ndarray, servers: int) -> np.ndarray:
    n = arrivals.size
    config = SchedulerConfig(8192, servers, 1e12, "decode_first")
    timeline = simulate(arrivals.tolist(), [1] * n, [OUTPUT_TOKENS] * n, config, ConstantSteps())
    # The service is exactly n steps: the first token after one step, the last after n.
    assert np.allclose(timeline.finish_s - timeline.admitted_s, SERVICE_S, rtol=1e-9)
    return np.asarray(timeline.admitted_s - timeline.arrival_s)


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.8), (4, 0.8), (16, 0.9)])
def test_waits_equal_the_fcfs_recursion_request_by_request(servers: int, rho: float) -> None:
    """Same arrivals, exact multi-server FCFS: equal waits (one server), else within a step.

    With c servers a start is rounded up to the next step boundary; every completion lies on
    one, so by induction each simulated start is at most one step after the exact one.
    """
    arrivals = _arrivals(rho * servers / SERVICE_S, 5_000, seed=3)
    simulated = _simulated_waits(arrivals, servers)
    exact = fcfs_waits_s(arrivals, SERVICE_S, servers)
    tolerance = 1e-9 if servers == 1 else STEP_S + 1e-9
    assert np.max(np.abs(simulated - exact)) <= tolerance
    assert np.max(simulated - exact) >= -1e-9  # never earlier than the exact queue


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.5), (1, 0.8), (4, 0.8), (16, 0.8)])
def test_fcfs_recursion_meets_md1_and_mdc_theory(servers: int, rho: float) -> None:
    """The recursion the simulator matches above, over 400,000 arrivals, against P-K/Crommelin.

    Seeds 4-7 scatter by up to 3.7% (ρ = 0.8); the tolerance is 4%.
    """
    rate = rho * servers / SERVICE_S
    waits = fcfs_waits_s(_arrivals(rate, 400_000, seed=4), SERVICE_S, servers)[20_000:]
    assert float(waits.mean()) == pytest.approx(mdc_mean_wait_s(rate, SERVICE_S, servers), rel=0.04)


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.7), (4, 0.7)])
def test_simulated_mean_wait_meets_theory(servers: int, rho: float) -> None:
    """The simulator's own mean wait (20,000 requests), with its sampling error as tolerance."""
    rate = rho * servers / SERVICE_S
    waits = _simulated_waits(_arrivals(rate, 20_000, seed=5), servers)[2_000:]
    theory = mdc_mean_wait_s(rate, SERVICE_S, servers) + (STEP_S / 2 if servers > 1 else 0.0)
    # Runs of 20,000 requests at ρ = 0.7 scatter by about ±8% around the theory (seeds 0-7).
    assert float(waits.mean()) == pytest.approx(theory, rel=0.12)


def _busy_share_by_recursion(
    arrivals: np.ndarray, servers: int, start: float, stop: float
) -> float:
    """The share of [start, stop] with at least one request present, from the exact FCFS
    recursion: request i is present over [a_i, a_i + w_i + D]; the union of those intervals."""
    exits = arrivals + fcfs_waits_s(arrivals, SERVICE_S, servers) + SERVICE_S
    covered, reach = 0.0, start
    for a, e in zip(arrivals.tolist(), exits.tolist(), strict=True):
        lo, hi = max(a, reach), min(e, stop)
        if hi > lo:
            covered += hi - lo
        reach = max(reach, e)
    return covered / (stop - start)


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.5), (1, 0.8), (4, 0.5)])
def test_utilization_is_the_steady_state_busy_share(servers: int, rho: float) -> None:
    """M/D/1: the server is busy a share ρ of the time (Little's law on the server: λ · D), so
    ρ = 0.5 reads 0.5 (20,000 requests: within 2% of the nominal ρ, within 0.1% of the stream's
    own λ · D over the steady stretch). M/D/4 at ρ = 0.5 per slot: steps run whenever any
    request is present, so the busy share is P(N ≥ 1), here ≈ 0.87, equal to the exact FCFS
    recursion's share of time with a request present (starts rounded to a step: ≤ 0.5%)."""
    n = 20_000
    arrivals = _arrivals(rho * servers / SERVICE_S, n, seed=3)
    config = SchedulerConfig(8192, servers, 1e12, "decode_first")
    timeline = simulate(arrivals.tolist(), [1] * n, [OUTPUT_TOKENS] * n, config, ConstantSteps())
    result = summarise(rho * servers / SERVICE_S, timeline, [OUTPUT_TOKENS] * n)
    start, stop = steady_window_s(timeline)
    if servers == 1:
        assert result.utilization == pytest.approx(rho, rel=0.02)
        inside = np.count_nonzero((arrivals >= start) & (arrivals <= stop))
        assert result.utilization == pytest.approx(inside * SERVICE_S / (stop - start), rel=1e-3)
    else:
        exact = _busy_share_by_recursion(arrivals, servers, start, stop)
        assert result.utilization == pytest.approx(exact, rel=0.005)
        assert result.utilization > 0.8  # far above the per-slot load of 0.5
