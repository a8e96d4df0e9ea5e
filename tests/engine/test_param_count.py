"""Tests for service.engine.param_count against docs/reference/models.md §4 computed counts."""

from __future__ import annotations

import dataclasses

import pytest

from service.catalog_files import load_model_records, model_from_record
from service.engine.param_count import count_parameters
from service.engine.shapes import ModelShape

# Expected (total, active) in billions, typed in by hand from
# docs/reference/models.md §4 "Parameter counts (total / active)", "Computed" columns.
# Active = total for dense models. DeepSeek-V3 active 37.55B includes embedding + head;
# gpt-oss active 4.19B / 5.71B include the input embedding (3.61B / 5.13B without it).
EXPECTED_BILLIONS: dict[str, tuple[float, float]] = {
    "llama-2-7b": (6.738, 6.738),
    "llama-2-13b": (13.016, 13.016),
    "llama-2-70b": (68.977, 68.977),
    "llama-3-8b": (8.030, 8.030),
    "llama-3-70b": (70.554, 70.554),
    "llama-3.1-8b": (8.030, 8.030),
    "llama-3.1-70b": (70.554, 70.554),
    "llama-3.3-70b": (70.554, 70.554),
    "llama-3.1-405b": (405.85, 405.85),
    "llama-3.2-1b": (1.236, 1.236),
    "llama-3.2-3b": (3.213, 3.213),
    "mistral-7b-v0.1": (7.242, 7.242),
    "mistral-7b-v0.3": (7.248, 7.248),
    "mixtral-8x7b": (46.70, 12.88),
    "mixtral-8x22b": (140.62, 39.15),
    "qwen2.5-7b": (7.616, 7.616),
    "qwen2.5-14b": (14.770, 14.770),
    "qwen2.5-32b": (32.764, 32.764),
    "qwen2.5-72b": (72.706, 72.706),
    "qwen3-8b": (8.191, 8.191),
    "qwen3-32b": (32.762, 32.762),
    "qwen3-30b-a3b": (30.53, 3.35),
    "qwen3-235b-a22b": (235.09, 22.19),
    "deepseek-v3": (671.03, 37.55),
    "deepseek-r1": (671.03, 37.55),
    "kimi-k2": (1026.41, 32.86),  # by hand in tests/engine/test_hf_import.py
    "gemma-2-9b": (9.242, 9.242),
    "gemma-2-27b": (27.227, 27.227),
    "gemma-3-27b": (27.009, 27.009),
    "phi-3-mini-4k": (3.821, 3.821),
    "phi-3-medium-4k": (13.960, 13.960),
    "gpt-oss-20b": (20.91, 4.19),
    "gpt-oss-120b": (116.83, 5.71),
    "opt-13b": (12.853, 12.853),
    "opt-30b": (29.975, 29.975),
    "opt-66b": (65.720, 65.720),
    "falcon-40b": (41.30, 41.30),
    # Not in docs/reference/models.md: counted by hand in tests/engine/test_hf_import.py (text
    # model only).
    "llama-4-scout": (107.77, 17.17),
    # By hand in tests/test_catalog_llama_4_maverick.py and tests/test_catalog_minimax_m2.py.
    "llama-4-maverick": (400.71, 17.18),
    "minimax-m2.5": (228.69, 11.03),
    # Hybrid Mamba2 + attention, by hand in tests/engine/test_hybrid_mamba.py.
    "nemotron-h-56b": (56.324, 56.324),
}
# docs/reference/models.md §4: active excluding the input-embedding table (OpenAI's convention
# for gpt-oss).
EXPECTED_ACTIVE_EXCLUDING_EMBEDDING = {"gpt-oss-20b": 3.61, "gpt-oss-120b": 5.13}

SHAPES = {str(r["id"]): model_from_record(r) for r in load_model_records()}


def test_every_catalog_model_has_an_expected_count() -> None:
    assert set(SHAPES) == set(EXPECTED_BILLIONS)


@pytest.mark.parametrize("model_id", sorted(EXPECTED_BILLIONS))
def test_counts_match_models_md(model_id: str) -> None:
    total, active = EXPECTED_BILLIONS[model_id]
    count = count_parameters(SHAPES[model_id])
    assert count.total / 1e9 == pytest.approx(total, rel=0.01)
    assert count.active / 1e9 == pytest.approx(active, rel=0.01)


