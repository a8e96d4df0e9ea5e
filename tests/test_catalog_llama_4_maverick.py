"""Llama-4 Maverick in the catalog: its real config.json's interleaved MoE, counted by hand.

The seeded record equals the import of the config (tests/engine/test_hf_import.py compares
every field); here the parameter count and the fp8 fit on 8 x H200 are checked by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.estimate import estimate
from service.engine.hf_import import shape_from_hf_config
from service.engine.parallel import Parallelism
from service.engine.param_count import count_parameters
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

CONFIG = (
    Path(__file__).resolve().parent
    / "data"
    / "hf_configs"
    / "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json"
)
HIDDEN, KV, VOCAB, EXPERT_WIDTH, DENSE_WIDTH = 5120, 1024, 202048, 8192, 16384


def _maverick() -> ModelShape:
    (record,) = [r for r in load_model_records() if r["id"] == "llama-4-maverick"]
    return model_from_record(record)


def test_interleaved_moe_layers_from_the_config() -> None:
    shape = _maverick()
    imported = shape_from_hf_config("llama-4-maverick", json.loads(CONFIG.read_text()))
    # interleave_moe_layer_step 2: 24 of the 48 layers are MoE, 24 dense SwiGLU.
    assert (shape.num_moe_layers, shape.first_dense_layers) == (24, 24)
    assert (imported.num_moe_layers, imported.first_dense_layers) == (24, 24)
    assert (shape.num_experts, shape.experts_per_token, shape.num_shared_experts) == (128, 1, 1)


def test_parameter_count_by_hand() -> None:
    """Per layer: q, o 2 x 5120^2 + k, v 2 x 5120 x 1024 = 62.9M, norms 2 x 5120.

    MoE layer: 128 routed + 1 shared SwiGLU expert of 3 x 5120 x 8192 = 125.8M each, router
    5120 x 128. Dense layer: 3 x 5120 x 16384 = 251.7M. Untied embedding and head 2 x 202048 x
    5120 = 2.07B, final norm 5120. Total 400.71B; active (1 routed + 1 shared) 17.18B.
    """
    attention = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * KV
    expert = 3 * HIDDEN * EXPERT_WIDTH
    router = HIDDEN * 128
    dense = 3 * HIDDEN * DENSE_WIDTH
    common = 48 * (attention + 2 * HIDDEN) + 24 * dense + 2 * VOCAB * HIDDEN + HIDDEN
    total = common + 24 * (129 * expert + router)
    active = common + 24 * (2 * expert + router)
    count = count_parameters(_maverick())
    assert count.total == total == 400_711_848_960
    assert count.active == pytest.approx(active, rel=1e-9)
    assert active / 1e9 == pytest.approx(17.18, abs=0.01)


def test_fp8_weights_fit_eight_h200() -> None:
    """fp8 at TP8 + EP8 on H200: the fp8 decoder weights and the 16-bit vocab split 8 ways.

    By hand: (400.71B − 2.07B vocab − 24 routers x 655,360) / 8 x 1 B x (1 + 4/16384, one fp32
    scale per 128 x 128 block) + the vocab shard 2.07B / 8 x 2 B + the routers 15.7M x 2 B
    (replicated) = 49.84 + 0.52 + 0.03 = 50.39 GB (norms, 1 MB, aside), under the 0.9 x 141 GB
    usable.
    """
    (h200,) = [
        accelerator_from_record(r) for r in load_accelerator_records() if r["id"] == "h200-sxm"
    ]
    result = estimate(
        _maverick(),
        h200,
        precision=Precision(weights="fp8", activations="fp8", kv_cache="fp8"),
        parallelism=Parallelism(tp=8, ep=8),
        input_tokens=1000,
        output_tokens=1000,
        batch_sizes=[1],
    )
    vocab, routers = 2 * VOCAB * HIDDEN, 24 * HIDDEN * 128
    fp8_bytes = (400_711_848_960 - vocab - routers) / 8 * (1 + 4 / 16384)
    hand_bytes = fp8_bytes + vocab / 8 * 2 + routers * 2
    assert result.weights_gb[0] == pytest.approx(hand_bytes / 1e9, rel=1e-4)
    assert result.fits[0]
