"""HTTP tests of /v1/accelerators: seeded facts, filters, pagination, CRUD and ETags."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit seeded catalog rows (which needs the admin scope)."""
    return make_api_key("admin")


def new_accelerator(accelerator_id: str = "test-gpu", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": accelerator_id,
        "vendor": "Acme",
        "name": "Acme Test GPU",
        "memory_gb": 64,
        "memory_bandwidth_gb_s": 2000,
        "peak_tflops": {"bf16": 500, "fp8": 1000},
        "interconnect_gb_s": 200,
        "tdp_w": 500,
        "price_usd_per_hour": 1.5,
        "price": {"date": "2026-01-01", "provider": "Acme Cloud", "tier": "on-demand"},
        "sources": ["https://example.com/acme-test-gpu"],
    }
    body.update(overrides)
    return body


def all_pages(client: TestClient, path: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = client.get(path, params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        items.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def test_h100_sxm_seeded_figures(client: TestClient) -> None:
    response = client.get("/v1/accelerators/h100-sxm")
    assert response.status_code == 200
    body = response.json()
    assert body["memory_gb"] == 80
    assert body["memory_bandwidth_gb_s"] == 3350
    assert body["peak_tflops"]["bf16"] == pytest.approx(989, rel=0.01)
    assert body["origin"] == "seed"
    # Ridge point is derived: 989.4e12 FLOP/s / 3.35e12 B/s.
    expected = body["peak_tflops"]["bf16"] * 1e12 / (body["memory_bandwidth_gb_s"] * 1e9)
    assert body["ridge_point_flop_per_byte"]["bf16"] == pytest.approx(expected)


def test_h200_sxm_seeded_figures(client: TestClient) -> None:
    body = client.get("/v1/accelerators/h200-sxm").json()
    assert body["memory_gb"] == 141
    assert body["memory_bandwidth_gb_s"] == 4800


def test_every_seeded_accelerator_has_source_urls(client: TestClient) -> None:
    items = all_pages(client, "/v1/accelerators", limit=200)
    assert len(items) >= 20
    for item in items:
        assert item["sources"], item["id"]
        assert all(url.startswith(("http://", "https://")) for url in item["sources"]), item["id"]


def test_filters(client: TestClient) -> None:
    nvidia = all_pages(client, "/v1/accelerators", vendor="nvidia")
    assert nvidia and all(item["vendor"].lower() == "nvidia" for item in nvidia)
    assert "mi300x" not in {item["id"] for item in nvidia}

    big = all_pages(client, "/v1/accelerators", min_memory_gb=141)
    assert big and all(item["memory_gb"] >= 141 for item in big)
    assert {"h200-sxm", "mi300x"} <= {item["id"] for item in big}
    assert "h100-sxm" not in {item["id"] for item in big}

    everything = all_pages(client, "/v1/accelerators", limit=200)
    fp8 = all_pages(client, "/v1/accelerators", dtype="fp8")
    assert {item["id"] for item in fp8} == {
        item["id"] for item in everything if item["peak_tflops"].get("fp8")
    }
    assert 0 < len(fp8) < len(everything)


def test_cursor_pagination_visits_every_row_once(client: TestClient) -> None:
    everything = client.get("/v1/accelerators", params={"limit": 200}).json()
    assert everything["next_cursor"] is None
    paged = all_pages(client, "/v1/accelerators", limit=7)
    assert [item["id"] for item in paged] == [item["id"] for item in everything["items"]]
    first = client.get("/v1/accelerators", params={"limit": 7}).json()
    assert len(first["items"]) == 7 and first["next_cursor"]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 201}, {"dtype": "fp64"}])
def test_bad_list_parameters_are_422(client: TestClient, params: dict[str, Any]) -> None:
    response = client.get("/v1/accelerators", params=params)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == next(iter(params))


@pytest.mark.parametrize("cursor", ["%%%", "a", "abcde", "x" * 401])
def test_cursor_outside_its_pattern_is_422(client: TestClient, cursor: str) -> None:
    response = client.get("/v1/accelerators", params={"cursor": cursor})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "cursor"


def test_any_cursor_of_the_pattern_names_a_position(client: TestClient) -> None:
    # The document promises that every string of the cursor pattern is accepted: it decodes to
    # a position in id order ("h1" is after "gh200" and before "h100-pcie").
    cursor = base64.urlsafe_b64encode(b"h1").decode().rstrip("=")
    page = client.get("/v1/accelerators", params={"cursor": cursor, "limit": 1}).json()
    assert [item["id"] for item in page["items"]] == ["h100-nvl"]
    for garbage in ("____", "AA"):  # bytes that are not UTF-8; a NUL (PostgreSQL has none)
        assert client.get("/v1/accelerators", params={"cursor": garbage}).status_code == 200


