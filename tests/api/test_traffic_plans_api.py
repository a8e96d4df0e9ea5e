"""POST /v1/plans with percentile targets: fleets sized by simulated traffic, ranked by cost."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from service.api.schemas.planning import PlanResponse


def plan(client: TestClient, **fields: Any) -> Any:
    body: dict[str, Any] = {
        "models": ["llama-3.1-8b"],
        "accelerators": ["h100-sxm", "a100-sxm-80gb"],
        "input_tokens": 1024,
        "output_tokens": 128,
        "objective": "min_cost_per_million_tokens",
        "requests_per_s": 20.0,
        "calibration": "none",
        "slo": {"ttft_ms_p90_max": 300.0, "tpot_ms_p99_max": 40.0},
        "precisions": [{"weights": "bf16"}],
        "max_gpus_per_replica": 2,
    }
    body.update(fields)
    return client.post("/v1/plans", json=body)


def test_fleets_are_sized_from_the_percentile_targets(client: TestClient) -> None:
    response = plan(client)
    assert response.status_code == 200, response.text
    answer = response.json()
    PlanResponse.model_validate(answer)
    rows = answer["configurations"]
    assert rows
    costs = [row["usd_per_hour"] for row in rows]
    assert costs == sorted(costs)
    for row in rows:
        traffic = row["traffic"]
        assert traffic["ttft_ms"]["p90"] <= 300.0 and traffic["tpot_ms"]["p99"] <= 40.0
        # The planned share with headroom times the replicas covers the rate and its headroom.
        assert row["replicas"] * traffic["requests_per_s_per_replica"] >= 20.0 * 1.2 - 1e-9
        assert row["gpus"] == row["replicas"] * row["gpus_per_replica"]
    assert any("percentile targets" in note for note in answer["notes"])


def test_more_traffic_needs_more_replicas(client: TestClient) -> None:
    low = plan(client, requests_per_s=5.0).json()["configurations"][0]
    high = plan(client, requests_per_s=80.0).json()["configurations"][0]
    assert high["replicas"] > low["replicas"]


def test_percentile_targets_need_a_rate(client: TestClient) -> None:
    response = plan(client, requests_per_s=None)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "requests_per_s"


def test_plans_without_percentile_targets_are_unchanged(client: TestClient) -> None:
    answer = plan(client, slo={"ttft_ms_max": 1000.0}).json()
    assert all(row.get("traffic") is None for row in answer["configurations"])


def test_impossible_percentile_targets_reject_with_a_reason(client: TestClient) -> None:
    answer = plan(client, slo={"tpot_ms_p99_max": 0.5}).json()
    assert answer["configurations"] == []
    assert {r["code"] for r in answer["rejected"]} >= {"misses_slo"}


def test_plan_traffic_numbers_are_strict(client: TestClient) -> None:
    for bad in (False, "0.2"):
        response = plan(client, traffic={"headroom": bad})
        assert response.status_code == 422, bad
        assert [e["field"] for e in response.json()["errors"]] == ["traffic.headroom"]


def test_a_plan_streams_a_workload_presets_lengths(client: TestClient) -> None:
    """traffic.input_tokens/output_tokens naming azure-code-2023 give the plan's simulated
    stream that preset's distributions: prompts with a long tail (p90 5,188, p95 7,303 tokens)
    instead of fixed 1,024-token ones, so TTFT p90 <= 300 ms holds only at a lower rate per
    replica (the sizing's per-replica share drops), though the short outputs (mean 29 tokens)
    raise the closed-loop capacity."""
    preset = {"workload": "azure-code-2023"}
    fixed = plan(client, accelerators=["h100-sxm"], traffic={"num_requests": 200})
    sampled = plan(
        client,
        accelerators=["h100-sxm"],
        traffic={"num_requests": 200, "input_tokens": preset, "output_tokens": preset},
    )
    assert fixed.status_code == 200 and sampled.status_code == 200, sampled.text
    assert sampled.json()["configurations"], sampled.json()["rejected"]
    first = fixed.json()["configurations"][0]["traffic"]
    second = sampled.json()["configurations"][0]["traffic"]
    assert second["requests_per_s_per_replica"] < first["requests_per_s_per_replica"]
    unknown = plan(client, traffic={"input_tokens": {"workload": "chat"}})
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["field"].startswith("traffic.input_tokens")
