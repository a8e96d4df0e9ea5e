"""Arrival processes: Poisson, or a gamma renewal process with a chosen burstiness.

Inter-arrival gaps of a renewal process with rate λ and coefficient of variation cv are gamma
with shape k = 1/cv² and scale 1/(λ·k): mean 1/λ, standard deviation cv/λ. cv = 1 is the
exponential (Poisson arrivals); cv > 1 is burstier, cv < 1 more regular. This is the burstiness
knob of ``vllm bench serve --burstiness`` (gamma shape = burstiness = 1/cv²).
"""

from __future__ import annotations

import numpy as np

from service.engine.errors import EngineError
from service.engine.kernels import FloatArray

PROCESSES = ("poisson", "gamma")


def unit_gaps(process: str, cv: float, count: int, rng: np.random.Generator) -> FloatArray:
    """Return ``count`` inter-arrival gaps of a rate-1 process (divide by λ for rate λ)."""
    if process not in PROCESSES:
        raise EngineError(f"arrival.process must be one of {', '.join(PROCESSES)}")
    if process == "poisson":
        return rng.standard_exponential(count)
    if not cv > 0:
        raise EngineError("arrival.cv must be positive")
    shape = 1.0 / (cv * cv)
    return np.asarray(rng.gamma(shape, 1.0 / shape, count), dtype=np.float64)
