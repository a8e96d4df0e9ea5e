"""The scale-out compose file: replicas, load balancer, database and connection budget agree.

No container runtime can pull images here, so the file is checked statically: its structure
below, and ``docker-compose config`` (which parses and validates it without a daemon) when the
binary is installed (.ci/run installs Debian's package).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
NGINX = ROOT / "deploy" / "nginx.conf"


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def api_services(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document["services"].items() if k.startswith("api")}


def test_several_replicas_share_one_database_and_command() -> None:
    document = compose()
    replicas = api_services(document)
    assert len(replicas) >= 3
    urls = {r["environment"]["DATABASE_URL"] for r in replicas.values()}
    commands = {tuple(r["command"]) for r in replicas.values()}
    assert len(urls) == 1 and "@db:5432/" in urls.pop()
    assert len(commands) == 1
    for replica in replicas.values():
        assert replica["depends_on"]["db"]["condition"] == "service_healthy"
        assert "ports" not in replica  # reached through the load balancer only


def test_the_load_balancer_routes_to_every_replica() -> None:
    document = compose()
    replicas = set(api_services(document))
    lb = document["services"]["lb"]
    assert set(lb["depends_on"]) == replicas
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    upstream = set(re.findall(r"server (api-\d+):8000", NGINX.read_text()))
    assert upstream == replicas
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in NGINX.read_text()


def test_replicas_fit_the_database_connection_budget() -> None:
    document = compose()
    replicas = api_services(document)
    budget = sum(int(r["environment"]["RIDGELINE_DB_MAX_CONNECTIONS"]) for r in replicas.values())
    command = document["services"]["db"]["command"]
    max_connections = int(command[command.index("-c") + 1].split("=")[1])
    assert budget < max_connections


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_validates_the_file() -> None:
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
