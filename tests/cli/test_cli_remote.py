"""``--url``: the CLI against a live ``ridgeline serve`` subprocess gives the in-process numbers."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from live_server import running_server
from typer.testing import Result

from service.settings import Settings

Invoke = Callable[..., Result]


@pytest.fixture
def server_url(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """A ``ridgeline serve`` process on the test database; its URL once /readyz answers."""
    env = {
        **os.environ,
        "RIDGELINE_DATABASE_URL": settings.database_url,
        "RIDGELINE_DATA_DIR": str(tmp_path),
        "RIDGELINE_LOG_LEVEL": "WARNING",
        "RIDGELINE_API_KEY_PEPPER": settings.api_key_pepper,
    }
    with running_server(
        env, tmp_path / "server.log", start_timeout_s=30, stop_timeout_s=10
    ) as running:
        yield running.base_url


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
