"""Catalog use cases: list, read, create, replace and delete accelerators and models.

``CatalogCache`` keeps engine objects per process, keyed by id and each row's freshness token
(``version``, ``updated_at``): one query (``db.freshness``) reads both tokens, so an edit made
through any worker process is seen by the next request.
"""

from __future__ import annotations

import copy
import difflib
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine, Select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.calibration_repository import NOTHING_ASIDE, LeftAside
from service.db.catalog_repository import (
    AcceleratorRepository,
    CatalogDeletionRepository,
    ModelRepository,
    accelerator_core_row,
    catalog_ids,
)
from service.db.freshness import Token, read_token_row
from service.db.models import (
    KIND_ACCELERATOR,
    KIND_MODEL,
    ORIGIN_SEED,
    ORIGIN_USER,
    AcceleratorRow,
    ModelRow,
    utcnow,
)
from service.db.session import begin_write
from service.engine.calibration.domain import model_kind
from service.engine.hardware import Accelerator
from service.engine.hf_import import shape_from_hf_config
from service.engine.param_count import count_parameters
from service.engine.shapes import ModelShape
from service.services.errors import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
)
from service.services.representation import (
    SHAPE_FIELDS,
    accelerator_from_row,
    accelerator_to_dict,
    decode_cursor,
    encode_cursor,
    etag_of,
    model_to_dict,
    shape_from_row,
)

RowT = TypeVar("RowT", AcceleratorRow, ModelRow)

ACCELERATOR_FIELDS = (
    "vendor",
    "name",
    "memory_gb",
    "memory_type",
    "memory_bandwidth_gb_s",
    "peak_tflops",
    "measured_matmul_tflops",
    "measured_memory_bandwidth_gb_s",
    "interconnect_gb_s",
    "topology",
    "tdp_w",
    "price_usd_per_hour",
    "price",
    "confidence",
    "notes",
    "sources",
    "field_sources",
)
ACCELERATOR_DEFAULTS: dict[str, Any] = {
    "memory_type": "",
    "interconnect_gb_s": 0.0,
    "price_usd_per_hour": None,
    "price": None,
    "confidence": None,
    "notes": "",
    "sources": [],
    "field_sources": {},
}
MODEL_META_DEFAULTS: dict[str, Any] = {
    "name": "",
    "family": "",
    "hf_repo": None,
    "vendor_stated_params": None,
    "notes": "",
    "sources": [],
    "field_sources": {},
}


