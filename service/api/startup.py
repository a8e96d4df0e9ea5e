"""Start-up that waits for the database: serve at once, report not-ready, retry with backoff.

The first attempt (connect, migrate and seed under the start-up lock) runs before the server
accepts connections, as before. If the database is unreachable, the server starts anyway:
``/healthz`` answers, ``/readyz`` and every API request answer 503 with Retry-After, and a
background task retries with doubling delays (``db_connect_first_delay_s`` up to
``db_connect_max_delay_s``), logging one line per failed attempt, until it succeeds. An error
that is not about reaching the database (a failed migration) is logged once and leaves the
replica not ready: retrying would not change it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.middleware import send_problem
from service.api.problems import database_unavailable
from service.db.session import ping
from service.services.bootstrap import prepare_database
from service.settings import Settings

logger = logging.getLogger("ridgeline.startup")
# Paths served while the database is not ready (liveness, readiness, metrics).
UNGATED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
NOT_READY_RETRY_AFTER_S = 2


@dataclass
class StartupState:
    """Whether this process finished its start-up work, and how the last attempt went."""

    ready: bool = False
    attempts: int = 0
    failed: bool = False
    last_error: str = ""

    def describe(self) -> str:
        if self.ready:
            return "done"
        if self.failed:
            return f"failed: {self.last_error}"
        return f"waiting for the database (attempt {self.attempts}: {self.last_error})"


def _prepare(settings: Settings, engine: Engine) -> None:
    ping(engine)
    prepare_database(settings, engine)


def _summary(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    return f"{type(original).__name__}: {first_line}"[:300]


async def attempt(state: StartupState, settings: Settings, engine: Engine) -> bool:
    """Run the start-up work once; return True when done (or failed for good)."""
    state.attempts += 1
    try:
        await run_in_threadpool(_prepare, settings, engine)
    except Exception as exc:
        state.last_error = _summary(exc)
        if not database_unavailable(exc):
            state.failed = True
            logger.exception("start-up failed; this replica stays not ready")
            return True
        return False
    state.ready = True
    if state.attempts > 1:
        logger.info("database reachable after %d attempts; ready", state.attempts)
    return True


async def wait_for_database(state: StartupState, settings: Settings, engine: Engine) -> None:
    """Retry the start-up work with doubling delays until it succeeds or fails for good."""
    delay_s = settings.db_connect_first_delay_s
    while True:
        logger.warning(
            "database unavailable (attempt %d: %s); retrying in %.1f s",
            state.attempts,
            state.last_error,
            delay_s,
        )
        await asyncio.sleep(delay_s)
        if await attempt(state, settings, engine):
            return
        delay_s = min(delay_s * 2, settings.db_connect_max_delay_s)


class StartupGateMiddleware:
    """Answer 503 + Retry-After to API requests until the start-up work is done."""

    def __init__(self, app: ASGIApp, state: StartupState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.state.ready or scope["type"] != "http" or scope["path"] in UNGATED_PATHS:
            await self.app(scope, receive, send)
            return
        await send_problem(
            send,
            503,
            "Service Unavailable",
            f"this replica is not ready: {self.state.describe()}",
            "not-ready",
            headers=[(b"retry-after", str(NOT_READY_RETRY_AFTER_S).encode())],
        )
