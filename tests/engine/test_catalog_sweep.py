"""Every shipped model on every shipped accelerator, in each mode, gives a physical answer.

The catalog grows one YAML file at a time; a new shape (a new attention kind, an odd head count,
an accelerator without an fp8 peak) can reach a formula no hand-written case exercised. Each pair
is estimated once per mode at three loads, and every point must have finite, positive latencies
and throughput that a heavier load does not make faster per token.
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
from service.engine.calibration.priors import with_engine_priors
from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.precision import AUTO_ACTIVATIONS, AUTO_KV_CACHE, NATIVE, Precision
from service.engine.shapes import ModelShape

MODELS = [model_from_record(r) for r in load_model_records()]
ACCELERATORS = [accelerator_from_record(r) for r in load_accelerator_records()]
LOADS = [1.0, 32.0, 256.0]
# The API's default: the model's shipped weights, activations and KV cache as engines run them.
PRECISION = Precision(weights=NATIVE, activations=AUTO_ACTIVATIONS, kv_cache=AUTO_KV_CACHE)
# (mode, load pattern, backend whose engine priors apply): a static batch, closed-loop clients
# on vLLM, and an offline queue on TensorRT-LLM.
MODES = [
    ("static", "closed_loop", None),
    ("serving", "closed_loop", "vllm"),
    ("serving", "offline", "trtllm"),
]


def _lengths(model: ModelShape) -> tuple[int, int]:
    """A 2,048-token prompt and 256 new tokens, shortened to fit the model's context window."""
    window = model.max_context_tokens or 2304
    output_tokens = min(256, window // 8)
    return min(2048, window - output_tokens), output_tokens


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_every_accelerator_answers_physically(model: ModelShape) -> None:
    input_tokens, output_tokens = _lengths(model)
    for accelerator in ACCELERATORS:
        for mode, load_pattern, backend in MODES:
            _check(model, accelerator, mode, load_pattern, backend, input_tokens, output_tokens)


def _check(
    model: ModelShape,
    accelerator: Accelerator,
    mode: str,
    load_pattern: str,
    backend: str | None,
    input_tokens: int,
    output_tokens: int,
) -> None:
    where = f"{model.id} on {accelerator.id}, {mode} {load_pattern}"
    result = estimate(
        model,
        accelerator,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        batch_sizes=LOADS,
        precision=PRECISION,
        mode=mode,
        load_pattern=load_pattern,
        params=with_engine_priors(DEFAULT_EFFICIENCY, backend),
    )
    for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s"):
        values = np.asarray(getattr(result, name))
        assert np.all(np.isfinite(values)) and np.all(values > 0.0), f"{where}: {name} {values}"
    tpot = np.asarray(result.tpot_ms)
    assert np.all(np.diff(tpot) >= -1e-9 * tpot[:-1]), f"{where}: TPOT falls with load {tpot}"
