"""Run several uvicorn worker processes, each accepting on its own SO_REUSEPORT socket.

uvicorn's ``--workers`` mode shares one listening socket between the workers. An idle worker
wakes for a burst of new connections and accepts all it can, so the keep-alive connections of
a client pool often land on one worker while the other idles (half the throughput, seen with
``benchmarks/load/loadgen.py``). With one socket per worker bound to the same port with
SO_REUSEPORT (Linux ≥ 3.9), the kernel spreads new connections over the workers by a hash of
their addresses instead.

The supervisor forwards SIGTERM/SIGINT to the workers (each finishes its in-flight requests, as
a single uvicorn process does) and restarts a worker that dies while it is not stopping.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass, replace
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

import uvicorn

from service.settings import Settings, get_settings

APP = "service.api.app:create_app"
# uvicorn would otherwise trust X-Forwarded-For from 127.0.0.1 and rewrite the client address;
# the app decides which proxies to believe (``trusted_proxies``, service/api/keys.py).
UVICORN_OPTIONS: dict[str, Any] = {"proxy_headers": False}


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn options every server process uses (both ``serve`` paths)."""
    return {
        **UVICORN_OPTIONS,
        "http": "service.api.protocol:HeaderTimeoutH11Protocol",
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "limit_concurrency": settings.max_connections,
    }


LISTEN_BACKLOG = 2048  # uvicorn's default
RESTART_PAUSE_S = 1.0  # between restarts of a crashing worker, so a broken start cannot spin
POLL_S = 0.5
PR_SET_PDEATHSIG = 1  # linux/prctl.h
logger = logging.getLogger("ridgeline.workers")


def reuse_port_supported() -> bool:
    """Return whether this platform balances connections over SO_REUSEPORT sockets.

    Linux hashes connections over the group; BSD and macOS accept SO_REUSEPORT without
    balancing, so they keep uvicorn's shared socket.
    """
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """Return a socket bound to (host, port) that other SO_REUSEPORT sockets may share."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker runs: the app factory on (host, port) with these uvicorn options."""

    host: str
    port: int
    log_level: str

    def uvicorn_config(self) -> uvicorn.Config:
        return uvicorn.Config(
            APP,
            factory=True,
            host=self.host,
            port=self.port,
            access_log=False,
            log_level=self.log_level,
            **uvicorn_options(get_settings()),
        )


def _exit_with(supervisor_pid: int) -> None:
    """Have Linux send this process SIGTERM when the supervisor dies (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def run_worker(config: WorkerConfig, supervisor_pid: int) -> None:
    """Body of one worker process: its own listening socket, one uvicorn server."""
    # The supervisor's handlers were inherited by the fork; uvicorn installs its own on start.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _exit_with(supervisor_pid)  # no worker outlives a killed supervisor
    sock = reuse_port_socket(config.host, config.port)
    sock.listen(LISTEN_BACKLOG)
    uvicorn.Server(config.uvicorn_config()).run(sockets=[sock])


class Supervisor:
    """Start ``count`` workers, keep them running, and stop them gracefully on a signal."""

    def __init__(self, config: WorkerConfig, count: int) -> None:
        self.config = config
        self.count = count
        self.stopping = threading.Event()
        self.workers: list[BaseProcess] = []
        self.context = multiprocessing.get_context("fork")

    def _start_worker(self) -> BaseProcess:
        process = self.context.Process(
            target=run_worker, args=(self.config, os.getpid()), daemon=False
        )
        process.start()
        logger.info("started worker %s", process.pid)
        return process

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping.set()

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT; return once every worker has exited."""
        # Holding a bound (not listening) socket reserves the port and fails fast if it is taken;
        # only listening sockets receive connections.
        reservation = reuse_port_socket(self.config.host, self.config.port)
        # Port 0 asks for a free port: every worker then binds the one the reservation got.
        self.config = replace(self.config, port=reservation.getsockname()[1])
        config = self.config
        logger.info("listening on %s:%s with %s workers", config.host, config.port, self.count)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.workers = [self._start_worker() for _ in range(self.count)]
            while not self.stopping.wait(POLL_S):
                self._restart_dead()
        finally:
            for process in self.workers:
                if process.is_alive() and process.pid is not None:
                    process.terminate()  # SIGTERM: uvicorn finishes in-flight requests
            for process in self.workers:
                process.join()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            reservation.close()

    def _restart_dead(self) -> None:
        for index, process in enumerate(self.workers):
            if process.is_alive() or self.stopping.is_set():
                continue
            logger.warning("worker %s exited with %s; restarting", process.pid, process.exitcode)
            if self.stopping.wait(RESTART_PAUSE_S):
                return
            self.workers[index] = self._start_worker()
