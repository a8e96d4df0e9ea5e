"""The autocommit reader behind the estimate freshness query: fresh reads, no open transaction."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, make_url, text

from service.db.reader import AutocommitReader
from service.db.session import make_engine

VERSION = text("SELECT version FROM accelerators WHERE id = 'h100-sxm'")


@pytest.fixture
def reader(database_url: str) -> Iterator[AutocommitReader]:
    opened = AutocommitReader(database_url)
    yield opened
    opened.close()


def _version(connection: Connection) -> int:
    return int(connection.execute(VERSION).scalar_one())


def test_each_read_sees_the_commits_before_it(database_url: str, reader: AutocommitReader) -> None:
    """An open transaction on the reader would pin SQLite's WAL snapshot at the first read."""
    first = reader.run(_version)
    writer = make_engine(database_url)
    try:
        for bump in (1, 2):
            with writer.begin() as connection:
                connection.execute(
                    text("UPDATE accelerators SET version = version + 1 WHERE id = 'h100-sxm'")
                )
            assert reader.run(_version) == first + bump
    finally:
        writer.dispose()


def test_a_read_leaves_no_transaction_open(database_url: str, reader: AutocommitReader) -> None:
    reader.run(_version)
    if database_url.startswith("sqlite"):
        raw = reader.run(lambda connection: connection.connection.dbapi_connection)
        assert raw is not None and not raw.in_transaction
        return
    pid = reader.run(lambda connection: connection.execute(text("SELECT pg_backend_pid()")))
    backend = pid.scalar_one()
    observer = make_engine(database_url)
    try:
        with observer.connect() as connection:
            state = connection.execute(
                text("SELECT state FROM pg_stat_activity WHERE pid = :pid"), {"pid": backend}
            ).scalar_one()
    finally:
        observer.dispose()
    assert state == "idle"


def test_a_dropped_connection_is_replaced(database_url: str, reader: AutocommitReader) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("a SQLite connection cannot be dropped by the server")
    backend_pid = text("SELECT pg_backend_pid()")
    before = reader.run(lambda connection: connection.execute(backend_pid).scalar_one())
    admin = make_engine(database_url)
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": before})
            connection.commit()
    finally:
        admin.dispose()
    after = reader.run(lambda connection: connection.execute(backend_pid).scalar_one())
    assert after != before
    assert reader.run(_version) >= 1


BUMP = text("UPDATE accelerators SET version = version + 1 WHERE id = 'h100-sxm'")


def _bump_elsewhere(database_url: str) -> None:
    writer = make_engine(database_url)
    try:
        with writer.begin() as connection:
            connection.execute(BUMP)
    finally:
        writer.dispose()


def test_a_memoised_read_is_reused_until_any_commit(
    database_url: str, reader: AutocommitReader
) -> None:
    """SQLite: the answer is reused while nothing was committed; a commit re-reads it."""
    reads: list[int] = []

    def counted(connection: Connection) -> int:
        reads.append(1)
        return _version(connection)

    first = reader.run_memoised("h100", counted)
    assert reader.run_memoised("h100", counted) == first
    sqlite = database_url.startswith("sqlite")
    assert len(reads) == (1 if sqlite else 2)  # PostgreSQL: every call reads
    _bump_elsewhere(database_url)
    assert reader.run_memoised("h100", counted) == first + 1
    assert len(reads) == (2 if sqlite else 3)
    reader.run_memoised("other key", counted)  # keys are memoised separately
    assert len(reads) == (3 if sqlite else 4)


def test_a_commit_by_another_process_invalidates_the_memo(
    database_url: str, reader: AutocommitReader
) -> None:
    """Another worker is another process: its commit must be seen by the next read."""
    if not database_url.startswith("sqlite"):
        pytest.skip("the memo is SQLite-only")
    first = reader.run_memoised("h100", _version)
    path = make_url(database_url).database
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
        "c.execute(\"UPDATE accelerators SET version = version + 1 WHERE id = 'h100-sxm'\"); "
        "c.commit()"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=60)
    assert reader.run_memoised("h100", _version) == first + 1
