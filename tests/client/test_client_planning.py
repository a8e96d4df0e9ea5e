"""The client's planning and chart methods against the ASGI app."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.client import InvalidRequestError, PlanRequest, Ridgeline

PLAN: dict[str, Any] = {
    "models": ["llama-3.1-8b"],
    "accelerators": ["h100-sxm", "a100-sxm-80gb"],
    "workload": "chat",
    "requests_per_s": 5,
}


def test_workloads_match_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    presets = ridgeline.workloads()
    assert [w.model_dump(mode="json") for w in presets] == client.get("/v1/workloads").json()[
        "items"
    ]
    assert {"chat", "code-completion", "offline-batch"} <= {w.id for w in presets}


def test_plan_equals_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    raw = client.post("/v1/plans", json=PLAN)
    assert raw.status_code == 200, raw.text
    answer = ridgeline.plan(PlanRequest.model_validate(PLAN))
    assert answer.model_dump(mode="json") == raw.json()
    assert {c.accelerator for c in answer.configurations} <= {"h100-sxm", "a100-sxm-80gb"}


def test_plan_validation_error(ridgeline: Ridgeline) -> None:
    with pytest.raises(InvalidRequestError) as info:
        ridgeline.plan(PLAN, objective="fastest")
    assert "objective" in info.value.fields


def test_chart_bytes_equal_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    params = {"accelerator": "h100-sxm", "model": "llama-3.1-70b", "batch_sizes": [1, 64, 512]}
    query = {**params, "batch_sizes": "1,64,512", "format": "vega"}
    raw = client.get("/v1/charts/roofline", params=query)
    assert raw.status_code == 200, raw.text
    spec = ridgeline.chart("roofline", "vega", **params)
    assert spec == raw.content
    svg = ridgeline.chart("roofline", "svg", **params)
    assert svg.lstrip().startswith(b"<svg") or b"<svg" in svg[:500]


def test_answer_models_can_be_sent_back(ridgeline: Ridgeline) -> None:
    best = ridgeline.plan(PLAN).configurations[0]
    common = {
        "model": best.model,
        "accelerator": best.accelerator,
        "mode": "serving",
        "input_tokens": 1000,
        "output_tokens": 200,
        "batch_sizes": [best.concurrency],
    }
    from_models = ridgeline.estimate(common, parallelism=best.parallelism, precision=best.precision)
    from_dicts = ridgeline.estimate(
        common,
        parallelism=best.parallelism.model_dump(),
        precision=best.precision.model_dump(),
    )
    assert from_models == from_dicts
    # A plan row's layout is one replica's; the estimate echoes it with dp = 1 replica.
    assert from_models.parallelism.model_dump() == {**best.parallelism.model_dump(), "dp": 1}
