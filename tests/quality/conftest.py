"""Fixtures for the quality gates: live ``ridgeline serve`` processes on the run's database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from quality_live import LiveServer, ServerFactory


@pytest.fixture(scope="module")
def live_server_factory(
    database_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerFactory]:
    """Return a function that builds (not starts) servers on fresh seeded databases."""
    servers: list[LiveServer] = []
    workdir = tmp_path_factory.mktemp("live")

    def make(workers: int = 2, **env: str) -> LiveServer:
        server = LiveServer(
            database_url=database_factory.seeded(),
            workdir=workdir,
            workers=workers,
            extra_env={"RIDGELINE_RATE_LIMIT_ENABLED": "false", **env},
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        if server.process is not None and server.process.poll() is None:
            server.kill()
