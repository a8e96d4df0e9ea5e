"""Calibration use cases: fit an upload within a time budget, store it immutably, read it back.

A POST with an ``Idempotency-Key`` is answered once: the first 201 is stored with the key (under
a unique constraint, in the profile's own transaction), a retry with the same upload replays it,
the same key with another upload is a 422. Two concurrent first attempts both fit; the loser's
insert hits the constraint, is rolled back (so its profile is not stored) and replays the
winner's answer.

Fits run on a small dedicated thread pool, never on the event loop. A fit that exceeds
``fit_budget_s`` is abandoned: the request fails with FitTimeoutError (503), nothing is stored,
and the fit's thread finishes in the background (Python threads cannot be stopped); the pool's
size bounds how many abandoned fits can run at once.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.calibration_repository import CalibrationRepository, IdempotencyRepository
from service.db.models import (
    VISIBILITY_PRIVATE,
    VISIBILITY_PUBLISHED,
    CalibrationProfileRow,
    IdempotencyKeyRow,
    utcnow,
)
from service.db.session import begin_write
from service.engine.calibration.fit import (
    KERNEL_GROUPS,
    CalibrationResult,
    fit,
    kernel_group_parameters,
    kernel_groups_of,
    streaming_source,
)
from service.engine.calibration.intervals import (
    COVERAGE,
    DISTANCE_LOG_SIGMA,
    TRANSFER_LOG_SIGMA,
)
from service.engine.calibration.measurements import Measurement
from service.engine.efficiency import EfficiencyParams, spec_sheet_efficiency
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape
from service.services.calibration_uploads import (
    CalibrationUpload,
    check_against_catalog,
    check_one_backend,
    measurement_to_json,
    referenced_models,
    split_by_backend,
    stored_measurement_json,
    with_runs_backend,
)
from service.services.catalog import CatalogService, Page
from service.services.errors import FieldError, NotFoundError, ServiceError
from service.services.representation import decode_cursor, encode_cursor

ENDPOINT = "POST /v1/calibrations"
KERNEL_SEARCH_LIMIT = 50  # newest profiles of the accelerator searched for kernel tables
FIT_WORKERS = 2
_FIT_POOL = ThreadPoolExecutor(max_workers=FIT_WORKERS, thread_name_prefix="calibration-fit")


class FitTimeoutError(ServiceError):
    """The fit did not finish within the per-request time budget."""

    def __init__(self, budget_s: float) -> None:
        super().__init__(
            f"the calibration fit exceeded its time budget of {budget_s:g} s; "
            "send fewer measurements or retry later"
        )
        self.budget_s = budget_s


@dataclass(frozen=True, slots=True)
class CreateOutcome:
    """The answer to a POST: status, body, and whether it replays a stored answer."""

    status_code: int
    body: dict[str, Any]
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class FitLimits:
    """Operator limits of one calibration request."""

    max_measurements: int
    fit_budget_s: float


def new_profile_id() -> str:
    """A profile id that sorts by creation time: ``cal_`` + ms timestamp + random hex."""
    return f"cal_{int(time.time() * 1000):013x}{secrets.token_hex(6)}"


def _iso(row: CalibrationProfileRow) -> str:
    """Creation time in ISO 8601 UTC (SQLite returns naive UTC datetimes)."""
    moment = row.created_at
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def profile_to_dict(row: CalibrationProfileRow) -> dict[str, Any]:
    """The profile as the API returns it."""
    return {
        "id": row.id,
        "accelerator": row.accelerator,
        "backend": row.backend or None,
        "backend_version": row.backend_version or None,
        "name": row.name,
        "version": row.version,
        "created_at": _iso(row),
        "visibility": row.visibility,
        **row.summary,
    }


VISIBILITIES = (VISIBILITY_PUBLISHED, VISIBILITY_PRIVATE)


def check_visibility(visibility: str, owner: str) -> None:
    """FieldError unless ``visibility`` is known and a private profile has an owning key."""
    if visibility not in VISIBILITIES:
        raise FieldError("visibility", f"must be one of {', '.join(VISIBILITIES)}")
    if visibility == VISIBILITY_PRIVATE and not owner:
        raise FieldError("visibility", "a private profile needs an API key to own it")


def _with_visibility(fingerprint: str, visibility: str) -> str:
    """A private upload's request hash differs from the same upload published."""
    if visibility == VISIBILITY_PUBLISHED:
        return fingerprint
    return hashlib.sha256(f"{visibility}:{fingerprint}".encode()).hexdigest()


