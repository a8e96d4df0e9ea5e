"""API-key authentication and scopes on writes (and on reads when configured)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.db.models import ApiKeyRow
from service.services.auth import hash_key, revoke_key
from service.settings import Settings

USER_ACCELERATOR = {
    "id": "user-gpu",
    "vendor": "Acme",
    "name": "Acme GPU",
    "memory_gb": 64,
    "memory_bandwidth_gb_s": 2000,
    "peak_tflops": {"bf16": 500},
    "sources": ["https://example.com/acme"],
}
PATCH = ("/v1/accelerators/l4", {"tdp_w": 70})  # a seeded row: editing it needs admin


def test_write_without_key_is_401(client: TestClient) -> None:
    response = client.patch(PATCH[0], json=PATCH[1])
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == "ApiKey"


def test_write_with_unknown_key_is_401(client: TestClient, api_key: str) -> None:
    forged = api_key[:-4] + ("aaaa" if not api_key.endswith("aaaa") else "bbbb")
    for key in (forged, "rl_000000000000_nope", "garbage"):
        response = client.patch(PATCH[0], json=PATCH[1], headers={"X-API-Key": key})
        assert response.status_code == 401, key


def test_read_scope_key_cannot_write(client: TestClient, make_api_key: Callable[..., str]) -> None:
    key = make_api_key("read")
    response = client.patch(PATCH[0], json=PATCH[1], headers={"X-API-Key": key})
    assert response.status_code == 403
    assert response.json()["title"] == "Forbidden"


def test_write_and_admin_keys_can_write(
    client: TestClient, make_api_key: Callable[..., str]
) -> None:
    for scope in ("write", "admin"):
        key = make_api_key(scope)
        body = {**USER_ACCELERATOR, "id": f"user-gpu-{scope}"}
        created = client.post("/v1/accelerators", json=body, headers={"X-API-Key": key})
        assert created.status_code == 201, scope
        path = f"/v1/accelerators/user-gpu-{scope}"
        response = client.patch(path, json=PATCH[1], headers={"X-API-Key": key})
        assert response.status_code == 200, scope
        assert client.delete(path, headers={"X-API-Key": key}).status_code == 204, scope


def test_seeded_rows_need_admin_to_edit_or_delete(
    client: TestClient, make_api_key: Callable[..., str]
) -> None:
    writer = {"X-API-Key": make_api_key("write")}
    admin = {"X-API-Key": make_api_key("admin")}
    refused = client.patch(PATCH[0], json=PATCH[1], headers=writer)
    assert refused.status_code == 403
    assert "admin" in refused.json()["detail"]
    assert client.delete(PATCH[0], headers=writer).status_code == 403
    assert client.delete("/v1/models/llama-3.1-8b", headers=writer).status_code == 403
    assert client.get(PATCH[0]).json()["tdp_w"] != 70  # nothing changed
    assert client.patch(PATCH[0], json=PATCH[1], headers=admin).status_code == 200
    assert client.delete(PATCH[0], headers=admin).status_code == 204


def test_revoked_key_is_401(
    client: TestClient, make_api_key: Callable[..., str], db_session: Session
) -> None:
    api_key = make_api_key("admin")
    assert client.patch(PATCH[0], json=PATCH[1], headers={"X-API-Key": api_key}).status_code == 200
    revoke_key(db_session, api_key.split("_")[1])
    db_session.commit()
    response = client.patch(PATCH[0], json=PATCH[1], headers={"X-API-Key": api_key})
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_key_is_stored_only_as_hmac(api_key: str, db_session: Session, settings: Settings) -> None:
    row = db_session.scalars(select(ApiKeyRow)).one()
    assert api_key not in (row.key_hash, row.prefix, row.name)
    assert row.key_hash == hash_key(settings.api_key_pepper, api_key)
    assert row.key_hash != hash_key("another-pepper", api_key)


def test_reads_are_open_by_default(client: TestClient) -> None:
    assert client.get("/v1/accelerators/h100-sxm").status_code == 200


def test_reads_need_a_key_when_configured(
    settings: Settings, make_api_key: Callable[..., str]
) -> None:
    locked = settings.model_copy(update={"require_key_for_reads": True})
    key = make_api_key("read")
    with TestClient(create_app(locked)) as client:
        assert client.get("/v1/accelerators/h100-sxm").status_code == 401
        assert client.get("/v1/models").status_code == 401
        ok = client.get("/v1/accelerators/h100-sxm", headers={"X-API-Key": key})
        assert ok.status_code == 200
        assert client.get("/healthz").status_code == 200
