"""Deleting a seeded row leaves a tombstone: re-seeding keeps it deleted until restored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.catalog_files import load_model_records
from service.cli import app as cli_app
from service.db.catalog_repository import CatalogDeletionRepository
from service.db.models import KIND_ACCELERATOR, KIND_MODEL
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.bootstrap import prepare_database
from service.services.seed import SeedReport, seed_catalog
from service.settings import Settings

ACCELERATOR = "l4"


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit or delete seeded catalog rows (needs the admin scope)."""
    return make_api_key("admin")


def reseed(database_url: str, *, restore_deleted: bool = False) -> SeedReport:
    """Run the seed in its own committed transaction, as the CLI and start-up do."""
    engine = make_engine(database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            return seed_catalog(session, restore_deleted=restore_deleted)
    finally:
        engine.dispose()


def tombstones(database_url: str, kind: str) -> set[str]:
    engine = make_engine(database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            return CatalogDeletionRepository(session).ids(kind)
    finally:
        engine.dispose()


def user_accelerator(accelerator_id: str, memory_gb: float) -> dict[str, Any]:
    return {
        "id": accelerator_id,
        "vendor": "Acme",
        "name": "My own L4 entry",
        "memory_gb": memory_gb,
        "memory_bandwidth_gb_s": 300,
        "peak_tflops": {"bf16": 121},
        "sources": ["https://example.com/my-l4"],
    }


def delete(client: TestClient, path: str, headers: dict[str, str]) -> None:
    response = client.delete(path, headers=headers)
    assert response.status_code == 204, response.text


def test_deleted_seed_accelerator_stays_deleted_after_reseeding(
    client: TestClient, auth_headers: dict[str, str], database_url: str
) -> None:
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").json()["origin"] == "seed"
    delete(client, f"/v1/accelerators/{ACCELERATOR}", auth_headers)
    assert tombstones(database_url, KIND_ACCELERATOR) == {ACCELERATOR}

    report = reseed(database_url)
    assert report.kept_deleted == [ACCELERATOR]
    assert ACCELERATOR not in report.inserted
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").status_code == 404
    # A second run still leaves it alone.
    assert reseed(database_url).kept_deleted == [ACCELERATOR]
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").status_code == 404


def test_deleted_seed_model_stays_deleted_after_reseeding(
    client: TestClient, auth_headers: dict[str, str], database_url: str
) -> None:
    model_id = str(load_model_records()[0]["id"])
    delete(client, f"/v1/models/{model_id}", auth_headers)
    report = reseed(database_url)
    assert report.kept_deleted == [model_id]
    assert client.get(f"/v1/models/{model_id}").status_code == 404
    assert tombstones(database_url, KIND_ACCELERATOR) == set()


def test_startup_seed_keeps_the_deletion(
    client: TestClient, auth_headers: dict[str, str], database_url: str, settings: Settings
) -> None:
    delete(client, f"/v1/accelerators/{ACCELERATOR}", auth_headers)
    startup = settings.model_copy(update={"migrate_on_startup": True, "seed_on_startup": True})
    engine = make_engine(database_url)
    try:
        report = prepare_database(startup, engine)
    finally:
        engine.dispose()
    assert report is not None and report.kept_deleted == [ACCELERATOR]
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").status_code == 404


def test_recreated_id_is_a_user_row_that_survives_reseeding(
    client: TestClient, auth_headers: dict[str, str], database_url: str
) -> None:
    delete(client, f"/v1/accelerators/{ACCELERATOR}", auth_headers)
    created = client.post(
        "/v1/accelerators", json=user_accelerator(ACCELERATOR, 20), headers=auth_headers
    )
    assert created.status_code == 201, created.text
    assert created.json()["origin"] == "user"
    assert tombstones(database_url, KIND_ACCELERATOR) == set()

    report = reseed(database_url)
    assert ACCELERATOR in report.kept_user_rows and report.kept_deleted == []
    body = client.get(f"/v1/accelerators/{ACCELERATOR}").json()
    assert body["origin"] == "user" and body["memory_gb"] == 20
    assert body["name"] == "My own L4 entry"


def test_deleting_an_edited_seed_row_also_stays_deleted(
    client: TestClient, auth_headers: dict[str, str], database_url: str
) -> None:
    edited = client.patch(
        f"/v1/accelerators/{ACCELERATOR}", json={"memory_gb": 30}, headers=auth_headers
    )
    assert edited.status_code == 200 and edited.json()["origin"] == "user"
    delete(client, f"/v1/accelerators/{ACCELERATOR}", auth_headers)
    assert reseed(database_url).kept_deleted == [ACCELERATOR]
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").status_code == 404


def test_deleting_a_user_created_row_leaves_no_tombstone(
    client: TestClient, auth_headers: dict[str, str], database_url: str
) -> None:
    created = client.post(
        "/v1/accelerators", json=user_accelerator("my-gpu", 48), headers=auth_headers
    )
    assert created.status_code == 201, created.text
    delete(client, "/v1/accelerators/my-gpu", auth_headers)
    assert tombstones(database_url, KIND_ACCELERATOR) == set()
    assert tombstones(database_url, KIND_MODEL) == set()


def test_restore_deleted_option_brings_the_row_back(
    client: TestClient,
    auth_headers: dict[str, str],
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delete(client, f"/v1/accelerators/{ACCELERATOR}", auth_headers)
    monkeypatch.setenv("RIDGELINE_DATABASE_URL", database_url)
    monkeypatch.setenv("RIDGELINE_DATA_DIR", str(tmp_path))
    runner = CliRunner()

    plain = runner.invoke(cli_app, ["seed"])
    assert plain.exit_code == 0, plain.output
    assert "inserted 0," in plain.output and "kept deleted 1" in plain.output
    assert client.get(f"/v1/accelerators/{ACCELERATOR}").status_code == 404

    restored = runner.invoke(cli_app, ["seed", "--restore-deleted"])
    assert restored.exit_code == 0, restored.output
    assert "inserted 1," in restored.output and "kept deleted 0" in restored.output
    body = client.get(f"/v1/accelerators/{ACCELERATOR}").json()
    assert body["origin"] == "seed"
    assert tombstones(database_url, KIND_ACCELERATOR) == set()
    assert reseed(database_url).inserted == []
