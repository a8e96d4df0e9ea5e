"""Resolve a request's ``calibration`` value into the efficiency parameters the engine uses.

``"none"`` is the spec-sheet roofline with the efficiency priors, whose GEMM compute efficiency
is the accelerator's measured matmul fraction (MAMF / peak) where the catalog has one, and whose
engine overheads are the named backend's priors (``calibration.priors``; generic without one).
``"auto"`` picks a stored profile by the rule in ``db.calibration_repository.profile_choice``
(its one home); no profile means the priors. Any other value is a profile id; a profile
fitted on another accelerator has its efficiencies transferred onto this accelerator's spec
sheet (the fractions apply to the new peaks and bandwidths, GEMM compute efficiencies scaled
by the ratio of measured matmul fractions when both are known), and the answer says so in
``transferred_from``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.db.calibration_repository import (
    AUTO,
    NOTHING_ASIDE,
    CalibrationRepository,
    LeftAside,
    fitted_models,
)
from service.db.catalog_repository import AcceleratorRepository
from service.db.freshness import Token
from service.db.models import CalibrationProfileRow
from service.engine.calibration.domain import model_kind
from service.engine.calibration.fit import CalibrationResult
from service.engine.calibration.intervals import estimate_intervals
from service.engine.calibration.priors import GENERIC, prior_backend, with_engine_priors
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    EfficiencyParams,
    crosses_vendor,
    spec_sheet_efficiency,
    transfer_efficiency,
    uses_measured_matmul,
)
from service.engine.estimate import EstimateResult
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape
from service.services.catalog import CatalogTokens
from service.services.errors import NotFoundError
from service.services.representation import accelerator_from_row

NONE = "none"
# Which compute-efficiency prior shaped an answer (``efficiency_prior``; None: a profile's own).
PRIOR_MEASURED = "measured_matmul"
PRIOR_DEFAULT = "default"
INTERVAL_FIELDS = ("ttft_ms_p10", "ttft_ms_p90", "tpot_ms_p10", "tpot_ms_p90")


@dataclass(frozen=True, slots=True)
class ResolvedEfficiency:
    """Engine parameters and the profile they came from (``{"id", "name", "backend", ...}``).

    ``calibration`` is None when the answer uses the uncalibrated priors. ``profile`` is the
    stored fit (``CalibrationResult.to_dict()``) whose held-out residuals give the intervals,
    and ``transferred`` says it is applied to another accelerator than it was fitted on.
    ``efficiency_prior`` is ``"measured_matmul"`` when a MAMF measurement set (or, on transfer,
    scaled) the GEMM compute efficiency, ``"default"`` for the H100-derived priors, and None
    when a profile's fitted values are used as they are. ``left_aside``: the stored profiles
    ``auto`` did not consider when it found none to take.
    """

    params: EfficiencyParams
    calibration: dict[str, Any] | None
    profile: Mapping[str, Any] | None = None
    transferred: bool = False
    efficiency_prior: str | None = PRIOR_DEFAULT
    left_aside: LeftAside = NOTHING_ASIDE


UNCALIBRATED = ResolvedEfficiency(params=DEFAULT_EFFICIENCY, calibration=None)


def uncalibrated(accelerator: Accelerator | None, backend: str | None = None) -> ResolvedEfficiency:
    """Return the priors for an accelerator and backend.

    GEMM compute efficiencies are the accelerator's measured matmul fractions where known; the
    engine overheads are the backend's priors (``with_engine_priors``).
    """
    spec = DEFAULT_EFFICIENCY if accelerator is None else spec_sheet_efficiency(accelerator)
    params = with_engine_priors(spec, backend)
    if params is DEFAULT_EFFICIENCY:
        return UNCALIBRATED
    measured = accelerator is not None and uses_measured_matmul(accelerator)
    return ResolvedEfficiency(
        params=params,
        calibration=None,
        efficiency_prior=PRIOR_MEASURED if measured else PRIOR_DEFAULT,
    )


def _accelerator(session: Session, accelerator_id: str) -> Accelerator | None:
    row = AcceleratorRepository(session).get(accelerator_id)
    return None if row is None else accelerator_from_row(row)


def _model_match(model: ModelShape, profile: Mapping[str, Any] | None) -> str:
    """How ``auto``'s model preference (``profile_choice``) met the chosen profile."""
    fitted = fitted_models(profile or {})
    kind = model_kind(model)
    if model.id in fitted:
        return "fitted on this model"
    same_kind = sorted(m for m, k in fitted.items() if k == kind)
    if same_kind:
        return f"fitted on {kind} models like this one ({', '.join(same_kind)}), none on it"
    return f"none fitted on this model or another {kind} model"


