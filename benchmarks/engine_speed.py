"""Time one engine estimate over 1,024 batch sizes (1..1024); print a table, write a result file.

Run: .venv/bin/python benchmarks/engine_speed.py
Engine part only; POST /v1/estimates end to end is in http_speed.py.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import _CRITICAL_CACHE
from service.engine.shapes import ModelShape

REPEATS = 50
RESULT = Path(__file__).parent / "results" / "engine_speed.txt"

H100 = Accelerator(  # accelerators.md §1/§2 "NVIDIA H100 SXM5 80GB"
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM5 80GB",
    memory_gb=80.0,
    memory_bandwidth_gb_s=3350.0,
    peak_tflops={"bf16": 989.5, "fp8": 1979.0},
    interconnect_gb_s=450.0,
    tdp_w=700.0,
    price_usd_per_hour=2.99,
    memory_type="HBM3",
)
H200 = Accelerator(  # accelerators.md §1/§2 "NVIDIA H200 SXM 141GB"
    id="h200-sxm",
    vendor="NVIDIA",
    name="H200 SXM 141GB",
    memory_gb=141.0,
    memory_bandwidth_gb_s=4800.0,
    peak_tflops={"bf16": 989.5, "fp8": 1979.0},
    interconnect_gb_s=450.0,
    tdp_w=700.0,
    memory_type="HBM3e",
)
LLAMA_70B = ModelShape(  # models.md §1 "Llama-3.1-70B"
    id="llama-3.1-70b",
    num_layers=80,
    hidden_size=8192,
    num_heads=64,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=28672,
    vocab_size=128256,
)
DEEPSEEK_V3 = ModelShape(  # models.md §1–§3 "DeepSeek-V3"
    id="deepseek-v3",
    num_layers=61,
    hidden_size=7168,
    num_heads=128,
    num_kv_heads=128,
    head_dim=192,
    intermediate_size=18432,
    vocab_size=129280,
    num_experts=256,
    experts_per_token=8,
    num_shared_experts=1,
    moe_intermediate_size=2048,
    shared_expert_intermediate_size=2048,
    first_dense_layers=3,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
)
CASES = [
    ("llama-3.1-70b h100 tp4 bf16", LLAMA_70B, H100, Precision(), Parallelism(tp=4)),
    ("deepseek-v3 h200 tp8 fp8", DEEPSEEK_V3, H200, Precision("fp8", "fp8"), Parallelism(tp=8)),
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
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    batches = np.arange(1, 1025, dtype=float)
    lines = [
        "Engine speed: one estimate() over 1,024 batch sizes (1..1024), input 1024 / output 256.",
        f"Machine: nproc={os.cpu_count()}, CPU: {_cpu_model()}, Python {platform.python_version()},"
        f" numpy {np.__version__}. {REPEATS} repeats after one warm-up. Target: <= 5 ms per sweep.",
        "HTTP part: benchmarks/http_speed.py; plan search: benchmarks/plan_speed.py.",
        "",
        "warm: critical batch size memoised (repeat request); cold: memo cleared before each call.",
        "",
        f"{'case':<30} {'mode':<8} {'warm p50':>9} {'warm p95':>9} {'cold p50':>9} {'cold p95':>9}",
    ]
    for name, model, acc, prec, par in CASES:
        for mode in ("static", "serving"):
            kwargs = {
                "precision": prec,
                "parallelism": par,
                "input_tokens": 1024,
                "output_tokens": 256,
                "batch_sizes": batches,
                "mode": mode,
            }
            estimate(model, acc, **kwargs)  # type: ignore[arg-type]
            cells = []
            for cold in (False, True):
                times = []
                for _ in range(REPEATS):
                    if cold:
                        _CRITICAL_CACHE.clear()
                    start = time.perf_counter()
                    estimate(model, acc, **kwargs)  # type: ignore[arg-type]
                    times.append((time.perf_counter() - start) * 1e3)
                times.sort()
                cells += [statistics.median(times), times[int(0.95 * (len(times) - 1))]]
            row = " ".join(f"{c:>9.2f}" for c in cells)
            lines.append(f"{name:<30} {mode:<8} {row}")
    lines.append("")
    lines.append(f"Load average (1, 5, 15 min) when the run ended: {_load()}.")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    RESULT.write_text(text)


if __name__ == "__main__":
    main()
