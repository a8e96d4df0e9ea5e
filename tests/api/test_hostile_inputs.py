"""Inputs that reached a 500 (issue 15, finding 8): NUL characters and very deep nesting."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from test_accelerators_api import new_accelerator

NUL = "\x00"
DEPTH = 100_000


def assert_names(response: object, field: str) -> None:
    assert response.status_code == 422, response.text  # type: ignore[attr-defined]
    problem = response.json()  # type: ignore[attr-defined]
    assert problem["status"] == 422
    assert any(e["field"] == field for e in problem["errors"]), problem


@pytest.mark.parametrize("field", ["id", "name", "notes"])
def test_nul_in_a_created_accelerator_is_422(
    client: TestClient, auth_headers: dict[str, str], field: str
) -> None:
    body = new_accelerator("nul-gpu")
    body[field] = f"bad{NUL}value"
    response = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert_names(response, field)


def test_nul_in_a_patch_and_in_a_list_is_422(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    client.post("/v1/accelerators", json=new_accelerator("nul-gpu"), headers=auth_headers)
    patched = client.patch(
        "/v1/accelerators/nul-gpu", json={"notes": f"a{NUL}b"}, headers=auth_headers
    )
    assert_names(patched, "notes")
    listed = client.post(
        "/v1/accelerators",
        json=new_accelerator("nul-gpu-2", sources=["https://example.com", f"x{NUL}"]),
        headers=auth_headers,
    )
    assert_names(listed, "sources.1")


def test_nul_in_a_path_or_query_is_422(client: TestClient) -> None:
    assert_names(client.get("/v1/accelerators/h100%00-sxm"), "path")
    assert_names(client.get("/v1/models", params={"family": f"llama{NUL}"}), "family")


def test_nul_in_calibration_metadata_is_422(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = {
        "accelerator": "h100-sxm",
        "name": f"nul{NUL}name",
        "measurements": [
            {"kind": "gemm", "dtype": "bf16", "m": 16, "n": 4096, "k": 4096, "latency_ms": 0.05}
        ],
    }
    assert_names(client.post("/v1/calibrations", json=body, headers=auth_headers), "name")
    csv_text = f"model,batch_size,input_tokens,output_tokens\nllama{NUL},1,128,64\n"
    response = client.post(
        "/v1/calibrations",
        content=csv_text,
        params={"accelerator": "h100-sxm", "name": "csv"},
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert_names(response, "body")


def test_deeply_nested_calibration_body_is_422(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    nested = "[" * DEPTH + "]" * DEPTH
    body = '{"accelerator": "h100-sxm", "name": "deep", "measurements": ' + nested + "}"
    response = client.post(
        "/v1/calibrations",
        content=body,
        headers={**auth_headers, "Content-Type": "application/json"},
    )
    assert_names(response, "body")
    assert "nest" in response.json()["detail"]


def test_deeply_nested_estimate_body_is_422(client: TestClient) -> None:
    nested = '{"a":' * DEPTH + "1" + "}" * DEPTH
    response = client.post(
        "/v1/estimates/batch",
        content='{"items": [' + nested + "]}",
        headers={"Content-Type": "application/json"},
    )
    assert_names(response, "body")
