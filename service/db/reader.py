"""One autocommit connection for the short single-statement reads on every estimate's path.

On SQLite, reads can also be memoised behind ``PRAGMA data_version`` (``run_memoised``): that
number, read on this connection, changes whenever any other connection (another worker, this
process's sessions, a CLI) commits to the database file, and this connection never writes.
So a memoised answer is returned only while no commit at all happened since it was read; it
costs one pragma (~2 us) instead of the query (~35 us). Other databases run the read each time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from service.db.session import make_engine

T = TypeVar("T")
# Memoised answers kept per data version (cleared on every commit anyway); a bound for safety.
MEMO_ENTRIES = 4096


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
        self._sqlite = self._base.dialect.name == "sqlite"
        self._version: Any = None  # data_version the memo holds answers for (None: empty)
        self._memo: dict[Hashable, Any] = {}

    def run(self, read: Callable[[Connection], T]) -> T:
        """Run ``read`` on the connection (opened on first use, reopened once if dropped)."""
        with self._lock:
            return self._run(read)

    def run_memoised(self, key: Hashable, read: Callable[[Connection], T]) -> T:
        """Return ``read``'s answer, memoised under ``key`` while the database is unchanged.

        ``read`` must depend only on the database's contents and on what ``key`` names. On
        SQLite the answer is reused until any connection commits; elsewhere it is read anew.
        """
        if not self._sqlite:
            return self.run(read)
        with self._lock:
            try:
                version = self._data_version()
            except Exception:  # the driver's own error (not wrapped): read without the memo
                self._discard()
                return self._run(read)
            if version != self._version or len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
                self._version = version
            elif key in self._memo:
                answer: T = self._memo[key]
                return answer
            answer = self._run(read)
            # Kept only if the connection that answered is the one whose version was read.
            if self._version is not None:
                self._memo[key] = answer
            return answer

    def close(self) -> None:
        """Close the connection and its engine's pool."""
        with self._lock:
            self._discard()
            self._base.dispose()

    def _run(self, read: Callable[[Connection], T]) -> T:
        try:
            return read(self._connect())
        except DBAPIError as exc:
            self._discard()
            if not exc.connection_invalidated:
                raise
        return read(self._connect())

    def _data_version(self) -> Any:
        """This connection's ``PRAGMA data_version``, through the driver (opens it)."""
        dbapi = self._connect().connection.dbapi_connection
        assert dbapi is not None
        return dbapi.execute("PRAGMA data_version").fetchone()[0]

    def _connect(self) -> Connection:
        if self._connection is None:
            self._connection = self._engine.connect()
        return self._connection

    def _discard(self) -> None:
        # Versions are per connection: a new one starts a new memo.
        self._memo.clear()
        self._version = None
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
