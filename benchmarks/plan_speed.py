"""Time POST /v1/plans in process over HTTP (httpx + ASGITransport) and the search alone.

Run: .venv/bin/python benchmarks/plan_speed.py
The plan covers 25 catalog accelerators × tp ∈ {1, 2, 4, 8} × 2 precisions (bf16; fp8 weights and
activations) = 200 candidates, 64 concurrency levels each, with a price for every accelerator so
none is skipped for having none. Target (issue 6): ≤ 100 ms p50 over HTTP on this 2-core machine.
"""

from __future__ import annotations

import asyncio
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from _timing import (
    in_process_client,
    load_average,
    machine,
    summary,
    time_calls,
    time_requests,
    write_result,
)

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.planning import Candidate, PlanQuestion, Slo, layouts, plan
from service.engine.precision import Precision
from service.settings import Settings

REPEATS = 15
RESULT = Path(__file__).parent / "results" / "plan_speed.txt"
ACCELERATORS = sorted(str(r["id"]) for r in load_accelerator_records())[:25]
PRICE_USD_PER_HOUR = 2.0
PRECISIONS = [{"weights": "bf16"}, {"weights": "fp8", "activations": "fp8"}]


def _body(model: str, objective: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "models": [model],
        "accelerators": ACCELERATORS,
        "workload": "chat",
        "objective": objective,
        "requests_per_s": 40,
        "precisions": PRECISIONS,
        "tp": [1, 2, 4, 8],
        "concurrency_levels": 64,
        "price_usd_per_hour": dict.fromkeys(ACCELERATORS, PRICE_USD_PER_HOUR),
    }
    body.update(fields)
    return body


CASES: list[tuple[str, dict[str, Any]]] = [
    ("70b chat min_cost", _body("llama-3.1-70b", "min_cost_per_million_tokens")),
    ("70b chat min_gpus_for_rate", _body("llama-3.1-70b", "min_gpus_for_rate")),
    ("8b chat min_cost", _body("llama-3.1-8b", "min_cost_per_million_tokens")),
    ("8b chat max_throughput", _body("llama-3.1-8b", "max_throughput_per_gpu")),
]


def _engine_times(body: dict[str, Any]) -> tuple[list[float], list[float], int, int]:
    """Time the search alone (engine ``plan``) on the same candidates, catalog from YAML."""
    accs = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
    models = {str(r["id"]): model_from_record(r) for r in load_model_records()}
    model = models[body["models"][0]]
    precisions = [Precision(**p) for p in PRECISIONS]
    candidates = [
        Candidate(model, accs[a], p, lay, price_usd_per_hour=PRICE_USD_PER_HOUR)
        for a in ACCELERATORS
        for lay in layouts(model, 8, tp=[1, 2, 4, 8])
        for p in precisions
    ]
    question = PlanQuestion(
        input_tokens=2048,
        output_tokens=256,
        slo=Slo(1000.0, 50.0),
        objective=body["objective"],
        requests_per_s=40.0,
    )
    result = plan(candidates, question)
    times, cpu = time_calls(partial(plan, candidates, question), REPEATS)
    return times, cpu, result.candidates_evaluated, result.points_evaluated


async def _run(data_dir: Path) -> list[str]:
    rows = []
    # The service's planning time, not its per-key quota on heavy work (which would answer 429).
    settings = Settings(data_dir=data_dir, log_level="WARNING", rate_limit_enabled=False)
    async with in_process_client(settings) as client:
        for name, body in CASES:
            send = partial(client.post, "/v1/plans", json=body)
            http = summary(*await time_requests(send, REPEATS))
            engine_wall, engine_cpu, evaluated, points = _engine_times(body)
            cells = " ".join(f"{c:>9.1f}" for c in (*http, *summary(engine_wall, engine_cpu)))
            rows.append(f"{name:<28} {evaluated:>5} {points:>6} {cells}")
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(_run(Path(tmp)))
    lines = [
        "Plan speed: POST /v1/plans in process (httpx AsyncClient + ASGITransport, seeded SQLite)",
        "and the engine search alone. 25 accelerators x tp {1,2,4,8} x 2 precisions = 200",
        "candidates, 64 concurrency levels each, chat workload (2048 in / 256 out, TTFT <= 1 s,",
        "TPOT <= 50 ms), 40 requests/s. 'eval' = candidates that reached the engine after the",
        "cheap checks (layout, dtype peak, memory); 'points' = concurrency levels estimated.",
        f"{machine()} {REPEATS} runs per column after one warm-up.",
        "Target: <= 100 ms p50 over HTTP. 'cpu p50' is this process's CPU time per run, less",
        "sensitive than wall time to other processes sharing the 2 cores.",
        f"Load average (1, 5, 15 min) when the run ended: {load_average()}.",
        "",
        f"{'case (ms)':<28} {'eval':>5} {'points':>6} {'http p50':>9} {'http p95':>9}"
        f" {'http cpu':>9} {'eng p50':>9} {'eng p95':>9} {'eng cpu':>9}",
        *rows,
    ]
    write_result(RESULT, lines)


if __name__ == "__main__":
    main()
