"""No TPOT or throughput cliff between consecutive batch sizes, anywhere in the catalog.

Every catalog model on every catalog accelerator (bf16, or fp16 where a part has no bf16), at
TP1 and at TP8 where the heads divide, static and serving: batch sizes 1…128 one by one. A
cliff is a step far larger than its neighbours: TPOT(B+1) − TPOT(B) more than 3 × the larger of
the steps on either side (plus 1e-6 of TPOT for rounding; the first and last steps, with one
side only, are not judged), or output throughput per GPU falling from one batch to the next.
A kink (memory-bound slope changing to compute-bound slope) is not a cliff: the steps after it
are as large as the step at it.
"""

from __future__ import annotations

import numpy as np
import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.errors import InvalidLayoutError
from service.engine.estimate import estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import Precision

BATCHES = np.arange(1.0, 129.0)
MODELS = {str(r["id"]): model_from_record(r) for r in load_model_records()}
ACCELERATORS = [accelerator_from_record(r) for r in load_accelerator_records()]


def _cliffs(values: np.ndarray) -> np.ndarray:
    """Return the batch sizes B where value(B+1) − value(B) is a spike among its neighbours."""
    steps = np.diff(values)
    # The first and last steps have one neighbour, so a kink there (one algorithm's slope
    # handing over to a shallower one, e.g. one-shot to two-shot all-reduce between B = 1 and 2
    # over PCIe) cannot be told from a step: they are not judged.
    left = np.concatenate([[np.inf], steps[:-1]])
    right = np.concatenate([steps[1:], [np.inf]])
    tolerance = 1e-6 * values[1:]
    spikes = steps > 3.0 * np.maximum(np.maximum(left, right), 0.0) + tolerance
    return BATCHES[:-1][spikes]


def test_cliff_detector_sees_a_step() -> None:
    smooth = 1.0 + 0.01 * BATCHES
    assert _cliffs(smooth).size == 0
    stepped = smooth + np.where(BATCHES > 32, 0.5, 0.0)
    assert _cliffs(stepped).tolist() == [32.0]


def _members(precision_16: str) -> list[Accelerator]:
    return [a for a in ACCELERATORS if a.peak_tflops.get(precision_16)]


@pytest.mark.parametrize("mode", ["static", "serving"])
@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_no_cliff_between_consecutive_batch_sizes(model_id: str, mode: str) -> None:
    model = MODELS[model_id]
    for dtype in ("bf16", "fp16"):
        accelerators = [
            a for a in _members(dtype) if dtype == "bf16" or not a.peak_tflops.get("bf16")
        ]
        if not accelerators:
            continue
        precision = Precision(weights=dtype, activations=dtype, kv_cache=dtype)
        for tp in (1, 8):
            layout = Parallelism(tp=tp)
            try:
                layout.check_divides(model)
            except InvalidLayoutError:
                continue
            results = estimate_stacked(
                model,
                accelerators,
                precision=precision,
                parallelism=layout,
                input_tokens=[1024] * len(accelerators),
                output_tokens=[256] * len(accelerators),
                batch_sizes=[BATCHES] * len(accelerators),
                mode=mode,
                with_critical_batch=False,
            )
            for accelerator, r in zip(accelerators, results, strict=True):
                where = f"{model_id} on {accelerator.id} tp={tp} {dtype} {mode}"
                assert _cliffs(r.tpot_ms).size == 0, (
                    f"TPOT cliff at B={_cliffs(r.tpot_ms)}: {where}"
                )
                per_gpu = r.output_tokens_per_s_per_gpu
                falls = np.flatnonzero(np.diff(per_gpu) < -1e-9 * per_gpu[1:])
                assert falls.size == 0, f"throughput falls after B={BATCHES[falls]}: {where}"


def test_llama_70b_tp8_all_reduce_grows_smoothly_from_batch_32_to_33() -> None:
    model = MODELS["llama-3.1-70b"]
    h100 = next(a for a in ACCELERATORS if a.id == "h100-sxm")
    (r,) = estimate_stacked(
        model,
        [h100],
        parallelism=Parallelism(tp=8),
        input_tokens=[1024],
        output_tokens=[256],
        batch_sizes=[np.array([32.0, 33.0])],
        with_critical_batch=False,
    )
    # The 160 all-reduces (2 per layer × 80) of 32 → 33 rows of 8192 × 2 B = 512 → 528 KiB run
    # two-shot (tests/engine/test_kernels.py): each grows by 1.75 × 16384 B / 382.5 GB/s = 75 ns,
    # 12 µs in all; the GEMMs and attention add their own few µs per row. The old switch from
    # one-shot to the NCCL ring at 512 KiB added 160 × 3.3 µs ≈ 0.5 ms here.
    all_reduce_step_ms = 160 * 1.75 * 16384 / (450e9 * 0.85) * 1e3
    step_ms = r.tpot_ms[1] - r.tpot_ms[0]
    assert all_reduce_step_ms < step_ms < all_reduce_step_ms + 0.05
