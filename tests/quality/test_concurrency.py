"""Concurrency against a live server (2 workers) on the run's database (SQLite or PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from quality_live import LiveServer, ServerFactory
from quality_writes import calibration_body, list_items, model_body, stored_matches

pytestmark = pytest.mark.slow

CONCURRENT_ESTIMATES = 500
CONCURRENT_WRITES = 50
CONCURRENT_UPLOADS = 50
RACING_DUPLICATES = 10


def estimate_body(index: int) -> dict[str, Any]:
    """An estimate whose batch size and lengths identify the request it answers."""
    return {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 128 + index,
        "output_tokens": 64,
        "batch_sizes": [index % 64 + 1],
        "mode": "serving" if index % 2 else "static",
    }


async def post_all(
    base_url: str, path: str, bodies: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> list[httpx.Response]:
    """POST every body at once, each on its own connection."""
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=120) as client:
        return list(
            await asyncio.gather(*(client.post(path, json=b, headers=headers) for b in bodies))
        )


@pytest.fixture(scope="module")
def server(live_server_factory: ServerFactory) -> Any:
    """One 2-worker server shared by this module's tests (they write disjoint rows)."""
    server = live_server_factory()
    server.start()
    yield server
    server.terminate()


def test_concurrent_estimates_all_answer_their_own_request(server: LiveServer) -> None:
    bodies = [estimate_body(i) for i in range(CONCURRENT_ESTIMATES)]
    responses = asyncio.run(post_all(server.base_url, "/v1/estimates", bodies))
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * CONCURRENT_ESTIMATES, sorted(set(statuses))
    for body, response in zip(bodies, responses, strict=True):
        answer = response.json()
        assert answer["input_tokens"] == body["input_tokens"]
        assert answer["mode"] == body["mode"]
        assert [p["batch_size"] for p in answer["points"]] == body["batch_sizes"]
    # Answers under load equal answers given one at a time.
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for index in (0, 1, 257):
            alone = client.post("/v1/estimates", json=bodies[index]).json()
            assert alone == responses[index].json()


def test_concurrent_writes_are_all_stored_once(server: LiveServer) -> None:
    headers = {"X-API-Key": server.create_key("write")}
    bodies = [model_body(f"quality-{i}", layers=i + 1) for i in range(CONCURRENT_WRITES)]
    racing = [model_body("quality-race", layers=100 + i) for i in range(RACING_DUPLICATES)]
    responses = asyncio.run(post_all(server.base_url, "/v1/models", bodies + racing, headers))
    statuses = [r.status_code for r in responses]
    assert all(status < 500 for status in statuses), statuses
    assert statuses[:CONCURRENT_WRITES] == [201] * CONCURRENT_WRITES
    race_statuses = sorted(statuses[CONCURRENT_WRITES:])
    assert race_statuses == [201] + [409] * (RACING_DUPLICATES - 1)
    winner = racing[statuses[CONCURRENT_WRITES:].index(201)]

    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for body in [*bodies, winner]:
            stored = client.get(f"/v1/models/{body['id']}")
            assert stored.status_code == 200
            assert stored_matches(stored.json(), body)
        listed = [item["id"] for item in list_items(client, "/v1/models")]
    ours = [i for i in listed if i.startswith("quality-")]
    assert sorted(ours) == sorted({b["id"] for b in bodies} | {"quality-race"})


async def upload_all(
    base_url: str, bodies: list[dict[str, Any]], keys: list[str], api_key: str
) -> tuple[list[httpx.Response], list[httpx.Response]]:
    """POST every calibration at once, each with its own Idempotency-Key, as a client that
    honours Retry-After: a 503 (every heavy-work slot and queue place taken) is sent again
    after the time it names. Returns the final answers and every 503 met on the way."""
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=0)
    refused: list[httpx.Response] = []
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=300) as client:

        async def send(body: dict[str, Any], key: str) -> httpx.Response:
            headers = {"X-API-Key": api_key, "Idempotency-Key": key}
            while True:
                response = await client.post("/v1/calibrations", json=body, headers=headers)
                if response.status_code != 503:
                    return response
                refused.append(response)
                await asyncio.sleep(float(response.headers["Retry-After"]))

        answers = await asyncio.gather(
            *(send(body, key) for body, key in zip(bodies, keys, strict=True))
        )
    return list(answers), refused


def test_concurrent_calibration_uploads_are_stored_once(server: LiveServer) -> None:
    api_key = server.create_key("write")
    bodies = [calibration_body(i) for i in range(CONCURRENT_UPLOADS)]
    keys = [f"quality-{i}" for i in range(CONCURRENT_UPLOADS)]
    retried = calibration_body(CONCURRENT_UPLOADS)
    bodies += [retried] * RACING_DUPLICATES
    keys += ["quality-retry"] * RACING_DUPLICATES
    responses, refused = asyncio.run(upload_all(server.base_url, bodies, keys, api_key))
    statuses = [r.status_code for r in responses]
    assert all(status < 500 for status in statuses), statuses
    # Fits hold heavy-work slots: beyond the slots and the queue the server says when to retry.
    assert all(r.json()["type"].endswith("heavy-work-queue-full") for r in refused)
    assert statuses[:CONCURRENT_UPLOADS] == [201] * CONCURRENT_UPLOADS, statuses
    retries = responses[CONCURRENT_UPLOADS:]
    # Every retry of one key either replays the one stored profile or is told it is in flight.
    replayed_ids = {r.json()["id"] for r in retries if r.status_code in (200, 201)}
    assert len(replayed_ids) == 1, [r.status_code for r in retries]
    assert all(r.status_code in (200, 201, 409) for r in retries)

    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for body, response in zip(bodies, responses[:CONCURRENT_UPLOADS], strict=False):
            stored = client.get(f"/v1/calibrations/{response.json()['id']}")
            assert stored.status_code == 200
            assert stored.json()["name"] == body["name"]
        listed = list_items(client, "/v1/calibrations", accelerator="h100-sxm")
    ours = [item["name"] for item in listed if item.get("backend") == "quality"]
    expected = [b["name"] for b in bodies[:CONCURRENT_UPLOADS]] + [retried["name"]]
    assert sorted(ours) == sorted(expected)
