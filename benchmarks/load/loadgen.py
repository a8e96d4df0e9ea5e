"""Load generator for a live ``ridgeline serve --workers 2`` on loopback; writes a result file.

Run: .venv/bin/python benchmarks/load/loadgen.py [--duration 10] [--url http://...]
Without --url it starts its own server on a fresh SQLite database (rate limits off). Each
scenario runs at saturation (closed loop, fixed concurrency) and at a fixed request rate (open
loop: latency counts from each request's scheduled send time, so a stalled server is not hidden).
The client is a minimal keep-alive HTTP/1.1 client on asyncio, light enough to share the machine.
Targets (issue 5): >= 1,500 req/s single-point estimate at saturation; p99 <= 25 ms at 500 req/s.
Request bodies vary (batch size, lengths; ``variants``) so each request is real engine work.
Baseline (issue 12): a bare FastAPI app with one validated POST (bare_app.py), served by the same
supervisor, uvicorn options and worker count, measured by the same client in the same run; each
saturation row reports its req/s as a fraction of the baseline's (target: single-point estimate
>= 0.4).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np

RESULT = Path(__file__).parent / "results.md"
BARE_APP = Path(__file__).parent / "bare_app.py"
READY_LIMIT_S = 120

ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "calibration": "none",
}
# Request bodies vary over these values (cycled, every combination once per cycle) so that the
# engine does real work per request, not a repeat of the previous one (issue 12).
BATCH_SIZES = (1, 2, 4, 8, 16, 32)
INPUT_TOKENS = (512, 1024, 2048)
OUTPUT_TOKENS = (64, 128, 256)
BASELINE = "bare FastAPI POST (baseline)"
# name -> (server, method, path, body); server "bare" is bare_app.py, "ridgeline" the service.
SCENARIOS: dict[str, tuple[str, str, str, dict[str, object] | None]] = {
    BASELINE: ("bare", "POST", "/estimate", {**ESTIMATE, "batch_sizes": [8]}),
    "catalog GET": ("ridgeline", "GET", "/v1/accelerators/h100-sxm", None),
    "estimate, 1 batch size": (
        "ridgeline",
        "POST",
        "/v1/estimates",
        {**ESTIMATE, "batch_sizes": [8]},
    ),
    "estimate, 64 batch sizes": (
        "ridgeline",
        "POST",
        "/v1/estimates",
        {**ESTIMATE, "batch_sizes": list(range(1, 65))},
    ),
    "intensity": (
        "ridgeline",
        "POST",
        "/v1/intensity",
        {
            "model": "llama-3.1-70b",
            "accelerator": "h100-sxm",
            "phase": "decode",
            "batch_size": 8,
            "context_tokens": 2048,
            "calibration": "none",
        },
    ),
}


def variants(body: dict[str, object] | None) -> list[dict[str, object] | None]:
    """The bodies a scenario cycles through: its lengths and batch size drawn from the sets
    above (a body with several batch sizes keeps them; a GET has no body)."""
    if body is None:
        return [None]
    bodies: list[dict[str, object] | None] = []
    for batch in BATCH_SIZES:
        for inputs in INPUT_TOKENS:
            for outputs in OUTPUT_TOKENS:
                varied = dict(body)
                if "phase" in body:  # intensity: one step at a context length
                    varied.update(batch_size=batch, context_tokens=inputs + outputs)
                else:
                    varied.update(input_tokens=inputs, output_tokens=outputs)
                    sizes = body["batch_sizes"]
                    if isinstance(sizes, list) and len(sizes) == 1:
                        varied["batch_sizes"] = [batch]
                bodies.append(varied)
    unique = {json.dumps(b, sort_keys=True): b for b in bodies}
    return list(unique.values())


@dataclass
class Run:
    """Outcome of one scenario in one mode."""

    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    resent: int = 0  # sent again after the server closed an idle keep-alive connection
    non_2xx: int = 0
    elapsed_s: float = 0.0
    cpu_s: float | None = None  # CPU seconds of the server's processes (None: not ours)

    def extend(self, other: Run) -> None:
        """Add another slice of the same scenario and mode."""
        self.latencies_s += other.latencies_s
        self.errors += other.errors
        for kind, count in other.error_kinds.items():
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + count
        self.resent += other.resent
        self.non_2xx += other.non_2xx
        self.elapsed_s += other.elapsed_s
        if self.cpu_s is not None and other.cpu_s is not None:
            self.cpu_s += other.cpu_s

    def cpu_ms_per_request(self) -> float:
        """Server CPU per completed request, ms (NaN when unknown)."""
        done = len(self.latencies_s)
        return self.cpu_s / done * 1e3 if self.cpu_s is not None and done else float("nan")

    def failed(self, exc: Exception) -> None:
        """Count a transport failure by its kind."""
        self.errors += 1
        kind = f"{type(exc).__name__}: {exc}"[:120]
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    async def timed(self, pool: Connections, request: bytes, since: float) -> None:
        """Send one request; record its latency counted from ``since``, or its failure."""
        try:
            status = await pool.send(request)
        except Exception as exc:
            self.failed(exc)
            return
        self.latencies_s.append(time.perf_counter() - since)
        self.non_2xx += status >= 300

    def figures(self) -> tuple[float, float, float]:
        """Requests/s, p50 and p99 latency in ms."""
        done = len(self.latencies_s)
        ms = np.array(self.latencies_s) * 1e3 if done else np.array([float("nan")])
        rate = done / self.elapsed_s if self.elapsed_s else 0.0
        return rate, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def table_row(name: str, mode: str, runs: list[Run], baselines: list[Run] | None = None) -> str:
    """One result row: median over the repeats, with the range when there are several.

    ``baselines`` are the bare app's runs paired with ``runs`` (same repeat, interleaved in
    time): at saturation the row gives its req/s as a fraction of theirs and its server CPU
    per request, and the bare CPU per request as a fraction of its own.
    """

    def cell(values: list[float], spec: str) -> str:
        middle = format(float(np.median(values)), spec)
        if len(values) == 1:
            return middle
        return f"{middle} ({format(min(values), spec)}–{format(max(values), spec)})"

    rates, p50s, p99s = (list(column) for column in zip(*(r.figures() for r in runs), strict=True))
    fraction = cpu_fraction = cpu = "—"
    if mode.startswith("saturation"):
        cpus = [r.cpu_ms_per_request() for r in runs]
        if not any(np.isnan(cpus)):
            cpu = cell(cpus, ".2f")
        if baselines:
            bare = [b.figures()[0] for b in baselines]
            shares = [r / b if b else float("nan") for r, b in zip(rates, bare, strict=True)]
            fraction = cell(shares, ".2f")
            bare_cpus = [b.cpu_ms_per_request() for b in baselines]
            if not any(np.isnan(cpus)) and not any(np.isnan(bare_cpus)):
                cpu_fraction = cell([b / c for b, c in zip(bare_cpus, cpus, strict=True)], ".2f")
    failures = (
        sum(r.non_2xx for r in runs),
        sum(r.errors for r in runs),
        sum(r.resent for r in runs),
    )
    return (
        f"| {name} | {mode} | {cell(rates, ',.0f')} | {fraction} | {cpu} | {cpu_fraction} | "
        f"{cell(p50s, '.2f')} | {cell(p99s, '.2f')} | "
        + " | ".join(str(n) for n in failures)
        + " |"
    )


def encode(method: str, host: str, path: str, body: dict[str, object] | None) -> bytes:
    """Return one keep-alive HTTP/1.1 request as bytes."""
    payload = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    return (head + "\r\n").encode() + payload


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    """Send a request and read its response; return the status code."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


