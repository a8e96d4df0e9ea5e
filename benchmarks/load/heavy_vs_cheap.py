"""Cheap GET latency while the heaviest requests the work budgets allow run four at once.

Run: .venv/bin/python benchmarks/load/heavy_vs_cheap.py [--duration 20] [--url http://...]
Without --url it starts ``ridgeline serve --workers 2`` on a fresh SQLite database with rate
limits off (the quotas would refuse the heavy loops; the work budgets and heavy-work slots
stay at their defaults). For each heavy kind, four clients send it back to back (closed
loop) while a fifth sends a cheap GET at a fixed rate (open loop: latency counts from the
scheduled send time). Target (issue 15): cheap GET p99 < 100 ms. Writes heavy_vs_cheap.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).parent))
from loadgen import Connections, Run, encode, fixed_rate, machine, start_server

from service.settings import Settings

RESULT = Path(__file__).parent / "heavy_vs_cheap.md"
CHEAP = ("GET", "/v1/accelerators/h100-sxm", None)
HEAVY_CLIENTS = 4
TARGET_P99_MS = 100.0


# A calibration upload: every TensorRT-LLM serving run of the shipped Qwen3-32B file (180
# runs; the end-to-end fit with its cross-validation and screening is the heaviest fit a
# serving file asks for), as text/csv with a write key.
SERVING_CSV = Path(__file__).parents[1] / "data" / "h100" / "serving_qwen3_32b.csv"
CALIBRATION_PATH = "/v1/calibrations?accelerator=h100-sxm&name=heavy-bench&backend=trtllm"


def calibration_csv() -> bytes:
    """The header and the TensorRT-LLM rows of the shipped Qwen3-32B serving file."""
    lines = SERVING_CSV.read_text().splitlines()
    return "\n".join([lines[0], *(ln for ln in lines[1:] if ",trtllm," in ln)]).encode() + b"\n"


def encode_upload(host: str, key: str) -> bytes:
    """One keep-alive POST of ``calibration_csv`` with the write key."""
    payload = calibration_csv()
    head = (
        f"POST {CALIBRATION_PATH} HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n"
        f"X-API-Key: {key}\r\nContent-Type: text/csv\r\nContent-Length: {len(payload)}\r\n"
    )
    return (head + "\r\n").encode() + payload


def heavy_requests() -> dict[str, tuple[str, str, dict[str, object] | None]]:
    """The heaviest request of each kind that the default work budgets accept."""
    budget = Settings(database_url="sqlite://").max_estimate_points
    item = {
        "model": "llama-3.1-70b",
        "accelerator": "h100-sxm",
        "input_tokens": 4096,
        "output_tokens": 512,
        "batch_sizes": list(range(1, 1025)),
        "calibration": "none",
    }
    frontier = urlencode(
        {
            "models": "llama-3.1-8b,llama-3.1-70b",
            "input_tokens": 1024,
            "output_tokens": 256,
            "format": "png",
        }
    )
    return {
        f"estimate batch, {budget // 1024} items x 1,024 batch sizes": (
            "POST",
            "/v1/estimates/batch",
            {"items": [item] * (budget // 1024)},
        ),
        "plan, 2 models, all accelerators, 2 precisions, 64 levels": (
            "POST",
            "/v1/plans",
            {
                "models": ["llama-3.1-8b", "llama-3.1-70b"],
                "input_tokens": 1024,
                "output_tokens": 256,
            },
        ),
        "frontier chart (PNG), 2 models, all accelerators": (
            "GET",
            f"/v1/charts/frontier?{frontier}",
            None,
        ),
    }


async def heavy_loop(pool: Connections, request: bytes, stop: asyncio.Event, run: Run) -> None:
    while not stop.is_set():
        await run.timed(pool, request, time.perf_counter())


async def scenario(
    host: str, port: int, heavy: bytes | None, rate: float, duration_s: float
) -> tuple[Run, Run]:
    """Cheap GETs at ``rate`` while HEAVY_CLIENTS loops send ``heavy``; return both runs."""
    cheap_request = encode(CHEAP[0], f"{host}:{port}", CHEAP[1], None)
    stop = asyncio.Event()
    heavy_run = Run()
    loops = []
    if heavy is not None:
        pools = [Connections(host, port) for _ in range(HEAVY_CLIENTS)]
        loops = [asyncio.create_task(heavy_loop(p, heavy, stop, heavy_run)) for p in pools]
        await asyncio.sleep(2.0)  # let the heavy requests occupy the workers
    began = time.perf_counter()
    cheap = await fixed_rate(Connections(host, port), cheap_request, rate, duration_s)
    stop.set()
    await asyncio.gather(*loops)
    heavy_run.elapsed_s = time.perf_counter() - began
    return cheap, heavy_run


def create_write_key(workdir: Path) -> str:
    """A write key for the server ``start_server`` runs on ``workdir`` (its database)."""
    env = dict(os.environ)
    env.update(
        RIDGELINE_DATABASE_URL=f"sqlite:///{workdir / 'load.db'}", RIDGELINE_DATA_DIR=str(workdir)
    )
    cli = Path(sys.executable).parent / "ridgeline"
    out = subprocess.run(
        [str(cli), "create-key", "--name", "heavy-bench"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def load_average() -> str:
    """The machine's 1-minute load average now (other processes count: the CPUs may be shared)."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "-"


