"""POST /v1/plans with ``slo.use_interval_upper_bound``: a calibrated candidate is judged at the
p90 that POST /v1/estimates answers for the same configuration (the profile's held-out band,
widened for what lies outside its domain), and reports it as ``ttft_ms_upper`` /
``tpot_ms_upper``; without a profile the plan says targets were judged on point predictions."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from support import upload_serving_runs

FP8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}


def _plan(client: TestClient, calibration: str, slo: dict[str, Any]) -> dict[str, Any]:
    body = {
        "models": ["llama-3.1-8b"], "accelerators": ["h100-sxm"], "tp": [1],
        "input_tokens": 1024, "output_tokens": 256, "precisions": [FP8], "backend": "trtllm",
        "calibration": calibration, "objective": "max_throughput_per_gpu", "slo": slo,
        "concurrency_levels": 6, "max_gpus_per_replica": 1,
    }  # fmt: skip
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_a_plan_judges_targets_at_the_estimates_p90(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    profile = upload_serving_runs(client, auth_headers)
    answer = _plan(client, profile, {"tpot_ms_max": 1000, "use_interval_upper_bound": True})
    (best, *_) = answer["configurations"]
    estimate = client.post(
        "/v1/estimates",
        json={
            "model": "llama-3.1-8b",
            "accelerator": "h100-sxm",
            "parallelism": best["parallelism"],
            "precision": FP8,
            "input_tokens": 1024,
            "output_tokens": 256,
            "batch_sizes": [best["concurrency"]],
            "mode": "serving",
            "load_pattern": "open_loop",  # the plan's default: a deployment's users
            "backend": "trtllm",
            "calibration": profile,
        },
    )
    assert estimate.status_code == 200, estimate.text
    (point,) = estimate.json()["points"]
    # Llama-3.1-8B is a model the profile (Qwen3-32B) never saw: the p90 is widened for it
    assert point["tpot_ms"] == pytest.approx(best["tpot_ms"], rel=1e-9)
    assert best["tpot_ms_upper"] == pytest.approx(point["tpot_ms_p90"], rel=1e-9)
    assert best["ttft_ms_upper"] == pytest.approx(point["ttft_ms_p90"], rel=1e-9)
    assert best["tpot_ms_upper"] > best["tpot_ms"]
    # a target between the point and its p90: met on the point, missed at the p90
    target = (best["tpot_ms"] + best["tpot_ms_upper"]) / 2.0
    at_points = _plan(client, profile, {"tpot_ms_max": target})
    at_p90 = _plan(client, profile, {"tpot_ms_max": target, "use_interval_upper_bound": True})
    level = best["concurrency"]
    assert any(c["concurrency"] >= level for c in at_points["configurations"])
    assert all(c["concurrency"] < level for c in at_p90["configurations"])


def test_an_uncalibrated_plan_says_its_targets_were_judged_on_points(client: TestClient) -> None:
    answer = _plan(client, "none", {"tpot_ms_max": 1000, "use_interval_upper_bound": True})
    assert answer["configurations"][0]["tpot_ms_upper"] is None
    assert any("judged on point predictions" in n for n in answer["notes"])
