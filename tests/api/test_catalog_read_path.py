"""The session-less accelerator read matches the ORM representation, ETag and 404."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from service.db.models import AcceleratorRow
from service.services.catalog import CatalogService, read_accelerator
from service.services.errors import NotFoundError
from service.services.representation import etag_of


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit seeded catalog rows (which needs the admin scope)."""
    return make_api_key("admin")


def test_core_read_equals_orm_representation_for_every_accelerator(
    app: FastAPI, client: TestClient
) -> None:
    engine = app.state.engine
    with app.state.session_factory() as session:
        ids = session.scalars(select(AcceleratorRow.id)).all()
        assert ids
        catalog = CatalogService(session)
        for accelerator_id in ids:
            expected = catalog.get_accelerator(accelerator_id)
            assert read_accelerator(engine, accelerator_id) == expected


def test_get_serves_an_edit_and_its_new_etag(
    client: TestClient, make_api_key: Callable[..., str]
) -> None:
    before = client.get("/v1/accelerators/h100-sxm")
    patched = client.patch(
        "/v1/accelerators/h100-sxm",
        json={"notes": "edited"},
        headers={"If-Match": before.headers["ETag"], "X-API-Key": make_api_key("admin")},
    )
    assert patched.status_code == 200
    after = client.get("/v1/accelerators/h100-sxm")
    assert after.json()["notes"] == "edited"
    assert after.headers["ETag"] == etag_of(after.json()) != before.headers["ETag"]


def test_unknown_id_is_not_found(app: FastAPI, client: TestClient) -> None:
    with pytest.raises(NotFoundError):
        read_accelerator(app.state.engine, "no-such-accelerator")
    response = client.get("/v1/accelerators/no-such-accelerator")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
