"""``--url``: the CLI against a live ``ridgeline serve`` subprocess gives the in-process numbers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import Result

from service.settings import Settings

Invoke = Callable[..., Result]
RIDGELINE = Path(sys.executable).with_name("ridgeline")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def server_url(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """A ``ridgeline serve`` process on the test database; its URL once /readyz answers."""
    port = free_port()
    env = {
        **os.environ,
        "RIDGELINE_DATABASE_URL": settings.database_url,
        "RIDGELINE_DATA_DIR": str(tmp_path),
        "RIDGELINE_LOG_LEVEL": "WARNING",
        "RIDGELINE_API_KEY_PEPPER": settings.api_key_pepper,
    }
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [str(RIDGELINE), "serve", "--port", str(port)], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                pytest.fail(f"server exited: {(tmp_path / 'server.log').read_text()}")
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("server did not become ready")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.mark.slow
def test_remote_estimate_equals_local(ridgeline_cli: Invoke, server_url: str, api_key: str) -> None:
    args = ("estimate", "llama-3.1-70b", "h100-sxm", "-b", "1,64,512", "--json")
    remote = ridgeline_cli(*args, "--url", server_url)
    assert remote.exit_code == 0, remote.stderr
    local = ridgeline_cli(*args)
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    refused = ridgeline_cli(
        "catalog", "import-hf", str(Path(__file__)), "--id", "x", "--url", server_url
    )
    assert refused.exit_code == 1  # not JSON: refused before any request
    config = str(
        Path(__file__).resolve().parents[1] / "data" / "hf_configs" / "Qwen--Qwen3-8B.json"
    )
    import_args = ("catalog", "import-hf", config, "--id", "remote-qwen", "--url", server_url)
    missing_key = ridgeline_cli(*import_args)
    assert missing_key.exit_code == 1 and "401" in missing_key.stderr
    with_key = ridgeline_cli(*import_args, "--api-key", api_key, "--json")
    assert with_key.exit_code == 0, with_key.stderr
    assert httpx.get(f"{server_url}/v1/models/remote-qwen").json()["id"] == "remote-qwen"
