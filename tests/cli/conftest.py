"""CLI fixtures: run ``ridgeline`` in-process on the per-test database, capturing its output."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner, Result

from service.cli import app as cli_app
from service.settings import Settings

Invoke = Callable[..., Result]


@pytest.fixture
def local_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the CLI's local mode at the test database (already migrated and seeded)."""
    monkeypatch.setenv("RIDGELINE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("RIDGELINE_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RIDGELINE_MIGRATE_ON_STARTUP", "false")
    monkeypatch.setenv("RIDGELINE_SEED_ON_STARTUP", "false")
    monkeypatch.setenv("RIDGELINE_LOG_LEVEL", "WARNING")
    monkeypatch.delenv("RIDGELINE_URL", raising=False)
    monkeypatch.delenv("RIDGELINE_API_KEY", raising=False)


@pytest.fixture
def ridgeline_cli(local_env: None) -> Invoke:
    """Run ``ridgeline ARGS...`` and return the result (stdout and stderr kept apart)."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli_app, list(args), catch_exceptions=False)

    return invoke