def choice_reason(
    calibration: str,
    backend: str | None,
    resolved: ResolvedEfficiency,
    model: ModelShape,
) -> str:
    """Say why ``calibration`` (with the request's ``backend`` and ``model``) chose the profile
    of ``resolved``."""
    if calibration != AUTO:
        return "the profile named by id"
    chosen = resolved.calibration or {}
    match = _model_match(model, resolved.profile)
    if chosen.get("backend"):
        return (
            f"auto: a profile of backend {chosen['backend']} for this accelerator, {match}; "
            "the newest such"
        )
    if backend:
        return (
            f"auto: no profile of backend {backend} for this accelerator; one fitted without "
            f"a backend, {match}; the newest such"
        )
    return (
        f"auto: a profile fitted without a backend for this accelerator, {match}; the newest "
        "such (name a backend to use that backend's profiles)"
    )


def uncalibrated_note(
    calibration: str, backend: str | None, resolved: ResolvedEfficiency, accelerator_id: str
) -> str | None:
    """Say why ``auto`` answered from the spec sheet (None when a profile applies or the
    request asked for ``none``), and which stored profiles it did not consider
    (``resolved.left_aside``)."""
    if calibration != AUTO or resolved.calibration is not None:
        return None
    aside = resolved.left_aside
    listing = f"(GET /v1/calibrations?accelerator={accelerator_id})"
    if backend:
        priors = f"{backend}'s" if prior_backend([backend]) != GENERIC else "the generic"
        kind = f"of backend {backend} or fitted without a backend"
        other_backends = "of other backends"
        use_other_backend = (
            "stored for it; auto never applies another engine's overheads: name one by id to "
            f"use its kernel efficiencies with {priors} engine priors {listing}"
        )
    else:
        priors = "the generic"
        kind = "fitted without a backend"
        other_backends = "of named backends"
        use_other_backend = f"stored for it: name the request's backend to use them {listing}"
    use_other_accelerator = (
        "stored for other accelerators; auto never transfers one: name it by id to apply it to "
        "this accelerator's spec sheet, with wider intervals (GET /v1/calibrations)"
    )
    parts = [
        f"auto: no profile {kind} for this accelerator, so the spec sheet with {priors} "
        "engine priors"
    ]
    for count, which, use in (
        (aside.other_backends, other_backends, use_other_backend),
        (aside.other_accelerators, kind, use_other_accelerator),
    ):
        if count:
            profiles = "1 profile" if count == 1 else f"{count} profiles"
            parts.append(f"{profiles} {which} {'is' if count == 1 else 'are'} {use}")
    return "; ".join(parts)


def resolve_efficiency(
    session: Session,
    accelerator_id: str,
    backend: str | None,
    calibration: str,
    *,
    model_id: str = "",
    viewer: str = "",
    accelerator: Accelerator | None = None,
) -> ResolvedEfficiency:
    """Return the efficiency parameters for ``calibration`` as chosen for a request about
    ``model_id`` by ``viewer`` (the caller's API key prefix, "" anonymous); NotFoundError
    for an unknown or invisible id.

    ``accelerator`` is the target's catalog entry; without it, it is read from the database.
    """
    target = accelerator if accelerator is not None else _accelerator(session, accelerator_id)
    if calibration == NONE:
        return uncalibrated(target, backend)
    row = CalibrationRepository(session).choose(
        accelerator_id, backend, calibration, viewer, model_id=model_id
    )
    if row is None:
        if calibration != AUTO:
            raise NotFoundError("calibration profile", calibration)
        return uncalibrated(target, backend)
    return apply_profile(session, row, accelerator_id, target)


def apply_profile(
    session: Session,
    row: CalibrationProfileRow,
    accelerator_id: str,
    target: Accelerator | None,
) -> ResolvedEfficiency:
    """Apply a chosen profile to the target accelerator (transferred if fitted on another)."""
    result = CalibrationResult.from_dict(row.result)
    transferred_from = row.accelerator if row.accelerator != accelerator_id else None
    params, prior = result.efficiency, None
    if transferred_from is not None and target is not None:
        source = _accelerator(session, transferred_from)
        if source is not None:
            moved = transfer_efficiency(params, source, target)
            if crosses_vendor(source, target):  # compute efficiency from the target's sheet
                prior = PRIOR_MEASURED if uses_measured_matmul(target) else PRIOR_DEFAULT
            else:
                prior = PRIOR_MEASURED if moved != params else None
            params = moved
    return ResolvedEfficiency(
        params=params,
        calibration={
            "id": row.id,
            "name": row.name,
            "backend": row.backend or None,
            "transferred_from": transferred_from,
        },
        profile=row.result,
        transferred=transferred_from is not None,
        efficiency_prior=prior,
    )


