"""A real ``ridgeline serve`` process: start, become ready, read, write with a CLI key, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import ridgeline_command, running_server

pytestmark = pytest.mark.slow

STARTUP_LIMIT_S = 60


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
    log_path = tmp_path / "server.log"
    with running_server(
        server_env, log_path, "--host", "127.0.0.1", start_timeout_s=STARTUP_LIMIT_S
    ) as running:
        yield running.base_url
    output = log_path.read_text()
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status reports it.
    assert running.process.returncode in (0, -signal.SIGTERM), output
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
            # Editing a seeded row needs the admin scope (a write key gets 403).
            [*ridgeline_command(), "create-key", "--name", "live", "--scope", "admin"],
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
