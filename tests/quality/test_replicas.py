"""Three ``ridgeline serve`` replicas started together on one fresh database (issue 15).

What docker-compose.yml runs, without containers: the replicas race on an empty database
(migrations and seeding under the start-up lock), then If-Match, shared rate limits,
Idempotency-Key and the header deadline are checked across them.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from quality_live import LiveServer
from quality_writes import calibration_body

pytestmark = pytest.mark.slow

REPLICAS = 3
BURST = 5
RACE_ROUNDS = 10
ACCELERATOR = {
    "id": "replica-gpu",
    "vendor": "Acme",
    "name": "Replica GPU",
    "memory_gb": 64,
    "memory_bandwidth_gb_s": 2000,
    "peak_tflops": {"bf16": 500},
    "sources": ["https://example.com/replica-gpu"],
}
ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 512,
    "output_tokens": 64,
    "batch_sizes": [1],
}


@pytest.fixture(scope="module")
def replicas(
    database_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[LiveServer]]:
    url = database_factory.empty()  # nothing migrated, nothing seeded
    workdir: Path = tmp_path_factory.mktemp("replicas")
    env = {
        "RIDGELINE_MIGRATE_ON_STARTUP": "true",
        "RIDGELINE_SEED_ON_STARTUP": "true",
        "RIDGELINE_RATE_LIMIT_ESTIMATES_BURST": str(BURST),
        "RIDGELINE_RATE_LIMIT_ESTIMATES_PER_S": "0.01",
        "RIDGELINE_RATE_LIMIT_SYNC_S": "0.1",
        "RIDGELINE_HEADER_TIMEOUT_S": "1",
        "RIDGELINE_DB_MAX_CONNECTIONS": "6",
    }
    servers = [
        LiveServer(database_url=url, workdir=workdir, workers=1, extra_env=env)
        for _ in range(REPLICAS)
    ]
    errors: list[BaseException] = []

    def start(server: LiveServer) -> None:
        try:
            server.start()
        except BaseException as exc:  # reported below with every replica's outcome
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, [s.log()[-2000:] for s in servers]
        yield servers
    finally:
        for server in servers:
            if server.process is not None and server.process.poll() is None:
                server.terminate()


def test_all_replicas_came_up_on_the_empty_database(replicas: list[LiveServer]) -> None:
    for server in replicas:
        assert server.process is not None and server.process.poll() is None
        assert httpx.get(f"{server.base_url}/readyz", timeout=10).status_code == 200
        h100 = httpx.get(f"{server.base_url}/v1/accelerators/h100-sxm", timeout=10)
        assert h100.status_code == 200


def test_if_match_holds_across_replicas(replicas: list[LiveServer]) -> None:
    key = {"X-API-Key": replicas[0].create_key("write")}
    first, second = (httpx.Client(base_url=s.base_url, timeout=30) for s in replicas[:2])
    assert first.post("/v1/accelerators", json=ACCELERATOR, headers=key).status_code == 201
    path = f"/v1/accelerators/{ACCELERATOR['id']}"
    for round_ in range(RACE_ROUNDS):
        etag = first.get(path).headers["ETag"]
        headers = {**key, "If-Match": etag}
        barrier = threading.Barrier(2)

        def patch(
            client: httpx.Client,
            note: str,
            h: dict[str, str] = headers,
            b: threading.Barrier = barrier,
        ) -> int:
            b.wait()
            return client.patch(path, json={"notes": note}, headers=h).status_code

        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(pool.map(patch, (first, second), (f"a{round_}", f"b{round_}")))
        assert statuses == [200, 412], round_


def test_rate_limits_are_shared_by_the_replicas(
    replicas: list[LiveServer], database_factory: Any
) -> None:
    """One client's estimate bucket (burst 5, refill 0.01/s) is one bucket on all replicas.

    Replica 0 spends the burst; the sixth request is refused. Then the two other replicas are
    asked three times each, 0.2 s apart (a forged X-Forwarded-For from loopback, not a trusted
    proxy, buys nothing). The whole test lasts under 5 s, so the refill adds at most
    5 x 0.01 = 0.05 of a token: no further request may be admitted anywhere.
    """

    def status(server: LiveServer, forwarded: str | None = None) -> int:
        headers = {"X-Forwarded-For": forwarded} if forwarded else {}
        return httpx.post(
            f"{server.base_url}/v1/estimates", json=ESTIMATE, headers=headers, timeout=30
        ).status_code

    spent = [status(replicas[0]) for _ in range(BURST + 1)]
    assert spent == [200] * BURST + [429]
    time.sleep(0.5)  # SQLite: replica 0's spending reaches the shared bucket within 0.1 s
    others = []
    for _ in range(3):
        for server in replicas[1:]:
            others.append(status(server, forwarded=f"10.9.{len(others)}.1"))
        time.sleep(0.2)
    if database_factory.is_postgres:
        # Tokens are taken in the database per request, atomically: the documented bound is
        # exact, so the replicas together admit the burst and nothing more.
        assert others == [429] * len(others)
    else:
        # SQLite (one node) exchanges spending every 0.1 s: a replica may spend from its
        # fresh local copy until its first sync returns (the documented bound,
        # (P - 1) x (burst + rate x sync_s), is 10 here: more than these 6 requests, so only
        # the end is pinned); once it has, the shared, empty bucket governs.
        assert others[-2:] == [429, 429], others


def test_idempotency_key_gives_one_profile_across_replicas(replicas: list[LiveServer]) -> None:
    key = {"X-API-Key": replicas[0].create_key("write"), "Idempotency-Key": "replicas-1"}
    body = calibration_body(7)
    answers = [
        httpx.post(f"{s.base_url}/v1/calibrations", json=body, headers=key, timeout=120)
        for s in replicas
    ]
    assert [a.status_code for a in answers] == [201] * REPLICAS
    assert len({a.json()["id"] for a in answers}) == 1


def test_a_client_that_never_finishes_its_headers_is_cut_off(
    replicas: list[LiveServer],
) -> None:
    port = int(replicas[0].base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: never finishes
        began = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the server
        assert time.monotonic() - began < 5
