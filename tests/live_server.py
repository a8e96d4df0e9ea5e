"""Start, wait for and stop a real ``ridgeline serve`` subprocess (shared by the live tests)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


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
class ServerProcess:
    """One launched ``ridgeline serve`` process on loopback, logging to a file."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    group: bool = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """Return what the process has written so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout_s: float, path: str = "/readyz", probe_s: float = 1.0) -> None:
        """Poll ``path`` until it answers 200; raise RuntimeError if the process exits or stalls."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}{path}", timeout=probe_s).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not become ready:\n{self.log()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the process (its whole group when launched in a new session) and reap it."""
        if self.process.poll() is None:
            if self.group:
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.kill()
        self.process.wait()

    def stop(self, timeout_s: float) -> int:
        """Send SIGTERM, wait for a graceful exit (else kill); return the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()


def launch(
    env: Mapping[str, str],
    log_path: Path,
    *serve_args: str,
    port: int | None = None,
    new_session: bool = False,
) -> ServerProcess:
    """Run ``ridgeline serve --port PORT SERVE_ARGS...`` with stdout and stderr to ``log_path``."""
    port = free_port() if port is None else port
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*ridgeline_command(), "serve", "--port", str(port), *serve_args],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )
    return ServerProcess(process, port, log_path, group=new_session)


@contextmanager
def running_server(
    env: Mapping[str, str],
    log_path: Path,
    *serve_args: str,
    ready_path: str = "/readyz",
    start_timeout_s: float = 60,
    stop_timeout_s: float = 15,
) -> Iterator[ServerProcess]:
    """Launch a server, yield it once ready, and stop it on exit."""
    server = launch(env, log_path, *serve_args)
    try:
        server.wait_ready(start_timeout_s, ready_path)
        yield server
    finally:
        server.stop(stop_timeout_s)