class Connections:
    """A pool of keep-alive connections to one server."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.resent = 0  # requests resent after the server closed an idle connection

    async def send(self, request: bytes) -> int:
        reused = bool(self.idle)
        conn = self.idle.pop() if reused else await self._open()
        try:
            status = await exchange(*conn, request)
        except (asyncio.IncompleteReadError, ConnectionError):
            conn[1].close()
            if not reused:
                raise
            # The server closed this idle keep-alive connection (uvicorn: after 5 s idle) as
            # the request went out: resend once on a new connection, as HTTP clients do.
            self.resent += 1
            conn = await self._open()
            status = await exchange(*conn, request)
        except Exception:
            conn[1].close()
            raise
        self.idle.append(conn)
        return status

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


Requests = Iterator[bytes]  # the scenario's encoded requests, cycled


async def saturate(
    pool: Connections, requests: Requests, concurrency: int, duration_s: float
) -> Run:
    """Closed loop: ``concurrency`` clients send back to back for ``duration_s``."""
    run = Run()
    deadline = time.perf_counter() + duration_s

    async def client() -> None:
        while time.perf_counter() < deadline:
            await run.timed(pool, next(requests), time.perf_counter())

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    run.elapsed_s = time.perf_counter() - began
    return run


async def fixed_rate(pool: Connections, requests: Requests, rate: float, duration_s: float) -> Run:
    """Open loop: start one request every 1/rate s; latency counts from its scheduled time."""
    run = Run()
    total = int(rate * duration_s)
    began = time.perf_counter()

    tasks = []
    for i in range(total):
        scheduled = began + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(run.timed(pool, next(requests), scheduled)))
    await asyncio.gather(*tasks)
    run.elapsed_s = time.perf_counter() - began
    return run


def free_port() -> int:
    """Return a loopback port that is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(workdir: Path) -> dict[str, str]:
    """Environment of both servers: a fresh SQLite database, rate limits off."""
    env = dict(os.environ)
    env.update(
        RIDGELINE_DATABASE_URL=f"sqlite:///{workdir / 'load.db'}",
        RIDGELINE_DATA_DIR=str(workdir),
        RIDGELINE_RATE_LIMIT_ENABLED="false",
    )
    return env


