"""Settings from the environment and the engine factory's SQLite pragmas."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import text

from service.db.session import make_engine
from service.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "RIDGELINE_DATABASE_URL", "RIDGELINE_ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)


def test_default_database_is_sqlite_under_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIDGELINE_DATA_DIR", "/srv/ridgeline")
    settings = Settings()
    assert settings.database_url == "sqlite:////srv/ridgeline/ridgeline.db"
    assert settings.migrate_on_startup and not settings.require_key_for_reads
    assert settings.max_body_bytes == 1024 * 1024


def test_plain_database_url_and_postgres_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@db:5432/x")
    assert Settings().database_url == "postgresql+psycopg://u:p@db:5432/x"
    monkeypatch.setenv("RIDGELINE_DATABASE_URL", "sqlite:///other.db")
    assert Settings().database_url == "sqlite:///other.db"


def test_production_refuses_the_default_pepper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIDGELINE_ENVIRONMENT", "production")
    with pytest.raises(ValidationError, match="API_KEY_PEPPER"):
        Settings()
    monkeypatch.setenv("RIDGELINE_API_KEY_PEPPER", "a-real-secret")
    assert Settings().api_key_pepper == "a-real-secret"


def test_sqlite_engine_sets_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'sub' / 'x.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 5000
    engine.dispose()
    assert (tmp_path / "sub" / "x.db").exists()
