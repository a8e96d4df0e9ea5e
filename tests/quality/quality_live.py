"""Start and stop a real ``ridgeline serve`` process for the quality tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import create_key

STARTUP_LIMIT_S = 90
PEPPER = "quality-test-pepper"


def free_port() -> int:
    """Return a TCP port that is free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ridgeline_command() -> list[str]:
    """Return the argv prefix that runs the ``ridgeline`` CLI of this virtualenv."""
    script = Path(sys.executable).parent / "ridgeline"
    if script.exists():
        return [str(script)]
    found = shutil.which("ridgeline")
    return [found] if found else [sys.executable, "-m", "service.cli"]


@dataclass
class LiveServer:
    """One ``ridgeline serve`` subprocess bound to loopback, logging to a file."""

    database_url: str
    workdir: Path
    workers: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
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

    def start(self) -> None:
        """Launch the process and wait until /readyz answers 200."""
        self.starts += 1
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                *ridgeline_command(),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server did not become ready:\n{self.log()}")
            time.sleep(0.2)

    def log(self) -> str:
        """Return what the current process has written so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def terminate(self, timeout_s: float = 30) -> int:
        """Send SIGTERM and wait for a graceful exit; return the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers) at once."""
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

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