def launch(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server process in its own session, its output in ``log``."""
    return subprocess.Popen(
        command,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_ready(process: subprocess.Popen[bytes], probe: httpx.Request) -> None:
    """Send ``probe`` until it is answered 200; kill the server if it never is."""
    deadline = time.monotonic() + READY_LIMIT_S
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            try:
                if client.send(probe).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
    os.killpg(process.pid, signal.SIGKILL)
    raise RuntimeError(f"server did not become ready: {probe.url}")


def start_server(workdir: Path, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``ridgeline serve`` on a free loopback port and wait until it is ready."""
    port = free_port()
    cli = Path(sys.executable).parent / "ridgeline"
    process = launch(
        [str(cli), "serve", "--port", str(port), "--workers", str(workers)],
        server_env(workdir),
        workdir / "server.log",
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(process, httpx.Request("GET", f"{url}/readyz"))
    return process, url


def start_bare(workdir: Path, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    """Start bare_app.py with the same worker count on a free port; wait until it answers."""
    port = free_port()
    process = launch(
        [sys.executable, str(BARE_APP), "--port", str(port), "--workers", str(workers)],
        server_env(workdir),
        workdir / "bare.log",
    )
    url = f"http://127.0.0.1:{port}"
    _, method, path, body = SCENARIOS[BASELINE]
    wait_ready(process, httpx.Request(method, f"{url}{path}", json=body))
    return process, url


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a server started here and wait for it."""
    if process is not None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def machine() -> str:
    """Describe the machine the numbers come from."""
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            ln.split(":", 1)[1].strip()
            for ln in cpuinfo.read_text().splitlines()
            if ln.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and all its descendants, from /proc."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (proc(5))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


class Target:
    """One server: where to send a scenario's request, and whose CPU to read (if ours)."""

    def __init__(self, url: str, pid: int | None, name: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        _, method, path, body = SCENARIOS[name]
        host = f"{self.host}:{self.port}"
        self.requests = itertools.cycle([encode(method, host, path, b) for b in variants(body)])
        self.pool = Connections(self.host, self.port)
        self.pid = pid

    async def run(self, runner: Callable[[Connections, Requests], Awaitable[Run]]) -> Run:
        """Run one measurement, with the resends and the server CPU it took."""
        resent_before = self.pool.resent
        cpu_before = tree_cpu_s(self.pid) if self.pid is not None else None
        run = await runner(self.pool, self.requests)
        if cpu_before is not None and self.pid is not None:
            run.cpu_s = tree_cpu_s(self.pid) - cpu_before
        run.resent = self.pool.resent - resent_before
        return run


async def measure(
    servers: dict[str, tuple[str, int | None]],
    names: list[str],
    duration_s: float,
    concurrency: int,
    rate: float,
    slices: int,
) -> tuple[dict[tuple[str, str], Run], dict[str, Run]]:
    """Run the named scenarios at saturation and at the fixed rate; return the runs by row,
    and for each Ridgeline scenario the bare app's saturation run paired with it.

    ``servers`` maps a scenario's server ("ridgeline", "bare") to its URL and the pid whose
    CPU is read (None: not started here). A Ridgeline scenario's saturation run alternates
    ``slices`` times between the bare app and the scenario (duration / slices each), so both
    see the same stretch of the machine's other load.
    """
    runs: dict[tuple[str, str], Run] = {}
    paired: dict[str, Run] = {}
    saturation = f"saturation, {concurrency} conns"
    bare = Target(*_where(servers, BASELINE), BASELINE)
    await saturate(bare.pool, bare.requests, concurrency, min(2.0, duration_s))  # warm-up
    for name in names:
        target = bare if name == BASELINE else Target(*_where(servers, name), name)
        if target is not bare:
            await saturate(target.pool, target.requests, concurrency, min(2.0, duration_s))
        piece = duration_s / (1 if target is bare else slices)
        slice_run = functools.partial(saturate, concurrency=concurrency, duration_s=piece)
        sat, pair = Run(cpu_s=0.0 if target.pid else None), Run(cpu_s=0.0 if bare.pid else None)
        for _ in range(1 if target is bare else slices):
            if target is not bare:
                pair.extend(await bare.run(slice_run))
            sat.extend(await target.run(slice_run))
        runs[name, saturation] = sat
        paired[name] = sat if target is bare else pair
        fixed = f"fixed {rate:g} req/s"
        runs[name, fixed] = await target.run(lambda p, r: fixed_rate(p, r, rate, duration_s))
        for mode in (saturation, fixed):
            run = runs[name, mode]
            print(table_row(name, mode, [run], [paired[name]]), flush=True)
            for kind, count in run.error_kinds.items():
                print(f"  {count} x {kind}", flush=True)
        if target is not bare:
            target.pool.close()
    bare.pool.close()
    return runs, paired


def _where(servers: dict[str, tuple[str, int | None]], name: str) -> tuple[str, int | None]:
    return servers[SCENARIOS[name][0]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="An already running server (default: start one).")
    parser.add_argument(
        "--bare-url", help="An already running bare_app.py (default: start one with --workers)."
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds per run.")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rate", type=float, default=500.0, help="Fixed-rate mode, req/s.")
    parser.add_argument("--output", type=Path, default=RESULT)
    parser.add_argument(
        "--repeat", type=int, default=1, help="Measure every row this many times (median, range)."
    )
    parser.add_argument(
        "--slices",
        type=int,
        default=4,
        help="Saturation runs alternate this many times between the bare app and the scenario.",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        choices=[n for n in SCENARIOS if n != BASELINE],
        help="Measure only this Ridgeline scenario (repeatable; the baseline always runs).",
    )
    args = parser.parse_args()
    names = [BASELINE, *(args.scenario or [n for n in SCENARIOS if n != BASELINE])]

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        started: list[subprocess.Popen[bytes]] = []
        try:
            servers: dict[str, tuple[str, int | None]] = {}
            for server, url, start in (
                ("ridgeline", args.url, start_server),
                ("bare", args.bare_url, start_bare),
            ):
                if url is None:
                    process, url = start(Path(tmp), args.workers)
                    started.append(process)
                    servers[server] = (url, process.pid)
                else:
                    servers[server] = (url, None)
            repeats = [
                asyncio.run(
                    measure(servers, names, args.duration, args.concurrency, args.rate, args.slices)
                )
                for _ in range(args.repeat)
            ]
        finally:
            for process in started:
                stop(process)
    header = [
        "# Load benchmark (benchmarks/load/loadgen.py)",
        "",
        f"Machine: {machine()}.",
        f"Server: `ridgeline serve --workers {args.workers}` on loopback, SQLite, INFO JSON "
        "access logs, rate limits off; the load generator shares the machine.",
        f"Baseline: `benchmarks/load/bare_app.py --workers {args.workers}`, a bare FastAPI app "
        "with one pydantic-validated POST taking the single-point estimate's body and "
        "returning a small JSON, served by the same supervisor, uvicorn options and worker "
        "count as `ridgeline serve`, measured by the same client in the same run. Each "
        f"Ridgeline saturation run alternates {args.slices} times between the baseline and the "
        "scenario (equal slices of the run), so both see the same stretch of the machine's "
        "other load; `÷ bare` is the scenario's req/s over the baseline's in those slices "
        "(target for the single-point estimate, issue 12: ≥ 0.4). `CPU ms` is the server's "
        "CPU (user + system of its processes, from /proc) per request at saturation, and "
        "`÷ bare CPU` the baseline's CPU per request over the scenario's in the same slices: "
        "the share of the baseline's rate the scenario would reach on cores of its own.",
        "Request bodies cycle through batch sizes "
        f"{', '.join(map(str, BATCH_SIZES))} (single-point bodies and intensity) and lengths "
        f"{', '.join(map(str, INPUT_TOKENS))} in × {', '.join(map(str, OUTPUT_TOKENS))} out, "
        "every combination once per cycle (the baseline gets the single-point bodies).",
        f"Each run {args.duration:g} s after a warm-up, every row measured {args.repeat} "
        f"time{'s' if args.repeat > 1 else ''} "
        "(median, and the range in brackets); latency in ms; "
        "`non-2xx` and `errors` (transport) count failures; `resent` counts requests sent again "
        "on a new connection because the server had just closed the idle keep-alive one.",
        f"1-minute load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
        "(above ~2, other processes competed for the 2 cores).",
        "",
        "| scenario | mode | req/s | ÷ bare | CPU ms | ÷ bare CPU | p50 ms | p99 ms | non-2xx "
        "| errors | resent |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = [
        table_row(name, mode, [r[name, mode] for r, _ in repeats], [p[name] for _, p in repeats])
        for name, mode in repeats[0][0]
    ]
    args.output.write_text("\n".join([*header, *rows]) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
