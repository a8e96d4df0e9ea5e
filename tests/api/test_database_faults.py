"""Database faults (issue 15, findings 5 and 6): wait for the database, answer 503 not 500."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from service.api.app import create_app
from service.db.session import make_engine, make_session_factory
from service.settings import Settings


def make_settings(database_url: str, data_dir: Path, **overrides: object) -> Settings:
    """Test settings for ``database_url`` (tests/conftest.py's defaults; not importable here)."""
    values: dict[str, object] = {
        "database_url": database_url,
        "data_dir": data_dir,
        "migrate_on_startup": False,
        "seed_on_startup": False,
        "api_key_pepper": "test-pepper-not-secret",
        "environment": "test",
        "log_level": "WARNING",
        "heavy_processes": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def unreachable_url(database_url: str, tmp_path: Path) -> str:
    """A URL of the same kind that cannot be opened: a closed port, or a directory as file."""
    if database_url.startswith("postgresql"):
        return make_url(database_url).set(port=1).render_as_string(hide_password=False)
    folder = tmp_path / "not-a-file.db"
    folder.mkdir()
    return f"sqlite:///{folder}"


def test_start_without_database_serves_not_ready_and_logs_each_attempt(
    database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(
        unreachable_url(database_url, tmp_path),
        tmp_path,
        db_connect_first_delay_s=0.05,
        db_connect_max_delay_s=0.1,
        log_level="INFO",
    )
    caplog.set_level(logging.WARNING, logger="ridgeline.startup")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert "waiting for the database" in ready.json()["checks"]["startup"]
        api = client.get("/v1/accelerators")
        assert api.status_code == 503
        assert api.headers["Retry-After"]
        assert api.headers["content-type"] == "application/problem+json"
        time.sleep(0.5)
        lines = [r for r in caplog.records if "database unavailable" in r.getMessage()]
        assert len(lines) >= 2
        assert all(r.exc_info is None for r in lines)  # one line each, no traceback


def test_start_retries_until_the_database_appears(tmp_path: Path) -> None:
    target = tmp_path / "late.db"
    target.mkdir()  # SQLite cannot open a directory: unreachable until it is replaced
    settings = make_settings(
        f"sqlite:///{target}",
        tmp_path,
        migrate_on_startup=True,
        seed_on_startup=True,
        db_connect_first_delay_s=0.05,
        db_connect_max_delay_s=0.1,
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.get("/readyz").status_code == 503
        target.rmdir()
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get("/readyz").status_code == 200
        assert client.get("/v1/accelerators/h100-sxm").status_code == 200


def test_database_lost_under_traffic_answers_503_with_retry_after(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    assert client.get("/v1/models").status_code == 200
    broken = make_engine(unreachable_url(settings.database_url, tmp_path))
    app = client.app
    app.state.engine = broken  # type: ignore[attr-defined]
    app.state.session_factory = make_session_factory(broken)  # type: ignore[attr-defined]
    try:
        for path in ("/v1/models", "/v1/accelerators/h100-sxm", "/v1/calibrations"):
            response = client.get(path)
            assert response.status_code == 503, (path, response.text)
            assert response.headers["Retry-After"] == "1"
    finally:
        broken.dispose()


def test_pool_is_sized_from_the_connection_budget(settings: Settings) -> None:
    budget = settings.model_copy(update={"db_max_connections": 12, "workers": 3})
    assert budget.pool_size_per_worker == 3  # 12 // 3 workers, less one for the reader
    app = create_app(budget)
    with TestClient(app):
        engine = app.state.engine
        if engine.dialect.name == "postgresql":
            assert engine.pool.size() == 3
            assert engine.pool._max_overflow == 0