def intervals_info(result: CalibrationResult) -> dict[str, Any]:
    """How estimates made with this profile get their 80% intervals."""
    return {
        "coverage": COVERAGE,
        "method": "empirical quantiles of held-out log(measured/predicted) residuals per metric, "
        "widened for transfer to another accelerator and, per dimension of the request outside "
        "the profile's domain (calibration.extrapolation), by the spread measured on held-out "
        "extrapolations of that kind",
        "extrapolation_spreads": {
            metric: {
                kind: {"log_sigma": v.log_sigma, "per_doubling": v.per_doubling, "n": v.n}
                for kind, v in kinds.items()
            }
            for metric, kinds in result.spreads.items()
        },
        "transfer_log_sigma": TRANSFER_LOG_SIGMA,
        "distance_log_sigma_per_doubling": DISTANCE_LOG_SIGMA,
        "residual_quantiles": {
            key: {"n": q.n, "log_low": q.q_low, "log_high": q.q_high}
            for key, q in result.residual_quantiles.items()
        },
        "calibrated_range": {
            key: {"low": r.low, "high": r.high} for key, r in result.ranges.items()
        },
    }


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class KernelBase:
    """Kernel efficiencies an upload without some kernel tables builds on, and where they came
    from; ``runs``: whether the upload holds end-to-end runs (which then fit only the engine
    terms)."""

    params: EfficiencyParams | None = None  # None: the accelerator's spec sheet
    sources: Mapping[str, str] = field(default_factory=dict)  # kernel group → profile id
    runs: bool = False

    def warning(self) -> list[str]:
        if not self.sources:
            return []
        named = ", ".join(f"{group} from {pid}" for group, pid in self.sources.items())
        runs = "; the runs fit only the engine terms" if self.runs else ""
        return [
            "the upload has no kernel measurements of these groups, so their efficiencies come "
            f"from the newest profile of this accelerator fitted on them ({named}){runs}"
        ]


def summary_of(
    upload: CalibrationUpload, result: CalibrationResult, base: KernelBase | None = None
) -> dict[str, Any]:
    """The stored representation parts a fit determines (JSON-safe)."""
    base = base or KernelBase()
    summary: dict[str, Any] = json_safe(
        {
            "format": upload.format,
            "n_measurements": len(upload.measurements),
            "parameters": result.parameters,
            "standard_errors": dict(result.standard_errors),
            "fit": {**result.fit_summary(), "kernels_from": dict(base.sources)},
            "intervals": intervals_info(result),
            "warnings": [*upload.warnings, *base.warning(), *result.warnings],
        }
    )
    return summary


def run_fit(
    measurements: Sequence[Measurement],
    accelerator: Accelerator,
    models: Mapping[str, ModelShape],
    budget_s: float,
    base: EfficiencyParams | None = None,
) -> CalibrationResult:
    """Fit on the fit pool within ``budget_s`` seconds (FitTimeoutError past it), starting
    from ``base`` (the kernel efficiencies the upload does not measure; None: the
    accelerator's spec sheet)."""
    future = _FIT_POOL.submit(fit, measurements, accelerator, models, base=base)
    try:
        return future.result(timeout=budget_s)
    except FutureTimeout:
        future.cancel()
        raise FitTimeoutError(budget_s) from None
    except EngineError as exc:
        raise FieldError("measurements", f"the fit rejected the measurements: {exc}") from exc


# Concurrent uploads of one (accelerator, backend, name) may race for a version number.
STORE_ATTEMPTS = 3


