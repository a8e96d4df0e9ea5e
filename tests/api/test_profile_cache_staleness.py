"""Cached calibration profiles follow edits of the accelerators they were resolved against.

A profile fitted on h100-sxm and applied to a100-sxm-40gb has its GEMM compute efficiency
scaled by the two accelerators' measured matmul fractions (``transfer_efficiency``), so an edit
of either spec sheet, in this worker or another one, must change the next estimate to what a
process with cold caches computes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.client.measurement_files import read_measurement_file
from service.settings import Settings

GEMM = Path(__file__).parents[1] / "data" / "benchmarks" / "h100_gemm_subset.csv"
SOURCE = "h100-sxm"
TARGET = "a100-sxm-40gb"  # both have a measured bf16 matmul rate in the seeded catalog


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit seeded catalog rows (which needs the admin scope)."""
    return make_api_key("admin")


def estimate(client: TestClient, **overrides: Any) -> dict[str, Any]:
    # 8 × 1024 prompt tokens: prefill is compute-bound, so TTFT follows GEMM efficiency.
    body: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": TARGET,
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1, 8],
    }
    body.update(overrides)
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture
def cold(settings: Settings) -> Callable[..., dict[str, Any]]:
    """Estimate in a brand-new app (empty caches): what an uncached read gives."""

    def run(**overrides: Any) -> dict[str, Any]:
        with TestClient(create_app(settings), raise_server_exceptions=False) as client:
            return estimate(client, **overrides)

    return run


@pytest.fixture
def profile_id(client: TestClient, auth_headers: dict[str, str]) -> str:
    rows = read_measurement_file(GEMM, accelerator=SOURCE).measurements
    upload = {"accelerator": SOURCE, "name": "gemm", "measurements": rows}
    response = client.post("/v1/calibrations", json=upload, headers=auth_headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def set_measured_bf16(
    editor: TestClient, accelerator: str, tflops: float, auth_headers: dict[str, str]
) -> None:
    """Replace an accelerator's measured bf16 matmul TFLOP/s with a PUT of its whole body."""
    body = editor.get(f"/v1/accelerators/{accelerator}").json()
    body["measured_matmul_tflops"] = {**body["measured_matmul_tflops"], "bf16": tflops}
    replaced = editor.put(f"/v1/accelerators/{accelerator}", json=body, headers=auth_headers)
    assert replaced.status_code == 200, replaced.text


def ttfts(answer: dict[str, Any]) -> list[float]:
    return [point["ttft_ms"] for point in answer["points"]]


@pytest.mark.parametrize("edited_by", ["same worker", "other worker"])
def test_transferred_profile_follows_target_and_source_edits(
    client: TestClient,
    other_worker: TestClient,
    cold: Callable[..., dict[str, Any]],
    profile_id: str,
    auth_headers: dict[str, str],
    edited_by: str,
) -> None:
    editor = client if edited_by == "same worker" else other_worker
    workers = (client, other_worker)
    before = estimate(client, calibration=profile_id)
    assert before["calibration"]["transferred_from"] == SOURCE
    assert estimate(other_worker, calibration=profile_id) == before  # both caches warm

    # Target: half its measured matmul rate halves the transferred GEMM efficiency.
    measured = editor.get(f"/v1/accelerators/{TARGET}").json()["measured_matmul_tflops"]["bf16"]
    set_measured_bf16(editor, TARGET, measured / 2, auth_headers)
    target_edited = cold(calibration=profile_id)
    assert all(after > was for after, was in zip(ttfts(target_edited), ttfts(before), strict=True))
    for worker in workers:
        assert estimate(worker, calibration=profile_id) == target_edited

    # Source: a higher measured rate where the profile was fitted lowers the transfer ratio.
    peak = editor.get(f"/v1/accelerators/{SOURCE}").json()["peak_tflops"]["bf16"]
    set_measured_bf16(editor, SOURCE, 0.95 * peak, auth_headers)
    source_edited = cold(calibration=profile_id)
    assert all(
        after > was for after, was in zip(ttfts(source_edited), ttfts(target_edited), strict=True)
    )
    for worker in workers:
        assert estimate(worker, calibration=profile_id) == source_edited


@pytest.mark.parametrize("edited_by", ["same worker", "other worker"])
def test_deleted_and_recreated_source_accelerator(
    client: TestClient,
    other_worker: TestClient,
    cold: Callable[..., dict[str, Any]],
    profile_id: str,
    auth_headers: dict[str, str],
    edited_by: str,
) -> None:
    editor = client if edited_by == "same worker" else other_worker
    workers = (client, other_worker)
    source_body = client.get(f"/v1/accelerators/{SOURCE}").json()
    # Make the transfer ratio far from 1 so that dropping it shows in the answer.
    set_measured_bf16(editor, SOURCE, 0.5 * source_body["peak_tflops"]["bf16"], auth_headers)
    transferred = cold(calibration=profile_id)
    for worker in workers:
        assert estimate(worker, calibration=profile_id) == transferred

    # Without its source the profile is applied as fitted (no spec sheets to scale by).
    assert editor.delete(f"/v1/accelerators/{SOURCE}", headers=auth_headers).status_code == 204
    orphan = cold(calibration=profile_id)
    assert orphan["calibration"]["transferred_from"] == SOURCE
    assert ttfts(orphan) != ttfts(transferred)
    for worker in workers:
        assert estimate(worker, calibration=profile_id) == orphan

    # Recreated (version 1 again, new updated_at) with the seeded spec sheet.
    created = editor.post("/v1/accelerators", json=source_body, headers=auth_headers)
    assert created.status_code == 201, created.text
    restored = cold(calibration=profile_id)
    assert ttfts(restored) != ttfts(orphan)
    for worker in workers:
        assert estimate(worker, calibration=profile_id) == restored


@pytest.mark.parametrize("calibration", ["none", "own profile"])
def test_untransferred_answers_follow_edits(
    client: TestClient,
    other_worker: TestClient,
    cold: Callable[..., dict[str, Any]],
    profile_id: str,
    auth_headers: dict[str, str],
    calibration: str,
) -> None:
    # The priors (measured matmul fraction) and a profile on its own accelerator.
    choice = profile_id if calibration == "own profile" else "none"
    before = estimate(client, accelerator=SOURCE, calibration=choice)
    assert estimate(other_worker, accelerator=SOURCE, calibration=choice) == before
    body = other_worker.get(f"/v1/accelerators/{SOURCE}").json()
    body["measured_matmul_tflops"]["bf16"] /= 2
    body["memory_bandwidth_gb_s"] /= 2
    replaced = other_worker.put(f"/v1/accelerators/{SOURCE}", json=body, headers=auth_headers)
    assert replaced.status_code == 200, replaced.text
    after = cold(accelerator=SOURCE, calibration=choice)
    assert after != before
    for worker in (client, other_worker):
        assert estimate(worker, accelerator=SOURCE, calibration=choice) == after
