"""Load an analysis target through the process-local catalog and profile caches.

One freshness query per target (``db.freshness``) reads the model's and accelerator's tokens
and the calibration profile the request's choice resolves to; only a cache miss loads ORM rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Select, Subquery
from sqlalchemy.orm import Session, sessionmaker

from service.db.calibration_repository import AUTO, NOTHING_ASIDE
from service.db.freshness import freshness_query, linked_profile
from service.db.reader import AutocommitReader
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape
from service.services.analysis_specs import AnalysisTarget
from service.services.catalog import CatalogTokens, catalog_cache, read_tokens
from service.services.efficiency_lookup import NONE, ResolvedEfficiency, profile_cache
from service.services.errors import NotFoundError


@dataclass(frozen=True, slots=True)
class Loaded:
    """A target's engine inputs: model, accelerator and resolved calibration."""

    model: ModelShape
    accelerator: Accelerator
    resolved: ResolvedEfficiency


_QUERIES: dict[str, Select[Any]] = {}


def _freshness(target: AnalysisTarget, viewer: str) -> tuple[Select[Any], dict[str, Any]]:
    """Return the freshness query for a target's calibration choice and its extra parameters.

    Besides the model and accelerator tokens it reads the profile id the choice resolves to
    for ``viewer`` (the caller's API key prefix, "" anonymous: only profiles it may see) and
    the token of that profile's source accelerator, all in one statement.
    """
    params: dict[str, Any] = {}
    linked: Subquery | None = None
    if target.calibration == NONE:
        key = NONE
    else:
        key, linked, params = linked_profile(target.backend, target.calibration, viewer)
    query = _QUERIES.get(key)
    if query is None:
        query = _QUERIES.setdefault(key, freshness_query(linked))
    return query, params


class CatalogLookup:
    """Loads targets through the process-local catalog and profile caches of one database."""

    def __init__(self, engine: Engine) -> None:
        self.catalog = catalog_cache(engine)
        self.profiles = profile_cache(engine)

    def tokens(
        self, db: Connection | Session, target: AnalysisTarget, viewer: str = ""
    ) -> CatalogTokens:
        """Run the one freshness query of a target (row tokens and the profile it resolves to
        for ``viewer``)."""
        query, params = _freshness(target, viewer)
        return read_tokens(db, query, target.model, target.accelerator, **params)

    def _profile_id(self, tokens: CatalogTokens, target: AnalysisTarget) -> str | None:
        if target.calibration == NONE:
            return None
        if tokens.extra is None and target.calibration != AUTO:
            raise NotFoundError("calibration profile", target.calibration)
        return None if tokens.extra is None else str(tokens.extra)

    def _uncalibrated(
        self, tokens: CatalogTokens, accelerator: Accelerator, target: AnalysisTarget
    ) -> ResolvedEfficiency:
        """The priors, with the stored profiles ``auto`` did not consider (per request)."""
        priors = self.profiles.uncalibrated(tokens, accelerator, target.backend)
        if tokens.left_aside == NOTHING_ASIDE:
            return priors
        return dataclasses.replace(priors, left_aside=tokens.left_aside)

    def cached(self, tokens: CatalogTokens, target: AnalysisTarget) -> Loaded | None:
        """Return the target from the caches, or None on a miss; NotFoundError if absent."""
        entries = self.catalog.cached(tokens)
        if entries is None:
            return None
        profile_id = self._profile_id(tokens, target)
        if profile_id is None:
            return Loaded(*entries, self._uncalibrated(tokens, entries[1], target))
        resolved = self.profiles.cached(tokens, profile_id)
        return None if resolved is None else Loaded(*entries, resolved)

    def load(self, session: Session, tokens: CatalogTokens, target: AnalysisTarget) -> Loaded:
        """Load what the caches miss from ORM rows and cache it."""
        model, accelerator = self.catalog.load(session, tokens)
        profile_id = self._profile_id(tokens, target)
        resolved = (
            self._uncalibrated(tokens, accelerator, target)
            if profile_id is None
            else self.profiles.resolve(session, tokens, profile_id, accelerator)
        )
        return Loaded(model, accelerator, resolved)

    def get(self, session: Session, target: AnalysisTarget, viewer: str = "") -> Loaded:
        """Return a target within a session: one freshness query, ORM loads only on a miss."""
        tokens = self.tokens(session, target, viewer)
        return self.cached(tokens, target) or self.load(session, tokens, target)

    def fresh(
        self, target: AnalysisTarget, reader: AutocommitReader, viewer: str = ""
    ) -> tuple[CatalogTokens, Loaded | None]:
        """Run the freshness query on ``reader``; return tokens and any cached target."""
        # The answer depends on the database and on these fields only (see ``_freshness``).
        key = (target.model, target.accelerator, target.backend, target.calibration, viewer)
        tokens = reader.run_memoised(
            key, lambda connection: self.tokens(connection, target, viewer)
        )
        return tokens, self.cached(tokens, target)

    def load_in_session(
        self, factory: sessionmaker[Session], tokens: CatalogTokens, target: AnalysisTarget
    ) -> Loaded:
        """Load a missed target in a short session of its own (run it off the event loop)."""
        with factory() as session:
            return self.load(session, tokens, target)
