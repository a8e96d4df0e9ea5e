"""Time the analysis endpoints in process over HTTP (httpx + ASGITransport); write a result file.

Run: .venv/bin/python benchmarks/http_speed.py
Each timing is one full request: JSON parsing and validation, catalog loads from a seeded SQLite
database, the engine, response building and JSON encoding. Targets: <= 20 ms p50 for a
1,024-point sweep of a 70B model; <= 50 ms p50 for a batch of 256 single-point items.
"""

from __future__ import annotations

import asyncio
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from _timing import (
    in_process_client,
    load_average,
    machine,
    summary,
    time_requests,
    write_result,
)

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


async def _time(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], headers: dict[str, str], cold: bool
) -> tuple[list[float], list[float]]:
    """Return wall and CPU (this process) milliseconds per request."""
    send = partial(client.post, path, json=body, headers=headers)
    return await time_requests(send, REPEATS, before=_CRITICAL_CACHE.clear if cold else None)


async def _run(data_dir: Path) -> list[str]:
    settings = Settings(data_dir=data_dir, log_level="WARNING", rate_limit_enabled=False)
    rows = []
    async with in_process_client(settings) as client:
        for name, path, body, headers in CASES:
            warm = summary(*await _time(client, path, body, headers, cold=False))
            cold = summary(*await _time(client, path, body, headers, cold=True))
            cells = " ".join(f"{c:>9.2f}" for c in (*warm, *cold))
            rows.append(f"{name:<38} {cells}")
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(_run(Path(tmp)))
    lines = [
        "HTTP speed: POST /v1/estimates, /v1/intensity and /v1/estimates/batch in process",
        "(httpx AsyncClient + ASGITransport, seeded SQLite, logging at WARNING, no rate limit).",
        f"{machine()} {REPEATS} requests per column after one warm-up.",
        f"Load average when done (other jobs share the machine): {load_average()}.",
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
    write_result(RESULT, lines)


if __name__ == "__main__":
    main()
