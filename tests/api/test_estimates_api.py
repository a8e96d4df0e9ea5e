"""HTTP tests of POST /v1/estimates: contract, engine agreement, fit, CSV, cost and errors."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from service.api.schemas.analysis import EstimateResponse
from service.engine.efficiency import spec_sheet_efficiency
from service.engine.estimate import estimate
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.services.catalog import CatalogService

POINT_FIELDS = {
    "batch_size",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_ms",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "requests_per_s",
    "decode",
    "prefill",
    "memory",
    "cost",
}
MEMORY_FIELDS = {"weights_gb", "kv_cache_gb", "activations_gb", "total_gb", "capacity_gb", "fits"}
COST_FIELDS = {"usd_per_million_output_tokens", "usd_per_million_input_tokens"}


def body(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1, 8, 64, 256],
    }
    request.update(overrides)
    return request


def post(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/estimates", json=body(**overrides))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_contract_fields_with_units(client: TestClient) -> None:
    answer = post(client, backend="trtllm")
    EstimateResponse.model_validate(answer)  # the documented response schema holds
    assert answer["model"] == "llama-3.1-8b" and answer["accelerator"] == "h100-sxm"
    assert answer["calibration"] is None and answer["backend"] == "trtllm"
    assert answer["mode"] == "static"
    assert answer["ridge_point_flop_per_byte"] == pytest.approx(295, abs=1)
    assert [p["batch_size"] for p in answer["points"]] == [1, 8, 64, 256]
    for point in answer["points"]:
        assert set(point) >= POINT_FIELDS
        assert set(point["memory"]) >= MEMORY_FIELDS
        assert set(point["cost"]) >= COST_FIELDS
        for phase in ("decode", "prefill"):
            assert set(point[phase]) >= {"arithmetic_intensity_flop_per_byte", "bound"}
            assert point[phase]["bound"] in {"memory", "compute", "communication"}


def test_matches_engine_called_directly(client: TestClient, db_session: Session) -> None:
    catalog = CatalogService(db_session)
    precision = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    batch_sizes = [1, 3, 48, 700]
    for mode in ("static", "serving"):
        answer = post(
            client,
            model="qwen3-32b",
            precision=precision,
            parallelism={"tp": 2},
            input_tokens=2000,
            output_tokens=300,
            batch_sizes=batch_sizes,
            mode=mode,
        )
        h100 = catalog.accelerator("h100-sxm")
        direct = estimate(
            catalog.model_shape("qwen3-32b"),
            h100,
            params=spec_sheet_efficiency(h100),  # uncalibrated: measured matmul fractions
            precision=Precision(**precision),
            parallelism=Parallelism(tp=2),
            input_tokens=2000,
            output_tokens=300,
            batch_sizes=batch_sizes,
            mode=mode,
        )
        assert answer["critical_batch_size"] == direct.critical_batch_size
        assert answer["max_batch_size"] == direct.max_batch_size
        assert answer["gpus_per_replica"] == 2
        points = answer["points"]
        for name in (
            "ttft_ms",
            "tpot_ms",
            "e2e_latency_ms",
            "queue_wait_ms",
            "admission_wait_ms",
            "prompts_ahead_ms",
            "requests_per_s",
        ):
            assert [p[name] for p in points] == getattr(direct, name).tolist()
        assert [p["memory"]["kv_cache_gb"] for p in points] == direct.kv_cache_gb.tolist()
        assert [p["memory"]["fits"] for p in points] == direct.fits.tolist()
        assert [p["decode"]["bound"] for p in points] == direct.decode_bound.tolist()
        assert [
            p["cost"]["usd_per_million_output_tokens"] for p in points
        ] == direct.usd_per_million_output_tokens.tolist()


def test_llama_70b_does_not_fit_one_h100_but_fits_four(client: TestClient) -> None:
    one = post(client, model="llama-3.1-70b", batch_sizes=[1, 8])
    assert [p["memory"]["fits"] for p in one["points"]] == [False, False]
    assert all(p["memory"]["total_gb"] > p["memory"]["usable_gb"] for p in one["points"])
    assert one["points"][0]["ttft_ms"] > 0  # an answer, not an error
    # 80 GB = 80e9 bytes: usable 0.9 × 80 = 72 GB; TP2 holds 70.5 GB of weights + 1.5 GB
    # runtime, so only TP4 (35.3 GB of weights) leaves room for a KV cache.
    assert one["points"][0]["memory"]["capacity_gb"] == 80.0
    four = post(client, model="llama-3.1-70b", batch_sizes=[1], parallelism={"tp": 4})
    assert four["points"][0]["memory"]["fits"] is True
    assert four["points"][0]["memory"]["weights_gb"] == pytest.approx(
        one["points"][0]["memory"]["weights_gb"] / 4, rel=0.02
    )


def test_csv_parses_and_matches_json(client: TestClient) -> None:
    request = body(mode="serving", batch_sizes=[1, 16, 512])
    as_json = client.post("/v1/estimates", json=request).json()
    response = client.post("/v1/estimates", json=request, headers={"Accept": "text/csv"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 3
    for row, point in zip(rows, as_json["points"], strict=True):
        assert row["model"] == "llama-3.1-8b" and row["mode"] == "serving"
        assert int(row["batch_size"]) == point["batch_size"]
        assert float(row["tpot_ms"]) == point["tpot_ms"]
        assert float(row["queue_wait_ms"]) == point["queue_wait_ms"]
        assert float(row["memory_total_gb"]) == point["memory"]["total_gb"]
        assert row["memory_fits"] == json.dumps(point["memory"]["fits"])
        assert row["decode_bound"] == point["decode"]["bound"]
        cost = point["cost"]["usd_per_million_output_tokens"]
        assert float(row["cost_usd_per_million_output_tokens"]) == cost


def test_json_preferred_unless_csv_ranks_higher(client: TestClient) -> None:
    accept = "application/json, text/csv;q=0.5"
    response = client.post("/v1/estimates", json=body(), headers={"Accept": accept})
    assert response.headers["content-type"].startswith("application/json")
    accept = "application/json;q=0.5, text/csv"
    response = client.post("/v1/estimates", json=body(), headers={"Accept": accept})
    assert response.headers["content-type"].startswith("text/csv")


def test_price_override_scales_cost(client: TestClient) -> None:
    base = post(client, price_usd_per_hour=2.0, parallelism={"tp": 2})
    double = post(client, price_usd_per_hour=4.0, parallelism={"tp": 2})
    assert base["price_usd_per_hour"] == 2.0 and base["usd_per_hour"] == 4.0
    for a, b in zip(base["points"], double["points"], strict=True):
        for name in COST_FIELDS:
            assert b["cost"][name] == pytest.approx(2 * a["cost"][name])


def test_no_price_gives_null_cost_never_nan(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    h100 = client.get("/v1/accelerators/h100-sxm").json()
    unpriced = {
        "id": "unpriced-gpu",
        "vendor": "test",
        "name": "Unpriced GPU",
        "memory_gb": h100["memory_gb"],
        "memory_bandwidth_gb_s": h100["memory_bandwidth_gb_s"],
        "peak_tflops": h100["peak_tflops"],
        "interconnect_gb_s": h100["interconnect_gb_s"],
    }
    created = client.post("/v1/accelerators", json=unpriced, headers=auth_headers)
    assert created.status_code == 201, created.text
    response = client.post("/v1/estimates", json=body(accelerator="unpriced-gpu"))
    assert response.status_code == 200
    json.loads(response.text, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    answer = response.json()
    assert answer["price_usd_per_hour"] is None and answer["usd_per_hour"] is None
    for point in answer["points"]:
        assert point["cost"] == dict.fromkeys(COST_FIELDS)
        assert point["energy"]["per_token_j"] is None
        assert math.isfinite(point["tpot_ms"])


def test_serving_queues_beyond_kv_capacity(client: TestClient) -> None:
    answer = post(client, mode="serving", model="llama-3.1-70b", parallelism={"tp": 4})
    limit = answer["max_batch_size"]
    concurrency = [max(limit // 2, 1), limit * 4]
    points = post(
        client,
        mode="serving",
        model="llama-3.1-70b",
        parallelism={"tp": 4},
        batch_sizes=concurrency,
    )["points"]
    assert points[0]["queue_wait_ms"] == 0.0
    assert points[1]["queue_wait_ms"] > 0.0
    assert points[1]["running_batch_size"] == limit


def test_order_and_duplicates_kept(client: TestClient) -> None:
    answer = post(client, batch_sizes=[64, 1, 64])
    points = answer["points"]
    assert [p["batch_size"] for p in points] == [64, 1, 64]
    assert points[0] == points[2]
    assert points[1]["tpot_ms"] < points[0]["tpot_ms"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"batch_sizes": []}, "batch_sizes"),
        ({"batch_sizes": [0]}, "batch_sizes.0"),
        ({"batch_sizes": [1, 65_537]}, "batch_sizes.1"),
        ({"batch_sizes": list(range(1, 1026))}, "batch_sizes"),
        ({"batch_sizes": "8"}, "batch_sizes"),
        ({"input_tokens": 0}, "input_tokens"),
        ({"output_tokens": 1_048_577}, "output_tokens"),
        ({"mode": "offline"}, "mode"),
        ({"precision": {"kv_cache": "fp6"}}, "precision.kv_cache"),
        ({"precision": {"activations": "int4"}}, "precision.activations"),
        ({"parallelism": {"pp": 0}}, "parallelism.pp"),
        ({"parallelism": {"tp": 2048}}, "parallelism.tp"),
        ({"parallelism": {"tp": 3}}, "parallelism.tp"),
        ({"parallelism": {"pp": 33}}, "parallelism.pp"),
        ({"parallelism": {"ep": 2, "tp": 2}}, "parallelism.ep"),
        ({"precision": {"weights": "int4", "activations": "fp4"}}, "precision"),
        ({"price_usd_per_hour": -1}, "price_usd_per_hour"),
        ({"calibration": ""}, "calibration"),
        ({"batch_size": 8}, "batch_size"),
    ],
)
def test_invalid_requests_name_the_field(
    client: TestClient, overrides: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/estimates", json=body(**overrides))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 422 and problem["title"] and problem["detail"]
    assert field in [error["field"] for error in problem["errors"]]


def test_nan_price_is_rejected(client: TestClient) -> None:
    raw = json.dumps(body()).replace("}", ', "price_usd_per_hour": NaN}')
    response = client.post(
        "/v1/estimates", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert "price_usd_per_hour" in [e["field"] for e in response.json()["errors"]]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"model": "no-such-model"}, "model 'no-such-model'"),
        ({"accelerator": "no-such-gpu"}, "accelerator 'no-such-gpu'"),
        ({"calibration": "profile-123"}, "calibration profile 'profile-123'"),
    ],
)
def test_unknown_ids_are_404(client: TestClient, overrides: dict[str, Any], needle: str) -> None:
    response = client.post("/v1/estimates", json=body(**overrides))
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert needle in response.json()["detail"]


@pytest.mark.parametrize(
    ("overrides", "detail"),
    [
        ({"model": "llama-3.1-70b-instruct"},
         "model 'llama-3.1-70b-instruct' does not exist; closest ids: llama-3.1-70b, "),
        ({"accelerator": "h100"},
         "accelerator 'h100' does not exist; closest ids: h100-sxm, "),
        ({"model": "zzzz"}, "model 'zzzz' does not exist"),
    ],
)  # fmt: skip
def test_a_404_names_the_catalog_ids_that_look_like_the_unknown_one(
    client: TestClient, overrides: dict[str, Any], detail: str
) -> None:
    response = client.post("/v1/estimates", json=body(**overrides))
    assert response.status_code == 404
    assert response.json()["detail"].startswith(detail)
    if "zzzz" in detail:  # nothing alike: no hint
        assert response.json()["detail"] == detail
    read = client.get(f"/v1/models/{overrides.get('model', 'llama-3.1-70b-instruct')}")
    assert read.status_code == 404
    assert ("closest ids" in read.json()["detail"]) == ("zzzz" not in detail)
    part = client.get("/v1/accelerators/h100")
    assert part.status_code == 404
    assert part.json()["detail"].startswith("accelerator 'h100' does not exist; closest ids: ")


def test_native_weights_by_default_and_explicit_dtype_wins(client: TestClient) -> None:
    # No precision.weights: DeepSeek-V3 runs in its fp8 checkpoint format and fits 8 × H200
    # (85.1 GB of weights per GPU < 126.9 GB usable; tests/engine/test_native_weights.py).
    native = post(
        client, model="deepseek-v3", accelerator="h200-sxm", parallelism={"tp": 8},
        batch_sizes=[1],
    )  # fmt: skip
    assert native["precision"]["weights"] == "fp8"
    assert native["precision"]["weights_source"] == "native"
    assert native["points"][0]["memory"]["fits"] is True
    EstimateResponse.model_validate(native)
    asked = post(
        client, model="deepseek-v3", accelerator="h200-sxm", parallelism={"tp": 8},
        batch_sizes=[1], precision={"weights": "bf16"},
    )  # fmt: skip
    assert asked["precision"]["weights"] == "bf16"
    assert asked["precision"]["weights_source"] == "request"
    assert asked["points"][0]["memory"]["fits"] is False
    # gpt-oss-120b ships MXFP4: one H100 holds it.
    oss = post(client, model="gpt-oss-120b", batch_sizes=[1])
    assert oss["precision"]["weights"] == "fp4"
    assert oss["points"][0]["memory"]["fits"] is True


@pytest.mark.parametrize(
    ("model", "input_tokens", "limit"),
    [("llama-3-8b", 16384, 8192), ("llama-3.1-8b", 200_000, 131072), ("gemma-2-9b", 100_000, 8192)],
)
def test_prompt_past_the_context_window_is_a_422_naming_the_limit(
    client: TestClient, model: str, input_tokens: int, limit: int
) -> None:
    response = client.post(
        "/v1/estimates", json=body(model=model, input_tokens=input_tokens, output_tokens=128)
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["field"] == "input_tokens"
    assert f"max_context_tokens={limit}" in problem["errors"][0]["message"]
    assert str(input_tokens + 128) in problem["errors"][0]["message"]
    # Exactly at the window is accepted: limit − 128 prompt tokens + 128 output tokens.
    post(client, model=model, input_tokens=limit - 128, output_tokens=128, batch_sizes=[1])


@pytest.mark.parametrize(
    ("accelerator", "parallelism", "gpus"),
    [
        ("h200-sxm", {"tp": 8}, 8),
        ("h200-sxm", {"attention_dp": 8, "ep": 8}, 8),
        ("gb200", {"attention_dp": 72, "ep": 72}, 72),
    ],
)
def test_deepseek_v3_layouts_are_estimable(
    client: TestClient, accelerator: str, parallelism: dict[str, int], gpus: int
) -> None:
    answer = post(
        client, model="deepseek-v3", accelerator=accelerator, parallelism=parallelism,
        batch_sizes=[1, 64], mode="serving",
    )  # fmt: skip
    assert answer["gpus_per_replica"] == gpus
    assert answer["parallelism"] == {
        "tp": 1,
        "pp": 1,
        "ep": 1,
        "attention_dp": 1,
        "pp_virtual_stages": 1,
        "dp": 1,
        **parallelism,
    }
    assert all(p["memory"]["fits"] for p in answer["points"])
    EstimateResponse.model_validate(answer)


def test_wide_ep_without_attention_dp_is_a_422_naming_ep(client: TestClient) -> None:
    response = client.post(
        "/v1/estimates",
        json=body(model="deepseek-v3", accelerator="h200-sxm", parallelism={"tp": 8, "ep": 16}),
    )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "parallelism.ep"
    assert "tp × attention_dp = 8" in error["message"]


def test_auto_activations_run_fp8_weights_as_engines_do(client: TestClient) -> None:
    """fp8 weights with the default activations and KV cache are W8A8 on an H100 (the answer
    says so, and equals asking for them), with the cache the named engine keeps: fp8 on
    TensorRT-LLM (its checkpoints quantize the cache), bf16 on vLLM or with no engine named.
    They are weight-only with a bf16 cache on an A100, which has no fp8 peak; asking for bf16
    activations keeps weight-only fp8 on the H100, whose prompts then take longer (bf16 GEMMs
    at half the fp8 peak)."""
    ask = {"model": "llama-3.1-70b", "parallelism": {"tp": 4}, "batch_sizes": [1, 64]}
    auto = post(client, **ask, precision={"weights": "fp8"})
    assert (auto["precision"]["activations"], auto["precision"]["kv_cache"]) == ("fp8", "bf16")
    assert auto["compute_dtype"] == "fp8"
    w8a8 = post(
        client, **ask, precision={"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}
    )
    assert auto["points"] == w8a8["points"]
    trt = post(client, **ask, backend="TensorRT-LLM", precision={"weights": "fp8"})
    assert trt["precision"]["kv_cache"] == "fp8"
    trt_named = post(
        client, **ask, backend="trtllm",
        precision={"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"},
    )  # fmt: skip
    assert trt["points"] == trt_named["points"]
    vllm = post(client, **ask, backend="vllm", precision={"weights": "fp8"})
    assert vllm["precision"]["kv_cache"] == "bf16"
    # the fp8 cache holds twice the sequences
    assert trt["max_batch_size"] > 1.9 * vllm["max_batch_size"]
    w8a16 = post(client, **ask, precision={"weights": "fp8", "activations": "bf16"})
    assert (w8a16["precision"]["activations"], w8a16["precision"]["kv_cache"]) == ("bf16", "bf16")
    assert all(
        slow["ttft_ms"] > fast["ttft_ms"]
        for slow, fast in zip(w8a16["points"], auto["points"], strict=True)
    )
    ampere = post(
        client, **ask, accelerator="a100-sxm-80gb", backend="trtllm", precision={"weights": "fp8"}
    )
    assert (ampere["precision"]["activations"], ampere["precision"]["kv_cache"]) == ("bf16", "bf16")
    assert ampere["compute_dtype"] == "bf16"


def test_an_answers_precision_and_layout_can_be_sent_back(client: TestClient) -> None:
    first = post(client, model="deepseek-v3", accelerator="h200-sxm", parallelism={"tp": 8})
    again = post(
        client, model="deepseek-v3", accelerator="h200-sxm", precision=first["precision"],
        parallelism=first["parallelism"],
    )  # fmt: skip
    assert again["precision"]["weights"] == "fp8"
    assert again["precision"]["weights_source"] == "request"  # fp8 was asked for this time
    assert again["points"] == first["points"]


def test_dp_replicas_multiply_rates_gpus_and_price_not_latency(client: TestClient) -> None:
    layout = {"tp": 2}
    one = post(client, parallelism=layout, price_usd_per_hour=2.0)
    four = post(client, parallelism={**layout, "dp": 4}, price_usd_per_hour=2.0)
    EstimateResponse.model_validate(four)
    assert four["parallelism"]["dp"] == 4
    assert (one["gpus"], four["gpus"]) == (2, 8)
    assert four["gpus_per_replica"] == 2
    assert one["usd_per_hour"] == four["usd_per_hour"] == 2 * 2.0  # one replica
    assert four["fleet_usd_per_hour"] == 4 * 2 * 2.0
    for a, b in zip(one["points"], four["points"], strict=True):
        for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s_per_gpu"):
            assert b[name] == a[name], name
        for name in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"):
            assert b[name] == pytest.approx(4 * a[name]), name
        assert b["cost"] == a["cost"]  # dp × the price over dp × the tokens
        assert b["memory"] == a["memory"]


@pytest.mark.parametrize("dp", [0, -1, 1.5, "2", 4097, True])
def test_bad_dp_is_a_422_naming_it(client: TestClient, dp: object) -> None:
    response = client.post("/v1/estimates", json=body(parallelism={"dp": dp}))
    assert response.status_code == 422, response.text
    fields = [e["field"] for e in response.json()["errors"]]
    assert fields == ["parallelism.dp"]


def test_dp_with_traffic_is_a_422(client: TestClient) -> None:
    response = client.post(
        "/v1/estimates",
        json=body(parallelism={"dp": 2}, traffic={"request_rate_per_s": 1.0}),
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "parallelism.dp"


def test_a_named_backend_caps_the_running_requests_at_its_default(client: TestClient) -> None:
    """vLLM runs at most max_num_seqs = 1024 requests on an 80 GB H100 (the KV cache of a small
    model would hold more); naming no backend leaves only the KV-cache limit; plans agree."""
    body = {
        "model": "llama-3.2-1b",
        "accelerator": "h100-sxm",
        "input_tokens": 128,
        "output_tokens": 128,
        "batch_sizes": [4000],
        "mode": "serving",
        "calibration": "none",
    }
    free = client.post("/v1/estimates", json=body).json()
    vllm = client.post("/v1/estimates", json={**body, "backend": "vllm"}).json()
    assert free["max_batch_size"] > 1024
    assert free["points"][0]["running_batch_size"] > 1024
    assert vllm["points"][0]["running_batch_size"] == 1024
    plan = client.post(
        "/v1/plans",
        json={
            "models": ["llama-3.2-1b"],
            "accelerators": ["h100-sxm"],
            "input_tokens": 128,
            "output_tokens": 128,
            "slo": {"ttft_ms_max": 100000, "tpot_ms_max": 1000},
            "requests_per_s": 1,
            "precisions": [{"weights": "bf16"}],
            "max_gpus_per_replica": 1,
            "backend": "vllm",
            "calibration": "none",
        },
    )
    assert plan.status_code == 200, plan.text
    configs = plan.json()["configurations"]
    assert configs and max(c["concurrency"] for c in configs) <= 1024


def test_ssm_state_dtype_sets_the_hybrid_state_and_is_ignored_elsewhere(
    client: TestClient,
) -> None:
    # Nemotron-H-56B at TP8, 64 sequences of 1024 + 128 tokens: KV 5120 B/token (10 attention
    # layers) and per sequence 54 Mamba2 layers × (SSM 32·64·256 + conv 3·2560) elements.
    # bf16 (auto): 54 × (524,288 + 7,680) × 2 = 57,452,544 B; fp32 SSM state:
    # 54 × (524,288 × 4 + 7,680 × 2) = 114,077,952 B (tests/engine/test_hybrid_mamba.py).
    base = {"model": "nemotron-h-56b", "accelerator": "h100-sxm", "batch_sizes": [64],
            "parallelism": {"tp": 8}, "output_tokens": 128}  # fmt: skip
    auto = post(client, **base)
    fp32 = post(client, **base, precision={"ssm_state": "fp32"})
    assert auto["precision"]["ssm_state"] == "bf16"
    assert fp32["precision"]["ssm_state"] == "fp32"
    assert auto["points"][0]["memory"]["kv_cache_gb"] == pytest.approx(
        64 * (5120 * 1152 + 57_452_544) / 1e9, rel=1e-3
    )
    assert fp32["points"][0]["memory"]["kv_cache_gb"] == pytest.approx(
        64 * (5120 * 1152 + 114_077_952) / 1e9, rel=1e-3
    )
    assert fp32["max_batch_size"] < auto["max_batch_size"]
    EstimateResponse.model_validate(fp32)
    # A model without Mamba2 layers ignores it (null in the answer), and the answer's
    # precision can be sent back.
    dense = post(client, precision={"ssm_state": "fp32"})
    plain = post(client)
    assert dense["precision"]["ssm_state"] is None
    assert dense["points"] == plain["points"]
    again = post(client, precision=dense["precision"])
    assert again["points"] == plain["points"]


@pytest.mark.parametrize("dtype", ["fp8", "float32", "int4"])
def test_unknown_ssm_state_dtype_is_a_422_naming_the_field(client: TestClient, dtype: str) -> None:
    response = client.post(
        "/v1/estimates", json=body(model="nemotron-h-56b", precision={"ssm_state": dtype})
    )
    assert response.status_code == 422
    fields = [e["field"] for e in response.json()["errors"]]
    assert "precision.ssm_state" in fields


def test_pp_virtual_stages_is_echoed_and_checked_against_the_layout(
    client: TestClient,
) -> None:
    interleaved = post(client, parallelism={"pp": 2, "pp_virtual_stages": 2}, batch_sizes=[8])
    assert interleaved["parallelism"]["pp_virtual_stages"] == 2
    assert interleaved["gpus_per_replica"] == 2  # virtual stages add no GPUs
    plain = post(client, parallelism={"pp": 2}, batch_sizes=[8])
    # Two more stage sends per step (pp·v − 1 = 3 instead of 1): a little slower.
    assert interleaved["points"][0]["tpot_ms"] > plain["points"][0]["tpot_ms"]
    for layout, message in (
        ({"pp_virtual_stages": 2}, "needs pp > 1"),
        ({"pp": 4, "pp_virtual_stages": 16}, "exceeds num_layers=32"),
    ):
        response = client.post("/v1/estimates", json=body(parallelism=layout))
        assert response.status_code == 422, response.text
        error = response.json()["errors"][0]
        assert error["field"] == "parallelism.pp_virtual_stages"
        assert message in error["message"]
