"""The client's catalog methods against the ASGI app: pages, CRUD, ETags, HF import, errors."""

from __future__ import annotations

from typing import Any

import pytest
from client_helpers import hf_config
from fastapi.testclient import TestClient

from service.client import (
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PreconditionFailedError,
    Ridgeline,
)


def all_pages(client: TestClient, path: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})}).json()
        items.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def new_accelerator(accelerator_id: str = "client-gpu") -> dict[str, Any]:
    return {
        "id": accelerator_id,
        "vendor": "Acme",
        "name": "Acme Client GPU",
        "memory_gb": 48,
        "memory_bandwidth_gb_s": 1000,
        "peak_tflops": {"bf16": 250},
        "interconnect_gb_s": 50,
        "sources": ["https://example.com/acme"],
    }


def test_list_accelerators_follows_every_page(ridgeline: Ridgeline, client: TestClient) -> None:
    expected = [item["id"] for item in all_pages(client, "/v1/accelerators")]
    got = [a.id for a in ridgeline.list_accelerators(limit=4)]
    assert len(expected) > 4  # more than one page was needed
    assert got == expected


def test_list_filters_reach_the_server(ridgeline: Ridgeline, client: TestClient) -> None:
    expected = {item["id"] for item in all_pages(client, "/v1/accelerators", vendor="AMD")}
    assert {a.id for a in ridgeline.list_accelerators(vendor="AMD")} == expected
    assert expected and all(a.vendor == "AMD" for a in ridgeline.list_accelerators(vendor="AMD"))
    moe = list(ridgeline.list_models(moe=True, limit=3))
    assert moe and all(m.num_experts > 0 for m in moe)
    assert {m.id for m in moe} == {i["id"] for i in all_pages(client, "/v1/models", moe="true")}


def test_get_accelerator_matches_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    raw = client.get("/v1/accelerators/h100-sxm").json()
    h100 = ridgeline.get_accelerator("h100-sxm")
    assert h100.model_dump(mode="json") == raw
    assert h100.ridge_point_flop_per_byte["bf16"] == raw["ridge_point_flop_per_byte"]["bf16"]


def test_accelerator_create_patch_replace_delete(ridgeline: Ridgeline) -> None:
    created = ridgeline.create_accelerator(new_accelerator())
    assert created.origin == "user" and created.memory_gb == 48
    patched = ridgeline.update_accelerator("client-gpu", memory_gb=64)
    assert patched.memory_gb == 64 and patched.version == created.version + 1
    replaced = ridgeline.update_accelerator(
        "client-gpu", {**new_accelerator(), "name": "Renamed"}, replace=True
    )
    assert replaced.name == "Renamed" and replaced.memory_gb == 48
    ridgeline.delete_accelerator("client-gpu")
    with pytest.raises(NotFoundError):
        ridgeline.get_accelerator("client-gpu")


def test_stale_if_match_is_precondition_failed(ridgeline: Ridgeline, client: TestClient) -> None:
    ridgeline.create_accelerator(new_accelerator())
    etag = client.get("/v1/accelerators/client-gpu").headers["ETag"]
    ridgeline.update_accelerator("client-gpu", memory_gb=50, if_match=etag)
    with pytest.raises(PreconditionFailedError) as info:
        ridgeline.update_accelerator("client-gpu", memory_gb=60, if_match=etag)
    assert info.value.status == 412
    with pytest.raises(PreconditionFailedError):
        ridgeline.delete_accelerator("client-gpu", if_match=etag)


def test_model_crud_and_hf_import(ridgeline: Ridgeline, client: TestClient) -> None:
    imported = ridgeline.import_hf("qwen3-8b-copy", hf_config("Qwen--Qwen3-8B"), name="Copy")
    raw = client.get("/v1/models/qwen3-8b-copy").json()
    assert imported.total_params == raw["total_params"] and imported.name == "Copy"
    shape = {k: v for k, v in raw.items() if k not in ("id", "origin", "version")}
    created = ridgeline.create_model({**shape, "id": "qwen3-8b-copy2"})
    assert created.total_params == imported.total_params
    patched = ridgeline.update_model("qwen3-8b-copy2", vocab_size=raw["vocab_size"] * 2)
    assert patched.total_params is not None and imported.total_params is not None
    assert patched.total_params > imported.total_params
    ridgeline.delete_model("qwen3-8b-copy2")
    assert ridgeline.get_model("qwen3-8b-copy").id == "qwen3-8b-copy"
    with pytest.raises(NotFoundError):
        ridgeline.get_model("qwen3-8b-copy2")


def test_not_found_carries_the_problem_details(ridgeline: Ridgeline) -> None:
    with pytest.raises(NotFoundError) as info:
        ridgeline.get_model("no-such-model")
    error = info.value
    assert error.status == 404
    assert error.title == "Not Found"
    assert "no-such-model" in error.detail
    assert error.type.endswith("/not-found")
    assert error.problem["status"] == 404


def test_validation_error_lists_the_fields(ridgeline: Ridgeline) -> None:
    body = {**new_accelerator(), "memory_gb": -1}
    with pytest.raises(InvalidRequestError) as info:
        ridgeline.create_accelerator(body)
    assert info.value.status == 422
    assert "memory_gb" in info.value.fields


def test_write_without_key_is_unauthorised(anonymous: Ridgeline) -> None:
    with pytest.raises(AuthenticationError) as info:
        anonymous.create_accelerator(new_accelerator())
    assert info.value.status == 401


def test_duplicate_is_conflict(ridgeline: Ridgeline) -> None:
    with pytest.raises(ConflictError) as info:
        ridgeline.import_hf("llama-3.1-8b", hf_config("Qwen--Qwen3-8B"))
    assert info.value.status == 409
