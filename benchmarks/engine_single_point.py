"""Time one engine estimate for a single batch size (the API's most common request).

Run: .venv/bin/python benchmarks/engine_single_point.py [--calls N] [--rounds R]
Prints, per case, the median over R rounds of the CPU microseconds per call (each round N
calls after a warm-up, batch sizes cycling 1, 2, 4, 8, 16, 32 as benchmarks/load/loadgen.py
sends them). Prints only: compare two commits by running this script alternately in each
checkout (``PYTHONPATH=<checkout>``), on the same machine, in the same minutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.estimate import estimate
from service.engine.parallel import Parallelism
from service.engine.precision import Precision

ACCELERATORS = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
MODELS = {str(r["id"]): model_from_record(r) for r in load_model_records()}
# A calibration-like parameter set (shape penalties and per-sequence host work switched on).
CALIBRATED = EfficiencyParams(
    gemm_compute_efficiency_bf16=0.74,
    gemm_half_efficiency_rows_bf16=41.0,
    gemm_half_efficiency_columns_bf16=120.0,
    gemm_kernel_latency_us_bf16=4.0,
    attention_half_efficiency_tokens=940.0,
    step_overhead_us=250.0,
    sequence_layer_overhead_us=0.3,
)
TP4, TP8 = Parallelism(tp=4), Parallelism(tp=8)
BF16, FP8 = Precision(), Precision("fp8", "fp8")
# (label, model, accelerator, precision, layout, mode, parameters)
CASES = [
    ("llama-3.1-70b h100 tp4 bf16", "llama-3.1-70b", "h100-sxm", BF16, TP4, "static", None),
    ("llama-3.1-70b h100 tp4 bf16", "llama-3.1-70b", "h100-sxm", BF16, TP4, "serving", None),
    ("llama-3.1-8b h100 bf16", "llama-3.1-8b", "h100-sxm", BF16, Parallelism(), "static", None),
    ("deepseek-v3 h200 tp8 fp8", "deepseek-v3", "h200-sxm", FP8, TP8, "serving", None),
    ("llama-3.1-70b h100 tp4 calib.", "llama-3.1-70b", "h100-sxm", BF16, TP4, "static", CALIBRATED),
]
BATCHES = (1, 2, 4, 8, 16, 32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name, model_id, acc_id, precision, parallelism, mode, params in CASES:
        call = partial(
            estimate,
            MODELS[model_id],
            ACCELERATORS[acc_id],
            precision=precision,
            parallelism=parallelism,
            input_tokens=1024,
            output_tokens=256,
            mode=mode,
            params=params or DEFAULT_EFFICIENCY,
        )
        for batch in BATCHES * 20:
            call(batch_sizes=[batch])
        rounds = []
        for _ in range(args.rounds):
            start = time.process_time()
            for i in range(args.calls):
                call(batch_sizes=[BATCHES[i % len(BATCHES)]])
            rounds.append((time.process_time() - start) / args.calls * 1e6)
        print(f"{name:<31} {mode:<8} {statistics.median(rounds):8.1f} us")


if __name__ == "__main__":
    main()
