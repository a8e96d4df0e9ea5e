"""Time the analysis endpoints in process over HTTP (httpx + ASGITransport); write a result file.

Run: .venv/bin/python benchmarks/http_speed.py
Each timing is one full request: JSON parsing and validation, catalog loads from a seeded SQLite
database, the engine, response building and JSON encoding. Targets: <= 20 ms p50 for a
1,024-point sweep of a 70B model; <= 50 ms p50 for a batch of 256 single-point items.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from service.api.app import create_app
from service.engine.roofline import _CRITICAL_CACHE
from service.settings import Settings

REPEATS = 30
RESULT = Path(__file__).parent / "results" / "http_speed.txt"
SWEEP = list(range(1, 1025))
FP8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}


def _estimate(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama-3.1-70b",
        "accelerator": "h100-sxm",
        "parallelism": {"tp": 4},
        "input_tokens": 1024,
        "output_tokens": 256,
        "batch_sizes": SWEEP,
    }
    body.update(fields)
    return body


# (name, path, body, headers)
CASES: list[tuple[str, str, dict[str, Any], dict[str, str]]] = [
    ("70b h100 tp4 sweep 1024 static", "/v1/estimates", _estimate(), {}),
    ("70b h100 tp4 sweep 1024 serving", "/v1/estimates", _estimate(mode="serving"), {}),
    ("70b h100 tp4 sweep 1024 CSV", "/v1/estimates", _estimate(), {"Accept": "text/csv"}),
    (
        "dsv3 h200 tp8 fp8 sweep 1024 static",
        "/v1/estimates",
        _estimate(
            model="deepseek-v3", accelerator="h200-sxm", parallelism={"tp": 8}, precision=FP8
        ),
        {},
    ),
    (
        "dsv3 h200 tp8 fp8 sweep 1024 serving",
        "/v1/estimates",
        _estimate(
            model="deepseek-v3",
            accelerator="h200-sxm",
            parallelism={"tp": 8},
            precision=FP8,
            mode="serving",
        ),
        {},
    ),
    (
        "8b h100 single point",
        "/v1/estimates",
        _estimate(model="llama-3.1-8b", parallelism={"tp": 1}, batch_sizes=[8]),
        {},
    ),
    (
        "70b h100 intensity decode",
        "/v1/intensity",
        {
            "model": "llama-3.1-70b",
            "accelerator": "h100-sxm",
            "batch_size": 8,
            "context_tokens": 2048,
            "parallelism": {"tp": 4},
        },
        {},
    ),
    (
        "batch 256 x 1 point, one config",
        "/v1/estimates/batch",
        {"items": [_estimate(batch_sizes=[b]) for b in range(1, 257)]},
        {},
    ),
    (
        "batch 256 x 1 point, 256 configs",
        "/v1/estimates/batch",
        {"items": [_estimate(batch_sizes=[8], input_tokens=256 + i) for i in range(256)]},
        {},
    ),
]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _load() -> str:
    try:
        return ", ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


async def _time(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], headers: dict[str, str], cold: bool
) -> tuple[list[float], list[float]]:
    """Return wall and CPU (this process) milliseconds per request."""
    response = await client.post(path, json=body, headers=headers)
    response.raise_for_status()
    times, cpu = [], []
    for _ in range(REPEATS):
        if cold:
            _CRITICAL_CACHE.clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        response = await client.post(path, json=body, headers=headers)
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
        response.raise_for_status()
    return times, cpu


async def _run(data_dir: Path) -> list[str]:
    settings = Settings(data_dir=data_dir, log_level="WARNING", rate_limit_enabled=False)
    app = create_app(settings)
    rows = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for name, path, body, headers in CASES:
                warm, warm_cpu = await _time(client, path, body, headers, cold=False)
                cold, cold_cpu = await _time(client, path, body, headers, cold=True)
                cells = " ".join(
                    f"{c:>9.2f}"
                    for c in (
                        *_percentiles(warm),
                        statistics.median(warm_cpu),
                        *_percentiles(cold),
                        statistics.median(cold_cpu),
                    )
                )
                rows.append(f"{name:<38} {cells}")
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(_run(Path(tmp)))
    lines = [
        "HTTP speed: POST /v1/estimates, /v1/intensity and /v1/estimates/batch in process",
        "(httpx AsyncClient + ASGITransport, seeded SQLite, logging at WARNING, no rate limit).",
        f"Machine: nproc={os.cpu_count()}, CPU: {_cpu_model()}, Python {platform.python_version()},"
        f" numpy {np.__version__}. {REPEATS} requests per column after one warm-up.",
        f"Load average when done (other jobs share the machine): {_load()}.",
        "Targets: <= 20 ms p50 for the 70b 1,024-point sweep; <= 50 ms p50 for batch 256.",
        "warm: engine's critical-batch memo filled (repeat request); cold: memo cleared each time.",
        "cpu: median CPU time of this process per request (less sensitive to other jobs' load).",
        "'256 configs' items differ in input tokens: they run as one estimate_stacked pass.",
        "sweeps: batch sizes 1..1024, input 1024 / output 256 tokens.",
        "",
        f"{'case (ms)':<38} {'warm p50':>9} {'warm p95':>9} {'warm cpu':>9} {'cold p50':>9}"
        f" {'cold p95':>9} {'cold cpu':>9}",
        *rows,
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    RESULT.write_text(text)


if __name__ == "__main__":
    main()
