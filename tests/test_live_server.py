"""A real ``ridgeline serve`` process: start, become ready, read, write with a CLI key, SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

STARTUP_LIMIT_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ridgeline_command() -> list[str]:
    script = Path(sys.executable).parent / "ridgeline"
    if script.exists():
        return [str(script)]
    found = shutil.which("ridgeline")
    return [found] if found else [sys.executable, "-m", "service.cli"]


@pytest.fixture
def server_env(database_factory: Any, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RIDGELINE_DATABASE_URL=database_factory.empty(),
        RIDGELINE_DATA_DIR=str(tmp_path),
        RIDGELINE_API_KEY_PEPPER="live-test-pepper",
        RIDGELINE_LOG_LEVEL="INFO",
    )
    return env


@pytest.fixture
def server(server_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [*ridgeline_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=server_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"server exited early:\n{(tmp_path / 'server.log').read_text()}")
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("server did not become ready")
            time.sleep(0.2)
        yield base
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
    output = (tmp_path / "server.log").read_text()
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status reports it.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output


def test_live_server_round_trip(server: str, server_env: dict[str, str]) -> None:
    with httpx.Client(base_url=server, timeout=10) as client:
        h100 = client.get("/v1/accelerators/h100-sxm")
        assert h100.status_code == 200
        assert h100.json()["memory_gb"] == 80
        assert h100.headers["x-request-id"]

        denied = client.patch("/v1/accelerators/h100-sxm", json={"tdp_w": 650})
        assert denied.status_code == 401

        created = subprocess.run(
            [*ridgeline_command(), "create-key", "--name", "live", "--scope", "write"],
            env=server_env,
            capture_output=True,
            text=True,
            check=True,
        )
        key = created.stdout.strip().splitlines()[0]
        written = client.patch(
            "/v1/accelerators/h100-sxm", json={"tdp_w": 650}, headers={"X-API-Key": key}
        )
        assert written.status_code == 200, written.text
        assert client.get("/v1/accelerators/h100-sxm").json()["tdp_w"] == 650
        assert "ridgeline_http_requests_total" in client.get("/metrics").text
