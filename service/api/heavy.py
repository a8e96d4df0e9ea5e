"""Heavy requests run a few at a time per process, the rest queue; a full queue answers 503.

Big estimate batches and sweeps, plans and chart renders cost from a fraction of a second to
seconds of CPU each. Left to FastAPI's 40-thread pool, a handful at once holds the GIL most of
the time and cheap requests wait behind them. ``HeavyWork`` admits ``workers`` of them at once
per process; up to ``queue`` more wait their turn (asynchronously, holding no thread); beyond
that the answer is 503 with Retry-After at once, so a burst of heavy requests cannot pile up.
What one heavy request may cost is capped separately by the work budgets (``budgets``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager

from fastapi import Depends, Request

from service.services.errors import ServiceError

HEAVY_RETRY_AFTER_S = 2


class HeavyWorkFullError(ServiceError):
    """Every heavy-work slot and queue place of this process is taken."""

    def __init__(self, workers: int, queue: int) -> None:
        super().__init__(
            f"the server is running {workers} heavy requests and {queue} more are queued; "
            f"retry after {HEAVY_RETRY_AFTER_S} s or send smaller requests"
        )


class HeavyWork:
    """A bounded admission gate: ``workers`` run at once, ``queue`` wait, the rest are refused.

    With ``processes`` > 0 the admitted work runs in that many child processes (their own
    interpreters, so their CPU time does not hold this process's GIL and cheap requests keep
    their latency); with 0 it runs in a thread of this process.
    """

    def __init__(self, workers: int, queue: int, processes: int = 0) -> None:
        self.workers = workers
        self.queue = queue
        self.processes = processes
        self._admitted = 0
        self._semaphore: asyncio.Semaphore | None = None
        self._pool: ProcessPoolExecutor | None = None

    def pool(self) -> ProcessPoolExecutor | None:
        """Return the child-process pool (started on first use), or None when in-process."""
        if self.processes <= 0:
            return None
        if self._pool is None:
            # forkserver: children start from a clean interpreter, not a fork of a process
            # whose other threads may hold locks.
            self._pool = ProcessPoolExecutor(
                max_workers=self.processes, mp_context=multiprocessing.get_context("forkserver")
            )
        return self._pool

    def discard_pool(self) -> None:
        """Drop a broken pool (a child died); the next heavy request starts a new one."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the child processes."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a running slot for the block (waiting in the queue if needed)."""
        if self._admitted >= self.workers + self.queue:
            raise HeavyWorkFullError(self.workers, self.queue)
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.workers)
        self._admitted += 1
        try:
            async with self._semaphore:
                yield
        finally:
            self._admitted -= 1


async def heavy_slot(request: Request) -> AsyncIterator[None]:
    """Dependency: run the route inside one of this process's heavy-work slots."""
    heavy: HeavyWork = request.app.state.heavy
    async with heavy.slot():
        yield


HeavyAccess = Depends(heavy_slot, scope="function")
