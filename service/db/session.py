"""Engine and session factories; SQLite gets WAL, a busy timeout and foreign keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 5000
# Execution option asking SQLite for the write lock when the transaction begins (see below).
WRITE_TRANSACTION = "ridgeline_write_transaction"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the driver, emit BEGIN (SQLAlchemy's documented pysqlite recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    # A deferred transaction that reads and then writes fails at once with "database is locked"
    # when another process committed in between (the busy timeout cannot help); write
    # transactions therefore take the write lock up front and wait for it instead.
    options = connection.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":
        return  # each statement is its own transaction (``reader.AutocommitReader``)
    immediate = options.get(WRITE_TRANSACTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def begin_write(session: Session) -> None:
    """Start ``session``'s transaction as a write transaction, unless one has already begun."""
    if not session.in_transaction():
        session.connection(execution_options={WRITE_TRANSACTION: True})


DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_TIMEOUT_S = 30.0


def make_engine(
    url: str,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    max_overflow: int = 0,
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
) -> Engine:
    """Create an engine for ``url``; creates the SQLite file's folder if needed.

    PostgreSQL pools hold at most ``pool_size + max_overflow`` connections; the app sizes them
    from the settings' connection budget (``Settings.pool_size_per_worker``).
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # Each worker serves many requests at once (thread pool); a calibration upload holds a
    # connection only around its reads and its write, not during the fit.
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout_s,
    )


def ping(engine: Engine) -> None:
    """Open a connection and run ``SELECT 1``; raises the driver's error if unreachable."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return a session factory whose objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """Run a unit of work outside HTTP: commit on success, roll back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
