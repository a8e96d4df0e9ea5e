"""Time open-loop traffic answers in process over HTTP (httpx + ASGITransport); write a result.

Run: .venv/bin/python benchmarks/traffic_speed.py
Targets (issue 12): one rate-based estimate with p50/p90/p99 <= 20 ms p50; a goodput search
<= 100 ms; a plan with percentile targets over the whole catalog <= 500 ms. Machines differ by
2-3x, so every figure is also given as a ratio to a baseline measured in the same run: the
single-point closed-loop estimate (for the estimates) and the same plan without percentile
targets (for the plan).
"""

from __future__ import annotations

import asyncio
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from _timing import in_process_client, load_average, machine, summary, time_requests, write_result

from service.services import traffic as traffic_service
from service.settings import Settings

REPEATS = 15
RESULT = Path(__file__).parent / "results" / "traffic_speed.txt"
LENGTHS = {
    "input_tokens": {"percentiles": {"p50": 400, "p90": 1200, "p99": 2500}, "max": 4000},
    "output_tokens": {"percentiles": {"p50": 150, "p90": 400, "p99": 800}, "max": 1000},
}
SLO = {"ttft_ms_p90_max": 500.0, "tpot_ms_p99_max": 50.0}


def _estimate(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 256,
        "mode": "serving",
    }
    body.update(fields)
    return body


def _plan(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "models": ["llama-3.1-8b"],
        "input_tokens": 1024,
        "output_tokens": 256,
        "objective": "min_cost_per_million_tokens",
        "requests_per_s": 20.0,
        "traffic": LENGTHS,
    }
    body.update(fields)
    return body


def _forget() -> None:
    """Drop the memoised replicas and capacities: every request tabulates and simulates anew."""
    traffic_service._REPLICAS.items.clear()
    traffic_service._SATURATION.items.clear()


TRAFFIC = {"request_rate_per_s": 4.0, **LENGTHS}
# (name, path, body, baseline name, cold)
CASES: list[tuple[str, str, dict[str, Any], str | None, bool]] = [
    ("baseline: 8b h100 single point", "/v1/estimates", _estimate(batch_sizes=[8]), None, False),
    (
        "rate estimate p50/p90/p99, cold",
        "/v1/estimates",
        _estimate(traffic=TRAFFIC),
        "baseline: 8b h100 single point",
        True,
    ),
    (
        "rate estimate p50/p90/p99, warm",
        "/v1/estimates",
        _estimate(traffic=TRAFFIC),
        "baseline: 8b h100 single point",
        False,
    ),
    (
        "goodput search, cold",
        "/v1/estimates",
        _estimate(traffic={**TRAFFIC, "slo": SLO}),
        "baseline: 8b h100 single point",
        True,
    ),
    (
        "baseline: plan, whole catalog, mean SLO",
        "/v1/plans",
        _plan(slo={"ttft_ms_max": 500.0, "tpot_ms_max": 50.0}),
        None,
        False,
    ),
    (
        "plan percentile SLO, whole catalog, cold",
        "/v1/plans",
        _plan(slo=SLO),
        "baseline: plan, whole catalog, mean SLO",
        True,
    ),
]


async def _run(data_dir: Path) -> list[str]:
    settings = Settings(data_dir=data_dir, log_level="WARNING", rate_limit_enabled=False)
    rows: list[str] = []
    p50s: dict[str, float] = {}
    async with in_process_client(settings) as client:
        for name, path, body, baseline, cold in CASES:
            send = partial(client.post, path, json=body)
            first = await send()
            first.raise_for_status()
            times, cpu = await time_requests(send, REPEATS, before=_forget if cold else None)
            p50, p95, cpu50 = summary(times, cpu)
            p50s[name] = p50
            ratio = f"{p50 / p50s[baseline]:>9.1f}" if baseline else f"{'-':>9}"
            rows.append(f"{name:<42} {p50:>9.2f} {p95:>9.2f} {cpu50:>9.2f} {ratio}")
            if path == "/v1/plans":
                answer = first.json()
                rows.append(
                    f"{'':<42} configurations {len(answer['configurations'])}, rejected "
                    f"{len(answer['rejected'])}, candidates {answer['candidates_evaluated']}"
                )
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(_run(Path(tmp)))
    lines = [
        "Traffic speed: POST /v1/estimates with traffic and POST /v1/plans with percentile",
        "targets, in process (httpx AsyncClient + ASGITransport, seeded SQLite, WARNING logs).",
        f"{machine()} {REPEATS} requests per row after one warm-up request.",
        f"Load average when done (other jobs share the machine): {load_average()}.",
        "Targets: rate estimate <= 20 ms p50; goodput <= 100 ms; catalog plan <= 500 ms.",
        "Stream: llama-3.1-8b on h100-sxm, 4 requests/s Poisson, 600 simulated requests,",
        "input p50/p90/p99 400/1200/2500 (max 4000), output 150/400/800 (max 1000) tokens;",
        "goodput targets TTFT p90 <= 500 ms, TPOT p99 <= 50 ms; the plan sizes 20 requests/s.",
        "cold: memoised replicas (step tables) and capacities dropped before every request;",
        "warm: a repeat request. ratio: p50 / the baseline row's p50 measured in the same run.",
        "",
        f"{'case (ms)':<42} {'p50':>9} {'p95':>9} {'cpu p50':>9} {'ratio':>9}",
        *rows,
    ]
    write_result(RESULT, lines)


if __name__ == "__main__":
    main()
