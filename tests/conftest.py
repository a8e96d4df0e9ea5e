"""Shared fixtures: a fresh migrated and seeded database per test, an app, a client, API keys.

SQLite (default): one template database is migrated and seeded per test session and its file
is copied per test. PostgreSQL (``DATABASE_URL=postgresql...``): every database is a fresh schema
in that database (selected through ``search_path``): the template schema is migrated and seeded
once; each test's schema is migrated to head and gets the template's rows. Schemas are dropped at
the end (schemas, not databases: DROP DATABASE forces a checkpoint each time, far slower).
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from service.api.app import create_app
from service.db import models as _models  # noqa: F401  (registers tables)
from service.db.base import Base
from service.db.migrate import upgrade
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import create_key
from service.services.bootstrap import prepare_database
from service.settings import Settings, normalise_database_url

TEST_PEPPER = "test-pepper-not-secret"


def pytest_configure(config: pytest.Config) -> None:
    """Keep pytest-alembic from binding its collector to this file (it breaks on pytest 9).

    Its built-in tests are imported explicitly in tests/migrations/test_migrations.py.
    """
    if hasattr(config.option, "pytest_alembic_tests_path"):
        config.option.pytest_alembic_tests_path = "tests/migrations/(built-ins imported there)"


def postgres_base_url() -> str | None:
    """Return the PostgreSQL URL the run targets, or None for SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    return normalise_database_url(url) if url.startswith("postgres") else None


def make_test_settings(database_url: str, data_dir: Path, **overrides: object) -> Settings:
    """Settings for a test app: the given database, already migrated and seeded."""
    values: dict[str, object] = {
        "database_url": database_url,
        "data_dir": data_dir,
        "migrate_on_startup": False,
        "seed_on_startup": False,
        "api_key_pepper": TEST_PEPPER,
        "environment": "test",
        "log_level": "WARNING",
        # Heavy work in a thread of the test process (tests monkeypatch services); the child
        # process path is tested in tests/api/test_heavy_processes.py and by the live servers.
        "heavy_processes": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


class DatabaseFactory:
    """Hands out fresh databases: empty ones, or copies of a migrated and seeded template."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.base_url = postgres_base_url()
        self._counter = itertools.count()
        self._template: str | None = None
        self._created: list[str] = []

    @property
    def is_postgres(self) -> bool:
        return self.base_url is not None

    def _admin(self) -> Engine:
        assert self.base_url is not None
        return create_engine(self.base_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)

    def _schema_url(self, schema: str) -> str:
        assert self.base_url is not None
        url = make_url(self.base_url).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    def _pg_schema(self, name: str) -> str:
        admin = self._admin()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
            conn.execute(text(f'CREATE SCHEMA "{name}"'))
        admin.dispose()
        self._created.append(name)
        return self._schema_url(name)

    def empty(self) -> str:
        """Return the URL of a new, empty database."""
        n = next(self._counter)
        if self.is_postgres:
            return self._pg_schema(f"ridgeline_t{os.getpid()}_{n}")
        return f"sqlite:///{self.workdir / f'empty_{n}.db'}"

    def _build_template(self) -> str:
        url = self.empty()
        settings = make_test_settings(
            url, self.workdir, migrate_on_startup=True, seed_on_startup=True
        )
        engine = make_engine(url)
        try:
            prepare_database(settings, engine)
            if not self.is_postgres:
                with engine.connect() as conn:
                    conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        finally:
            engine.dispose()
        return url

    def seeded(self) -> str:
        """Return the URL of a new database at the migration head holding the seeded catalog."""
        if self._template is None:
            self._template = self._build_template()
        n = next(self._counter)
        if self.is_postgres:
            return self._pg_copy(self._template, f"ridgeline_t{os.getpid()}_{n}")
        source = Path(make_url(self._template).database or "")
        target = self.workdir / f"seeded_{n}.db"
        shutil.copyfile(source, target)
        return f"sqlite:///{target}"

    def _pg_copy(self, template_url: str, name: str) -> str:
        """Migrate a new schema to head, then copy the template schema's rows into it."""
        url = self._pg_schema(name)
        upgrade(url)
        template = str(make_url(template_url).query["options"]).split("=", 1)[1]
        admin = self._admin()
        with admin.begin() as conn:
            for table in Base.metadata.sorted_tables:
                conn.execute(
                    text(
                        f'INSERT INTO "{name}"."{table.name}" '
                        f'SELECT * FROM "{template}"."{table.name}"'
                    )
                )
        admin.dispose()
        return url

    def drop_all(self) -> None:
        """Drop every PostgreSQL schema this factory created."""
        if not self.is_postgres:
            return
        admin = self._admin()
        with admin.connect() as conn:
            for name in reversed(self._created):
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="session")
def database_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseFactory]:
    factory = DatabaseFactory(tmp_path_factory.mktemp("databases"))
    yield factory
    factory.drop_all()


@pytest.fixture
def database_url(database_factory: DatabaseFactory) -> str:
    """A fresh database at head with the seeded catalog."""
    return database_factory.seeded()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return make_test_settings(database_url, tmp_path)


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    """A client on the ASGI app, with its lifespan running."""
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def other_worker(settings: Settings) -> Iterator[TestClient]:
    """A second app on the same database: its own engine, so its own caches (a cold process)."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def db_session(settings: Settings) -> Iterator[Session]:
    """A session on the test database that commits when the test ends without error."""
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            yield session
    finally:
        engine.dispose()


@pytest.fixture
def make_api_key(settings: Settings) -> Callable[..., str]:
    """Return a function that stores a new API key with the given scopes and returns it."""

    def make(*scopes: str, name: str = "test") -> str:
        engine = make_engine(settings.database_url)
        try:
            with session_scope(make_session_factory(engine)) as session:
                _, key = create_key(session, settings.api_key_pepper, name, scopes or ("write",))
        finally:
            engine.dispose()
        return key

    return make


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """A key with the ``write`` scope."""
    return make_api_key("write")


@pytest.fixture
def auth_headers(api_key: str) -> dict[str, str]:
    return {"X-API-Key": api_key}
