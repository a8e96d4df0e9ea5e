"""One autocommit connection for the short single-statement reads on every estimate's path."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from service.db.session import make_engine

T = TypeVar("T")


class AutocommitReader:
    """A lazily opened connection whose every statement is its own transaction.

    A pooled connection costs a checkout, a BEGIN and a ROLLBACK around each read (three round
    trips on PostgreSQL); this one stays open and runs the read alone, so the read still sees
    every commit made before it. It has an engine (and pool) of its own: a connection switched
    to autocommit must not go back to the shared pool, whose SQLite connections rely on
    ``session._sqlite_begin``. Thread-safe; a dropped connection is replaced once.
    """

    def __init__(self, database_url: str) -> None:
        self._base = make_engine(database_url, pool_size=1)
        self._engine = self._base.execution_options(isolation_level="AUTOCOMMIT")
        self._connection: Connection | None = None
        self._lock = threading.Lock()

    def run(self, read: Callable[[Connection], T]) -> T:
        """Run ``read`` on the connection (opened on first use, reopened once if dropped)."""
        with self._lock:
            try:
                return read(self._connect())
            except DBAPIError as exc:
                self._discard()
                if not exc.connection_invalidated:
                    raise
            return read(self._connect())

    def close(self) -> None:
        """Close the connection and its engine's pool."""
        with self._lock:
            self._discard()
            self._base.dispose()

    def _connect(self) -> Connection:
        if self._connection is None:
            self._connection = self._engine.connect()
        return self._connection

    def _discard(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
