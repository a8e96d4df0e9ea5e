"""Alembic environment: runs migrations against the configured Ridgeline database."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine

from service.db import models  # noqa: F401  (registers tables on the metadata)
from service.db.base import Base
from service.db.session import make_engine
from service.settings import Settings

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    return url if url else Settings().database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """Emit SQL to stdout without a database connection."""
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Run migrations on a live connection (or one handed in by a caller)."""
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given)
        return
    if isinstance(given, Engine):
        with given.begin() as conn:
            _run(conn)
        return
    engine = make_engine(_database_url())
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