def row(name: str, cheap: Run, heavy: Run) -> str:
    _, p50, p99 = cheap.figures()
    done = len(heavy.latencies_s)
    heavy_s = sorted(heavy.latencies_s)
    heavy_p50 = f"{heavy_s[len(heavy_s) // 2]:.2f}" if heavy_s else "-"
    verdict = "yes" if p99 < TARGET_P99_MS and cheap.errors == 0 else "**no**"
    return (
        f"| {name} | {p50:.1f} | {p99:.1f} | {verdict} | {cheap.non_2xx + cheap.errors} | "
        f"{done} | {heavy_p50} | {heavy.non_2xx} | {load_average()} |"
    )


async def measure(url: str, duration_s: float, rate: float, key: str | None) -> list[str]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    rows = []
    print(f"load average before: {load_average()}", flush=True)
    cheap, heavy = await scenario(host, port, None, rate, duration_s)
    rows.append(row("none (cheap GETs alone)", cheap, heavy))
    print(rows[-1], flush=True)
    for name, (method, path, body) in heavy_requests().items():
        request = encode(method, f"{host}:{port}", path, body)
        cheap, heavy = await scenario(host, port, request, rate, duration_s)
        rows.append(row(name, cheap, heavy))
        print(rows[-1], flush=True)
    if key is not None:
        cheap, heavy = await scenario(
            host, port, encode_upload(f"{host}:{port}", key), rate, duration_s
        )
        rows.append(row("calibration upload, 180 serving runs (CSV)", cheap, heavy))
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="An already running server (default: start one).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=20.0, help="Seconds per scenario.")
    parser.add_argument("--rate", type=float, default=50.0, help="Cheap GETs per second.")
    parser.add_argument("--output", type=Path, default=RESULT)
    parser.add_argument("--key", help="A write key of --url's server (its upload row).")
    args = parser.parse_args()
    process = None
    url = args.url
    key = args.key
    load_before = load_average()
    if url is None:
        workdir = Path(tempfile.mkdtemp(prefix="ridgeline-heavy-"))
        process, url = start_server(workdir, args.workers)
        key = create_write_key(workdir)
    try:
        rows = asyncio.run(measure(url, args.duration, args.rate, key))
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
    head = [
        "# Cheap GET latency under the heaviest allowed requests, four at once",
        "",
        f"Machine: {machine()}. Server: `ridgeline serve --workers {args.workers}`, SQLite, "
        "rate limits off, default work budgets and heavy-work slots (1 running + 8 queued per "
        f"worker). Cheap request: `GET {CHEAP[1]}` at {args.rate:g} req/s for "
        f"{args.duration:g} s (open loop); {HEAVY_CLIENTS} closed-loop clients send the heavy "
        "request. Target: cheap p99 < 100 ms. The cheap GET is not rate-limited, so it never "
        "takes a shared rate-limit token (docs/shared-service.md, Rate limits).",
        "",
        f"1-minute load average before the run: {load_before} (the last column: after each "
        "scenario; other processes sharing the CPUs count in it).",
        "",
        f"Command: `.venv/bin/python benchmarks/load/heavy_vs_cheap.py --duration "
        f"{args.duration:g} --rate {args.rate:g}`",
        "",
        "| heavy request (x4 at once) | cheap p50 ms | cheap p99 ms | p99 < 100 ms | cheap "
        "failures | heavy answered | heavy p50 s | heavy non-2xx | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    args.output.write_text("\n".join([*head, *rows]) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
