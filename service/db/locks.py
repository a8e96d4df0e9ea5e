"""Database-wide locks for work that exactly one process may do at a time (start-up).

PostgreSQL: a session-level advisory lock on a dedicated connection, keyed by a name and the
connection's schema (tests and deployments that share one database through ``search_path``
do not wait on each other); released when the block ends or the connection dies. SQLite: an
exclusive ``flock`` on a file beside the database (SQLite's own write lock cannot be held
across Alembic's separate connection; a file lock serialises processes on one host, which is
the only place an SQLite file can be shared).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text

STARTUP_LOCK = "ridgeline:startup"


@contextmanager
def database_lock(engine: Engine, name: str = STARTUP_LOCK) -> Iterator[None]:
    """Hold the named lock of this database for the duration of the block (waits for it)."""
    if engine.dialect.name == "postgresql":
        with _advisory_lock(engine, name):
            yield
        return
    database = engine.url.database or ""
    if not database or database == ":memory:":
        yield  # a private in-memory database: nobody to wait for
        return
    with _file_lock(Path(f"{database}.{name.rsplit(':', 1)[-1]}.lock")):
        yield


@contextmanager
def _advisory_lock(engine: Engine, name: str) -> Iterator[None]:
    key = text("SELECT hashtext(:name || ':' || current_schema())")
    connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        lock_id = connection.execute(key, {"name": name}).scalar_one()
        connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": lock_id})
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": lock_id})
    finally:
        connection.close()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
