"""Error statistics and cross-validation splits for calibration quality reports."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Split = tuple[NDArray[np.intp], NDArray[np.intp]]


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Absolute percentage error of predictions against measurements."""

    n: int
    mdape_pct: float  # median absolute percentage error
    mape_pct: float  # mean absolute percentage error

    def as_dict(self) -> dict[str, float | int]:
        """Return the fields as a plain dict."""
        return {"n": self.n, "mdape_pct": self.mdape_pct, "mape_pct": self.mape_pct}


@dataclass(frozen=True, slots=True)
class MetricQuality:
    """Error before (spec-sheet roofline) and after the fit, and on held-out data."""

    before: ErrorStats
    after: ErrorStats
    held_out: ErrorStats | None = None


def ape(predicted: ArrayLike, measured: ArrayLike) -> NDArray[np.float64]:
    """Absolute percentage error |pred/meas − 1| · 100, elementwise."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    return np.asarray(np.abs(p / m - 1.0) * 100.0, dtype=np.float64)


def error_stats(predicted: ArrayLike, measured: ArrayLike) -> ErrorStats:
    """Median and mean APE over the finite pairs."""
    e = ape(predicted, measured)
    e = e[np.isfinite(e)]
    if e.size == 0:
        return ErrorStats(0, float("nan"), float("nan"))
    return ErrorStats(int(e.size), float(np.median(e)), float(np.mean(e)))


def log_residuals(predicted: ArrayLike, measured: ArrayLike) -> NDArray[np.float64]:
    """log(measured / predicted): positive when the model is optimistic."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    return np.asarray(np.log(m / p), dtype=np.float64)


def kfold_splits(n: int, k: int = 5, seed: int = 0) -> list[Split]:
    """Shuffled k-fold (train, test) index pairs over ``n`` items."""
    if n < 2:
        return []
    k = max(2, min(k, n))
    order = np.random.default_rng(seed).permutation(n)
    folds = np.array_split(order, k)
    return [
        (np.sort(np.concatenate([f for j, f in enumerate(folds) if j != i])), np.sort(folds[i]))
        for i in range(k)
    ]


def group_splits(groups: Sequence[Hashable]) -> list[tuple[Hashable, Split]]:
    """Leave-one-group-out (group, (train, test)) index pairs; empty with fewer than 2 groups."""
    labels = list(groups)
    distinct = list(dict.fromkeys(labels))
    if len(distinct) < 2:
        return []
    idx = np.arange(len(labels))
    out: list[tuple[Hashable, Split]] = []
    for g in distinct:
        mask = np.array([label == g for label in labels], dtype=bool)
        out.append((g, (idx[~mask], idx[mask])))
    return out


def merged_group_splits(groups: Sequence[Hashable], max_folds: int) -> list[Split]:
    """Leave-one-group-out (train, test) pairs with the groups merged into ≤ ``max_folds`` folds.

    Up to ``max_folds`` groups, one fold per group. Beyond, groups (largest first, ties in order
    of first appearance) each join the fold holding the fewest items so far, so the merge is
    deterministic and balanced. Empty with fewer than 2 groups.
    """
    labels = list(groups)
    distinct = list(dict.fromkeys(labels))
    if len(distinct) < 2:
        return []
    position = {g: i for i, g in enumerate(distinct)}
    codes = np.array([position[label] for label in labels], dtype=np.intp)
    sizes = np.bincount(codes, minlength=len(distinct))
    folds = min(len(distinct), max(max_folds, 2))
    fold_of = np.arange(len(distinct))
    if folds < len(distinct):
        load = np.zeros(folds, dtype=np.intp)
        for g in sorted(range(len(distinct)), key=lambda g: (-sizes[g], g)):
            f = int(np.argmin(load))
            fold_of[g] = f
            load[f] += sizes[g]
    member = fold_of[codes]
    idx = np.arange(len(labels))
    return [(idx[member != f], idx[member == f]) for f in range(folds)]