class CalibrationService:
    """Create, read and list calibration profiles within one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.catalog = CatalogService(session)
        self.profiles = CalibrationRepository(session)
        self.keys = IdempotencyRepository(session)

    def _visible(self, profile_id: str, viewer: str) -> CalibrationProfileRow:
        row = self.profiles.get_visible(profile_id, viewer)
        if row is None:  # a private profile of another key is as absent as an unknown id
            raise NotFoundError("calibration profile", profile_id)
        return row

    def get(self, profile_id: str, *, viewer: str = "") -> dict[str, Any]:
        """Return one profile ``viewer`` (an API key prefix, "" anonymous) may see; else
        NotFoundError."""
        return profile_to_dict(self._visible(profile_id, viewer))

    def list_profiles(
        self, *, accelerator: str | None, cursor: str | None, limit: int, viewer: str = ""
    ) -> Page:
        """Return a page of the profiles ``viewer`` may see in creation order, optionally for
        one accelerator."""
        rows = self.profiles.page(
            viewer=viewer, accelerator=accelerator, after_id=decode_cursor(cursor), limit=limit + 1
        )
        items = [profile_to_dict(r) for r in rows[:limit]]
        more = len(rows) > limit
        return Page(items=items, next_cursor=encode_cursor(items[-1]["id"]) if more else None)

    def measurements(self, profile_id: str, *, viewer: str = "") -> list[dict[str, Any]]:
        """Return the measurements a profile ``viewer`` may see was fitted on, in upload order."""
        self._visible(profile_id, viewer)
        return [stored_measurement_json(r.data) for r in self.profiles.measurements(profile_id)]

    def _replay(self, owner: str, key: str, fingerprint: str) -> CreateOutcome | None:
        stored = self.keys.get(owner, ENDPOINT, key)
        if stored is None:
            return None
        if stored.request_hash != fingerprint:
            raise FieldError("Idempotency-Key", "was already used with a different request body")
        return CreateOutcome(stored.status_code, dict(stored.response), replayed=True)

    def check(
        self, upload: CalibrationUpload, limits: FitLimits, *, one_backend: bool = True
    ) -> tuple[Accelerator, dict[str, ModelShape]]:
        """Validate an upload against limits and the catalog (and, unless ``one_backend`` is
        False, that its runs name one backend); return its accelerator and models."""
        if one_backend:
            check_one_backend(upload)
        count = len(upload.measurements)
        if count == 0:
            raise FieldError("measurements", "the upload holds no usable measurement")
        if count > limits.max_measurements:
            raise FieldError(
                "measurements",
                f"at most {limits.max_measurements} measurements per calibration, got {count}",
            )
        try:
            accelerator = self.catalog.accelerator(upload.metadata.accelerator)
        except NotFoundError as exc:
            raise FieldError("accelerator", f"{exc} in the catalog") from exc
        models: dict[str, ModelShape] = {}
        for model_id in referenced_models(upload.measurements):
            try:
                models[model_id] = self.catalog.model_shape(model_id)
            except NotFoundError:
                continue  # named with its row by check_against_catalog
        check_against_catalog(upload, accelerator, models)
        return accelerator, models

    def create(
        self,
        upload: CalibrationUpload,
        limits: FitLimits,
        *,
        owner: str,
        idempotency_key: str | None = None,
        visibility: str = VISIBILITY_PUBLISHED,
    ) -> CreateOutcome:
        """Fit and store a profile (or replay the answer already given to this key).

        ``visibility``: published (every reader's) or private (only ``owner``'s, the uploading
        key's prefix; FieldError without one).
        """
        check_visibility(visibility, owner)
        fingerprint = _with_visibility(upload.fingerprint(), visibility)
        if idempotency_key is not None:
            replay = self._replay(owner, idempotency_key, fingerprint)
            if replay is not None:
                return replay
        upload = with_runs_backend(upload)
        accelerator, models = self.check(upload, limits)
        base = self.kernel_base(upload, owner, accelerator)
        # Nothing is written yet: end the read transaction so neither a pooled connection nor
        # SQLite's write lock is held while the fit runs (fits queue on a small pool).
        self.session.rollback()
        result = run_fit(upload.measurements, accelerator, models, limits.fit_budget_s, base.params)
        return self._commit(
            owner,
            idempotency_key,
            fingerprint,
            lambda: self._store(upload, result, owner, visibility, base),
        )

    def kernel_base(
        self, upload: CalibrationUpload, viewer: str, accelerator: Accelerator
    ) -> KernelBase:
        """For an upload without kernel measurements of some group (``KERNEL_GROUPS``: GEMMs
        per dtype, attention per phase, collectives): that group's efficiencies from the newest
        profile of the accelerator that ``viewer`` may see and that was fitted on such
        measurements, as one upload of them all would give. End-to-end runs then fit only the
        engine terms (the kernel stage never sees the runs; benchmarks/results/accuracy.md §7e
        measures what the tables add); kernel tables uploaded one file at a time make one
        profile of all of them, the one ``auto`` takes for a request naming no backend."""
        measured = kernel_groups_of(upload.measurements)
        missing = [g for g in KERNEL_GROUPS if g not in measured]
        if not missing:
            return KernelBase()
        sources: dict[str, str] = {}
        stored: dict[str, Mapping[str, float]] = {}  # profile id → its efficiency values
        for row in self.profiles.newest_visible(accelerator.id, viewer, KERNEL_SEARCH_LIMIT):
            metrics = row.summary.get("fit", {}).get("metrics", {})
            found = [g for g in missing if g not in sources and f"{g}.latency_ms" in metrics]
            if found:
                stored[row.id] = CalibrationResult.from_dict(row.result).values
                sources.update(dict.fromkeys(found, row.id))
            if len(sources) == len(missing):
                break
        if not sources:
            return KernelBase()
        values = spec_sheet_efficiency(accelerator).to_dict()
        ordered = {g: sources[g] for g in KERNEL_GROUPS if g in sources}
        for group, profile_id in ordered.items():  # KERNEL_GROUPS order: decode's latency last
            values.update({n: stored[profile_id][n] for n in kernel_group_parameters(group)})
        # the streaming fraction one upload of them all would take: a borrowed fp8 group sets
        # it when no bf16 group, borrowed or measured, does (bf16's carries it itself)
        gemm_groups = {g.removeprefix("gemm_") for g in (*measured, *ordered) if "gemm_" in g}
        if streaming_source(gemm_groups) == "fp8" and "gemm_fp8" in ordered:
            streaming = stored[ordered["gemm_fp8"]]["memory_bandwidth_efficiency"]
            values["memory_bandwidth_efficiency"] = streaming
        runs = any(m.kind in ("static", "serving") for m in upload.measurements)
        return KernelBase(EfficiencyParams.from_dict(values), ordered, runs)

    def create_per_backend(
        self,
        upload: CalibrationUpload,
        limits: FitLimits,
        *,
        owner: str,
        idempotency_key: str | None = None,
        visibility: str = VISIBILITY_PUBLISHED,
    ) -> CreateOutcome:
        """Fit one profile per backend the runs name (kernel measurements go to each) and store
        them all in one transaction, or none; the body is ``{"items": [profile, ...]}``."""
        check_visibility(visibility, owner)
        # another answer than create's for the same upload: its own 64-hex request hash
        fingerprint = hashlib.sha256(f"per-backend:{upload.fingerprint()}".encode()).hexdigest()
        fingerprint = _with_visibility(fingerprint, visibility)
        if idempotency_key is not None:
            replay = self._replay(owner, idempotency_key, fingerprint)
            if replay is not None:
                return replay
        parts = split_by_backend(upload)
        accelerator, models = self.check(upload, limits, one_backend=False)
        bases = [self.kernel_base(part, owner, accelerator) for part in parts]
        self.session.rollback()
        results = [
            run_fit(part.measurements, accelerator, models, limits.fit_budget_s, base.params)
            for part, base in zip(parts, bases, strict=True)
        ]

        def store() -> dict[str, Any]:
            return {
                "items": [
                    self._store(p, r, owner, visibility, b)
                    for p, r, b in zip(parts, results, bases, strict=True)
                ]
            }

        return self._commit(owner, idempotency_key, fingerprint, store)

    def _commit(
        self,
        owner: str,
        idempotency_key: str | None,
        fingerprint: str,
        store: Callable[[], dict[str, Any]],
    ) -> CreateOutcome:
        """Run ``store`` in a write transaction with the idempotency key; retry on a version
        race, replay a concurrent first answer to the same key."""
        for attempt in range(STORE_ATTEMPTS):
            begin_write(self.session)
            if attempt and idempotency_key is not None:
                replay = self._replay(owner, idempotency_key, fingerprint)
                if replay is not None:
                    return replay
            try:
                body = store()
                if idempotency_key is not None:
                    self.keys.add(
                        IdempotencyKeyRow(
                            owner=owner,
                            endpoint=ENDPOINT,
                            key=idempotency_key,
                            request_hash=fingerprint,
                            status_code=201,
                            response=body,
                        )
                    )
                return CreateOutcome(201, body)
            except IntegrityError:
                # a concurrent upload took this key (replayed next) or this version number
                self.session.rollback()
                if attempt == STORE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _store(
        self,
        upload: CalibrationUpload,
        result: CalibrationResult,
        owner: str,
        visibility: str,
        base: KernelBase,
    ) -> dict[str, Any]:
        meta = upload.metadata
        self.profiles.lock_series(meta.accelerator, meta.backend, meta.name)
        row = CalibrationProfileRow(
            id=new_profile_id(),
            accelerator=meta.accelerator,
            backend=meta.backend,
            backend_version=meta.backend_version,
            name=meta.name,
            version=self.profiles.next_version(meta.accelerator, meta.backend, meta.name),
            n_measurements=len(upload.measurements),
            result=json_safe(result.to_dict()),
            summary=summary_of(upload, result, base),
            created_at=utcnow(),
            owner=owner,
            visibility=visibility,
        )
        stored = [{"kind": m.kind, "data": measurement_to_json(m)} for m in upload.measurements]
        self.profiles.add(row, stored)
        return profile_to_dict(row)
