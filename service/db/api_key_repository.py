"""API-key queries: the only place SQL for the api_keys table is written."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.models import ApiKeyRow


class ApiKeyRepository:
    """Lookup, insert and listing of API keys; callers own the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, row: ApiKeyRow) -> ApiKeyRow:
        """Insert a key row and flush to get its id."""
        self.session.add(row)
        self.session.flush()
        return row

    def by_prefix(self, prefix: str) -> ApiKeyRow | None:
        """Return the key with this lookup prefix, or None."""
        return self.session.scalars(select(ApiKeyRow).where(ApiKeyRow.prefix == prefix)).first()

    def by_id(self, key_id: int) -> ApiKeyRow | None:
        """Return the key with this id, or None."""
        return self.session.get(ApiKeyRow, key_id)

    def all(self) -> Sequence[ApiKeyRow]:
        """Return every key, oldest first."""
        return self.session.scalars(select(ApiKeyRow).order_by(ApiKeyRow.id)).all()

    def save(self, row: ApiKeyRow) -> ApiKeyRow:
        """Flush pending changes to a loaded key."""
        self.session.flush()
        return row
