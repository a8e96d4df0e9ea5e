"""HTTP tests of measured DRAM read bandwidth: the accelerator field and the estimate it caps."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_measured_matmul_api import estimate, new_accelerator


def test_seeded_h200_shows_its_measured_read(client: TestClient) -> None:
    assert client.get("/v1/accelerators/h200-sxm").json()["measured_memory_bandwidth_gb_s"] == 3889
    assert client.get("/v1/accelerators/h100-sxm").json()["measured_memory_bandwidth_gb_s"] is None


def test_a_measured_read_below_the_priors_slows_memory_bound_decode(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """2,000 GB/s on the sheet, 1,400 measured (0.70 against the priors' 0.85 and 0.90): one
    sequence's decode, weight streaming, slows by nearly 0.85 / 0.70 = 1.21."""
    slow = new_accelerator("slow-hbm", measured_memory_bandwidth_gb_s=1400.0)
    created = client.post("/v1/accelerators", json=slow, headers=auth_headers)
    assert created.status_code == 201, created.text
    assert created.json()["measured_memory_bandwidth_gb_s"] == 1400.0
    plain = client.post("/v1/accelerators", json=new_accelerator("plain-hbm"), headers=auth_headers)
    assert plain.status_code == 201, plain.text
    decode = {"input_tokens": 128, "output_tokens": 256}
    capped, free = estimate(client, "slow-hbm", **decode), estimate(client, "plain-hbm", **decode)
    ratio = capped["points"][0]["tpot_ms"] / free["points"][0]["tpot_ms"]
    assert 1.12 < ratio < 0.85 / 0.70 + 1e-9


@pytest.mark.parametrize("measured", [2000.5, 0.0, -1.0, "1400"])
def test_invalid_measured_bandwidth_rejected(
    client: TestClient, auth_headers: dict[str, str], measured: Any
) -> None:
    body = new_accelerator("bad-hbm", measured_memory_bandwidth_gb_s=measured)
    response = client.post("/v1/accelerators", json=body, headers=auth_headers)
    assert response.status_code == 422, response.text
    assert "measured_memory_bandwidth_gb_s" in response.text


def test_a_patch_below_the_stored_measurement_is_refused(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = new_accelerator("patched-hbm", measured_memory_bandwidth_gb_s=1800.0)
    assert client.post("/v1/accelerators", json=body, headers=auth_headers).status_code == 201
    lowered = client.patch(
        "/v1/accelerators/patched-hbm",
        json={"memory_bandwidth_gb_s": 1500},
        headers={**auth_headers, "Content-Type": "application/merge-patch+json"},
    )
    assert lowered.status_code == 422, lowered.text
    assert "measured_memory_bandwidth_gb_s" in lowered.text