@dataclass(frozen=True, slots=True)
class Page:
    """One page of representations and the cursor of the next page (None at the end)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


def etag_matches(if_match: str, etag: str) -> bool:
    """Apply RFC 9110 strong comparison of an If-Match header against the current ETag."""
    candidates = [tag.strip() for tag in if_match.split(",")]
    return "*" in candidates or etag in candidates


def apply_accelerator(row: AcceleratorRow, data: Mapping[str, Any]) -> None:
    """Copy accelerator fields from ``data`` onto ``row`` (missing ones take defaults)."""
    for name in ACCELERATOR_FIELDS:
        value = data.get(name)
        setattr(
            row, name, copy.deepcopy(ACCELERATOR_DEFAULTS.get(name) if value is None else value)
        )


def shape_from_data(model_id: str, data: Mapping[str, Any]) -> ModelShape:
    """Build and validate a ModelShape; raises InvalidShapeError naming the field."""
    shape_values = {name: data[name] for name in SHAPE_FIELDS if data.get(name) is not None}
    shape = ModelShape(
        id=model_id,
        name=str(data.get("name") or ""),
        family=str(data.get("family") or ""),
        **shape_values,
    )
    shape.validate()
    return shape


def apply_model(row: ModelRow, data: Mapping[str, Any]) -> None:
    """Validate the shape in ``data``, count its parameters and copy it onto ``row``."""
    shape = shape_from_data(row.id, data)
    counts = count_parameters(shape)
    for name, default in MODEL_META_DEFAULTS.items():
        value = data.get(name)
        setattr(row, name, copy.deepcopy(default if value is None else value))
    row.shape = {name: getattr(shape, name) for name in SHAPE_FIELDS}
    row.num_layers = shape.num_layers
    row.hidden_size = shape.hidden_size
    row.num_experts = shape.num_experts
    row.kind = model_kind(shape)
    row.total_params = int(counts.total)
    row.active_params = int(counts.active)


@dataclass(frozen=True)
class _Collection(Generic[RowT]):
    """Generic CRUD over one catalog table."""

    kind: str
    session: Session
    repo: Any
    row_type: type[RowT]
    to_dict: Callable[[RowT], dict[str, Any]]
    apply: Callable[[RowT, Mapping[str, Any]], None]
    deletions: CatalogDeletionRepository
    may_edit_seeded: bool = True

    def load(self, row_id: str) -> RowT:
        row: RowT | None = self.repo.get(row_id)
        if row is None:
            closest = closest_ids(row_id, catalog_ids(self.session, self.kind))
            raise NotFoundError(self.kind, row_id, closest)
        return row

    def load_for_update(self, row_id: str) -> RowT:
        """Load the row locked for this write transaction (see ``get_for_update``)."""
        begin_write(self.session)
        row: RowT | None = self.repo.get_for_update(row_id)
        if row is None:
            raise NotFoundError(self.kind, row_id)
        return row

    def check_owner(self, row: RowT) -> None:
        """Refuse edits and deletions of seeded rows unless the caller may make them (admin)."""
        seeded = row.origin == ORIGIN_SEED or row.seed_hash is not None
        if seeded and not self.may_edit_seeded:
            raise PermissionDeniedError(
                f"{self.kind} '{row.id}' comes from the seeded catalog; editing or deleting it "
                "needs the 'admin' scope"
            )

    def check(self, row: RowT, if_match: str | None) -> None:
        if if_match is not None and not etag_matches(if_match, etag_of(self.to_dict(row))):
            raise PreconditionFailedError(
                f"{self.kind} '{row.id}' has changed since the ETag in If-Match was issued"
            )

    def create(self, data: Mapping[str, Any]) -> dict[str, Any]:
        begin_write(self.session)
        row_id = str(data["id"])
        if self.repo.get(row_id) is not None:
            raise ConflictError(self.kind, row_id)
        row = self.row_type(id=row_id, origin=ORIGIN_USER, version=1)
        self.apply(row, data)
        try:
            with self.session.begin_nested():
                self.deletions.remove(self.kind, row_id)
                self.repo.add(row)
        except IntegrityError as exc:
            raise ConflictError(self.kind, row_id) from exc
        return self.to_dict(row)

    def replace(self, row_id: str, data: Mapping[str, Any], if_match: str | None) -> dict[str, Any]:
        # The lock makes check-then-write atomic: of two writers holding the same ETag, the
        # second reads the first one's commit and fails the If-Match check.
        row = self.load_for_update(row_id)
        self.check_owner(row)
        self.check(row, if_match)
        self.apply(row, data)
        row.origin = ORIGIN_USER
        row.version += 1
        row.updated_at = utcnow()
        self.repo.save(row)
        return self.to_dict(row)

    def delete(self, row_id: str, if_match: str | None) -> None:
        row = self.load_for_update(row_id)
        self.check_owner(row)
        self.check(row, if_match)
        # A row seeded once (even if edited since) gets a tombstone so seeding won't restore it.
        seeded = row.origin == ORIGIN_SEED or row.seed_hash is not None
        self.repo.delete(row)
        if seeded:
            self.deletions.record(self.kind, row_id)


class CatalogService:
    """Accelerator and model catalog operations within one session (the caller commits)."""

    def __init__(self, session: Session, *, may_edit_seeded: bool = True) -> None:
        """``may_edit_seeded``: whether seeded rows may be replaced or deleted (API: admin)."""
        self.session = session
        self.accelerator_repo = AcceleratorRepository(session)
        self.model_repo = ModelRepository(session)
        deletions = CatalogDeletionRepository(session)
        self._accelerators = _Collection(
            KIND_ACCELERATOR,
            session,
            self.accelerator_repo,
            AcceleratorRow,
            accelerator_to_dict,
            apply_accelerator,
            deletions,
            may_edit_seeded,
        )
        self._models = _Collection(
            KIND_MODEL,
            session,
            self.model_repo,
            ModelRow,
            model_to_dict,
            apply_model,
            deletions,
            may_edit_seeded,
        )

    # Accelerators
    def list_accelerators(
        self,
        *,
        vendor: str | None = None,
        min_memory_gb: float | None = None,
        dtype: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page:
        """Return a page of accelerators ordered by id that match every given filter."""
        rows = self.accelerator_repo.page(
            vendor=vendor,
            min_memory_gb=min_memory_gb,
            dtype=dtype,
            after_id=decode_cursor(cursor),
            limit=limit + 1,
        )
        return _page([accelerator_to_dict(r) for r in rows], limit)

    def get_accelerator(self, accelerator_id: str, *, for_update: bool = False) -> dict[str, Any]:
        """Return one accelerator's representation; NotFoundError if absent.

        ``for_update`` starts a write transaction and locks the row until it ends (the read of
        a read-modify-write such as a merge patch).
        """
        collection = self._accelerators
        row = (
            collection.load_for_update(accelerator_id)
            if for_update
            else collection.load(accelerator_id)
        )
        return accelerator_to_dict(row)

    def create_accelerator(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a user accelerator; ConflictError if the id exists."""
        return self._accelerators.create(data)

    def replace_accelerator(
        self, accelerator_id: str, data: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        """Overwrite an accelerator (it becomes a user row); PreconditionFailedError if stale."""
        return self._accelerators.replace(accelerator_id, data, if_match)

    def delete_accelerator(self, accelerator_id: str, *, if_match: str | None = None) -> None:
        """Delete an accelerator (seeding will not restore it); PreconditionFailedError if stale."""
        self._accelerators.delete(accelerator_id, if_match)

    def accelerator(self, accelerator_id: str) -> Accelerator:
        """Return the engine Accelerator for an id; NotFoundError if absent."""
        return accelerator_from_row(self._accelerators.load(accelerator_id))

    def all_accelerators(self) -> list[Accelerator]:
        """Return every accelerator as engine objects, ordered by id."""
        return [accelerator_from_row(row) for row in self.accelerator_repo.all()]

    # Models
    def list_models(
        self,
        *,
        family: str | None = None,
        moe: bool | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page:
        """Return a page of models ordered by id that match every given filter."""
        rows = self.model_repo.page(
            family=family, moe=moe, after_id=decode_cursor(cursor), limit=limit + 1
        )
        return _page([model_to_dict(r) for r in rows], limit)

    def get_model(self, model_id: str, *, for_update: bool = False) -> dict[str, Any]:
        """Return one model's representation; NotFoundError if absent (``for_update``: locked)."""
        collection = self._models
        row = collection.load_for_update(model_id) if for_update else collection.load(model_id)
        return model_to_dict(row)

    def create_model(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and insert a user model; InvalidShapeError or ConflictError on failure."""
        return self._models.create(data)

    def import_model(
        self, model_id: str, hf_config: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Create a model from a Hugging Face config.json; InvalidShapeError names the key."""
        shape = shape_from_hf_config(model_id, dict(hf_config))
        data: dict[str, Any] = {name: getattr(shape, name) for name in SHAPE_FIELDS}
        data.update(id=model_id, name=shape.name or model_id, family=shape.family)
        data.update({k: v for k, v in (extra or {}).items() if v is not None})
        return self._models.create(data)

    def replace_model(
        self, model_id: str, data: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        """Overwrite a model (it becomes a user row); PreconditionFailedError if stale."""
        return self._models.replace(model_id, data, if_match)

    def delete_model(self, model_id: str, *, if_match: str | None = None) -> None:
        """Delete a model (seeding will not restore it); PreconditionFailedError if stale."""
        self._models.delete(model_id, if_match)

    def model_shape(self, model_id: str) -> ModelShape:
        """Return the engine ModelShape for an id; NotFoundError if absent."""
        return shape_from_row(self._models.load(model_id))


def _page(items: Sequence[dict[str, Any]], limit: int) -> Page:
    if len(items) > limit:
        kept = list(items[:limit])
        return Page(items=kept, next_cursor=encode_cursor(str(kept[-1]["id"])))
    return Page(items=list(items), next_cursor=None)


CACHE_LIMIT = 512  # entries per kind in a CatalogCache


@dataclass(frozen=True, slots=True)
class CatalogTokens:
    """A target's ids and what its freshness query returned (``db.freshness.TokenRow``)."""

    model_id: str
    accelerator_id: str
    model: Token | None
    accelerator: Token | None
    extra: Any = None
    linked: Token | None = None
    closest: tuple[str, ...] = ()  # ids like the first absent one (read only when one is)
    left_aside: LeftAside = NOTHING_ASIDE

    def require(self) -> None:
        """Raise NotFoundError for the first absent row (the model, then the accelerator)."""
        if self.model is None:
            raise NotFoundError(KIND_MODEL, self.model_id, self.closest)
        if self.accelerator is None:
            raise NotFoundError(KIND_ACCELERATOR, self.accelerator_id, self.closest)


def read_tokens(
    db: Connection | Session,
    query: Select[Any],
    model_id: str,
    accelerator_id: str,
    **params: Any,
) -> CatalogTokens:
    """Run a ``freshness_query`` once and return the rows' tokens and the linked value."""
    row = read_token_row(db, query, model_id, accelerator_id, **params)
    closest: tuple[str, ...] = ()
    if row.model is None or row.accelerator is None:
        kind, wanted = (
            (KIND_MODEL, model_id) if row.model is None else (KIND_ACCELERATOR, accelerator_id)
        )
        closest = tuple(closest_ids(wanted, catalog_ids(db, kind)))
    return CatalogTokens(
        model_id,
        accelerator_id,
        row.model,
        row.accelerator,
        row.extra,
        row.linked,
        closest,
        row.left_aside,
    )


def closest_ids(wanted: str, ids: Iterable[str]) -> list[str]:
    """Up to 3 catalog ids that look like ``wanted`` (difflib's ratio ≥ 0.6), for a 404's hint
    (``llama-3.1-70b-instruct`` → ``llama-3.1-70b``)."""
    return difflib.get_close_matches(wanted.lower(), list(ids), n=3, cutoff=0.6)


def read_accelerator(engine: Engine, accelerator_id: str) -> dict[str, Any]:
    """Return one accelerator's representation from one Core query (no ORM session)."""
    row = accelerator_core_row(engine, accelerator_id)
    if row is None:
        with engine.connect() as connection:
            ids = catalog_ids(connection, KIND_ACCELERATOR)
        raise NotFoundError(KIND_ACCELERATOR, accelerator_id, closest_ids(accelerator_id, ids))
    return accelerator_to_dict(row)


class CatalogCache:
    """Engine objects of one database, reused while their row's token is unchanged."""

    def __init__(self) -> None:
        self._models: dict[str, tuple[Token, ModelShape]] = {}
        self._accelerators: dict[str, tuple[Token, Accelerator]] = {}

    def cached(self, tokens: CatalogTokens) -> tuple[ModelShape, Accelerator] | None:
        """Return the model and accelerator if both are cached under these tokens."""
        tokens.require()
        model = self._models.get(tokens.model_id)
        accelerator = self._accelerators.get(tokens.accelerator_id)
        if model is None or accelerator is None:
            return None
        if model[0] != tokens.model or accelerator[0] != tokens.accelerator:
            return None
        return model[1], accelerator[1]

    def load(self, session: Session, tokens: CatalogTokens) -> tuple[ModelShape, Accelerator]:
        """Load what is not cached under ``tokens`` from ORM rows and cache it under them.

        A row edited after the tokens were read is cached under its old token, so the next
        request (which reads the new token) loads it again: a stale entry is never served.
        """
        tokens.require()
        assert tokens.model is not None and tokens.accelerator is not None
        catalog = CatalogService(session)
        model = self._models.get(tokens.model_id)
        if model is None or model[0] != tokens.model:
            model = (tokens.model, catalog.model_shape(tokens.model_id))
            _store(self._models, tokens.model_id, model)
        accelerator = self._accelerators.get(tokens.accelerator_id)
        if accelerator is None or accelerator[0] != tokens.accelerator:
            accelerator = (tokens.accelerator, catalog.accelerator(tokens.accelerator_id))
            _store(self._accelerators, tokens.accelerator_id, accelerator)
        return model[1], accelerator[1]


def _store(entries: dict[str, Any], key: str, value: Any) -> None:
    if len(entries) >= CACHE_LIMIT and key not in entries:
        entries.clear()
    entries[key] = value


_CACHES: weakref.WeakKeyDictionary[Engine, CatalogCache] = weakref.WeakKeyDictionary()


def catalog_cache(engine: Engine) -> CatalogCache:
    """Return the process-local catalog cache of one database engine."""
    cache = _CACHES.get(engine)
    if cache is None:
        cache = _CACHES.setdefault(engine, CatalogCache())
    return cache
