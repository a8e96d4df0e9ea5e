"""POST /v1/calibrations?split_by_backend=true: a run's backend becomes a profile's backend."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def _run(backend: str) -> dict[str, Any]:
    return {
        "kind": "serving",
        "model": "llama-3-8b",
        "input_tokens": 512,
        "output_tokens": 128,
        "concurrency": 8,
        "ttft_ms": 80.0,
        "tpot_ms": 12.0,
        "backend": backend,
    }


@pytest.mark.parametrize("backend", ["v" * 51, "vLLM 0.9 (nightly)"])
def test_a_run_backend_that_is_no_profile_backend_is_a_422(
    client: TestClient, auth_headers: dict[str, str], backend: str
) -> None:
    """The profile field `backend` takes at most 50 letters, digits, `.`, `_`, `-`; a run that
    names another backend cannot be split into a profile of its own (nothing is stored)."""
    body = {"accelerator": "h100-sxm", "measurements": [_run("vllm"), _run(backend)]}
    response = client.post(
        "/v1/calibrations", json=body, headers=auth_headers, params={"split_by_backend": "true"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "measurements.1.backend"
    assert client.get("/v1/calibrations", headers=auth_headers).json()["items"] == []


def test_the_document_states_the_upload_form_and_both_201_bodies(client: TestClient) -> None:
    """The form has only its named text fields (never JSON null: a "null" field is the text
    "null"), and the 201 body is a profile or, split by backend, {"items": [...]}."""
    operation = client.get("/openapi.json").json()["paths"]["/v1/calibrations"]["post"]
    form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["additionalProperties"] is False
    assert all("anyOf" not in field for field in form["properties"].values())
    created = operation["responses"]["201"]["content"]["application/json"]["schema"]
    refs = {branch.get("$ref", "").rsplit("/", 1)[-1] for branch in created["anyOf"]}
    assert refs == {"CalibrationProfileOut", "CalibrationProfilesOut"}
    dtypes = operation["requestBody"]["content"]["application/json"]["schema"]
    assert "bf16" in str(dtypes) and "tf32" not in str(dtypes)


def _estimate(client: TestClient, backend: str) -> dict[str, Any]:
    request = {"model": "llama-3-8b", "accelerator": "h100-sxm", "input_tokens": 512,
               "output_tokens": 128, "batch_sizes": [8], "mode": "serving",
               "backend": backend}  # fmt: skip
    response = client.post("/v1/estimates", json=request)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_an_upload_naming_no_backend_takes_the_one_its_runs_name(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """One engine's runs make that engine's profile, with a warning, so "auto" leaves other
    engines' requests alone; kernel tables without runs stay without a backend."""
    runs = [dict(_run("TensorRT-LLM"), concurrency=c, tpot_ms=10.0 + c / 8) for c in (4, 8, 16)]
    body = {"accelerator": "h100-sxm", "name": "trt runs", "measurements": runs}
    response = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert response.status_code == 201, response.text
    profile = response.json()
    assert profile["backend"] == "trtllm"
    assert any("takes the one its runs name (trtllm)" in w for w in profile["warnings"])
    assert _estimate(client, "trtllm")["calibration"]["id"] == profile["id"]
    assert _estimate(client, "vllm")["calibration"] is None
    kernel = {"kind": "gemm", "dtype": "bf16", "m": 16, "n": 4096, "k": 4096, "latency_ms": 0.021}
    body = {"accelerator": "h100-sxm", "name": "gemm", "measurements": [kernel]}
    tables = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert tables.status_code == 201, tables.text
    assert tables.json()["backend"] is None
