"""The process-local catalog and profile caches behind estimates never serve a stale entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.client.measurement_files import read_measurement_file
from service.services.catalog import CatalogService

GEMM = Path(__file__).parents[1] / "data" / "benchmarks" / "h100_gemm_subset.csv"


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit seeded catalog rows (which needs the admin scope)."""
    return make_api_key("admin")


def request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1, 8],
        "calibration": "none",
    }
    body.update(overrides)
    return body


def estimate(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/estimates", json=request(**overrides))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_repeated_estimates_load_rows_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    model_shape = CatalogService.model_shape

    def counted(self: CatalogService, model_id: str) -> Any:
        calls.append(model_id)
        return model_shape(self, model_id)

    monkeypatch.setattr(CatalogService, "model_shape", counted)
    first = estimate(client)
    assert estimate(client) == first
    step = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "calibration": "none",
            "phase": "decode", "batch_size": 4, "context_tokens": 512}  # fmt: skip
    assert client.post("/v1/intensity", json=step).status_code == 200
    assert calls == ["llama-3.1-8b"]


def test_model_edit_is_seen_by_the_next_estimate(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    before = estimate(client)
    patched = client.patch("/v1/models/llama-3.1-8b", json={"num_layers": 16}, headers=auth_headers)
    assert patched.status_code == 200, patched.text
    after = estimate(client)
    assert after["points"][0]["memory"]["weights_gb"] < before["points"][0]["memory"]["weights_gb"]
    assert after == estimate(other_worker)  # same answer as a process with a cold cache


def test_edit_by_another_worker_is_seen(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    before = estimate(client)
    body = other_worker.get("/v1/accelerators/h100-sxm").json()
    body["memory_bandwidth_gb_s"] = body["memory_bandwidth_gb_s"] / 2
    replaced = other_worker.put("/v1/accelerators/h100-sxm", json=body, headers=auth_headers)
    assert replaced.status_code == 200, replaced.text
    after = estimate(client)
    assert after["points"][0]["tpot_ms"] > before["points"][0]["tpot_ms"]
    assert after == estimate(other_worker)


def test_deleted_and_recreated_accelerator(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    body = client.get("/v1/accelerators/h100-sxm").json()
    body["id"] = "cache-gpu"
    assert client.post("/v1/accelerators", json=body, headers=auth_headers).status_code == 201
    before = estimate(client, accelerator="cache-gpu")
    assert client.delete("/v1/accelerators/cache-gpu", headers=auth_headers).status_code == 204
    gone = client.post("/v1/estimates", json=request(accelerator="cache-gpu"))
    assert gone.status_code == 404
    assert "cache-gpu" in gone.json()["detail"]
    # Recreated with the same id and version 1 but another spec sheet.
    body["memory_bandwidth_gb_s"] = body["memory_bandwidth_gb_s"] * 2
    assert client.post("/v1/accelerators", json=body, headers=auth_headers).status_code == 201
    after = estimate(client, accelerator="cache-gpu")
    assert after["points"][0]["tpot_ms"] < before["points"][0]["tpot_ms"]
    assert after == estimate(other_worker, accelerator="cache-gpu")


def test_new_profile_is_picked_by_auto(client: TestClient, auth_headers: dict[str, str]) -> None:
    assert estimate(client, calibration="auto")["calibration"] is None
    rows = read_measurement_file(GEMM, accelerator="h100-sxm").measurements
    upload = {"accelerator": "h100-sxm", "name": "gemm", "measurements": rows}
    response = client.post("/v1/calibrations", json=upload, headers=auth_headers)
    assert response.status_code == 201, response.text
    profile = response.json()
    auto = estimate(client, calibration="auto")
    assert auto["calibration"] is not None and auto["calibration"]["id"] == profile["id"]
    by_id = estimate(client, calibration=profile["id"])
    assert by_id["calibration"].pop("reason") == "the profile named by id"
    assert auto["calibration"].pop("reason").startswith("auto: a profile fitted without a backend")
    assert by_id == auto
    # A backend-specific request falls back to the profile stored without a backend, and says so.
    fallback = estimate(client, calibration="auto", backend="vllm")["calibration"]
    assert fallback["id"] == auto["calibration"]["id"]
    assert "no profile of backend vllm" in fallback["reason"]
    missing = client.post("/v1/estimates", json=request(calibration="cal_missing"))
    assert missing.status_code == 404
