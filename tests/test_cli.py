"""The ``ridgeline`` command line, through typer's CliRunner."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy import inspect
from typer.testing import CliRunner

import service
from service.cli import app, register_extensions
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import authenticate
from service.services.errors import AuthenticationError

PEPPER = "cli-test-pepper"
runner = CliRunner()


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path) -> str:
    monkeypatch.setenv("RIDGELINE_DATABASE_URL", database_url)
    monkeypatch.setenv("RIDGELINE_API_KEY_PEPPER", PEPPER)
    monkeypatch.setenv("RIDGELINE_DATA_DIR", str(tmp_path))
    return database_url


def check_key(database_url: str, key: str) -> None:
    engine = make_engine(database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            authenticate(session, PEPPER, key)
    finally:
        engine.dispose()


def test_migrate_and_seed_an_empty_database(
    monkeypatch: pytest.MonkeyPatch, database_factory: Any, tmp_path: Path
) -> None:
    url = database_factory.empty()
    monkeypatch.setenv("RIDGELINE_DATABASE_URL", url)
    monkeypatch.setenv("RIDGELINE_DATA_DIR", str(tmp_path))
    result = runner.invoke(app, ["migrate"])
    assert result.exit_code == 0, result.output
    engine = make_engine(url)
    assert {"accelerators", "models", "api_keys"} <= set(inspect(engine).get_table_names())
    engine.dispose()
    first = runner.invoke(app, ["seed"])
    assert first.exit_code == 0, first.output
    assert "inserted 0" not in first.output
    second = runner.invoke(app, ["seed"])
    assert "inserted 0, updated 0" in second.output


def test_create_list_and_revoke_key(cli_env: str) -> None:
    created = runner.invoke(app, ["create-key", "--name", "ci-bot", "--scope", "write"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[0]
    assert key.startswith("rl_")
    check_key(cli_env, key)

    listed = runner.invoke(app, ["list-keys"])
    assert listed.exit_code == 0
    assert "ci-bot" in listed.stdout and key.split("_")[1] in listed.stdout
    assert key not in listed.stdout

    revoked = runner.invoke(app, ["revoke-key", key.split("_")[1]])
    assert revoked.exit_code == 0, revoked.output
    with pytest.raises(AuthenticationError):
        check_key(cli_env, key)


def test_create_key_rejects_unknown_scope(cli_env: str) -> None:
    result = runner.invoke(app, ["create-key", "--name", "x", "--scope", "root"])
    assert result.exit_code != 0


def test_revoke_unknown_key_fails(cli_env: str) -> None:
    result = runner.invoke(app, ["revoke-key", "ffffffffffff"])
    assert result.exit_code == 1


def test_export_openapi_to_file(cli_env: str, tmp_path: Path) -> None:
    target = tmp_path / "openapi.json"
    result = runner.invoke(app, ["export-openapi", "--output", str(target)])
    assert result.exit_code == 0, result.output
    document = json.loads(target.read_text())
    assert "/v1/accelerators/{accelerator_id}" in document["paths"]
    stdout = runner.invoke(app, ["export-openapi"])
    assert json.loads(stdout.stdout)["info"]["title"] == "Ridgeline"


def test_cli_extension_modules_are_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "service"
    package.mkdir()
    (package / "cli_demo.py").write_text(
        "import typer\n\n"
        "def register(app: typer.Typer) -> None:\n"
        "    @app.command('demo')\n"
        "    def demo() -> None:\n"
        "        typer.echo('demo ran')\n"
    )
    monkeypatch.setattr(service, "__path__", [*service.__path__, str(package)])
    target = typer.Typer()

    @target.command()
    def other() -> None:
        """Keep typer in multi-command mode."""

    try:
        assert "cli_demo" in register_extensions(target)
    finally:
        sys.modules.pop("service.cli_demo", None)
    result = runner.invoke(target, ["demo"])
    assert result.exit_code == 0 and "demo ran" in result.stdout