def test_crud_round_trip(client: TestClient, auth_headers: dict[str, str]) -> None:
    created = client.post("/v1/accelerators", json=new_accelerator(), headers=auth_headers)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/accelerators/test-gpu"
    assert created.json()["origin"] == "user"
    assert created.json()["ridge_point_flop_per_byte"]["bf16"] == pytest.approx(250.0)

    fetched = client.get("/v1/accelerators/test-gpu")
    assert fetched.json()["memory_gb"] == 64
    assert fetched.headers["etag"] == created.headers["etag"]

    replaced = client.put(
        "/v1/accelerators/test-gpu",
        json=new_accelerator(memory_gb=96),
        headers=auth_headers,
    )
    assert replaced.status_code == 200
    assert replaced.json()["memory_gb"] == 96
    assert replaced.json()["version"] == 2

    patched = client.patch(
        "/v1/accelerators/test-gpu",
        json={"peak_tflops": {"fp8": None, "fp16": 500}, "tdp_w": 450},
        headers=auth_headers,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["peak_tflops"] == {"bf16": 500, "fp16": 500}
    assert patched.json()["tdp_w"] == 450
    assert patched.json()["memory_gb"] == 96

    deleted = client.delete("/v1/accelerators/test-gpu", headers=auth_headers)
    assert deleted.status_code == 204
    assert client.get("/v1/accelerators/test-gpu").status_code == 404


def test_put_accepts_its_own_get_body(client: TestClient, auth_headers: dict[str, str]) -> None:
    body = client.get("/v1/accelerators/l40s").json()
    body["price_usd_per_hour"] = 0.5
    response = client.put("/v1/accelerators/l40s", json=body, headers=auth_headers)
    assert response.status_code == 200, response.text
    assert response.json()["price_usd_per_hour"] == 0.5
    assert response.json()["origin"] == "user"


def test_duplicate_id_is_409(client: TestClient, auth_headers: dict[str, str]) -> None:
    response = client.post(
        "/v1/accelerators", json=new_accelerator("h100-sxm"), headers=auth_headers
    )
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert "h100-sxm" in response.json()["detail"]


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_unknown_id_is_404(client: TestClient, auth_headers: dict[str, str], method: str) -> None:
    kwargs: dict[str, Any] = {"headers": auth_headers}
    if method in ("put", "patch"):
        kwargs["json"] = new_accelerator("no-such-gpu")
    response = getattr(client, method)("/v1/accelerators/no-such-gpu", **kwargs)
    assert response.status_code == 404
    body = response.json()
    assert body["status"] == 404 and body["title"] and body["type"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"memory_gb": -1}, "memory_gb"),
        ({"memory_bandwidth_gb_s": "fast"}, "memory_bandwidth_gb_s"),
        ({"peak_tflops": {"fp64": 10}}, "peak_tflops.fp64"),
        ({"sources": ["not a url"]}, "sources.0"),
        ({"id": "Bad Id!"}, "id"),
        ({"colour": "green"}, "colour"),
    ],
)
def test_schema_violation_is_422_naming_the_field(
    client: TestClient, auth_headers: dict[str, str], overrides: dict[str, Any], field: str
) -> None:
    response = client.post(
        "/v1/accelerators", json=new_accelerator(**overrides), headers=auth_headers
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert field in [error["field"] for error in response.json()["errors"]]


def test_missing_required_field_is_422(client: TestClient, auth_headers: dict[str, str]) -> None:
    body = new_accelerator()
    del body["memory_gb"]
    response = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["memory_gb"]


def test_patch_with_invalid_result_is_422(client: TestClient, auth_headers: dict[str, str]) -> None:
    response = client.patch(
        "/v1/accelerators/h100-sxm", json={"memory_gb": 0}, headers=auth_headers
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "memory_gb"
    assert client.get("/v1/accelerators/h100-sxm").json()["memory_gb"] == 80


def test_put_with_mismatched_body_id_is_422(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = client.put(
        "/v1/accelerators/h100-sxm", json=new_accelerator("other"), headers=auth_headers
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "id"


def test_conditional_get_returns_304(client: TestClient) -> None:
    first = client.get("/v1/accelerators/h100-sxm")
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    again = client.get("/v1/accelerators/h100-sxm", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.headers["etag"] == etag
    other = client.get("/v1/accelerators/h100-sxm", headers={"If-None-Match": '"other"'})
    assert other.status_code == 200


def test_stale_if_match_is_412(client: TestClient, auth_headers: dict[str, str]) -> None:
    etag = client.get("/v1/accelerators/h100-sxm").headers["etag"]
    first = client.patch(
        "/v1/accelerators/h100-sxm",
        json={"tdp_w": 690},
        headers={**auth_headers, "If-Match": etag},
    )
    assert first.status_code == 200
    assert first.headers["etag"] != etag
    for method, kwargs in (
        ("patch", {"json": {"tdp_w": 680}}),
        ("put", {"json": new_accelerator("h100-sxm")}),
        ("delete", {}),
    ):
        stale = getattr(client, method)(
            "/v1/accelerators/h100-sxm", headers={**auth_headers, "If-Match": etag}, **kwargs
        )
        assert stale.status_code == 412, method
    assert client.get("/v1/accelerators/h100-sxm").json()["tdp_w"] == 690
    fresh = client.delete(
        "/v1/accelerators/h100-sxm", headers={**auth_headers, "If-Match": first.headers["etag"]}
    )
    assert fresh.status_code == 204