# Target accelerator token and source accelerator token a profile was resolved under.
_Tokens = tuple[Token | None, Token | None]


class ProfileCache:
    """Calibration profiles of one database resolved against accelerators.

    Profiles are immutable once stored, but one applied to another accelerator is transferred
    with both spec sheets (``transfer_efficiency``). An entry per (profile id, target id) is
    reused while the target's token and the profile's source accelerator's token (both read
    by the request's freshness query) are unchanged; an edit or deletion of either misses.
    """

    def __init__(self) -> None:
        self._resolved: dict[tuple[str, str], tuple[_Tokens, ResolvedEfficiency]] = {}
        # by (accelerator id, backend)
        self._priors: dict[tuple[str, str], tuple[Token | None, ResolvedEfficiency]] = {}

    def uncalibrated(
        self, tokens: CatalogTokens, accelerator: Accelerator, backend: str | None = None
    ) -> ResolvedEfficiency:
        """Return ``uncalibrated(accelerator, backend)``, reused while the token holds."""
        key = (tokens.accelerator_id, backend or "")
        entry = self._priors.get(key)
        if entry is not None and entry[0] == tokens.accelerator:
            return entry[1]
        priors = uncalibrated(accelerator, backend)
        if len(self._priors) >= PROFILE_CACHE_LIMIT and key not in self._priors:
            self._priors.clear()
        self._priors[key] = (tokens.accelerator, priors)
        return priors

    def cached(self, tokens: CatalogTokens, profile_id: str) -> ResolvedEfficiency | None:
        """Return the profile applied to the tokens' accelerator if cached under these tokens."""
        entry = self._resolved.get((profile_id, tokens.accelerator_id))
        if entry is None or entry[0] != (tokens.accelerator, tokens.linked):
            return None
        return entry[1]

    def resolve(
        self,
        session: Session,
        tokens: CatalogTokens,
        profile_id: str,
        accelerator: Accelerator,
    ) -> ResolvedEfficiency:
        """Return the profile applied to ``accelerator``; NotFoundError if it is gone.

        ``accelerator`` is the target as of ``tokens``. A row edited after the tokens were
        read is cached under the old tokens, so the next request resolves it again.
        """
        hit = self.cached(tokens, profile_id)
        if hit is None:
            # The freshness query already chose this id for the caller (visibility included).
            row = CalibrationRepository(session).get(profile_id)
            if row is None:
                raise NotFoundError("calibration profile", profile_id)
            hit = apply_profile(session, row, tokens.accelerator_id, accelerator)
            key = (profile_id, tokens.accelerator_id)
            if len(self._resolved) >= PROFILE_CACHE_LIMIT and key not in self._resolved:
                self._resolved.clear()
            self._resolved[key] = ((tokens.accelerator, tokens.linked), hit)
        return hit


PROFILE_CACHE_LIMIT = 256
_CACHES: weakref.WeakKeyDictionary[Engine, ProfileCache] = weakref.WeakKeyDictionary()


def profile_cache(engine: Engine) -> ProfileCache:
    """Return the process-local profile cache of one database engine."""
    cache = _CACHES.get(engine)
    if cache is None:
        cache = _CACHES.setdefault(engine, ProfileCache())
    return cache


def interval_columns(
    resolved: ResolvedEfficiency,
    result: EstimateResult,
    extrapolating: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, list[float | None]]:
    """80% interval bounds per point (``ttft_ms_p10`` ...); None without a calibration profile.

    ``extrapolating`` (per metric, ``extrapolation.request_extrapolation``) widens them outside
    the domain.
    """
    if resolved.profile is None:
        points = int(np.size(result.ttft_ms))
        return {name: [None] * points for name in INTERVAL_FIELDS}
    bands = estimate_intervals(
        resolved.profile, result, transferred=resolved.transferred, extrapolating=extrapolating
    )
    columns: dict[str, list[float | None]] = {}
    for metric in ("ttft_ms", "tpot_ms"):
        band = bands[metric]
        for suffix, values in (("p10", band.low), ("p90", band.high)):
            columns[f"{metric}_{suffix}"] = [
                v if math.isfinite(v) else None for v in np.atleast_1d(values).tolist()
            ]
    return columns
