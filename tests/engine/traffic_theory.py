"""Queueing-theory references for the traffic tests (M/D/1 and M/D/c mean waits)."""

from __future__ import annotations

import math

import numpy as np


def md1_mean_wait_s(rate_per_s: float, service_s: float) -> float:
    """Pollaczek–Khinchine for deterministic service: Wq = ρ·D / (2(1 − ρ)), ρ = λ·D."""
    rho = rate_per_s * service_s
    return rho * service_s / (2.0 * (1.0 - rho))


def mdc_mean_wait_s(rate_per_s: float, service_s: float, servers: int, states: int = 600) -> float:
    """Mean wait of M/D/c from the number in system at times D apart (Crommelin 1932).

    With deterministic service D every customer in service at t has left by t + D and every
    one waiting at t is still there, so N(t + D) = max(N(t) − c, 0) + A, A ~ Poisson(λD),
    for any t: the chain's stationary law is the time-stationary law of N. Arrivals see it
    (PASTA), so Lq = E[max(N − c, 0)] and Wq = Lq / λ (Little). Solved on ``states`` states.
    """
    a = rate_per_s * service_s
    k = np.arange(states)
    log_pmf = k * math.log(a) - a - np.array([math.lgamma(i + 1.0) for i in k])
    arrivals = np.exp(log_pmf)
    p = np.zeros(states)
    p[0] = 1.0
    for _ in range(20_000):
        base = np.zeros(states)
        base[0] = p[: servers + 1].sum()
        base[1 : states - servers] = p[servers + 1 :]
        new = np.convolve(base, arrivals)[:states]
        new /= new.sum()
        if np.abs(new - p).max() < 1e-13:
            p = new
            break
        p = new
    queue = np.maximum(k - servers, 0)
    return float((p * queue).sum() / rate_per_s)


def fcfs_waits_s(arrivals_s: np.ndarray, service_s: float, servers: int) -> np.ndarray:
    """Exact waits of a first-come-first-served queue with ``servers`` servers (the recursion
    start = max(arrival, earliest free server), Kiefer and Wolfowitz 1955)."""
    import heapq

    free = [0.0] * servers
    waits = np.empty(arrivals_s.size)
    for i, a in enumerate(arrivals_s.tolist()):
        earliest = heapq.heappop(free)
        start = a if a > earliest else earliest
        waits[i] = start - a
        heapq.heappush(free, start + service_s)
    return waits
