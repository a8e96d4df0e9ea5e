"""HTTP tests of /v1/models: seeded shapes, parameter counts, validation, CRUD and HF import."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf_configs"


@pytest.fixture
def api_key(make_api_key: Callable[..., str]) -> str:
    """An admin key: these tests edit seeded catalog rows (which needs the admin scope)."""
    return make_api_key("admin")


def hf_config(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((HF_CONFIGS / f"{name}.json").read_text())
    return config


def small_model(model_id: str = "tiny-llama", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": model_id,
        "name": "Tiny Llama",
        "family": "llama",
        "num_layers": 2,
        "hidden_size": 64,
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "sources": ["https://example.com/tiny-llama"],
    }
    body.update(overrides)
    return body


def test_seeded_model_has_counts_and_sources(client: TestClient) -> None:
    body = client.get("/v1/models/llama-3.1-8b").json()
    assert body["num_layers"] == 32
    assert body["num_kv_heads"] == 8
    # Meta states 8.03B parameters for Llama 3.1 8B (untied embeddings).
    assert body["total_params"] == pytest.approx(8.03e9, rel=0.005)
    assert body["active_params"] == body["total_params"]
    assert body["sources"] and body["origin"] == "seed"


def test_moe_model_active_below_total(client: TestClient) -> None:
    body = client.get("/v1/models/mixtral-8x7b").json()
    assert body["num_experts"] == 8 and body["experts_per_token"] == 2
    assert body["active_params"] < body["total_params"]


def test_list_models_and_filters(client: TestClient) -> None:
    page = client.get("/v1/models", params={"limit": 200}).json()
    ids = [item["id"] for item in page["items"]]
    assert ids == sorted(ids) and "deepseek-v3" in ids
    assert all(item["sources"] for item in page["items"])
    moe = client.get("/v1/models", params={"moe": "true", "limit": 200}).json()["items"]
    assert moe and all(item["num_experts"] > 0 for item in moe)
    dense = client.get("/v1/models", params={"moe": "false", "limit": 200}).json()["items"]
    assert len(moe) + len(dense) == len(ids)


def test_create_counts_parameters(client: TestClient, auth_headers: dict[str, str]) -> None:
    response = client.post("/v1/models", json=small_model(), headers=auth_headers)
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["location"] == "/v1/models/tiny-llama"
    # embeddings + LM head + per layer (q,o: 64x64; k,v: 64x32; GLU 3x64x128; 2 norms) + norm
    layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert body["total_params"] == 2 * 1000 * 64 + 2 * layer + 64
    assert body["origin"] == "user"


def test_inconsistent_shape_is_422_naming_the_field(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = client.post("/v1/models", json=small_model(num_kv_heads=3), headers=auth_headers)
    assert response.status_code == 422
    body = response.json()
    assert body["errors"][0]["field"] == "num_kv_heads"
    assert client.get("/v1/models/tiny-llama").status_code == 404


def test_schema_type_error_is_422(client: TestClient, auth_headers: dict[str, str]) -> None:
    response = client.post("/v1/models", json=small_model(num_layers="many"), headers=auth_headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "num_layers"


def test_duplicate_model_is_409(client: TestClient, auth_headers: dict[str, str]) -> None:
    response = client.post("/v1/models", json=small_model("qwen3-32b"), headers=auth_headers)
    assert response.status_code == 409


def test_patch_recounts_parameters(client: TestClient, auth_headers: dict[str, str]) -> None:
    client.post("/v1/models", json=small_model(), headers=auth_headers)
    before = client.get("/v1/models/tiny-llama").json()["total_params"]
    patched = client.patch("/v1/models/tiny-llama", json={"num_layers": 4}, headers=auth_headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["num_layers"] == 4
    assert patched.json()["total_params"] > before
    assert client.delete("/v1/models/tiny-llama", headers=auth_headers).status_code == 204
    assert client.get("/v1/models/tiny-llama").status_code == 404


def test_model_etag_round_trip(client: TestClient, auth_headers: dict[str, str]) -> None:
    etag = client.get("/v1/models/qwen3-8b").headers["etag"]
    assert client.get("/v1/models/qwen3-8b", headers={"If-None-Match": etag}).status_code == 304
    body = client.get("/v1/models/qwen3-8b").json()
    body["notes"] = "edited"
    ok = client.put("/v1/models/qwen3-8b", json=body, headers={**auth_headers, "If-Match": etag})
    assert ok.status_code == 200, ok.text
    stale = client.put("/v1/models/qwen3-8b", json=body, headers={**auth_headers, "If-Match": etag})
    assert stale.status_code == 412


def test_import_real_hf_config(client: TestClient, auth_headers: dict[str, str]) -> None:
    config = hf_config("meta-llama--Meta-Llama-3.1-70B")
    response = client.post(
        "/v1/models/import",
        json={"id": "my-llama-70b", "hf_config": config},
        headers=auth_headers,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["num_layers"] == config["num_hidden_layers"]
    assert body["hidden_size"] == config["hidden_size"]
    assert body["num_kv_heads"] == config["num_key_value_heads"]
    seeded = client.get("/v1/models/llama-3.1-70b").json()
    assert body["total_params"] == seeded["total_params"]
    assert client.get("/v1/models/my-llama-70b").json()["origin"] == "user"


def test_import_moe_hf_config(client: TestClient, auth_headers: dict[str, str]) -> None:
    config = hf_config("mistralai--Mixtral-8x7B-v0.1")
    response = client.post(
        "/v1/models/import", json={"id": "my-mixtral", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 201, response.text
    assert response.json()["num_experts"] == config["num_local_experts"]


def test_import_reads_an_experts_only_checkpoint(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    # gpt-oss's MXFP4 leaves attention out of the quantization (modules_to_not_convert).
    config = hf_config("openai--gpt-oss-120b")
    response = client.post(
        "/v1/models/import", json={"id": "my-gpt-oss", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["native_weights_dtype"], body["native_quantized_layers"]) == ("fp4", "experts")
    seeded = client.get("/v1/models/gpt-oss-120b").json()
    assert seeded["native_quantized_layers"] == "experts"
    # A dense model cannot quantize its experts alone: a 422 naming the field.
    patched = client.patch(
        "/v1/models/llama-3.1-8b", json={"native_quantized_layers": "experts"},
        headers=auth_headers,
    )  # fmt: skip
    assert patched.status_code == 422
    assert patched.json()["errors"][0]["field"] == "native_quantized_layers"


def test_import_llama_4_scout_and_estimate_it(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    config = hf_config("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    response = client.post(
        "/v1/models/import", json={"id": "my-llama-4-scout", "hf_config": config},
        headers=auth_headers,
    )  # fmt: skip
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["num_experts"], body["num_sliding_layers"]) == (16, 36)
    # 107.8B parameters by hand (tests/engine/test_hf_import.py): 215.5 GB in bf16, so TP4 on
    # H100 (53.9 GB per GPU) is the smallest power-of-two TP that fits 72 GB usable.
    estimate = client.post(
        "/v1/estimates",
        json={
            "model": "my-llama-4-scout", "accelerator": "h100-sxm", "input_tokens": 1024,
            "output_tokens": 128, "batch_sizes": [1, 8], "parallelism": {"tp": 4},
        },
    )  # fmt: skip
    assert estimate.status_code == 200, estimate.text
    assert all(p["memory"]["fits"] for p in estimate.json()["points"])


def test_unsupported_architecture_is_a_422_naming_it(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    config = hf_config("google--gemma-4-26B-A4B")
    response = client.post(
        "/v1/models/import", json={"id": "gemma4", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "model_type"
    assert "gemma4" in error["message"] and "per-layer head widths" in error["message"]


@pytest.mark.parametrize(
    ("model_type", "layer_kind"),
    [
        ("glm_moe_dsa", "DeepSeek Sparse Attention"),
        ("qwen3_5_moe", "Gated DeltaNet linear-attention layers"),
    ],
)
def test_glm5_and_qwen3_5_imports_are_422s_naming_the_layer_kind(
    client: TestClient, auth_headers: dict[str, str], model_type: str, layer_kind: str
) -> None:
    # Qwen3.5 from its real config.json; GLM-5 (no real config among the fixtures) with GLM-5's
    # widths from HF GlmMoeDsaConfig. The importer refuses both on model_type.
    config = (
        hf_config("Qwen--Qwen3.5-397B-A17B")
        if model_type == "qwen3_5_moe"
        else {"model_type": model_type, "hidden_size": 6144, "num_hidden_layers": 78}
    )
    response = client.post(
        "/v1/models/import", json={"id": "refused", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "model_type"
    assert model_type in error["message"] and layer_kind in error["message"]


def test_import_nemotron_h_and_estimate_it_on_8x_h100(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    config = hf_config("nvidia--Nemotron-H-56B-Base-8K")
    del config["time_step_limit"]  # [0.0, Infinity]: not sendable as strict JSON
    response = client.post(
        "/v1/models/import",
        json={"id": "my-nemotron-h-56b", "hf_config": config},
        headers=auth_headers,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    # The 118-letter pattern: 54 Mamba2, 10 attention, 54 MLP blocks; 56.32B parameters by hand
    # (tests/engine/test_hybrid_mamba.py).
    assert body["layer_pattern"].count("M") == 54 and body["layer_pattern"].count("*") == 10
    assert body["total_params"] == 56_324_350_464
    # TP8 holds 14.08 GB of bf16 weights per H100; at 1152 tokens a sequence needs
    # 5120 B/token of KV (10 attention layers) + 57,452,544 B of Mamba2 state.
    estimate = client.post(
        "/v1/estimates",
        json={
            "model": "my-nemotron-h-56b", "accelerator": "h100-sxm", "input_tokens": 1024,
            "output_tokens": 128, "batch_sizes": [1, 64], "parallelism": {"tp": 8},
        },
    )  # fmt: skip
    assert estimate.status_code == 200, estimate.text
    points = estimate.json()["points"]
    assert all(p["memory"]["fits"] for p in points)
    assert points[0]["memory"]["weights_gb"] == pytest.approx(14.08, abs=0.01)
    assert points[1]["memory"]["kv_cache_gb"] == pytest.approx(
        64 * (5120 * 1152 + 57_452_544) / 1e9, rel=0.01
    )
    # One GPU cannot hold 112.6 GB of bf16 weights.
    single = client.post(
        "/v1/estimates",
        json={
            "model": "my-nemotron-h-56b", "accelerator": "h100-sxm", "input_tokens": 1024,
            "output_tokens": 128, "batch_sizes": [1],
        },
    )  # fmt: skip
    assert single.status_code == 200, single.text
    assert not single.json()["points"][0]["memory"]["fits"]


def test_import_broken_config_is_422_naming_the_key(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    config = hf_config("meta-llama--Meta-Llama-3.1-8B")
    del config["num_attention_heads"]
    response = client.post(
        "/v1/models/import", json={"id": "broken", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "num_attention_heads"
    assert client.get("/v1/models/broken").status_code == 404


def test_import_existing_id_is_409(client: TestClient, auth_headers: dict[str, str]) -> None:
    config = hf_config("Qwen--Qwen3-8B")
    response = client.post(
        "/v1/models/import", json={"id": "qwen3-8b", "hf_config": config}, headers=auth_headers
    )
    assert response.status_code == 409


@pytest.mark.parametrize("model_id", ["gemma-3-27b", "qwen3-235b-a22b"])
def test_seeded_models_can_be_patched(
    client: TestClient, auth_headers: dict[str, str], model_id: str
) -> None:
    """The merged row keeps the seeded sources, which must pass SourceUrl like any edit's."""
    patched = client.patch(f"/v1/models/{model_id}", json={"notes": "x"}, headers=auth_headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["notes"] == "x"
    assert all(
        url.startswith("https://huggingface.co/") or url.startswith("https://gitcode.com/")
        for url in patched.json()["sources"]
    )
