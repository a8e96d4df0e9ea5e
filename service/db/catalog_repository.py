"""Catalog queries: the only place SQL for accelerators and models is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Connection, Engine, Row, bindparam, delete, func, select
from sqlalchemy.orm import Session

from service.db.models import KIND_MODEL, AcceleratorRow, CatalogDeletionRow, ModelRow, utcnow

RowT = TypeVar("RowT", AcceleratorRow, ModelRow)


class _CatalogRepository(Generic[RowT]):
    """Keyed access to one catalog table; callers own the transaction (repositories flush)."""

    row_type: type[RowT]

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, row_id: str) -> RowT | None:
        """Return the row with this id, or None."""
        return self.session.get(self.row_type, row_id)

    def get_for_update(self, row_id: str) -> RowT | None:
        """Return the row with this id, freshly read and locked until the transaction ends.

        PostgreSQL: ``SELECT ... FOR UPDATE``, so a concurrent writer of the same row waits for
        this transaction and then reads what it committed. SQLite renders no lock clause: its
        write transactions (``BEGIN IMMEDIATE``) already serialise writers.
        """
        return self.session.get(self.row_type, row_id, with_for_update=True, populate_existing=True)

    def add(self, row: RowT) -> RowT:
        """Insert a row and flush so constraint violations surface here."""
        self.session.add(row)
        self.session.flush()
        return row

    def save(self, row: RowT) -> RowT:
        """Flush pending changes to a loaded row."""
        self.session.flush()
        return row

    def delete(self, row: RowT) -> None:
        """Delete a row."""
        self.session.delete(row)
        self.session.flush()

    def all(self) -> Sequence[RowT]:
        """Return every row ordered by id."""
        return self.session.scalars(select(self.row_type).order_by(self.row_type.id)).all()

    def _page(
        self, conditions: list[ColumnElement[bool]], after_id: str | None, limit: int
    ) -> Sequence[RowT]:
        stmt = select(self.row_type).where(*conditions)
        if after_id is not None:
            stmt = stmt.where(self.row_type.id > after_id)
        return self.session.scalars(stmt.order_by(self.row_type.id).limit(limit)).all()


class AcceleratorRepository(_CatalogRepository[AcceleratorRow]):
    """Queries over the accelerators table."""

    row_type = AcceleratorRow

    def page(
        self,
        *,
        vendor: str | None = None,
        min_memory_gb: float | None = None,
        dtype: str | None = None,
        after_id: str | None = None,
        limit: int = 50,
    ) -> Sequence[AcceleratorRow]:
        """Return up to ``limit`` rows after ``after_id`` that match every given filter."""
        conditions: list[ColumnElement[bool]] = []
        if vendor is not None:
            conditions.append(func.lower(AcceleratorRow.vendor) == vendor.lower())
        if min_memory_gb is not None:
            conditions.append(AcceleratorRow.memory_gb >= min_memory_gb)
        if dtype is not None:
            conditions.append(AcceleratorRow.peak_tflops[dtype].as_float() > 0)
        return self._page(conditions, after_id, limit)


_ACCELERATOR_BY_ID = select(AcceleratorRow.__table__).where(
    AcceleratorRow.__table__.c.id == bindparam("accelerator_id")
)


def accelerator_core_row(engine: Engine, accelerator_id: str) -> Row[Any] | None:
    """Return one accelerator's columns from one Core query on its own connection (no ORM)."""
    with engine.connect() as connection:
        return connection.execute(
            _ACCELERATOR_BY_ID, {"accelerator_id": accelerator_id}
        ).one_or_none()


def catalog_ids(db: Connection | Session, kind: str) -> Sequence[str]:
    """Every id of the models (``KIND_MODEL``) or accelerators table."""
    row_type = ModelRow if kind == KIND_MODEL else AcceleratorRow
    return db.execute(select(row_type.id)).scalars().all()


class ModelRepository(_CatalogRepository[ModelRow]):
    """Queries over the models table."""

    row_type = ModelRow

    def page(
        self,
        *,
        family: str | None = None,
        moe: bool | None = None,
        after_id: str | None = None,
        limit: int = 50,
    ) -> Sequence[ModelRow]:
        """Return up to ``limit`` rows after ``after_id`` that match every given filter."""
        conditions: list[ColumnElement[bool]] = []
        if family is not None:
            conditions.append(func.lower(ModelRow.family) == family.lower())
        if moe is not None:
            conditions.append(ModelRow.num_experts > 0 if moe else ModelRow.num_experts == 0)
        return self._page(conditions, after_id, limit)


class CatalogDeletionRepository:
    """Tombstones of deleted seed rows; callers own the transaction (methods flush)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def record(self, kind: str, row_id: str) -> None:
        """Record (or refresh) the deletion of ``kind``/``row_id``."""
        tombstone = self.session.get(CatalogDeletionRow, (kind, row_id))
        if tombstone is None:
            self.session.add(CatalogDeletionRow(kind=kind, id=row_id, deleted_at=utcnow()))
        else:
            tombstone.deleted_at = utcnow()
        self.session.flush()

    def remove(self, kind: str, row_id: str) -> bool:
        """Forget the deletion of ``kind``/``row_id``; return whether one was recorded."""
        result = self.session.execute(
            delete(CatalogDeletionRow).where(
                CatalogDeletionRow.kind == kind, CatalogDeletionRow.id == row_id
            )
        )
        self.session.flush()
        return bool(getattr(result, "rowcount", 0))

    def ids(self, kind: str) -> set[str]:
        """Return every deleted id of this kind."""
        stmt = select(CatalogDeletionRow.id).where(CatalogDeletionRow.kind == kind)
        return set(self.session.scalars(stmt).all())

    def clear(self) -> int:
        """Forget every recorded deletion; return how many there were."""
        result = self.session.execute(delete(CatalogDeletionRow))
        self.session.flush()
        return int(getattr(result, "rowcount", 0))
