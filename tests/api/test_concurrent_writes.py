"""Racing writers (issue 15, findings 3 and 8): two apps on one database, requests sent at once.

Two ``create_app`` instances stand for two replicas (each has its own engine and pool); a
barrier releases both requests of a round at once so their transactions overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from test_accelerators_api import new_accelerator

from service.services import calibration as calibration_service

RACE_ROUNDS = 15


def calibration_body() -> dict[str, Any]:
    """A small GEMM upload (synthetic latencies near an H100's bf16 roofline)."""
    shapes = [(m, n, k) for m in (16, 256, 4096) for n, k in ((4096, 4096), (14336, 4096))]
    return {
        "accelerator": "h100-sxm",
        "name": "racing name",
        "backend": "race",
        "measurements": [
            {
                "kind": "gemm",
                "dtype": "bf16",
                "m": m,
                "n": n,
                "k": k,
                "latency_ms": round(2 * m * n * k / 700e12 * 1e3 + 0.01, 6),
            }
            for m, n, k in shapes
        ],
    }


def race(*calls: Callable[[], httpx.Response]) -> list[httpx.Response]:
    """Run the calls in threads released by one barrier; return their responses in order."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], httpx.Response]) -> httpx.Response:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def _patch(
    client: TestClient, path: str, body: dict[str, Any], headers: dict[str, str]
) -> Callable[[], httpx.Response]:
    return lambda: client.patch(path, json=body, headers=headers)


def test_two_if_match_writers_exactly_one_wins(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    path = "/v1/accelerators/race-gpu"
    assert client.post("/v1/accelerators", json=new_accelerator("race-gpu"), headers=auth_headers)
    outcomes = []
    for round_ in range(RACE_ROUNDS):
        current = client.get(path)
        etag, version = current.headers["ETag"], current.json()["version"]
        headers = {**auth_headers, "If-Match": etag}
        first, second = race(
            _patch(client, path, {"notes": f"a{round_}"}, headers),
            _patch(other_worker, path, {"notes": f"b{round_}"}, headers),
        )
        statuses = sorted((first.status_code, second.status_code))
        outcomes.append(statuses)
        assert statuses == [200, 412], (round_, first.text, second.text)
        winner = first if first.status_code == 200 else second
        assert winner.json()["version"] == version + 1
        stored = client.get(path).json()
        assert stored["notes"] == winner.json()["notes"]
        assert stored["version"] == version + 1
    assert len(outcomes) == RACE_ROUNDS


def test_racing_writers_without_if_match_never_get_412(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    path = "/v1/accelerators/race-free-gpu"
    created = client.post(
        "/v1/accelerators", json=new_accelerator("race-free-gpu"), headers=auth_headers
    )
    start = created.json()["version"]
    for round_ in range(RACE_ROUNDS):
        first, second = race(
            _patch(client, path, {"notes": f"a{round_}"}, auth_headers),
            _patch(other_worker, path, {"tdp_w": 400 + round_}, auth_headers),
        )
        assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
        # Versions are allocated without collision: the two writes got consecutive numbers.
        assert sorted([first.json()["version"], second.json()["version"]]) == [
            start + 2 * round_ + 1,
            start + 2 * round_ + 2,
        ]
        stored = client.get(path).json()
        # Neither merge patch was lost: each touched a different field.
        assert stored["notes"] == f"a{round_}" and stored["tdp_w"] == 400 + round_


def test_racing_put_with_if_match_exactly_one_wins(
    client: TestClient, other_worker: TestClient, auth_headers: dict[str, str]
) -> None:
    path = "/v1/accelerators/race-put-gpu"
    client.post("/v1/accelerators", json=new_accelerator("race-put-gpu"), headers=auth_headers)
    for round_ in range(RACE_ROUNDS):
        etag = client.get(path).headers["ETag"]
        headers = {**auth_headers, "If-Match": etag}
        bodies = [new_accelerator("race-put-gpu", notes=f"{side}{round_}") for side in "ab"]
        first, second = race(
            lambda b=bodies[0], h=headers: client.put(path, json=b, headers=h),
            lambda b=bodies[1], h=headers: other_worker.put(path, json=b, headers=h),
        )
        assert sorted((first.status_code, second.status_code)) == [200, 412], round_


def test_concurrent_same_name_uploads_get_distinct_versions(
    client: TestClient,
    other_worker: TestClient,
    auth_headers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Fits queue on a 2-thread pool per process; replicas fit in parallel. Reuse one fit so
    # every upload reaches its store step at once, as uploads on separate replicas do.
    real_fit = calibration_service.run_fit
    fitted: list[Any] = []

    def fit_once(*args: Any) -> Any:
        if not fitted:
            fitted.append(real_fit(*args))
        return fitted[0]

    monkeypatch.setattr(calibration_service, "run_fit", fit_once)
    client.post("/v1/calibrations", json=calibration_body(), headers=auth_headers)  # warm fit
    uploads = 8
    clients = [client, other_worker] * (uploads // 2)
    body = calibration_body()
    responses = race(
        *(
            (lambda c=c: c.post("/v1/calibrations", json=body, headers=auth_headers))
            for c in clients
        )
    )
    assert [r.status_code for r in responses] == [201] * uploads, [r.text for r in responses]
    assert sorted(r.json()["version"] for r in responses) == list(range(2, uploads + 2))


def test_an_upload_records_its_owner(
    client: TestClient, auth_headers: dict[str, str], db_session: Any
) -> None:
    from service.db.models import CalibrationProfileRow

    created = client.post("/v1/calibrations", json=calibration_body(), headers=auth_headers)
    assert created.status_code == 201
    row = db_session.get(CalibrationProfileRow, created.json()["id"])
    assert row.owner == auth_headers["X-API-Key"].split("_")[1]
