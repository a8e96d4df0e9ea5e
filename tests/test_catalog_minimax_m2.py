"""MiniMax-M2.5 in the catalog: written by hand from its config.json, counted by hand.

The importer refuses model_type minimax_m2 (tests/engine/test_hf_import.py), so the record is
checked here against the config's keys and against a hand count of its parameters.
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
from service.engine.parallel import Parallelism
from service.engine.param_count import count_parameters
from service.engine.precision import NATIVE, Precision
from service.engine.shapes import ModelShape

CONFIG = json.loads(
    (
        Path(__file__).resolve().parent / "data" / "hf_configs" / "MiniMaxAI--MiniMax-M2.5.json"
    ).read_text()
)


def _minimax() -> ModelShape:
    (record,) = [r for r in load_model_records() if r["id"] == "minimax-m2.5"]
    return model_from_record(record)


def test_record_carries_the_config_shape() -> None:
    shape, c = _minimax(), CONFIG
    assert (shape.num_layers, shape.hidden_size, shape.vocab_size) == (
        c["num_hidden_layers"],
        c["hidden_size"],
        c["vocab_size"],
    )
    assert (shape.num_heads, shape.num_kv_heads, shape.head_dim) == (
        c["num_attention_heads"],
        c["num_key_value_heads"],
        c["head_dim"],
    )
    assert (shape.num_experts, shape.experts_per_token, shape.moe_intermediate_size) == (
        c["num_local_experts"],
        c["num_experts_per_tok"],
        c["intermediate_size"],
    )
    assert c["shared_intermediate_size"] == shape.num_shared_experts == 0
    assert shape.num_moe_layers == shape.num_layers  # every layer MoE, no dense FFN
    assert shape.max_context_tokens == c["max_position_embeddings"]
    assert c["quantization_config"]["quant_method"] == shape.native_weights_dtype == "fp8"
    assert shape.tie_word_embeddings is c["tie_word_embeddings"] is False


def test_parameter_count_by_hand() -> None:
    """Per layer: q, o 2 x 3072 x 6144 + k, v 2 x 3072 x 1024 = 44.04M; 256 SwiGLU experts
    of 3 x 3072 x 1536 = 14.16M each; router 3072 x 256; norms 2 x 3072 + q/k 2 x 128.
    Untied embedding and head 2 x 200064 x 3072 = 1.23B; final norm 3072.
    Total 228.69B; active (8 experts) 11.03B, 10.42B without the embedding.
    """
    attention = 2 * 3072 * 6144 + 2 * 3072 * 1024
    expert = 3 * 3072 * 1536
    router = 3072 * 256
    norms = 2 * 3072 + 2 * 128
    vocab = 2 * 200064 * 3072
    total = 62 * (attention + 256 * expert + router + norms) + vocab + 3072
    active = 62 * (attention + 8 * expert + router + norms) + vocab + 3072
    count = count_parameters(_minimax())
    assert count.total == total == 228_689_320_448
    assert count.active == active
    assert count.active_excluding_embedding == pytest.approx(active - vocab / 2, rel=1e-9)


def test_native_fp8_fits_four_h200() -> None:
    """Native fp8 at TP4 + EP4 on H200: (228.69B − 1.23B vocab − 62 routers x 786,432) / 4 x
    (1 + 4/16384 block scales) + vocab / 4 x 2 B + routers x 2 B = 56.87 + 0.61 + 0.10 =
    57.58 GB per GPU (norms aside), under 0.9 x 141 GB usable.
    """
    (h200,) = [
        accelerator_from_record(r) for r in load_accelerator_records() if r["id"] == "h200-sxm"
    ]
    result = estimate(
        _minimax(),
        h200,
        precision=Precision(weights=NATIVE),
        parallelism=Parallelism(tp=4, ep=4),
        input_tokens=1000,
        output_tokens=1000,
        batch_sizes=[1],
    )
    assert result.precision.weights == "fp8"
    vocab, routers = 2 * 200064 * 3072, 62 * 3072 * 256
    fp8 = (228_689_320_448 - vocab - routers) / 4 * (1 + 4 / 16384)
    assert result.weights_gb[0] == pytest.approx(
        (fp8 + vocab / 4 * 2 + routers * 2) / 1e9, rel=1e-4
    )
    assert result.fits[0]
