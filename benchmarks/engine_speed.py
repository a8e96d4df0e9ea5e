"""Time one engine estimate over 1,024 batch sizes (1..1024); print a table, write a result file.

Run: .venv/bin/python benchmarks/engine_speed.py
Engine part only; POST /v1/estimates end to end is in http_speed.py.
Accelerators and models come from the seeded catalog files (hardware_catalog/).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
from _timing import load_average, machine, percentiles, time_calls, write_result

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.estimate import estimate
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import _CRITICAL_CACHE

REPEATS = 50
RESULT = Path(__file__).parent / "results" / "engine_speed.txt"

ACCELERATORS = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
MODELS = {str(r["id"]): model_from_record(r) for r in load_model_records()}
H100, H200 = ACCELERATORS["h100-sxm"], ACCELERATORS["h200-sxm"]
LLAMA_70B, DEEPSEEK_V3 = MODELS["llama-3.1-70b"], MODELS["deepseek-v3"]
CASES = [
    ("llama-3.1-70b h100 tp4 bf16", LLAMA_70B, H100, Precision(), Parallelism(tp=4)),
    ("deepseek-v3 h200 tp8 fp8", DEEPSEEK_V3, H200, Precision("fp8", "fp8"), Parallelism(tp=8)),
]


def main() -> None:
    batches = np.arange(1, 1025, dtype=float)
    lines = [
        "Engine speed: one estimate() over 1,024 batch sizes (1..1024), input 1024 / output 256.",
        f"{machine()} {REPEATS} repeats after one warm-up. Target: <= 5 ms per sweep.",
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
            cells: list[float] = []
            for cold in (False, True):
                times, _ = time_calls(
                    partial(estimate, model, acc, **kwargs),
                    REPEATS,
                    before=_CRITICAL_CACHE.clear if cold else None,
                )
                cells += percentiles(times)
            row = " ".join(f"{c:>9.2f}" for c in cells)
            lines.append(f"{name:<30} {mode:<8} {row}")
    lines.append("")
    lines.append(f"Load average (1, 5, 15 min) when the run ended: {load_average()}.")
    write_result(RESULT, lines)


if __name__ == "__main__":
    main()