@pytest.mark.parametrize("model_id", sorted(EXPECTED_ACTIVE_EXCLUDING_EMBEDDING))
def test_active_excluding_embedding_gpt_oss(model_id: str) -> None:
    count = count_parameters(SHAPES[model_id])
    expected = EXPECTED_ACTIVE_EXCLUDING_EMBEDDING[model_id]
    assert count.active_excluding_embedding / 1e9 == pytest.approx(expected, rel=0.01)


def test_headline_values_tight() -> None:
    # Tighter than 1% for the figures quoted in the brief.
    assert count_parameters(SHAPES["llama-3.1-8b"]).total == pytest.approx(8.030e9, rel=1e-3)
    assert count_parameters(SHAPES["llama-3.1-70b"]).total == pytest.approx(70.554e9, rel=1e-3)
    ds = count_parameters(SHAPES["deepseek-v3"])
    assert (ds.total, ds.active) == (
        pytest.approx(671.03e9, rel=1e-3),
        pytest.approx(37.55e9, rel=1e-3),
    )


def _tiny(**changes: object) -> ModelShape:
    base = ModelShape(
        id="tiny",
        num_layers=2,
        hidden_size=8,
        num_heads=4,
        num_kv_heads=2,
        head_dim=2,
        intermediate_size=16,
        vocab_size=10,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_tiny_dense_by_hand() -> None:
    c = count_parameters(_tiny())
    # q 8*8, k,v 8*4 each, o 8*8 = 192; GLU 3*8*16 = 384; norms 2*8; embed/head 80 each; final 8
    assert c.attention_per_layer == 192
    assert c.dense_ffn_per_layer == 384
    assert c.total == 80 + 80 + 2 * (192 + 16 + 384) + 8
    assert c.active == c.total


def test_tied_embeddings_counted_once() -> None:
    untied = count_parameters(_tiny())
    tied = count_parameters(_tiny(tie_word_embeddings=True))
    assert untied.total - tied.total == 80
    assert tied.lm_head == 0
    # The LM head still multiplies by the shared table, so it stays in the matmul count.
    assert tied.active_excluding_embedding == tied.active
    assert untied.active_excluding_embedding == untied.active - 80


def test_biases_norms_and_mlp() -> None:
    base = count_parameters(_tiny()).attention_per_layer
    assert count_parameters(_tiny(attention_bias=True)).attention_per_layer == base + 8 + 2 * 4
    assert count_parameters(_tiny(output_bias=True)).attention_per_layer == base + 8
    assert count_parameters(_tiny(qk_norm=True)).attention_per_layer == base + 2 * 2
    mlp = count_parameters(_tiny(ffn_type="mlp", mlp_bias=True))
    assert mlp.dense_ffn_per_layer == 2 * 8 * 16 + 16 + 8


def test_moe_active_uses_top_k_plus_shared() -> None:
    shape = _tiny(
        num_experts=4,
        experts_per_token=2,
        moe_intermediate_size=4,
        num_shared_experts=1,
        shared_expert_intermediate_size=6,
        first_dense_layers=1,
    )
    c = count_parameters(shape)
    expert = 3 * 8 * 4
    shared = 3 * 8 * 6
    router = 8 * 4
    assert (c.expert, c.shared_experts_per_layer, c.router_per_layer) == (expert, shared, router)
    assert (c.num_dense_ffn_layers, c.num_moe_layers) == (1, 1)
    assert c.total - c.active == 2 * expert
    assert c.moe_per_layer == router + shared + 4 * expert


def test_mla_attention_by_hand() -> None:
    shape = _tiny(
        q_lora_rank=3, kv_lora_rank=5, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2
    )
    # q: 8*3 + 3 + 3*4*3; kv: 8*(5+1) + 5 + 5*4*(2+2); o: 4*2*8
    expected = (24 + 3 + 36) + (48 + 5 + 80) + 64
    assert count_parameters(shape).attention_per_layer == expected
    no_q_lora = _tiny(kv_lora_rank=5, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2)
    assert count_parameters(no_q_lora).attention_per_layer == 8 * 4 * 3 + (48 + 5 + 80) + 64
