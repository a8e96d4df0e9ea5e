"""80% prediction intervals for TTFT and TPOT from held-out residuals.

How an interval is built, for a prediction ``p`` of metric ``M`` (``ttft_ms`` or ``tpot_ms``):

1. Residuals ``r = log(measured / predicted)`` come from measurements held out of the fit
   (cross-validation), never from the fitted points themselves, so they include the error of
   predicting data the fit has not seen.
2. Their empirical quantiles at the conformal levels ``⌊(n+1)·0.1⌋/n`` and ``⌈(n+1)·0.9⌉/n``
   give ``q_lo ≤ q_hi``; the interval is ``[p·exp(q_lo), p·exp(q_hi)]``. With fewer than
   ``MIN_RESIDUALS`` residuals the quantiles fall back to ±``z·FALLBACK_LOG_SIGMA``.
3. Widening adds an extra, independent log-spread ``s`` in quadrature: with the band's centre
   ``c = (q_lo + q_hi)/2`` and half-width ``h = (q_hi − q_lo)/2``, the interval becomes
   ``c ± √(h² + (z·s)²)``, ``z = 1.2816`` (the 90th percentile of a standard normal) and
   ``s² = s_t² + s_d²``. (Independent log-errors add their variances; adding ``z·s`` to each
   quantile instead would over-widen, and did: see benchmarks/results/accuracy.md.)

   - transfer (a profile fitted on another accelerator): ``s_t = TRANSFER_LOG_SIGMA``,
     measured on the four held-out transfers of benchmarks/results/accuracy.md §11a (H100
     profiles of vLLM and TensorRT-LLM applied to A100-40GB and GH200 static batches, pooled
     into one band). It agrees with the spread of the spec sheets themselves: the
     best-shape GEMM fraction of peak spans 80–87% across A100/H100/GH200
     (docs/reference/accelerators.md §3a) and achieved HBM fractions ~84–92% (§3b).
   - distance from the calibration data: ``s_d = DISTANCE_LOG_SIGMA · d`` with 0.05 per
     doubling, where ``d`` is the number of doublings (log2) by which the query lies outside
     the range spanned by the calibration data, summed over batch size/concurrency, input
     tokens, output tokens and GPU count (0 inside the range).

``prediction_interval`` / ``estimate_intervals`` do the same from a stored profile
(``CalibrationResult.to_dict()``), so the service needs no fitted objects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from service.engine.estimate import EstimateResult

COVERAGE = 0.8
Z_90 = 1.2815515655446004  # standard normal 90th percentile (two-sided 80%)
MIN_RESIDUALS = 8
FALLBACK_LOG_SIGMA = 0.25  # ±25%-ish when too few held-out residuals exist
TRANSFER_LOG_SIGMA = 0.160  # accuracy.md §11a, accelerator kind, pooled (see above)
DISTANCE_LOG_SIGMA = 0.05  # per doubling outside the calibration range


@dataclass(frozen=True, slots=True)
class FeatureRange:
    """Closed range of one workload feature seen in the calibration data."""

    low: float
    high: float

    def doublings_outside(self, value: ArrayLike) -> NDArray[np.float64]:
        """log2 distance of ``value`` outside [low, high] (0 inside)."""
        v = np.maximum(np.asarray(value, dtype=float), 1e-12)
        below = np.log2(self.low / v)
        above = np.log2(v / self.high)
        return np.asarray(np.maximum(np.maximum(below, above), 0.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ResidualQuantiles:
    """Lower and upper log-residual quantiles for one metric, from ``n`` held-out points."""

    n: int
    q_low: float
    q_high: float


@dataclass(frozen=True, slots=True)
class ExtrapolationSpread:
    """Extra log-spread an interval needs for one kind of extrapolation, measured held out.

    ``per_doubling``: the spread is per doubling outside the fitted range (numeric kinds);
    otherwise it applies whole once the request is outside (model, mode, backend, ...).
    ``n`` held-out residuals measured it (``extrapolation_cv``).
    """

    log_sigma: float
    per_doubling: bool
    n: int


def extra_spread(outside: ResidualQuantiles, inside: ResidualQuantiles) -> float:
    """Log-spread that, added in quadrature to the in-domain band, reaches the outside band.

    The outside band's reach from the in-domain centre (its half-width plus any shift of its
    centre) must equal √(h_in² + (z·s)²); s is 0 when the outside band is no wider.
    """
    centre_in = (inside.q_low + inside.q_high) / 2.0
    h_in = (inside.q_high - inside.q_low) / 2.0
    centre_out = (outside.q_low + outside.q_high) / 2.0
    reach = (outside.q_high - outside.q_low) / 2.0 + abs(centre_out - centre_in)
    return math.sqrt(max(reach**2 - h_in**2, 0.0)) / Z_90


# A numeric kind's spread is measured per direction: the query above the fitted range (a
# heavier load, longer prompts, more GPUs) or below it (domain.extrapolation_amounts).
DIRECTIONS = ("below", "above")


def directed(kind: str, direction: str) -> str:
    """Name of a numeric kind in one direction, e.g. ``concurrency_above``."""
    return f"{kind}_{direction}"


def _undirected(kind: str) -> str:
    base, _, direction = kind.rpartition("_")
    return base if direction in DIRECTIONS else kind


def spread_sigma(
    spreads: Mapping[str, ExtrapolationSpread],
    kinds: Mapping[str, ArrayLike],
    metric: str = "",
) -> NDArray[np.float64]:
    """Total extra log-spread for the kinds a request extrapolates in, added in quadrature.

    ``kinds`` maps a kind to its doublings outside (numeric kinds) or 1.0 (whole kinds). A kind
    the profile did not measure takes ``DEFAULT_SPREADS[metric]`` (benchmarks/accuracy.py); a
    profile stored before spreads had directions gives its undirected ``concurrency`` spread.
    """
    total: NDArray[np.float64] = np.zeros(())
    for kind, amount in kinds.items():
        spread, _ = measured_spread(spreads, kind, metric)
        if spread is None:
            continue
        a = np.asarray(amount, dtype=float)
        scale = a if spread.per_doubling else (a > 0).astype(float)
        total = total + (spread.log_sigma * scale) ** 2
    return np.asarray(np.sqrt(total), dtype=np.float64)


def measured_spread(
    spreads: Mapping[str, ExtrapolationSpread], kind: str, metric: str
) -> tuple[ExtrapolationSpread | None, str | None]:
    """The spread of ``kind`` for ``metric`` and where it was measured: on the profile's own
    runs (``profile``), else on the shipped benchmark (``default``, ``DEFAULT_SPREADS``);
    (None, None) when nothing measures the kind, which then does not widen."""
    own = spreads.get(kind) or spreads.get(_undirected(kind))
    if own is not None:
        return own, "profile"
    default = DEFAULT_SPREADS.get(metric, {}).get(kind)
    return (default, "default") if default is not None else (None, None)


# Extra log-spread per metric and extrapolation kind where a profile's own runs cannot measure
# it (one model, one mode, ...): what benchmarks/accuracy.py measures on the shipped data
# (accuracy.md section 11a: the held-out residuals of every group of a kind pooled into one
# band against their training fits' pooled in-domain residuals, ``extra_spread``, the
# statistic ``extrapolation_cv`` uses inside a profile; model from the leave-one-model-out
# protocols (model_kind from those whose held-out model is of a kind, dense, MoE or MLA, that
# no fitted model is), backend from its group fitted on other engines (one group), mode from
# static <-> serving, concurrency and GPU count per doubling from the concurrency-range and
# hold-out-TP protocols).
def _spread(log_sigma: float, per_doubling: bool = False) -> ExtrapolationSpread:
    return ExtrapolationSpread(log_sigma, per_doubling, 0)


DEFAULT_SPREADS: Mapping[str, Mapping[str, ExtrapolationSpread]] = {
    "serving.tpot_ms": {
        "model": _spread(0.035),
        "model_kind": _spread(0.147),
        "backend": _spread(0.0),
        "mode": _spread(0.0),
        "concurrency_above": _spread(0.063, per_doubling=True),
        "concurrency_below": _spread(0.0, per_doubling=True),
        "gpus_above": _spread(0.0, per_doubling=True),
        "gpus_below": _spread(0.102, per_doubling=True),
    },
    "serving.ttft_ms": {
        "model": _spread(0.361),
        "model_kind": _spread(0.136),
        "backend": _spread(0.0),
        "mode": _spread(2.022),
        "concurrency_above": _spread(0.455, per_doubling=True),
        "concurrency_below": _spread(0.0, per_doubling=True),
        "gpus_above": _spread(0.081, per_doubling=True),
        "gpus_below": _spread(0.166, per_doubling=True),
    },
    "static.latency_ms": {
        "model": _spread(0.0),
        "model_kind": _spread(0.14),
        "mode": _spread(0.22),
    },
}


def stored_spreads(profile: Mapping[str, Any]) -> dict[str, dict[str, ExtrapolationSpread]]:
    """Measured extrapolation spreads of a stored profile, per metric and kind."""
    table: Mapping[str, Mapping[str, Mapping[str, Any]]] = profile.get("extrapolation_spreads", {})
    return {
        metric: {
            kind: ExtrapolationSpread(float(v["log_sigma"]), bool(v["per_doubling"]), int(v["n"]))
            for kind, v in kinds.items()
        }
        for metric, kinds in table.items()
    }


@dataclass(frozen=True, slots=True)
class Interval:
    """An interval per prediction, same units as the prediction."""

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    coverage: float = COVERAGE


def residual_quantiles(residuals: ArrayLike, coverage: float = COVERAGE) -> ResidualQuantiles:
    """Conformal lower/upper quantiles of held-out log residuals log(meas/pred)."""
    r = np.asarray(residuals, dtype=float)
    r = np.sort(r[np.isfinite(r)])
    n = int(r.size)
    tail = (1.0 - coverage) / 2.0
    if n < MIN_RESIDUALS:
        center = float(np.median(r)) if n else 0.0
        half = Z_90 * FALLBACK_LOG_SIGMA
        return ResidualQuantiles(n, center - half, center + half)
    lo_rank = max(math.floor((n + 1) * tail), 1)
    hi_rank = min(math.ceil((n + 1) * (1.0 - tail)), n)
    return ResidualQuantiles(n, float(r[lo_rank - 1]), float(r[hi_rank - 1]))


def extra_log_sigma(
    *, transferred: bool, doublings_outside: ArrayLike = 0.0
) -> NDArray[np.float64]:
    """Extra log-spread for transfer and distance from the calibration data (see module doc)."""
    d = np.asarray(doublings_outside, dtype=float)
    s_t = TRANSFER_LOG_SIGMA if transferred else 0.0
    return np.asarray(np.sqrt(s_t**2 + (DISTANCE_LOG_SIGMA * d) ** 2), dtype=np.float64)


def interval(
    predicted: ArrayLike,
    quantiles: ResidualQuantiles,
    *,
    transferred: bool = False,
    doublings_outside: ArrayLike = 0.0,
    extra_sigma: ArrayLike = 0.0,
) -> Interval:
    """Prediction interval around ``predicted`` from residual quantiles, widened as documented.

    ``extra_sigma`` (measured extrapolation spreads, ``spread_sigma``) adds in quadrature.
    """
    p = np.asarray(predicted, dtype=float)
    s = extra_log_sigma(transferred=transferred, doublings_outside=doublings_outside)
    s = np.sqrt(s**2 + np.asarray(extra_sigma, dtype=float) ** 2)
    centre = (quantiles.q_low + quantiles.q_high) / 2.0
    half = np.sqrt(((quantiles.q_high - quantiles.q_low) / 2.0) ** 2 + (Z_90 * s) ** 2)
    low = p * np.exp(centre - half)
    high = p * np.exp(centre + half)
    return Interval(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64))


def coverage_of(intervals: Interval, measured: ArrayLike) -> float:
    """Fraction of measurements inside their intervals."""
    m = np.asarray(measured, dtype=float)
    inside = (m >= intervals.low) & (m <= intervals.high)
    return float(np.mean(inside)) if inside.size else float("nan")


def doublings_outside(
    ranges: Mapping[str, FeatureRange], features: Mapping[str, ArrayLike]
) -> NDArray[np.float64]:
    """Sum of log2 distances outside the calibration ranges over the features both name."""
    total: NDArray[np.float64] = np.zeros(())
    for name, value in features.items():
        if name in ranges:
            total = total + ranges[name].doublings_outside(value)
    return np.asarray(total, dtype=np.float64)


def _metric_keys(metric: str, mode: str) -> tuple[str, ...]:
    """Residual keys to try for ``metric`` of a ``mode`` estimate, most specific first.

    A static profile fitted on whole-batch latency alone has no TTFT/TPOT residuals; its
    ``static.latency_ms`` spread (prefill plus every decode step) stands in for them, then the
    other mode's residuals of the same metric.
    """
    if "." in metric:
        return (metric,)
    other = "serving" if mode == "static" else "static"
    return (f"{mode}.{metric}", f"{mode}.latency_ms", f"{other}.{metric}")


def _mode_key(metric: str, mode: str) -> str:
    """The key whose mode spread widens a ``mode`` estimate of ``metric`` from a profile fitted
    on the other mode: the predicted mode's own, measured in that direction (accuracy.md §9,
    §11a). Serving TTFT from static runs carries the closed-loop queueing no static fit can
    learn (spread 2.1); static batches from serving runs are the engine alone (0.23, on static
    latency, the one figure static runs measure: it stands for a static TTFT or TPOT too)."""
    key = metric if "." in metric else f"{mode}.{metric}"
    return key if "mode" in DEFAULT_SPREADS.get(key, {}) else f"{mode}.latency_ms"


def spread_key(profile: Mapping[str, Any], metric: str, mode: str, kind: str = "") -> str:
    """The key whose extrapolation spreads widen ``metric`` of a ``mode`` estimate: that of the
    residuals the band itself comes from, but for the ``mode`` kind that of the mode predicted
    (``_mode_key``)."""
    if kind == "mode":
        return _mode_key(metric, mode)
    table = profile.get("residual_quantiles", {})
    keys = _metric_keys(metric, mode)
    return next((k for k in keys if k in table), keys[0])


def kind_widening(
    profile: Mapping[str, Any],
    spreads: Mapping[str, Mapping[str, ExtrapolationSpread]],
    metric: str,
    mode: str,
    kind: str,
) -> tuple[ExtrapolationSpread | None, str | None]:
    """The measured spread one extrapolation kind widens ``metric``'s band by, and its source
    (``measured_spread``; ``spreads``: the profile's ``stored_spreads``); an accelerator the
    profile is transferred to widens by ``TRANSFER_LOG_SIGMA`` (source ``transfer``)."""
    if kind == "accelerator":
        return _spread(TRANSFER_LOG_SIGMA), "transfer"
    key = spread_key(profile, metric, mode, kind)
    return measured_spread(spreads.get(key, {}), kind, key)


def stored_quantiles(profile: Mapping[str, Any], metric: str, mode: str) -> ResidualQuantiles:
    """Held-out residual quantiles of a stored profile for ``metric`` (fallback band if none)."""
    table: Mapping[str, Mapping[str, Any]] = profile.get("residual_quantiles", {})
    for key in _metric_keys(metric, mode):
        q = table.get(key)
        if q is not None:
            return ResidualQuantiles(int(q["n"]), float(q["q_low"]), float(q["q_high"]))
    return residual_quantiles(np.zeros(0))


def prediction_interval(
    profile: Mapping[str, Any],
    metric: str,
    predicted: ArrayLike,
    *,
    mode: str = "serving",
    transferred: bool | None = None,
    features: Mapping[str, ArrayLike] | None = None,
    extrapolating: Mapping[str, ArrayLike] | None = None,
) -> Interval:
    """80% interval per point for ``metric`` (``ttft_ms``, ``tpot_ms``, or a full key).

    ``extrapolating`` (kind → amount, ``domain.extrapolation_amounts``) widens it by the
    profile's measured extrapolation spreads; profiles stored without them use ``features``.

    ``profile`` is a stored profile (``CalibrationResult.to_dict()``). ``transferred`` defaults
    to the profile's own flag; pass True when it is applied to another accelerator. ``features``
    (``batch_size``, ``input_tokens``, ``output_tokens``, ``gpus``) widen it outside the
    calibration data's range.
    """
    if transferred is None:
        transferred = profile.get("transferred_from") is not None
    if extrapolating is not None and "extrapolation_spreads" in profile:
        spreads = stored_spreads(profile)
        kinds = dict(extrapolating)
        mode_amount = kinds.pop("mode", None)
        key = spread_key(profile, metric, mode)
        sigma = spread_sigma(spreads.get(key, {}), kinds, key)
        if mode_amount is not None:
            target = spread_key(profile, metric, mode, kind="mode")
            across = spread_sigma(spreads.get(target, {}), {"mode": mode_amount}, target)
            sigma = np.hypot(sigma, across)
        return interval(
            predicted,
            stored_quantiles(profile, metric, mode),
            transferred=transferred,
            extra_sigma=sigma,
        )
    ranges = {
        k: FeatureRange(float(r["low"]), float(r["high"]))
        for k, r in profile.get("ranges", {}).items()
    }
    far = doublings_outside(ranges, features) if features else 0.0
    return interval(
        predicted,
        stored_quantiles(profile, metric, mode),
        transferred=transferred,
        doublings_outside=far,
    )


def estimate_intervals(
    profile: Mapping[str, Any],
    result: EstimateResult,
    *,
    transferred: bool | None = None,
    extrapolating: Mapping[str, Mapping[str, ArrayLike]] | None = None,
) -> dict[str, Interval]:
    """Return 80% intervals of an estimate's TTFT and TPOT per point from a stored profile.

    ``extrapolating`` maps each metric (``ttft_ms``, ``tpot_ms``) to its widening amounts
    (``domain.extrapolation_amounts``).

    A TTFT that includes a wait for a free slot (``queue_wait_ms``: an offline queue, or more
    clients than running slots) is banded in two parts. Its own part (admission to first
    token) takes the TTFT band. The wait is a multiple k of a request's service time, which is
    that own part plus its decoding, (S_out − 1) · TPOT (serving.py), so it takes k times
    their bands, the decoding's from TPOT:

        TTFT band = (1 + k) · own band + k · (S_out − 1) · TPOT band.

    A long queue is mostly decode steps, so its error is the TPOT's, not that of the prompt
    work the TTFT residuals measure (nor its widening for prompts outside the domain)."""
    features: dict[str, ArrayLike] = {
        "batch_size": result.batch_size,
        "input_tokens": float(result.input_tokens),
        "output_tokens": float(result.output_tokens),
        "gpus": float(result.gpus_per_replica),
    }

    def band(metric: str, predicted: ArrayLike) -> Interval:
        return prediction_interval(
            profile,
            metric,
            predicted,
            mode=result.mode,
            transferred=transferred,
            features=features,
            extrapolating=None if extrapolating is None else extrapolating[metric],
        )

    tpot = band("tpot_ms", result.tpot_ms)
    queued = np.asarray(result.queue_wait_ms, dtype=np.float64)
    if not np.any(queued > 0.0):
        return {"ttft_ms": band("ttft_ms", result.ttft_ms), "tpot_ms": tpot}
    own = band("ttft_ms", np.asarray(result.ttft_ms, dtype=np.float64) - queued)
    decoding = np.asarray(result.e2e_latency_ms, dtype=np.float64) - result.ttft_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(queued > 0.0, queued / (result.ttft_ms - queued + decoding), 0.0)
        steps = np.where(result.tpot_ms > 0.0, decoding / result.tpot_ms, 0.0)
        low, high = (np.where(k > 0.0, k * steps * t, 0.0) for t in (tpot.low, tpot.high))
    ttft = Interval(low=(1.0 + k) * own.low + low, high=(1.0 + k) * own.high + high)
    return {"ttft_ms": ttft, "tpot_ms": tpot}
