"""Shared helpers for the speed benchmarks: timing, percentiles, machine line, result files."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np

from service.api.app import create_app
from service.settings import Settings


def cpu_model() -> str:
    """Return the CPU model name from /proc/cpuinfo, else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    """Return the 1, 5 and 15 minute load averages as text."""
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine() -> str:
    """Return the 'Machine: ...' sentence shared by every result file."""
    return (
        f"Machine: nproc={os.cpu_count()}, CPU: {cpu_model()}, Python {platform.python_version()},"
        f" numpy {np.__version__}."
    )


def percentiles(times: list[float]) -> tuple[float, float]:
    """Return the median and the 95th percentile (nearest rank below) of ``times``."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def summary(times: list[float], cpu: list[float]) -> tuple[float, float, float]:
    """Return wall p50, wall p95 and median CPU milliseconds."""
    return (*percentiles(times), statistics.median(cpu))


def time_calls(
    call: Callable[[], object], repeats: int, before: Callable[[], object] | None = None
) -> tuple[list[float], list[float]]:
    """Return wall and CPU (this process) milliseconds of each call; ``before`` runs untimed."""
    times, cpu = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return times, cpu


async def time_requests(
    send: Callable[[], Awaitable[httpx.Response]],
    repeats: int,
    before: Callable[[], object] | None = None,
) -> tuple[list[float], list[float]]:
    """Send one warm-up request, then return wall and CPU milliseconds per request."""
    (await send()).raise_for_status()
    times, cpu = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        start, start_cpu = time.perf_counter(), time.process_time()
        response = await send()
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
        response.raise_for_status()
    return times, cpu


@asynccontextmanager
async def in_process_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """Yield an httpx client bound in process to a started app built from ``settings``."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            yield client


def write_result(path: Path, lines: list[str]) -> None:
    """Print the table and write it to the result file."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    path.write_text(text)
