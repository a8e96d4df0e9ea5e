"""HTTP tests of measured matmul TFLOP/s: accelerator field and the estimate's prior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient


def new_accelerator(accelerator_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": accelerator_id,
        "vendor": "Acme",
        "name": "Acme Test GPU",
        "memory_gb": 64,
        "memory_bandwidth_gb_s": 2000,
        "peak_tflops": {"bf16": 500, "fp8": 1000},
        "interconnect_gb_s": 200,
        "sources": ["https://example.com/acme-test-gpu"],
    }
    return {**body, **overrides}


def estimate(client: TestClient, accelerator: str, **overrides: Any) -> dict[str, Any]:
    body = {
        "model": "llama-3.1-8b",
        "accelerator": accelerator,
        "input_tokens": 8192,
        "output_tokens": 16,
        "batch_sizes": [1],
        "calibration": "none",
        **overrides,
    }
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_seeded_accelerator_shows_measurement(client: TestClient) -> None:
    mi300x = client.get("/v1/accelerators/mi300x").json()
    assert mi300x["measured_matmul_tflops"] == {"bf16": 668.4}
    assert client.get("/v1/accelerators/l4").json()["measured_matmul_tflops"] is None


def test_create_round_trips_and_drives_the_estimate(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = new_accelerator("slow-gemm", measured_matmul_tflops={"bf16": 250.0})
    created = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert created.status_code == 201, created.text
    assert created.json()["measured_matmul_tflops"] == {"bf16": 250.0}
    plain = client.post(
        "/v1/accelerators", json=new_accelerator("plain-gemm"), headers=auth_headers
    )
    assert plain.status_code == 201, plain.text
    slow, default = estimate(client, "slow-gemm"), estimate(client, "plain-gemm")
    assert slow["efficiency_prior"] == "measured_matmul" and slow["calibration"] is None
    assert default["efficiency_prior"] == "default" and default["calibration"] is None
    # 250/500 = 0.5 of peak instead of the 0.80 prior: the compute-bound prefill is slower.
    assert slow["points"][0]["ttft_ms"] > 1.2 * default["points"][0]["ttft_ms"]


@pytest.mark.parametrize(
    "measured",
    [{"bf16": 600.0}, {"fp4": 10.0}, {"bf16": 0.0}, {"bf16": "250"}, {"bf17": 1.0}],
)
def test_invalid_measurements_rejected(
    client: TestClient, auth_headers: dict[str, str], measured: dict[str, Any]
) -> None:
    body = new_accelerator("bad-gemm", measured_matmul_tflops=measured)
    response = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert response.status_code == 422, response.text


def test_mi300x_uncalibrated_uses_measured_prior(client: TestClient) -> None:
    answer = estimate(client, "mi300x")
    assert answer["efficiency_prior"] == "measured_matmul"


def test_intensity_names_its_prior_like_the_estimate(client: TestClient) -> None:
    body = {
        "model": "llama-3.1-8b",
        "phase": "prefill",
        "batch_size": 1,
        "context_tokens": 4096,
        "calibration": "none",
    }
    priors = {}
    for accelerator in ("mi300x", "h100-sxm"):
        response = client.post("/v1/intensity", json={**body, "accelerator": accelerator})
        assert response.status_code == 200, response.text
        priors[accelerator] = response.json()["efficiency_prior"]
        assert priors[accelerator] == estimate(client, accelerator)["efficiency_prior"]
    assert priors["mi300x"] == "measured_matmul"


def test_an_h100_kernel_profile_on_another_vendors_chip_keeps_only_the_engine_terms(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    table = Path(__file__).parents[1] / "data" / "benchmarks" / "h100_gemm_subset.csv"
    response = client.post(
        "/v1/calibrations",
        files={"file": ("gemm.csv", table.read_bytes(), "text/csv")},
        data={"accelerator": "h100-sxm", "name": "h100 gemm"},
        headers=auth_headers,
    )
    assert response.status_code == 201, response.text
    profile = response.json()["id"]
    fp8 = {"precision": {"weights": "fp8", "activations": "fp8"}, "output_tokens": 256}
    for accelerator, same_kernels in (("h200-sxm", True), ("tpu-v5p", False)):
        spec = estimate(client, accelerator, **fp8)
        moved = estimate(client, accelerator, calibration=profile, **fp8)
        assert moved["calibration"]["transferred_from"] == "h100-sxm"
        # a kernel-only profile fits no engine term, so off NVIDIA nothing of it is left
        if same_kernels:
            assert moved["points"][0]["tpot_ms"] != pytest.approx(spec["points"][0]["tpot_ms"])
        else:
            assert moved["efficiency_prior"] == spec["efficiency_prior"] == "default"
            assert moved["points"][0]["tpot_ms"] == pytest.approx(spec["points"][0]["tpot_ms"])
            assert moved["points"][0]["ttft_ms"] == pytest.approx(spec["points"][0]["ttft_ms"])
