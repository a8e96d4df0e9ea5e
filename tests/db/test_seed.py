"""Seeding from the YAML records: idempotent, refreshes seed rows, never overwrites user rows."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from service.catalog_files import load_accelerator_records, load_model_records
from service.db.catalog_repository import AcceleratorRepository, ModelRepository
from service.services.seed import seed_catalog


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit or delete seeded catalog rows (needs the admin scope)."""
    return make_api_key("admin")


def records_with(accelerator_id: str, **changes: Any) -> list[dict[str, Any]]:
    records = copy.deepcopy(load_accelerator_records())
    for record in records:
        if record["id"] == accelerator_id:
            record.update(changes)
    return records


def test_seeded_database_holds_every_yaml_record(db_session: Session) -> None:
    accelerators = {row.id for row in AcceleratorRepository(db_session).all()}
    models = {row.id for row in ModelRepository(db_session).all()}
    assert accelerators == {str(r["id"]) for r in load_accelerator_records()}
    assert models == {str(r["id"]) for r in load_model_records()}


def test_reseeding_unchanged_yaml_changes_nothing(db_session: Session) -> None:
    report = seed_catalog(db_session)
    assert report.inserted == [] and report.updated == [] and report.kept_user_rows == []
    assert report.unchanged == len(load_accelerator_records()) + len(load_model_records())


def test_changed_yaml_updates_unedited_seed_row(db_session: Session) -> None:
    report = seed_catalog(db_session, records_with("l4", memory_gb=25), load_model_records())
    assert report.updated == ["l4"]
    row = AcceleratorRepository(db_session).get("l4")
    assert row is not None and row.memory_gb == 25 and row.version == 2 and row.origin == "seed"


def test_reseeding_never_overwrites_a_user_edited_row(
    client: TestClient, auth_headers: dict[str, str], db_session: Session
) -> None:
    edited = client.patch("/v1/accelerators/l4", json={"memory_gb": 30}, headers=auth_headers)
    assert edited.status_code == 200 and edited.json()["origin"] == "user"
    report = seed_catalog(db_session, records_with("l4", memory_gb=25), load_model_records())
    assert "l4" in report.kept_user_rows and report.updated == []
    db_session.commit()
    assert client.get("/v1/accelerators/l4").json()["memory_gb"] == 30


def test_seed_restores_a_deleted_row_and_inserts_new_records(db_session: Session) -> None:
    repo = AcceleratorRepository(db_session)
    row = repo.get("a10")
    assert row is not None
    repo.delete(row)
    extra = copy.deepcopy(next(r for r in load_accelerator_records() if r["id"] == "l4"))
    extra.update(id="l4-clone", name="L4 clone")
    report = seed_catalog(db_session, [*load_accelerator_records(), extra], load_model_records())
    assert sorted(report.inserted) == ["a10", "l4-clone"]
    clone = repo.get("l4-clone")
    assert clone is not None and clone.origin == "seed" and clone.sources
