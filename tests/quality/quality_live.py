"""Start and stop a real ``ridgeline serve`` process for the quality tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from live_server import ServerProcess, free_port, launch

from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import create_key

STARTUP_LIMIT_S = 90
PEPPER = "quality-test-pepper"


@dataclass
class LiveServer:
    """One ``ridgeline serve`` subprocess bound to loopback, logging to a file."""

    database_url: str
    workdir: Path
    workers: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    running: ServerProcess | None = None
    starts: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"server-{self.port}-{self.starts}.log"

    def env(self) -> dict[str, str]:
        """Return the environment the server (and CLI commands against its database) run with."""
        env = dict(os.environ)
        env.update(
            RIDGELINE_DATABASE_URL=self.database_url,
            RIDGELINE_DATA_DIR=str(self.workdir),
            RIDGELINE_API_KEY_PEPPER=PEPPER,
            RIDGELINE_LOG_LEVEL="INFO",
        )
        env.update(self.extra_env)
        return env

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process if self.running else None

    def start(self) -> None:
        """Launch the process and wait until /readyz answers 200."""
        self.starts += 1
        self.running = launch(
            self.env(),
            self.log_path,
            "--host",
            "127.0.0.1",
            "--workers",
            str(self.workers),
            port=self.port,
            new_session=True,
        )
        try:
            self.running.wait_ready(STARTUP_LIMIT_S, probe_s=2)
        except RuntimeError:
            self.kill()
            raise

    def log(self) -> str:
        """Return what the current process has written so far."""
        return self.running.log() if self.running else ""

    def terminate(self, timeout_s: float = 30) -> int:
        """Send SIGTERM and wait for a graceful exit; return the exit status."""
        assert self.running is not None
        return self.running.stop(timeout_s)

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers) at once."""
        assert self.running is not None
        self.running.kill()

    def create_key(self, *scopes: str) -> str:
        """Store an API key in the server's database and return it."""
        engine = make_engine(self.database_url)
        try:
            with session_scope(make_session_factory(engine)) as session:
                _, key = create_key(session, PEPPER, "quality", scopes or ("write",))
        finally:
            engine.dispose()
        return key


ServerFactory = Callable[..., LiveServer]
