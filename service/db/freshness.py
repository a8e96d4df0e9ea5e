"""The freshness query: one statement reading catalog rows' tokens and a request's profile.

A token is a row's ``(version, updated_at)``; every write through the API or seeding bumps
both, and a deleted and recreated row gets a new ``updated_at``. Process-local caches
(``services.catalog.CatalogCache``, ``services.efficiency_lookup.ProfileCache``) keep engine
objects while the tokens this query returns are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, Subquery, bindparam, case, null, select
from sqlalchemy.orm import Session, aliased

from service.db.calibration_repository import NOTHING_ASIDE, LeftAside, profile_choice
from service.db.models import AcceleratorRow, CalibrationProfileRow, ModelRow

Token = tuple[int, datetime]


@dataclass(frozen=True, slots=True)
class TokenRow:
    """What one freshness query returned: each row's token (None: absent) and a linked value.

    ``extra`` is the linked value (a calibration profile id, or None) and ``linked`` the token
    of the accelerator row it names (a profile's source accelerator; None when there is no
    value, or that accelerator is absent). ``left_aside``: the profiles ``auto`` did not
    consider (``ProfileChoice.left_aside``; none for other choices).
    """

    model: Token | None
    accelerator: Token | None
    extra: Any = None
    linked: Token | None = None
    left_aside: LeftAside = NOTHING_ASIDE


def _token_columns(row_type: type[AcceleratorRow] | type[ModelRow], param: str) -> list[Any]:
    where = row_type.id == bindparam(param)
    return [
        select(row_type.version).where(where).scalar_subquery(),
        select(row_type.updated_at).where(where).scalar_subquery(),
    ]


def linked_profile(
    backend: str | None, calibration: str, viewer: str = ""
) -> tuple[str, Subquery, dict[str, Any]]:
    """Return a cache key, the profile part of a request's freshness query and its parameters.

    A one-row subquery: ``value`` is the profile id ``calibration`` resolves to for ``viewer``
    (the caller's API key prefix, "" anonymous; None: none), ``accelerator`` the
    accelerator that profile was fitted on, whose spec sheet a transfer reads
    (``freshness_query`` joins its token), and ``other_backends`` and
    ``other_accelerators`` the counts of ``ProfileChoice.left_aside``. Binds as
    ``profile_choice``.
    """
    choice = profile_choice(backend, calibration, viewer)
    chosen = select(choice.column.label("id")).subquery("chosen_profile")
    # An alias, so the profile id subqueries are not correlated with the joined row; its id
    # (NULL when nothing was chosen) is returned, so the choice is evaluated once.
    profile = aliased(CalibrationProfileRow, name="linked_profile")
    # the counts only matter, and are only run, when nothing was chosen
    aside = [
        case((chosen.c.id.is_(None), count), else_=0)
        for count in (choice.left_aside or (null(), null()))
    ]
    linked = select(
        profile.id.label("value"),
        profile.accelerator.label("accelerator"),
        aside[0].label("other_backends"),
        aside[1].label("other_accelerators"),
    ).select_from(chosen.outerjoin(profile, profile.id == chosen.c.id))
    return choice.key, linked.subquery("linked"), choice.params


def freshness_query(linked: Subquery | None = None) -> Select[Any]:
    """Return the token query (binds ``model_id`` and ``accelerator_id``).

    ``linked`` is an optional one-row subquery with columns ``value`` (returned as ``extra``),
    ``accelerator`` (an accelerator id whose token is returned as ``linked``),
    ``other_backends`` and ``other_accelerators`` (returned as ``left_aside``), joined in the
    same statement so that a request still costs one round trip.
    """
    tokens = [
        *_token_columns(ModelRow, "model_id"),
        *_token_columns(AcceleratorRow, "accelerator_id"),
    ]
    if linked is None:
        return select(*tokens, null(), null(), null(), null(), null())
    # An alias, so the target's token subqueries are not correlated with the joined row.
    other = aliased(AcceleratorRow, name="linked_accelerator")
    aside = (linked.c.other_backends, linked.c.other_accelerators)
    return select(*tokens, linked.c.value, other.version, other.updated_at, *aside).select_from(
        linked.outerjoin(other, other.id == linked.c.accelerator)
    )


def _token(version: int | None, updated_at: datetime | None) -> Token | None:
    return None if version is None or updated_at is None else (int(version), updated_at)


def read_token_row(
    db: Connection | Session,
    query: Select[Any],
    model_id: str,
    accelerator_id: str,
    **params: Any,
) -> TokenRow:
    """Run a ``freshness_query`` once and return the rows' tokens and the linked value."""
    values = {"model_id": model_id, "accelerator_id": accelerator_id, **params}
    row = db.execute(query, values).one()
    return TokenRow(
        model=_token(row[0], row[1]),
        accelerator=_token(row[2], row[3]),
        extra=row[4],
        linked=_token(row[5], row[6]),
        left_aside=LeftAside(int(row[7] or 0), int(row[8] or 0)),
    )
