"""Run Alembic migrations programmatically and check whether a database is at head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine


def _migrations_dir() -> Path:
    """Find ``migrations/`` beside the source tree, else in the working directory."""
    beside = Path(__file__).resolve().parents[2] / "migrations"
    return beside if beside.is_dir() else Path.cwd() / "migrations"


MIGRATIONS_DIR = _migrations_dir()


def alembic_config(database_url: str) -> Config:
    """Build an Alembic config pointing at the repository's migrations folder."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Upgrade the database to ``revision``."""
    command.upgrade(alembic_config(database_url), revision)


def head_revisions(database_url: str) -> set[str]:
    """Return the head revision ids of the migration scripts."""
    return set(ScriptDirectory.from_config(alembic_config(database_url)).get_heads())


def is_at_head(engine: Engine) -> bool:
    """Return True when the database's applied revisions equal the script heads."""
    url = engine.url.render_as_string(hide_password=False)
    with engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    return current == head_revisions(url)
