"""HTTP contract fixes: bounded catalog numbers, strict types, 409 documented, Allow, bad bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from service.db.models import AcceleratorRow
from service.services.representation import accelerator_to_dict


def accelerator(accelerator_id: str = "bounded-gpu", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": accelerator_id,
        "vendor": "Acme",
        "name": "Acme Bounded GPU",
        "memory_gb": 64,
        "memory_bandwidth_gb_s": 2000,
        "peak_tflops": {"bf16": 500},
    }
    body.update(overrides)
    return body


def model(model_id: str = "bounded-llama", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": model_id,
        "num_layers": 2,
        "hidden_size": 64,
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1000,
    }
    body.update(overrides)
    return body


def error_fields(response: Any) -> set[str]:
    assert response.status_code == 422, response.text
    return {error["field"] for error in response.json()["errors"]}


def test_overflowing_ridge_point_is_refused_and_nothing_is_stored(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = accelerator(peak_tflops={"bf16": 1e300}, memory_bandwidth_gb_s=1e-300)
    response = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert error_fields(response) == {"memory_bandwidth_gb_s", "peak_tflops.bf16"}
    assert client.get("/v1/accelerators/bounded-gpu").status_code == 404
    listing = client.get("/v1/accelerators", params={"limit": 200})
    assert listing.status_code == 200


def test_extreme_accepted_accelerator_renders_as_json(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = accelerator(peak_tflops={"bf16": 1e7}, memory_bandwidth_gb_s=1e-3, memory_gb=1e5)
    assert client.post("/v1/accelerators", json=body, headers=auth_headers).status_code == 201
    response = client.get("/v1/accelerators/bounded-gpu")
    assert response.status_code == 200
    assert response.json()["ridge_point_flop_per_byte"]["bf16"] == pytest.approx(1e7 * 1e12 / 1e6)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_gb", 1e5 * 1.01),
        ("memory_bandwidth_gb_s", 1e6 * 1.01),
        ("memory_bandwidth_gb_s", 0),
        ("interconnect_gb_s", 1e-9),
        ("tdp_w", -1),
    ],
)
def test_accelerator_numbers_out_of_bounds_are_refused(
    client: TestClient, auth_headers: dict[str, str], field: str, value: float
) -> None:
    response = client.post(
        "/v1/accelerators", json=accelerator(**{field: value}), headers=auth_headers
    )
    assert error_fields(response) == {field}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(
    client: TestClient, auth_headers: dict[str, str], literal: str
) -> None:
    raw = json.dumps(accelerator(memory_gb="__X__")).replace('"__X__"', literal)
    headers = {**auth_headers, "Content-Type": "application/json"}
    response = client.post("/v1/accelerators", content=raw, headers=headers)
    assert error_fields(response) == {"memory_gb"}
    raw = json.dumps(model(vendor_stated_params={"total": "__X__"})).replace('"__X__"', literal)
    response = client.post("/v1/models", content=raw, headers=headers)
    assert error_fields(response) == {"vendor_stated_params"}


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_layers", 10**6), ("hidden_size", 2**40), ("vocab_size", 2**31), ("num_experts", 10**5)],
)
def test_model_counts_out_of_bounds_are_refused(
    client: TestClient, auth_headers: dict[str, str], field: str, value: int
) -> None:
    response = client.post("/v1/models", json=model(**{field: value}), headers=auth_headers)
    assert field in error_fields(response)


def test_imported_config_out_of_bounds_is_refused(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 2**40,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 1000,
    }
    body = {"id": "huge-import", "hf_config": config}
    response = client.post("/v1/models/import", json=body, headers=auth_headers)
    assert error_fields(response) == {"hf_config"}
    assert "hidden_size" in response.json()["errors"][0]["message"]


def test_representation_never_holds_non_finite_numbers() -> None:
    now = datetime.now(UTC)
    row = AcceleratorRow(
        id="legacy",
        vendor="Acme",
        name="Legacy",
        memory_gb=80.0,
        memory_type="",
        memory_bandwidth_gb_s=1e-300,
        peak_tflops={"bf16": 1e300, "fp8": float("inf")},
        interconnect_gb_s=0.0,
        tdp_w=float("nan"),
        price_usd_per_hour=None,
        price=None,
        confidence=None,
        notes="",
        sources=[],
        field_sources={},
        origin="user",
        version=1,
        created_at=now,
        updated_at=now,
    )
    representation = accelerator_to_dict(row)
    json.dumps(representation, allow_nan=False)
    assert representation["ridge_point_flop_per_byte"] == {}
    assert representation["peak_tflops"] == {"bf16": 1e300}
    assert representation["tdp_w"] is None


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/accelerators", accelerator(memory_gb=True)),
        ("/v1/accelerators", accelerator(peak_tflops={"bf16": True})),
        ("/v1/accelerators", accelerator(ridge_point_flop_per_byte={"bf16": True})),
        ("/v1/models", model(num_layers=True)),
        ("/v1/models", model(num_experts=False)),
    ],
)
def test_booleans_are_not_numbers(
    client: TestClient, auth_headers: dict[str, str], path: str, body: dict[str, Any]
) -> None:
    response = client.post(path, json=body, headers=auth_headers)
    assert response.status_code == 422, response.text


def test_catalog_posts_declare_conflict(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/accelerators", "/v1/models", "/v1/models/import"):
        assert "409" in paths[path]["post"]["responses"], path


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/v1/accelerators/h100-sxm", {"GET", "PUT", "PATCH", "DELETE"}),
        ("DELETE", "/v1/accelerators", {"GET", "POST"}),
        ("OPTIONS", "/v1/models/import", {"POST"}),
        ("PUT", "/v1/estimates", {"POST"}),
    ],
)
def test_method_not_allowed_lists_every_method(
    client: TestClient, method: str, path: str, allowed: set[str]
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed
    assert response.headers["Content-Type"] == "application/problem+json"


def test_undecodable_body_gets_a_clear_problem(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    headers = {**auth_headers, "Content-Type": "application/json"}
    response = client.post("/v1/accelerators", content=b'{"id": "\xff\xfe"}', headers=headers)
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["title"] == "Malformed request body"
    assert problem["type"].endswith("/malformed-body")
    assert "UTF-8" in problem["detail"] and "decode" in problem["detail"]


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every JSON object nested in ``node`` (itself included)."""
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def test_patterned_keys_close_the_object(client: TestClient) -> None:
    """patternProperties alone would let any other key through; the server refuses them."""
    document = client.get("/openapi.json").json()
    patterned = [o for o in _objects(document) if "patternProperties" in o]
    assert len(patterned) >= 2  # traffic percentiles, plan prices
    assert all(o.get("additionalProperties") is False for o in patterned)


