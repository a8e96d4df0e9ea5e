"""Calibration queries: the only place SQL for profiles, measurements and idempotency keys lives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    and_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    text,
)
from sqlalchemy.orm import Session, aliased

from service.db.models import (
    VISIBILITY_PUBLISHED,
    ApiKeyRow,
    CalibrationMeasurementRow,
    CalibrationProfileModelRow,
    CalibrationProfileRow,
    IdempotencyKeyRow,
    ModelRow,
)

AUTO = "auto"  # a request's ``calibration``: choose a stored profile (else a profile id)


def fitted_models(result: Mapping[str, Any]) -> dict[str, str]:
    """Model id → kind of the models a stored result's domain was fitted on (none for a
    kernel-only profile)."""
    domain = result.get("domain") or {}
    return {str(m["id"]): str(m["kind"]) for m in domain.get("models", ())}


def visible_to(viewer: Any) -> ColumnElement[bool]:
    """Whether a profile is visible to ``viewer`` (an API key's lookup prefix, "" anonymous).

    Published profiles are everyone's; a private one only its owner's (an owner "" never
    matches, so an anonymous caller sees only published profiles), and only while the
    owner's key is not revoked: that is read here, in the statement that lists, reads or
    chooses the profile, so a revocation holds from the next request on every replica
    whatever the processes' key caches hold (``api.keys.KeyVerifier`` caches only that a
    key's secret matches its prefix, which never changes).
    """
    table = CalibrationProfileRow
    active_key = (
        select(ApiKeyRow.id)
        .where(ApiKeyRow.prefix == viewer, ApiKeyRow.revoked_at.is_(None))
        .exists()
    )
    return or_(
        table.visibility == VISIBILITY_PUBLISHED,
        and_(table.owner != "", table.owner == viewer, active_key),
    )


def _fitted_on(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """1 when the profile of the enclosing select has a fitted model meeting ``condition``."""
    fitted = CalibrationProfileModelRow
    rows = select(fitted.profile_id).where(fitted.profile_id == CalibrationProfileRow.id, condition)
    return case((rows.exists(), 1), else_=0)


def _preferred_id(backend: Any) -> ColumnElement[Any]:
    """The visible profile id for the bound ``accelerator_id`` and ``backend`` ("": none) that
    suits the bound ``model_id`` best: fitted on that model, else on a model of its kind
    (dense / MoE / MLA), else any; the newest among equals."""
    table = CalibrationProfileRow
    fitted = CalibrationProfileModelRow
    model_id: BindParameter[str] = bindparam("model_id")
    request_kind = select(ModelRow.kind).where(ModelRow.id == model_id).scalar_subquery()
    stmt = select(table.id).where(
        table.accelerator == bindparam("accelerator_id"),
        table.backend == backend,
        visible_to(bindparam("viewer")),
    )
    return (
        stmt.order_by(
            _fitted_on(fitted.model_id == model_id).desc(),
            _fitted_on(fitted.model_kind == request_kind).desc(),
            table.created_at.desc(),
            table.id.desc(),
        )
        .limit(1)
        .scalar_subquery()
    )


@dataclass(frozen=True, slots=True)
class ProfileChoice:
    """The profile a request's ``calibration`` and ``backend`` select, as one SQL column.

    The one home of the rule: ``auto`` with a backend takes a profile of that backend for the
    accelerator, else one fitted without a backend; ``auto`` without a backend takes only
    profiles fitted without one (another backend's host overheads are never applied to a
    request that did not ask for it). Among those it prefers one fitted on the request's
    model, then one fitted on a model of the same kind (a profile's engine terms were fitted
    on its models), then the newest (``_preferred_id``). Any other value is a profile id (on
    any accelerator). Either way only profiles visible to the viewer count (``visible_to``:
    published ones and the caller's own private ones). ``column`` is a scalar subquery giving
    the chosen id (NULL: none); it binds ``accelerator_id``, ``model_id`` and ``params``.
    ``key`` names the statement's shape, so a query built around it can be cached and reused
    with other parameters. ``left_aside`` (``auto`` only; same binds) counts, as two scalar
    subqueries, the visible profiles the rule does not consider (``LeftAside``), so that an
    answer with no profile can say they exist.
    """

    key: str
    column: ColumnElement[Any]
    params: dict[str, Any]
    left_aside: tuple[ColumnElement[Any], ColumnElement[Any]] | None = None


@dataclass(frozen=True, slots=True)
class LeftAside:
    """Visible profiles ``auto`` does not consider for a request: those of other backends on
    its accelerator (another engine's overheads are never applied), and those it could take
    but stored for other accelerators (``auto`` never transfers)."""

    other_backends: int = 0
    other_accelerators: int = 0


NOTHING_ASIDE = LeftAside()


def profile_choice(backend: str | None, calibration: str, viewer: str = "") -> ProfileChoice:
    """Return the choice rule for a request's ``backend`` and ``calibration`` (not "none"),
    made by ``viewer`` (the caller's API key prefix, "" anonymous)."""
    table = CalibrationProfileRow
    column: ColumnElement[Any]
    if calibration != AUTO:
        stmt = select(table.id).where(
            table.id == bindparam("profile_id"), visible_to(bindparam("viewer"))
        )
        return ProfileChoice(
            "id", stmt.scalar_subquery(), {"profile_id": calibration, "viewer": viewer}
        )
    if backend:
        column = func.coalesce(_preferred_id(bindparam("backend")), _preferred_id(""))
        aside = _count_left_aside(bindparam("backend"))
        return ProfileChoice("auto-backend", column, {"backend": backend, "viewer": viewer}, aside)
    return ProfileChoice("auto-generic", _preferred_id(""), {"viewer": viewer}, _count_left_aside())


def _takes(backend: Any = None) -> ColumnElement[bool]:
    """Whether ``auto`` may take a profile, by its backend, for a request naming ``backend``
    (None: none): one of ``backend``, or one fitted without a backend."""
    table = CalibrationProfileRow
    return table.backend == "" if backend is None else table.backend.in_([backend, ""])


def _count_left_aside(
    backend: Any = None,
) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """``LeftAside``'s two counts for the bound ``accelerator_id`` and ``viewer``."""
    here = CalibrationProfileRow.accelerator == bindparam("accelerator_id")

    def count(condition: ColumnElement[bool]) -> ColumnElement[Any]:
        stmt = select(func.count()).where(visible_to(bindparam("viewer")), condition)
        return stmt.scalar_subquery()

    return count(and_(here, ~_takes(backend))), count(and_(~here, _takes(backend)))


class CalibrationRepository:
    """Profiles and their measurements; callers own the transaction (writes flush)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, profile_id: str) -> CalibrationProfileRow | None:
        """Return the profile with this id, or None (whoever may see it)."""
        return self.session.get(CalibrationProfileRow, profile_id)

    def get_visible(self, profile_id: str, viewer: str) -> CalibrationProfileRow | None:
        """Return the profile with this id if ``viewer`` may see it (``visible_to``), else None."""
        stmt = select(CalibrationProfileRow).where(
            CalibrationProfileRow.id == profile_id, visible_to(viewer)
        )
        return self.session.scalars(stmt).first()

    def lock_series(self, accelerator: str, backend: str, name: str) -> None:
        """Serialise version allocation of one (accelerator, backend, name) until commit.

        PostgreSQL: a transaction-scoped advisory lock on a hash of the three (a hash collision
        only makes two series wait for each other). SQLite: nothing to do, a write transaction
        (``BEGIN IMMEDIATE``) already holds the database's single write lock.
        """
        if self.session.get_bind().dialect.name == "postgresql":
            key = f"ridgeline:calibration:{accelerator}\x1f{backend}\x1f{name}"
            self.session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})

    def next_version(self, accelerator: str, backend: str, name: str) -> int:
        """Return 1 + the highest version stored for (accelerator, backend, name).

        Call ``lock_series`` first in the same transaction, so two writers cannot both get it.
        """
        stmt = select(func.max(CalibrationProfileRow.version)).where(
            CalibrationProfileRow.accelerator == accelerator,
            CalibrationProfileRow.backend == backend,
            CalibrationProfileRow.name == name,
        )
        return int(self.session.scalar(stmt) or 0) + 1

    def add(
        self, row: CalibrationProfileRow, measurements: Sequence[Mapping[str, Any]]
    ) -> CalibrationProfileRow:
        """Insert a profile, the models its domain was fitted on and its measurements
        (``{"kind", "data"}`` each, in order) and flush."""
        self.session.add(row)
        self.session.flush()
        fitted = [
            {"profile_id": row.id, "model_id": model_id, "model_kind": kind}
            for model_id, kind in fitted_models(row.result).items()
        ]
        if fitted:
            self.session.execute(insert(CalibrationProfileModelRow), fitted)
        if measurements:
            rows = [
                {"profile_id": row.id, "position": i, "kind": m["kind"], "data": m["data"]}
                for i, m in enumerate(measurements)
            ]
            self.session.execute(insert(CalibrationMeasurementRow), rows)
        return row

    def measurements(self, profile_id: str) -> Sequence[CalibrationMeasurementRow]:
        """Return a profile's measurements in upload order."""
        stmt = (
            select(CalibrationMeasurementRow)
            .where(CalibrationMeasurementRow.profile_id == profile_id)
            .order_by(CalibrationMeasurementRow.position)
        )
        return self.session.scalars(stmt).all()

    def count_measurements(self, profile_id: str) -> int:
        """Return how many measurements are stored for a profile."""
        stmt = select(func.count()).where(CalibrationMeasurementRow.profile_id == profile_id)
        return int(self.session.scalar(stmt) or 0)

    def page(
        self,
        *,
        viewer: str,
        accelerator: str | None = None,
        after_id: str | None = None,
        limit: int = 50,
    ) -> Sequence[CalibrationProfileRow]:
        """Return up to ``limit`` profiles ``viewer`` may see after ``after_id`` in id (=
        creation) order."""
        stmt = select(CalibrationProfileRow).where(visible_to(viewer))
        if accelerator is not None:
            stmt = stmt.where(CalibrationProfileRow.accelerator == accelerator)
        if after_id is not None:
            stmt = stmt.where(CalibrationProfileRow.id > after_id)
        return self.session.scalars(stmt.order_by(CalibrationProfileRow.id).limit(limit)).all()

    def choose(
        self,
        accelerator: str,
        backend: str | None,
        calibration: str,
        viewer: str = "",
        *,
        model_id: str = "",
    ) -> CalibrationProfileRow | None:
        """Return the profile ``profile_choice(backend, calibration, viewer)`` picks for a
        request about ``model_id`` ("": no model preferred), or None."""
        choice = profile_choice(backend, calibration, viewer)
        # An alias, so the choice's subqueries are not correlated with the selected row.
        chosen = aliased(CalibrationProfileRow, name="chosen")
        stmt = select(chosen).where(chosen.id == choice.column)
        params = {"accelerator_id": accelerator, "model_id": model_id, **choice.params}
        return self.session.scalars(stmt, params).first()

    def left_aside_by_accelerator(
        self, accelerators: Sequence[str], backend: str | None, viewer: str = ""
    ) -> dict[str, LeftAside]:
        """``LeftAside`` for a request naming ``backend`` by ``viewer`` on each of
        ``accelerators``, as ``ProfileChoice.left_aside`` counts one accelerator's."""
        table = CalibrationProfileRow
        takes = _takes(backend or None)
        stmt = (
            select(table.accelerator, takes.label("takes"), func.count())
            .where(visible_to(viewer))
            .group_by(table.accelerator, takes)
        )
        others: dict[str, int] = {}
        taken: dict[str, int] = {}
        for acc, takeable, n in self.session.execute(stmt):
            (taken if takeable else others)[str(acc)] = int(n)
        total = sum(taken.values())
        return {
            acc: LeftAside(others.get(acc, 0), total - taken.get(acc, 0)) for acc in accelerators
        }

    def newest_visible(
        self, accelerator: str, viewer: str, limit: int
    ) -> Sequence[CalibrationProfileRow]:
        """Up to ``limit`` profiles of an accelerator that ``viewer`` may see, newest first."""
        table = CalibrationProfileRow
        stmt = select(table).where(table.accelerator == accelerator, visible_to(viewer))
        stmt = stmt.order_by(table.created_at.desc(), table.id.desc()).limit(limit)
        return self.session.scalars(stmt).all()


class IdempotencyRepository:
    """Stored first answers keyed by (owner, endpoint, Idempotency-Key)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, owner: str, endpoint: str, key: str) -> IdempotencyKeyRow | None:
        """Return the stored answer for this key, or None."""
        stmt = select(IdempotencyKeyRow).where(
            IdempotencyKeyRow.owner == owner,
            IdempotencyKeyRow.endpoint == endpoint,
            IdempotencyKeyRow.key == key,
        )
        return self.session.scalars(stmt).first()

    def add(self, row: IdempotencyKeyRow) -> IdempotencyKeyRow:
        """Insert and flush: a concurrent duplicate raises IntegrityError here."""
        self.session.add(row)
        self.session.flush()
        return row
