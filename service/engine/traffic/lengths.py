"""Request-length distributions: fixed, piecewise-linear through percentiles, or a histogram.

A distribution is sampled by inverse transform: ``quantile(u)`` for uniform ``u`` in [0, 1).
Samples are whole tokens, at least 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from service.engine.errors import EngineError
from service.engine.kernels import FloatArray

HISTOGRAM_SUM_TOLERANCE = 1e-3  # shares must sum to 1 within this


class LengthError(EngineError):
    """A length distribution is inconsistent; ``field`` names the offending part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """A length distribution as a quantile function: linear between ``(probability, tokens)``.

    Fixed lengths have one knot; percentiles give knots at 0 (min), each percentile and 1 (max);
    a histogram gives the cumulative shares at its bin edges.
    """

    probabilities: tuple[float, ...]
    tokens: tuple[float, ...]

    @classmethod
    def fixed(cls, tokens: int) -> LengthDistribution:
        if tokens < 1:
            raise LengthError("tokens", "must be at least 1")
        return cls((0.0, 1.0), (float(tokens), float(tokens)))

    @classmethod
    def from_percentiles(
        cls,
        percentiles: Mapping[float, float],
        *,
        minimum: float = 1.0,
        maximum: float | None = None,
        mean: float | None = None,
    ) -> LengthDistribution:
        """Knots at (0, min), (p, value) per percentile (p in (0, 1)) and (1, max).

        Without ``maximum`` the top knot is solved from ``mean``: the quantile function's
        integral (trapezoids between knots) equals the mean; its last segment is the only one
        that holds the maximum. One of the two is needed.
        """
        if not percentiles:
            raise LengthError("percentiles", "give at least one percentile")
        ps = sorted(percentiles)
        if any(not 0.0 < p < 1.0 for p in ps):
            raise LengthError("percentiles", "percentile levels must lie strictly between 0 and 1")
        values = [float(percentiles[p]) for p in ps]
        if minimum < 1:
            raise LengthError("min", "must be at least 1")
        knots = [float(minimum), *values]
        for (p, v), previous in zip(zip(ps, values, strict=True), knots, strict=False):
            if v < previous:
                raise LengthError(
                    "percentiles",
                    f"p{_level(p)} = {v:g} is below the level before it ({previous:g}); "
                    "percentiles must not decrease and must be at least min",
                )
        probs = [0.0, *ps]
        if maximum is None:
            if mean is None:
                raise LengthError("max", "give max or mean (the top of the distribution)")
            inner = sum(
                (probs[i + 1] - probs[i]) * (knots[i] + knots[i + 1]) / 2.0
                for i in range(len(knots) - 1)
            )
            tail = 1.0 - probs[-1]
            maximum = 2.0 * (mean - inner) / tail - knots[-1]
            if maximum < knots[-1]:
                raise LengthError(
                    "mean",
                    f"mean {mean:g} is too small for these percentiles (it needs at least "
                    f"{inner + tail * knots[-1]:g})",
                )
        elif maximum < knots[-1]:
            raise LengthError("max", f"max {maximum:g} is below the highest percentile")
        dist = cls((*probs, 1.0), (*knots, float(maximum)))
        if mean is not None and abs(dist.mean - mean) > 0.01 * mean + 0.5:
            raise LengthError(
                "mean",
                f"mean {mean:g} does not match the percentiles and max (they give {dist.mean:g})",
            )
        return dist

    @classmethod
    def from_histogram(
        cls, bin_edges: tuple[float, ...], shares: tuple[float, ...]
    ) -> LengthDistribution:
        """Uniform within each bin [edge_i, edge_i+1); shares are bin probabilities summing to 1."""
        if len(bin_edges) < 2 or len(shares) != len(bin_edges) - 1:
            raise LengthError("histogram", "needs n + 1 bin edges for n shares")
        if bin_edges[0] < 1:
            raise LengthError("histogram.bin_edges_tokens", "edges must be at least 1")
        if any(b <= a for a, b in itertools.pairwise(bin_edges)):
            raise LengthError("histogram.bin_edges_tokens", "edges must increase")
        if any(s < 0 for s in shares):
            raise LengthError("histogram.shares", "shares must not be negative")
        total = float(sum(shares))
        if abs(total - 1.0) > HISTOGRAM_SUM_TOLERANCE:
            raise LengthError("histogram.shares", f"shares sum to {total:g}, not 1")
        cumulative = np.concatenate([[0.0], np.cumsum(shares) / total])
        return cls(tuple(cumulative.tolist()), tuple(float(e) for e in bin_edges))

    @property
    def is_fixed(self) -> bool:
        return self.tokens[0] == self.tokens[-1]

    @property
    def mean(self) -> float:
        """Integral of the quantile function (trapezoids between knots)."""
        p, t = np.asarray(self.probabilities), np.asarray(self.tokens)
        return float(np.sum(np.diff(p) * (t[1:] + t[:-1]) / 2.0))

    @property
    def mean_square(self) -> float:
        """E[L²]: over a segment linear from a to b, ∫ L² = width · (a² + ab + b²) / 3."""
        p, t = np.asarray(self.probabilities), np.asarray(self.tokens)
        a, b = t[:-1], t[1:]
        return float(np.sum(np.diff(p) * (a * a + a * b + b * b) / 3.0))

    @property
    def max_tokens(self) -> int:
        return int(np.ceil(self.tokens[-1]))

    def quantile(self, u: FloatArray) -> FloatArray:
        """Return whole-token lengths (≥ 1) at probabilities ``u``."""
        values = np.interp(u, self.probabilities, self.tokens)
        return np.asarray(np.maximum(np.rint(values), 1.0), dtype=np.float64)


def _level(p: float) -> str:
    return f"{p * 100:g}"
