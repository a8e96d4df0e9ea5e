"""What of an estimate request lies outside its calibration profile's fitted domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy.typing as npt

from service.engine.calibration.domain import (
    Domain,
    Extrapolation,
    extrapolation,
    extrapolation_amounts,
    model_kind,
    model_kind_outside,
)
from service.engine.calibration.intervals import (
    ExtrapolationSpread,
    kind_widening,
    stored_spreads,
)
from service.engine.calibration.priors import Prior
from service.engine.calibration.reach import within_reach
from service.engine.efficiency import EfficiencyParams
from service.engine.estimate import EstimateResult
from service.engine.shapes import ModelShape

# Per metric (ttft_ms, tpot_ms): widening kind → amount (domain.extrapolation_amounts).
Amounts = dict[str, dict[str, npt.ArrayLike]]
NO_EXTRAPOLATION: tuple[list[dict[str, Any]], Amounts | None] = ([], None)


def request_extrapolation(
    profile: Mapping[str, Any] | None,
    model: ModelShape,
    accelerator_id: str,
    result: EstimateResult,
    *,
    weights_dtype: str,
    backend: str | None,
    load_pattern: str = "closed_loop",
    stream: bool = False,
) -> tuple[list[dict[str, Any]], Amounts | None]:
    """The ``calibration.extrapolation`` items of an estimate (each with its ``widening``) and,
    per metric, the interval widening amounts by kind (``request_widening``). ``stream``: the
    answer is a simulated open-loop stream, checked as open loop with no concurrency of its
    own, whatever ``load_pattern`` its request names."""
    found, amounts = _outside(
        profile, model, accelerator_id, result, weights_dtype, backend, load_pattern, stream
    )
    if profile is None or amounts is None:
        return NO_EXTRAPOLATION
    spreads = stored_spreads(profile) if "extrapolation_spreads" in profile else None
    outside_kind = model_kind_outside(found)
    items = [
        {**e.as_dict(), "widening": _widening(profile, spreads, e, result.mode, outside_kind)}
        for e in found
    ]
    return items, amounts


def request_widening(
    profile: Mapping[str, Any] | None,
    model: ModelShape,
    accelerator_id: str,
    result: EstimateResult,
    *,
    weights_dtype: str,
    backend: str | None,
    load_pattern: str = "closed_loop",
) -> Amounts | None:
    """Per metric, the interval widening amounts by kind of an estimate, without the items
    (a plan's interval upper bounds need only these)."""
    return _outside(profile, model, accelerator_id, result, weights_dtype, backend, load_pattern)[1]


def _outside(
    profile: Mapping[str, Any] | None,
    model: ModelShape,
    accelerator_id: str,
    result: EstimateResult,
    weights_dtype: str,
    backend: str | None,
    load_pattern: str,
    stream: bool = False,
) -> tuple[list[Extrapolation], Amounts | None]:
    """What of an estimate lies outside the profile's domain, and per metric the interval
    widening amounts by kind (a static batch's TTFT, its prefill, ignores the output length).

    The load checked against the fitted concurrencies is the running batch, the requests the
    engine runs at once: clients or queued requests beyond it only wait, and that wait, priced
    from the running batch's steps, is banded by the TPOT interval (``intervals``). Checking
    the clients would widen an offline queue of 3,000 requests as if the engine ran 3,000.

    Profiles stored before domains were recorded have neither (their intervals keep the old
    distance widening): ``([], None)``.
    """
    if profile is None or profile.get("domain") is None:
        return [], None
    domain = Domain.from_dict(profile["domain"])
    if stream:
        load_pattern = "open_loop"
    request: dict[str, Any] = {
        "mode": result.mode,
        "batch_sizes": () if stream else result.running_batch_size,
        "input_tokens": float(result.input_tokens),
        "output_tokens": float(result.output_tokens),
        "gpus": float(result.gpus_per_replica),
    }
    found = extrapolation(
        domain,
        model=model,
        accelerator=accelerator_id,
        weights_dtype=weights_dtype,
        backend=backend,
        load_pattern=load_pattern,
        **request,
    )
    amounts = {
        metric: extrapolation_amounts(
            domain,
            found,
            prefill_only=metric == "ttft_ms" and result.mode == "static",
            **request,
        )
        for metric in ("ttft_ms", "tpot_ms")
    }
    return found, amounts


def _widening(
    profile: Mapping[str, Any],
    spreads: Mapping[str, Mapping[str, ExtrapolationSpread]] | None,
    item: Extrapolation,
    mode: str,
    outside_kind: bool,
) -> dict[str, Any] | None:
    """How far one extrapolation item widens the answer's intervals: the kind it counts under,
    the measured log-spread per metric (per doubling for numeric kinds) and where it was
    measured (``intervals.kind_widening``). Each kind widens once, at its largest amount, and
    kinds add in quadrature. None for a profile stored before spreads were measured."""
    if spreads is None:
        return None
    kind = item.widening_kind(outside_kind)
    out: dict[str, Any] = {"kind": kind, "doublings": item.doublings}
    measured = []
    for metric in ("ttft_ms", "tpot_ms"):
        spread, source = kind_widening(profile, spreads, metric, mode, kind)
        if metric == "ttft_ms" and mode == "static" and item.dimension == "output_tokens":
            spread, source = None, None  # a static batch's TTFT is its prefill
        out[f"{metric}_log_sigma"] = None if spread is None else spread.log_sigma
        out[f"{metric}_source"] = source
        measured += [spread] if spread is not None else []
    out["per_doubling"] = any(s.per_doubling for s in measured)
    return out


def reach_params(
    profile: Mapping[str, Any] | None,
    params: EfficiencyParams,
    *,
    gpus: float,
    backend: str | None = None,
    mode: str | None = None,
    model: ModelShape | None = None,
) -> EfficiencyParams:
    """The profile's parameters for a request on ``gpus`` GPUs in ``mode`` for ``model``
    (``within_reach``)."""
    if profile is None or profile.get("domain") is None:
        return params
    priors = {
        k: Prior(float(p["mean"]), float(p["sd"])) for k, p in profile.get("priors", {}).items()
    }
    domain = Domain.from_dict(profile["domain"])
    kind = model_kind(model) if model is not None else None
    return within_reach(
        params, priors, domain, gpus=gpus, backend=backend, mode=mode, model_kind=kind
    )
