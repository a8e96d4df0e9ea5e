"""``ridgeline serve --workers 2``: connections reach both workers, a dead worker is replaced."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from quality_live import ServerFactory
from test_shutdown import read_response

from service.api.workers import reuse_port_supported

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not reuse_port_supported(), reason="needs Linux SO_REUSEPORT balancing"),
]

CONNECTIONS = 16
RESTART_LIMIT_S = 60


def _access_pids(log: str, prefix: str) -> dict[str, int]:
    """Map request id -> pid of the worker that logged it, for ids starting with ``prefix``."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return {
        r["request_id"]: r["pid"] for r in lines if str(r.get("request_id", "")).startswith(prefix)
    }


def _open_and_ask(port: int, request_id: str) -> int:
    head = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Request-ID: {request_id}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        status, _, _ = read_response(sock)
    return status


def _worker_pids(parent: int) -> set[int]:
    children = f"/proc/{parent}/task/{parent}/children"
    with open(children) as handle:
        return {int(pid) for pid in handle.read().split()}


def test_a_burst_of_connections_reaches_both_workers(live_server_factory: ServerFactory) -> None:
    """16 connections opened at once: with one socket per worker the kernel spreads them.

    With a shared listening socket one idle worker could accept the whole burst. Hash-based
    spreading puts all 16 on one worker with probability 2 · 2^-16.
    """
    server = live_server_factory()
    server.start()
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        statuses = list(
            pool.map(lambda i: _open_and_ask(server.port, f"burst-{i}"), range(CONNECTIONS))
        )
    assert statuses == [200] * CONNECTIONS
    time.sleep(0.5)  # let the access log lines reach the file
    pids = _access_pids(server.log(), "burst-")
    assert len(pids) == CONNECTIONS, server.log()
    assert len(set(pids.values())) == 2, pids
    assert server.process is not None
    assert set(pids.values()) == _worker_pids(server.process.pid)
    assert server.terminate() in (0, -signal.SIGTERM)


def test_a_killed_worker_is_replaced(live_server_factory: ServerFactory) -> None:
    server = live_server_factory()
    server.start()
    assert server.process is not None
    before = _worker_pids(server.process.pid)
    assert len(before) == 2
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + RESTART_LIMIT_S
    after = before
    while time.monotonic() < deadline:
        after = _worker_pids(server.process.pid)
        if len(after) == 2 and victim not in after:
            break
        time.sleep(0.2)
    assert len(after) == 2 and victim not in after, server.log()
    replacement = (after - before).pop()
    # The replacement serves: keep asking on fresh connections until it answers one.
    seen: set[int] = set()
    for i in range(200):
        response = httpx.get(
            f"{server.base_url}/healthz", headers={"X-Request-ID": f"after-{i}"}, timeout=30
        )
        assert response.status_code == 200
        time.sleep(0.01)
        seen = set(_access_pids(server.log(), "after-").values())
        if replacement in seen:
            break
    assert replacement in seen, server.log()
    assert server.terminate() in (0, -signal.SIGTERM)


def test_workers_exit_when_the_supervisor_is_killed(live_server_factory: ServerFactory) -> None:
    """SIGKILL to the supervisor alone: its workers get SIGTERM and stop; none keeps the port."""
    server = live_server_factory()
    server.start()
    assert server.process is not None
    workers = _worker_pids(server.process.pid)
    assert len(workers) == 2
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()
    deadline = time.monotonic() + RESTART_LIMIT_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers), server.log()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.base_url}/healthz", timeout=5)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
