"""Robust bounded least squares in log relative error, with Jacobian standard errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares

# Residuals are log(pred/meas); soft_l1 turns linear beyond ~10% so outliers weigh less.
F_SCALE = 0.1


@dataclass(frozen=True, slots=True)
class Solution:
    """Fitted values and standard errors by parameter name."""

    values: Mapping[str, float]
    standard_errors: Mapping[str, float]
    cost: float


def solve(
    names: Sequence[str],
    start: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    residuals: Callable[[Mapping[str, float]], NDArray[np.float64]],
    jacobian: Callable[[Mapping[str, float]], NDArray[np.float64]] | None = None,
) -> Solution:
    """Minimise soft-L1 of ``residuals(values)`` over ``names`` within ``bounds``.

    ``jacobian(values)`` (residuals × names), when given, replaces finite differences.
    """
    lo = np.array([bounds[n][0] for n in names], dtype=float)
    hi = np.array([bounds[n][1] for n in names], dtype=float)
    margin = 1e-6 * (hi - lo)
    x0 = np.clip(np.array([start[n] for n in names], dtype=float), lo + margin, hi - margin)

    def f(x: NDArray[np.float64]) -> NDArray[np.float64]:
        r = residuals(dict(zip(names, (float(v) for v in x), strict=True)))
        return np.where(np.isfinite(r), r, 10.0)

    def jac_of(x: NDArray[np.float64]) -> NDArray[np.float64]:
        assert jacobian is not None
        j = np.asarray(jacobian(dict(zip(names, (float(v) for v in x), strict=True))), dtype=float)
        return np.asarray(np.where(np.isfinite(j), j, 0.0), dtype=np.float64)

    sol = least_squares(
        f,
        x0,
        jac=jac_of if jacobian is not None else "2-point",
        bounds=(lo, hi),
        loss="soft_l1",
        f_scale=F_SCALE,
        x_scale="jac",
    )
    x = np.asarray(sol.x, dtype=float)
    r = np.asarray(sol.fun, dtype=float)
    jac = np.asarray(sol.jac, dtype=float)
    dof = max(r.size - len(names), 1)
    s2 = float(np.sum(r**2) / dof)
    cov = np.linalg.pinv(jac.T @ jac) * s2
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return Solution(
        values=dict(zip(names, (float(v) for v in x), strict=True)),
        standard_errors=dict(zip(names, (float(v) for v in se), strict=True)),
        cost=float(sol.cost),
    )
