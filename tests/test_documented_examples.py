"""The README's and the client guide's examples, run as written against ``ridgeline serve``.

Every fenced ``bash`` block that talks to the server (``curl`` or the ``ridgeline`` CLI), every
``console`` block of ``$ ridgeline ...`` commands and every ``python`` block that names the
server is taken from README.md and docs/client.md in order and run from a scratch directory that
sees the repository's ``tests/`` folder, so the files the examples name must exist. The only
rewrites are the ones a reader's machine makes for them: the server is the test's (its port
instead of 8000, started by the fixture instead of the tour's first line) and ``ridgeline`` is
this virtualenv's CLI. ``curl`` fails on any 4xx/5xx answer, and ``set -e`` stops at the first
failing command, so a stale example fails the test with the server's answer. docs/api.md's JSON
request bodies are sent to the endpoint each one's text names (in process).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from live_server import ridgeline_command, running_server

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = (REPO / "README.md", REPO / "docs" / "client.md")
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SERVE_LINE = re.compile(r"^\.venv/bin/ridgeline serve\b.*&\s*$", re.MULTILINE)
# Blocks that set up a machine (install, run the tests) rather than use a running server.
SETUP = ("pip install", "pytest")


def documented_blocks(language: str) -> list[str]:
    """The documents' fenced blocks of ``language`` that use a running server, in order
    (``console`` blocks come back as the commands after their ``$`` prompts)."""
    blocks = [
        body
        for document in DOCUMENTS
        for lang, body in FENCE.findall(document.read_text())
        if lang == language
    ]
    if language == "bash":
        uses_server = ("curl", ".venv/bin/ridgeline")
        return [
            b for b in blocks if any(u in b for u in uses_server) and not any(s in b for s in SETUP)
        ]
    if language == "console":
        return [re.sub(r"^\$ ridgeline ", ".venv/bin/ridgeline ", b, flags=re.MULTILINE)
                for b in blocks if "$ ridgeline " in b]  # fmt: skip
    return [b for b in blocks if "127.0.0.1:8000" in b or "localhost:8000" in b]


def as_run_here(block: str, base_url: str) -> str:
    """A README block with the reader's server and CLI replaced by the test's."""
    cli = " ".join(ridgeline_command())
    block = SERVE_LINE.sub("", block)
    block = block.replace("http://127.0.0.1:8000", base_url).replace("127.0.0.1:8000", base_url)
    block = block.replace("localhost:8000", base_url)
    return block.replace(".venv/bin/ridgeline", cli)


@pytest.fixture
def server_env(database_factory: Any, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RIDGELINE_DATABASE_URL=database_factory.empty(),
        RIDGELINE_DATA_DIR=str(tmp_path / "data"),
        RIDGELINE_API_KEY_PEPPER="readme-test-pepper",
        RIDGELINE_RATE_LIMIT_ENABLED="false",
    )
    return env


@pytest.fixture
def server(server_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    with running_server(server_env, tmp_path / "server.log", "--host", "127.0.0.1") as running:
        yield running.base_url


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A working directory where the examples' relative paths (tests/data/...) resolve."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "tests").symlink_to(REPO / "tests")
    return work


def test_the_documents_name_their_server_examples() -> None:
    # README: the API tour, the calibration upload and the CLI tables; the client guide's CLI
    # commands; the Python client in both
    assert len(documented_blocks("bash")) >= 3
    assert len(documented_blocks("console")) >= 1
    assert len(documented_blocks("python")) >= 3


def test_the_readme_shell_examples_run_as_written(
    server: str, server_env: dict[str, str], scratch: Path
) -> None:
    script = "\n".join(
        [
            "set -euo pipefail",
            'curl() { command curl --fail-with-body --silent --show-error "$@"; }',
            *(as_run_here(block, server) for block in documented_blocks("bash")),
            *(as_run_here(block, server) for block in documented_blocks("console")),
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=scratch,
        env=server_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert (scratch / "roofline.svg").read_text().lstrip().startswith("<svg")


def test_the_readme_python_examples_run_as_written(
    server: str, server_env: dict[str, str], scratch: Path
) -> None:
    for block in documented_blocks("python"):
        done = subprocess.run(
            [sys.executable, "-c", as_run_here(block, server)],
            cwd=scratch,
            env={**server_env, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{block}\nstderr:\n{done.stderr[-4000:]}"
        assert done.stdout.strip(), block


def api_body_examples() -> list[tuple[str, dict[str, Any]]]:
    """docs/api.md's JSON request bodies, each with the ``POST /v1/...`` named just above it."""
    text = (REPO / "docs" / "api.md").read_text()
    out: list[tuple[str, dict[str, Any]]] = []
    for match in re.finditer(r"^```json\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        before = text[: match.start()].splitlines()[-6:]
        paths = re.findall(r"POST (/v1/[a-z/]+)", "\n".join(before))
        assert paths, f"no POST /v1/... named above the example:\n{match.group(1)}"
        out.append((paths[-1], json.loads(match.group(1))))
    return out


def test_the_api_reference_bodies_are_answered(
    client: TestClient, make_api_key: Callable[..., str]
) -> None:
    examples = api_body_examples()
    assert {path for path, _ in examples} >= {"/v1/estimates", "/v1/plans", "/v1/calibrations"}
    key = make_api_key("write")
    for path, body in examples:
        answer = client.post(path, json=body, headers={"X-API-Key": key})
        assert answer.status_code in (200, 201), f"{path}: {answer.status_code} {answer.text}"


def test_the_readme_counts_the_catalog_it_ships() -> None:
    stated = re.search(
        r"Catalog: (\d+) accelerators and (\d+) model shapes", (REPO / "README.md").read_text()
    )
    assert stated is not None
    catalog = REPO / "hardware_catalog"
    shipped = (len(list((catalog / "accelerators").glob("*.yaml"))),
               len(list((catalog / "models").glob("*.yaml"))))  # fmt: skip
    assert (int(stated.group(1)), int(stated.group(2))) == shipped
