"""Revoking a key reads the row, then writes it: on SQLite a commit by another connection in
between (a replica's rate-limit sync) must not fail the revocation with "database is locked"."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event

from service.db.api_key_repository import ApiKeyRepository
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import revoke_key
from service.settings import Settings


def test_a_commit_elsewhere_between_the_read_and_the_write_does_not_fail_a_revocation(
    settings: Settings, make_api_key: Callable[..., str]
) -> None:
    if not settings.database_url.startswith("sqlite"):
        pytest.skip("SQLite's single writer lock is what this exercises")
    prefix = make_api_key("read").split("_")[1]
    other = sqlite3.connect(settings.database_url.split("///", 1)[1], timeout=0.2)
    outcome: list[str] = []

    def commit_elsewhere_first(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("UPDATE api_keys") and not outcome:
            try:
                other.execute(
                    "INSERT INTO rate_limit_buckets (bucket, tokens, updated_s) VALUES ('x', 1, 0)"
                )
                other.commit()
                outcome.append("the other connection committed")
            except sqlite3.OperationalError:
                outcome.append("the other connection waited for the write lock")

    engine = make_engine(settings.database_url)
    event.listen(engine, "before_cursor_execute", commit_elsewhere_first)
    try:
        with session_scope(make_session_factory(engine)) as session:
            revoke_key(session, prefix)
        with session_scope(make_session_factory(engine)) as session:
            row = ApiKeyRepository(session).by_prefix(prefix)
            assert row is not None and row.revoked_at is not None
    finally:
        engine.dispose()
        other.close()
    assert outcome == ["the other connection waited for the write lock"]