def test_unpatterned_keys_are_refused(client: TestClient) -> None:
    body = {"models": ["llama-3.1-8b"], "price_usd_per_hour": {"H100": 2.0}}
    assert error_fields(client.post("/v1/plans", json=body)) == {"price_usd_per_hour.H100"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({}, "batch_sizes"),
        ({"batch_sizes": None}, "batch_sizes"),
        ({"traffic": {"request_rate_per_s": 1.0}, "parallelism": {"dp": 2}}, "parallelism.dp"),
        ({"batch_sizes": [1], "load_pattern": "offline"}, "load_pattern"),
    ],
)
def test_estimate_rules_the_document_states(
    client: TestClient, overrides: dict[str, Any], field: str
) -> None:
    """Each body the server refuses for a field dependency, the document refuses too."""
    document = client.get("/openapi.json").json()
    body = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "input_tokens": 64}
    body |= {"output_tokens": 8, **overrides}
    assert field in error_fields(client.post("/v1/estimates", json=body))
    schema = {**document, "$ref": "#/components/schemas/EstimateRequest"}
    assert not jsonschema.Draft202012Validator(schema).is_valid(body)
    fixed = {**body, "batch_sizes": [1], "mode": "serving", "parallelism": {"dp": 1}}
    assert jsonschema.Draft202012Validator(schema).is_valid(fixed)
    assert client.post("/v1/estimates", json=fixed).status_code == 200


def test_free_text_query_refuses_nul_as_documented(client: TestClient) -> None:
    parameter = client.get("/openapi.json").json()["paths"]["/v1/accelerators"]["get"]
    vendor = next(p for p in parameter["parameters"] if p["name"] == "vendor")
    assert vendor["schema"]["pattern"] == "^[^\\x00]*$"
    assert error_fields(client.get("/v1/accelerators", params={"vendor": "a\x00"})) == {"vendor"}
