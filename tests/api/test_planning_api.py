"""HTTP tests of GET /v1/workloads and POST /v1/plans against the seeded catalog."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

PRESETS = {"chat", "code-completion", "offline-batch", "evaluation", "test-time-compute"}
CONFIG_FIELDS = {
    "model",
    "accelerator",
    "parallelism",
    "precision",
    "concurrency",
    "ttft_ms",
    "tpot_ms",
    "output_tokens_per_s_per_gpu",
    "replicas",
    "gpus",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "calibration",
}


def plan_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "models": ["llama-3.1-70b"],
        "accelerators": ["h100-sxm", "h200-sxm", "mi300x"],
        "workload": "chat",
        "slo": {"ttft_ms_max": 1000, "tpot_ms_max": 50},
        "objective": "min_cost_per_million_tokens",
        "requests_per_s": 40,
        "precisions": [{"weights": "bf16"}, {"weights": "fp8", "activations": "fp8"}],
        "max_gpus_per_replica": 8,
        "price_usd_per_hour": {"h100-sxm": 2.5},
        "concurrency_levels": 16,
    }
    body.update(overrides)
    return body


def test_workloads_lists_the_presets(client: TestClient) -> None:
    response = client.get("/v1/workloads")
    assert response.status_code == 200
    items = {w["id"]: w for w in response.json()["items"]}
    assert PRESETS | {"rl-rollout"} <= set(items)
    chat = items["chat"]
    assert chat["ttft_ms_max"] > 0 and chat["tpot_ms_max"] > 0
    assert chat["input_tokens"] > chat["output_tokens"] > 0
    assert items["offline-batch"]["tpot_ms_max"] is None
    assert all(w["description"] and w["rationale"] for w in items.values())


def test_plan_configurations_reproduce_with_estimates(client: TestClient) -> None:
    response = client.post("/v1/plans", json=plan_body())
    assert response.status_code == 200, response.text
    answer = response.json()
    configs = answer["configurations"]
    assert configs and {"frontier", "rejected"} <= set(answer)
    assert answer["workload"]["input_tokens"] == 2048 and answer["workload"]["mode"] == "serving"
    assert answer["workload"]["load_pattern"] == "open_loop"  # a deployment's users
    costs = [c["usd_per_million_tokens"] for c in configs]
    assert costs == sorted(costs)
    for cfg in configs:
        assert set(cfg) >= CONFIG_FIELDS
        assert cfg["ttft_ms"] <= 1000 and cfg["tpot_ms"] <= 50
        assert cfg["replicas"] == math.ceil(40 / cfg["requests_per_s_per_replica"])
        assert cfg["gpus"] == cfg["replicas"] * cfg["parallelism"]["tp"]
        estimate = client.post(
            "/v1/estimates",
            json={
                "model": cfg["model"],
                "accelerator": cfg["accelerator"],
                "parallelism": cfg["parallelism"],
                "precision": cfg["precision"],
                "input_tokens": 2048,
                "output_tokens": 256,
                "batch_sizes": [cfg["concurrency"]],
                "mode": "serving",
                "load_pattern": "open_loop",
                "price_usd_per_hour": cfg["usd_per_gpu_hour"],
            },
        )
        assert estimate.status_code == 200, estimate.text
        (p,) = estimate.json()["points"]
        assert p["ttft_ms"] == pytest.approx(cfg["ttft_ms"], rel=1e-9)
        assert p["tpot_ms"] == pytest.approx(cfg["tpot_ms"], rel=1e-9)
        assert p["memory"]["fits"]
        assert p["cost"]["usd_per_million_output_tokens"] == pytest.approx(
            cfg["usd_per_million_output_tokens"], rel=1e-9
        )
        assert p["output_tokens_per_s"] / cfg["gpus_per_replica"] == pytest.approx(
            cfg["output_tokens_per_s_per_gpu"], rel=1e-9
        )
    h100 = [c for c in configs if c["accelerator"] == "h100-sxm"]
    assert h100 and all(c["usd_per_gpu_hour"] == 2.5 for c in h100)
    for points in answer["frontier"].values():
        xs = [p["tokens_per_s_per_user"] for p in points]
        ys = [p["output_tokens_per_s_per_gpu"] for p in points]
        assert xs == sorted(xs) and ys == sorted(ys, reverse=True)


def test_plan_reports_rejections(client: TestClient) -> None:
    answer = client.post("/v1/plans", json=plan_body(tp=[1, 3])).json()
    reasons = {
        (r["accelerator"], r["parallelism"]["tp"], r["precision"]["weights"]): r
        for r in answer["rejected"]
    }
    assert reasons[("h100-sxm", 1, "bf16")]["code"] == "does_not_fit"
    assert reasons[("h100-sxm", 3, "bf16")]["reason"].startswith("layout does not divide the model")


def test_infeasible_plan_is_an_answer(client: TestClient) -> None:
    body = plan_body(slo={"tpot_ms_max": 0.5}, accelerators=["h100-sxm"], tp=[4, 8])
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200
    answer = response.json()
    assert answer["configurations"] == []
    assert {r["code"] for r in answer["rejected"]} == {"misses_tpot"}
    assert all("misses TPOT" in r["reason"] for r in answer["rejected"])


def test_unpriced_accelerators_are_rejected_for_cost(client: TestClient) -> None:
    bf16 = [{"weights": "bf16"}]
    body = plan_body(accelerators=["a100-sxm-80gb"], tp=[4], precisions=bf16)
    answer = client.post("/v1/plans", json=body).json()
    assert answer["configurations"] == []
    assert {r["code"] for r in answer["rejected"]} == {"no_price"}
    priced = dict(body, price_usd_per_hour={"a100-sxm-80gb": 1.8})
    assert client.post("/v1/plans", json=priced).json()["configurations"]


def test_workload_fills_what_the_request_leaves_out(client: TestClient) -> None:
    body = {
        "models": ["llama-3.1-8b"],
        "accelerators": ["h100-sxm"],
        "workload": "code-completion",
        "slo": {"tpot_ms_max": None},
        "concurrency_levels": 8,
        "tp": [1],
    }
    answer = client.post("/v1/plans", json=body).json()
    workload = answer["workload"]
    assert workload["ttft_ms_max"] == 200 and workload["tpot_ms_max"] is None
    assert (workload["input_tokens"], workload["output_tokens"]) == (1536, 64)
    assert answer["objective"] == "min_cost_per_million_tokens"


def test_min_gpus_for_rate_and_default_catalog(client: TestClient) -> None:
    body = {
        "models": ["llama-3.1-8b"],
        "workload": "chat",
        "objective": "min_gpus_for_rate",
        "requests_per_s": 25,
        "tp": [1, 2],
        "concurrency_levels": 8,
    }
    answer = client.post("/v1/plans", json=body).json()
    configs = answer["configurations"]
    accelerators = client.get("/v1/accelerators", params={"limit": 200}).json()["items"]
    seen = {c["accelerator"] for c in configs} | {r["accelerator"] for r in answer["rejected"]}
    assert seen == {a["id"] for a in accelerators}
    gpus = [c["gpus"] for c in configs]
    assert gpus == sorted(gpus)
    for cfg in configs:
        assert cfg["replicas"] == math.ceil(25 / cfg["requests_per_s_per_replica"])


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"objective": "fastest"}, "objective"),
        ({"slo": {"tpot_ms_max": -1}}, "slo.tpot_ms_max"),
        ({"models": []}, "models"),
        ({"workload": "karaoke"}, "workload"),
        ({"workload": None, "input_tokens": None}, "input_tokens"),
        ({"objective": "min_gpus_for_rate", "requests_per_s": None}, "requests_per_s"),
        # Above MAX_REQUEST_RATE_PER_S = 1e6 (the largest double was a 500: replicas past 2^64).
        ({"requests_per_s": 1.7976931348623157e308}, "requests_per_s"),
        ({"requests_per_s": 1_000_001.0}, "requests_per_s"),
        ({"precisions": [{"weights": "fp7"}]}, "precisions.0.weights"),
        ({"load_pattern": "waves"}, "load_pattern"),
    ],
)
def test_invalid_plans_name_the_field(
    client: TestClient, override: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/plans", json=plan_body(**override))
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    assert field in [e["field"] for e in response.json()["errors"]]


@pytest.mark.parametrize(
    "override",
    [
        {"models": ["no-such-model"]},
        {"accelerators": ["no-such-gpu"]},
        {"price_usd_per_hour": {"no-such-gpu": 1.0}},
        {"calibration": "no-such-profile"},
    ],
)
def test_unknown_ids_are_404(client: TestClient, override: dict[str, Any]) -> None:
    response = client.post("/v1/plans", json=plan_body(**override))
    assert response.status_code == 404
    assert response.json()["status"] == 404


def _deepseek_plan(client: TestClient, **overrides: Any) -> dict[str, Any]:
    """A throughput plan of DeepSeek-V3 at its native fp8 with loose targets."""
    body = plan_body(
        models=["deepseek-v3"],
        precisions=[{}],  # native: the fp8 checkpoint
        slo={"ttft_ms_max": 10_000, "tpot_ms_max": 200},
        objective="max_throughput_per_gpu",
        requests_per_s=None,
        price_usd_per_hour={},
    )
    body.update(overrides)
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.parametrize(("accelerator", "gpus"), [("h200-sxm", 8), ("gb200", 72)])
def test_deepseek_v3_plan_searches_attention_dp_and_wide_ep(
    client: TestClient, accelerator: str, gpus: int
) -> None:
    answer = _deepseek_plan(client, accelerators=[accelerator], max_gpus_per_replica=gpus)
    found = {
        (c["parallelism"]["tp"], c["parallelism"]["attention_dp"], c["parallelism"]["ep"])
        for c in answer["configurations"]
    }
    assert all(c["precision"]["weights"] == "fp8" for c in answer["configurations"])
    # Attention DP over the whole replica with wide EP (ep > tp) is among the answers.
    assert (1, gpus, gpus) in found
    # The layouts that cannot run are listed with the reason.
    skipped = [r for r in answer["rejected"] if r["code"] == "invalid_layout"]
    assert all("layout does not divide the model" in r["reason"] for r in skipped)


def test_native_fp8_weights_with_auto_activations_are_one_w8a8_candidate(
    client: TestClient,
) -> None:
    """DeepSeek-V3's shipped fp8 weights with the default (auto) activations run as W8A8 on an
    H200, the same deployment as an explicit fp8/fp8 item: one candidate per layout, not two.
    On an A100 (no fp8 peak) the native item is weight-only, bf16 GEMMs."""
    answer = _deepseek_plan(
        client,
        accelerators=["h200-sxm", "a100-sxm-80gb"],
        precisions=[{}, {"weights": "fp8", "activations": "fp8"}],
        max_gpus_per_replica=8,
        tp=[8],
    )
    outcomes = [
        (o["accelerator"], o["parallelism"]["attention_dp"], o["parallelism"]["ep"],
         o["precision"]["activations"])
        for o in (*answer["configurations"], *answer["rejected"])
    ]  # fmt: skip
    h200 = [o for o in outcomes if o[0] == "h200-sxm"]
    assert h200 and all(o[3] == "fp8" for o in h200)
    assert len(h200) == len(set(h200))
    a100 = {o[3] for o in outcomes if o[0] == "a100-sxm-80gb"}
    assert a100 == {"bf16", "fp8"}


def test_plan_dp_is_a_floor_on_replicas(client: TestClient) -> None:
    # Without a rate a plan deploys dp replicas; with one, max(dp, what the rate needs).
    body = plan_body(requests_per_s=None, dp=3, objective="max_throughput_per_gpu")
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    configurations = response.json()["configurations"]
    assert configurations
    for cfg in configurations:
        assert cfg["replicas"] == 3
        assert cfg["gpus"] == 3 * cfg["gpus_per_replica"]
        if cfg["usd_per_hour"] is not None:
            assert cfg["usd_per_hour"] == pytest.approx(
                3 * cfg["gpus_per_replica"] * cfg["usd_per_gpu_hour"]
            )
    response = client.post("/v1/plans", json=plan_body(dp=2))
    assert response.status_code == 200, response.text
    for cfg in response.json()["configurations"]:
        assert cfg["replicas"] == max(2, math.ceil(40 / cfg["requests_per_s_per_replica"]))


@pytest.mark.parametrize("dp", [0, 4097, 1.5])
def test_plan_bad_dp_is_a_422(client: TestClient, dp: object) -> None:
    response = client.post("/v1/plans", json=plan_body(dp=dp))
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == ["dp"]


def test_plan_a_hybrid_mamba_model(client: TestClient) -> None:
    # Nemotron-H-56B (54 Mamba2 + 10 attention layers): 112.6 GB of bf16 weights need at
    # least two H100s (fp8's 56.3 GB fit on one).
    response = client.post(
        "/v1/plans", json=plan_body(models=["nemotron-h-56b"], accelerators=["h100-sxm"])
    )
    assert response.status_code == 200, response.text
    configs = response.json()["configurations"]
    bf16 = [c for c in configs if c["precision"]["weights"] == "bf16"]
    assert configs and bf16
    assert all(c["parallelism"]["tp"] >= 2 for c in bf16)


def test_a_static_plan_has_no_load_pattern(client: TestClient) -> None:
    """A static batch has no arrivals: a static plan ignores load_pattern and echoes null."""
    plain = client.post("/v1/plans", json=plan_body(mode="static"))
    asked = client.post("/v1/plans", json=plan_body(mode="static", load_pattern="offline"))
    assert plain.status_code == asked.status_code == 200, asked.text
    assert asked.json()["workload"]["load_pattern"] is None
    assert asked.json()["configurations"] == plain.json()["configurations"]
