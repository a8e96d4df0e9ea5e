"""Crash safety: SIGKILL a live server while writes are in flight, restart, audit the database."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import httpx
import pytest
from quality_live import LiveServer, ServerFactory
from quality_writes import calibration_body, list_items, model_body, stored_matches
from sqlalchemy import make_url

pytestmark = pytest.mark.slow

WRITES = 160
IN_FLIGHT = 16
KILL_AFTER_ACKNOWLEDGED = 24


def planned_writes(with_calibrations: bool) -> list[tuple[str, dict[str, Any]]]:
    """Model creations, interleaved with calibration uploads when the route exists."""
    writes: list[tuple[str, dict[str, Any]]] = []
    for i in range(WRITES):
        if with_calibrations and i % 2:
            body = calibration_body(i)
            body["backend"] = "crash"
            writes.append(("/v1/calibrations", body))
        else:
            writes.append(("/v1/models", model_body(f"crash-{i}", layers=i + 1)))
    return writes


async def write_until_killed(
    server: LiveServer, writes: list[tuple[str, dict[str, Any]]], api_key: str
) -> dict[int, dict[str, Any]]:
    """Send writes with bounded concurrency, SIGKILL the server mid-way; return 201 answers."""
    acknowledged: dict[int, dict[str, Any]] = {}
    gate = asyncio.Semaphore(IN_FLIGHT)
    killed = asyncio.Event()
    headers = {"X-API-Key": api_key}

    async def send(client: httpx.AsyncClient, index: int, path: str, body: dict[str, Any]) -> None:
        async with gate:
            if killed.is_set():
                return
            try:
                response = await client.post(path, json=body, headers=headers)
            except httpx.TransportError:
                return
            if response.status_code == 201:
                acknowledged[index] = response.json()
            elif response.status_code == 503:
                # every heavy-work slot taken (calibration fits): refused, not acknowledged,
                # and the answer says when to retry
                assert "Retry-After" in response.headers, response.text
            else:
                assert response.status_code < 500, response.text
            if len(acknowledged) >= KILL_AFTER_ACKNOWLEDGED and not killed.is_set():
                killed.set()
                server.kill()

    limits = httpx.Limits(max_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=60) as client:
        await asyncio.gather(*(send(client, i, p, b) for i, (p, b) in enumerate(writes)))
    assert killed.is_set(), "every write finished before the kill; raise WRITES"
    return acknowledged


def sqlite_integrity(database_url: str) -> str:
    """Run PRAGMA integrity_check on a SQLite file (recovering its WAL) and return the verdict."""
    connection = sqlite3.connect(make_url(database_url).database or "")
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


def test_kill_9_loses_no_acknowledged_write(live_server_factory: ServerFactory) -> None:
    server = live_server_factory()
    api_key = server.create_key("write")
    server.start()
    paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    writes = planned_writes(with_calibrations="post" in paths.get("/v1/calibrations", {}))
    acknowledged = asyncio.run(write_until_killed(server, writes, api_key))

    if server.database_url.startswith("sqlite"):
        assert sqlite_integrity(server.database_url) == "ok"
    server.start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            audit(client, writes, acknowledged)
    finally:
        server.terminate()


def audit(
    client: httpx.Client,
    writes: list[tuple[str, dict[str, Any]]],
    acknowledged: dict[int, dict[str, Any]],
) -> None:
    """Every acknowledged write reads back whole; every stored write is whole."""
    model_ids = {item["id"] for item in list_items(client, "/v1/models")}
    profiles = (
        {
            item["name"]: item
            for item in list_items(client, "/v1/calibrations", accelerator="h100-sxm")
            if item.get("backend") == "crash"
        }
        if any(path == "/v1/calibrations" for path, _ in writes)
        else {}
    )
    for index, (path, body) in enumerate(writes):
        if path == "/v1/models":
            stored = body["id"] in model_ids
            if stored:
                read = client.get(f"/v1/models/{body['id']}")
                assert read.status_code == 200 and stored_matches(read.json(), body), body["id"]
        else:
            stored = body["name"] in profiles
            if stored:
                profile_id = profiles[body["name"]]["id"]
                kept = client.get(f"/v1/calibrations/{profile_id}/measurements")
                assert kept.status_code == 200
                assert len(measurement_rows(kept.json())) == len(body["measurements"])
        if index in acknowledged:
            assert stored, f"acknowledged write {index} ({path}) was lost"


def measurement_rows(answer: Any) -> list[Any]:
    """Return the measurement rows of a /measurements answer (a list or an items page)."""
    return list(answer["items"] if isinstance(answer, dict) else answer)
