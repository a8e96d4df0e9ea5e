"""HTTP tests of disaggregated prefill/decode pools in POST /v1/estimates and POST /v1/plans."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.schemas.analysis import EstimateResponse
from service.api.schemas.planning import PlanResponse


def body(**traffic: Any) -> dict[str, Any]:
    return {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "mode": "serving",
        "calibration": "none",
        "traffic": {"request_rate_per_s": 4.0, "num_requests": 200, **traffic},
    }


def post(client: TestClient, request: dict[str, Any]) -> Any:
    return client.post("/v1/estimates", json=request)


def test_disaggregated_estimate_reports_pools_and_transfer(client: TestClient) -> None:
    """1P2D of Llama-3.1-8B bf16 on H100: the group holds 3 GPUs (within the NVLink domain, 450
    GB/s); a 1,024-token prompt's KV is 1,024 · 131,072 B per GPU, sent in
    134,217,728 / (450e9 · 0.85) + 5.8 µs = 0.356696 ms."""
    pools = {"prefill_replicas": 1, "decode_replicas": 2}
    response = post(client, body(disaggregation=pools))
    assert response.status_code == 200, response.text
    answer = response.json()
    EstimateResponse.model_validate(answer)
    traffic = answer["traffic"]
    dis = traffic["disaggregation"]
    assert (dis["prefill_replicas"], dis["decode_replicas"], dis["gpus"]) == (1, 2, 3)
    kv = dis["kv_transfer"]
    assert kv["link"] == "auto" and kv["link_gb_s"] == pytest.approx(450.0)
    assert kv["bytes_per_gpu"] == pytest.approx(1024 * 131_072)
    assert kv["transfer_ms"]["mean"] == pytest.approx(0.356696, abs=1e-6)
    assert kv["transfer_ms"]["p99"] == pytest.approx(0.356696, abs=1e-6)
    for pool in ("prefill", "decode"):
        assert dis[pool]["load_factor"] == pytest.approx(4.0 / dis[pool]["capacity_requests_per_s"])
    bottleneck = dis["bottleneck"]
    capacities = {
        "prefill": dis["prefill"]["capacity_requests_per_s"],
        "decode": dis["decode"]["capacity_requests_per_s"],
        "kv_transfer": kv["capacity_requests_per_s"],
    }
    assert capacities[bottleneck] == min(capacities.values())
    assert traffic["saturation_requests_per_s"] == pytest.approx(min(capacities.values()))
    assert traffic["ttft_ms"]["p50"] > kv["transfer_ms"]["mean"]
    assert traffic["goodput"] is None
    plain = post(client, body()).json()["traffic"]
    assert plain["disaggregation"] is None


def test_network_link_is_slower_than_nvlink(client: TestClient) -> None:
    """scale_out on h100-sxm (the catalog's network per GPU) moves the same bytes more slowly."""
    fast = post(client, body(disaggregation={"prefill_replicas": 1, "decode_replicas": 1}))
    slow = post(
        client,
        body(disaggregation={"prefill_replicas": 1, "decode_replicas": 1, "kv_link": "scale_out"}),
    )
    assert fast.status_code == slow.status_code == 200, slow.text
    f = fast.json()["traffic"]["disaggregation"]["kv_transfer"]
    s = slow.json()["traffic"]["disaggregation"]["kv_transfer"]
    assert s["link_gb_s"] < f["link_gb_s"]
    assert s["transfer_ms"]["mean"] == pytest.approx(
        1024 * 131_072 / (s["link_gb_s"] * 1e9 * 0.85) * 1e3 + 0.0058, rel=1e-9
    )


def test_an_overloaded_group_says_which_pool_saturates(client: TestClient) -> None:
    """150 requests/s of 1,024/128 on 1P1D: the answer's own capacities put the prefill pool
    (about 53 prompts/s on one H100) below the rate, so the group is saturated by a factor
    150 ÷ its least capacity, and the message names the pool."""
    response = post(
        client,
        body(
            request_rate_per_s=150.0, disaggregation={"prefill_replicas": 1, "decode_replicas": 1}
        ),
    )
    assert response.status_code == 200, response.text
    traffic = response.json()["traffic"]
    dis = traffic["disaggregation"]
    assert dis["bottleneck"] == "prefill"
    assert traffic["saturated"] is True
    least = dis["prefill"]["capacity_requests_per_s"]
    assert traffic["overload_factor"] == pytest.approx(150.0 / least)
    assert "1P1D" in traffic["message"] and "prefill saturates first" in traffic["message"]


@pytest.mark.parametrize(
    ("pools", "field"),
    [
        ({"prefill_replicas": 0, "decode_replicas": 1}, "traffic.disaggregation.prefill_replicas"),
        ({"prefill_replicas": 1, "decode_replicas": 17}, "traffic.disaggregation.decode_replicas"),
        (
            {"prefill_replicas": 1.5, "decode_replicas": 1},
            "traffic.disaggregation.prefill_replicas",
        ),
        (
            {"prefill_replicas": True, "decode_replicas": 1},
            "traffic.disaggregation.prefill_replicas",
        ),
        ({"prefill_replicas": 1}, "traffic.disaggregation.decode_replicas"),
        (
            {"prefill_replicas": 1, "decode_replicas": 1, "kv_link": "pcie"},
            "traffic.disaggregation.kv_link",
        ),
    ],
)
def test_bad_pools_are_422s_naming_the_field(
    client: TestClient, pools: dict[str, Any], field: str
) -> None:
    response = post(client, body(disaggregation=pools))
    assert response.status_code == 422
    assert field in [e["field"] for e in response.json()["errors"]]


def test_disaggregated_estimate_with_targets_reports_the_groups_goodput(
    client: TestClient,
) -> None:
    """With traffic.slo the answer's goodput is per group: the largest rate at which the 1P1D
    group meets p90 TTFT ≤ 60 ms, below the group's capacity (the least of its pools'), and
    the same stream through the group at that rate meets the target while the colocated
    replica's goodput is another figure."""
    pools = {"prefill_replicas": 1, "decode_replicas": 1}
    slo = {"ttft_ms_p90_max": 60.0}
    response = post(client, body(disaggregation=pools, slo=slo))
    assert response.status_code == 200, response.text
    answer = response.json()
    EstimateResponse.model_validate(answer)
    traffic = answer["traffic"]
    goodput = traffic["goodput"]
    assert goodput["limited_by"] == "slo"
    assert 0.0 < goodput["requests_per_s"] < traffic["saturation_requests_per_s"]
    assert goodput["ttft_ms"]["p90"] <= 60.0
    at = post(client, body(request_rate_per_s=goodput["requests_per_s"], disaggregation=pools))
    assert at.json()["traffic"]["ttft_ms"]["p90"] == pytest.approx(goodput["ttft_ms"]["p90"])
    colocated = post(client, body(slo=slo)).json()["traffic"]["goodput"]
    assert colocated["requests_per_s"] != pytest.approx(goodput["requests_per_s"], rel=0.01)


def plan(
    client: TestClient,
    lengths: tuple[int, int] = (1024, 128),
    *,
    rate: float = 40.0,
    slo: dict[str, float] | None = None,
    **traffic: Any,
) -> Any:
    return client.post(
        "/v1/plans",
        json={
            "models": ["llama-3.1-8b"],
            "accelerators": ["h100-sxm"],
            "input_tokens": lengths[0],
            "output_tokens": lengths[1],
            "objective": "min_cost_per_million_tokens",
            "requests_per_s": rate,
            "calibration": "none",
            "slo": slo or {"ttft_ms_p90_max": 2000.0, "tpot_ms_p99_max": 100.0},
            "precisions": [{"weights": "bf16"}],
            "max_gpus_per_replica": 1,
            "traffic": {"num_requests": 200, **traffic},
        },
    )


@pytest.mark.parametrize(
    ("lengths", "heavier"), [((4096, 16), "prefill_replicas"), ((128, 1024), "decode_replicas")]
)
def test_plan_picks_the_cheapest_pool_ratio(
    client: TestClient, lengths: tuple[int, int], heavier: str
) -> None:
    """40 requests/s of 4,096-token prompts and 16-token answers: a prefill replica completes
    far fewer of them per second than a decode replica (the estimate's pool capacities), so
    the cheapest ratio has more prefill than decode replicas; 128/1,024 the other way round.
    The winner is the tried ratio with the lowest fleet price, and the fleet is its groups ×
    (prefill + decode) replicas."""
    response = plan(client, lengths, disaggregation="search")
    assert response.status_code == 200, response.text
    answer = response.json()
    PlanResponse.model_validate(answer)
    row = answer["configurations"][0]
    chosen = row["traffic"]["disaggregation"]
    tried = chosen["tried"]
    names = [t["ratio"] for t in tried]
    ratios = ["1P1D", "1P2D", "2P1D", "1P3D", "3P1D", "2P3D", "3P2D", "1P4D", "4P1D"]
    assert names == [*ratios, "colocated"]  # the colocated fleet is compared, never chosen
    sized = [t for t in tried if t["gpus"] is not None and t["ratio"] != "colocated"]
    cheapest = min(sized, key=lambda t: (t["usd_per_hour"], t["gpus"]))
    winner = f"{chosen['prefill_replicas']}P{chosen['decode_replicas']}D"
    assert winner == cheapest["ratio"]
    lighter = "decode_replicas" if heavier == "prefill_replicas" else "prefill_replicas"
    assert chosen[heavier] > chosen[lighter]
    per_group = chosen["prefill_replicas"] + chosen["decode_replicas"]
    assert row["replicas"] == chosen["groups"] * per_group
    assert row["gpus"] == row["replicas"] * row["gpus_per_replica"]
    assert row["usd_per_hour"] == pytest.approx(cheapest["usd_per_hour"])
    assert row["usd_per_hour"] == pytest.approx(row["gpus"] * 2.99)  # the catalog's H100 price
    # Each group takes its share with headroom; the groups cover the rate.
    assert chosen["groups"] * row["traffic"]["requests_per_s_per_replica"] >= 40.0 * 1.2 - 1e-9
    assert row["traffic"]["ttft_ms"]["p90"] <= 2000.0
    assert row["traffic"]["tpot_ms"]["p99"] <= 100.0
    assert any("disaggregated pools" in note for note in answer["notes"])


def test_plan_tries_the_ratios_given(client: TestClient) -> None:
    ratios = [{"prefill_replicas": 1, "decode_replicas": 1}]
    answer = plan(client, disaggregation=ratios).json()
    chosen = answer["configurations"][0]["traffic"]["disaggregation"]
    assert [t["ratio"] for t in chosen["tried"]] == ["1P1D", "colocated"]
    assert (chosen["prefill_replicas"], chosen["decode_replicas"]) == (1, 1)


def test_plan_sizes_the_colocated_fleet_beside_the_pools(client: TestClient) -> None:
    """40 requests/s of 1,024/256 with p99 TPOT ≤ 10 ms: decode-only steps keep the pools'
    TPOT low, so groups of pools need fewer GPUs than colocated replicas, whose decode steps
    carry prompt chunks. The colocated entry is what the same plan without
    traffic.disaggregation sizes, and it is not cheaper: no note says so."""
    slo = {"ttft_ms_p90_max": 200.0, "tpot_ms_p99_max": 10.0}
    response = plan(client, (1024, 256), slo=slo, disaggregation="search")
    assert response.status_code == 200, response.text
    answer = response.json()
    PlanResponse.model_validate(answer)
    row = answer["configurations"][0]
    chosen = row["traffic"]["disaggregation"]
    colocated = chosen["colocated"]
    alone = plan(client, (1024, 256), slo=slo).json()["configurations"][0]
    assert alone["traffic"]["disaggregation"] is None
    assert colocated["replicas"] == alone["replicas"]
    assert colocated["gpus"] == alone["gpus"]
    assert colocated["usd_per_hour"] == pytest.approx(alone["usd_per_hour"])
    assert chosen["tried"][-1] == {
        "ratio": "colocated",
        "groups": colocated["replicas"],
        "gpus": colocated["gpus"],
        "usd_per_hour": pytest.approx(colocated["usd_per_hour"]),
    }
    assert colocated["gpus"] > row["gpus"] and colocated["cheaper"] is False
    assert colocated["saving_gpus"] == row["gpus"] - colocated["gpus"]
    assert colocated["saving_usd_per_hour"] == pytest.approx(
        row["usd_per_hour"] - colocated["usd_per_hour"]
    )
    assert not any("less colocated" in note for note in answer["notes"])


def test_plan_notes_when_colocated_is_cheaper_and_keeps_the_pools(client: TestClient) -> None:
    """5 requests/s with loose targets: one colocated H100 (2.99 $/h) serves them, while the
    smallest group, 1P1D, holds two. The pools stay the answer (the plan asked for pools); the
    row says colocated is cheaper by one GPU's price and the notes say so."""
    response = plan(client, (1024, 256), rate=5.0, disaggregation="search")
    assert response.status_code == 200, response.text
    answer = response.json()
    row = answer["configurations"][0]
    chosen = row["traffic"]["disaggregation"]
    assert (chosen["prefill_replicas"], chosen["decode_replicas"], chosen["groups"]) == (1, 1, 1)
    assert row["replicas"] == 2
    colocated = chosen["colocated"]
    assert colocated["cheaper"] is True
    assert (colocated["replicas"], colocated["gpus"], colocated["saving_gpus"]) == (1, 1, 1)
    assert colocated["saving_usd_per_hour"] == pytest.approx(2.99)
    assert any("2.99 $/h (50%) less colocated" in note for note in answer["notes"])


def test_pools_that_miss_the_targets_are_rejected_saying_colocated_meets_them(
    client: TestClient,
) -> None:
    """8,192-token prompts, 1P1D over the network (the catalog's 50 GB/s per GPU): every TTFT
    carries a 1,073,741,824-byte transfer, 1,073,741,824 / (50e9 · 0.85) + 5.8 µs = 25.3 ms, on
    top of the prefill step (about 188 ms), so the pools' p50 TTFT cannot reach 200 ms whatever
    their load, while a colocated replica's (the prefill step alone) does."""
    ratios = [{"prefill_replicas": 1, "decode_replicas": 1, "kv_link": "scale_out"}]
    response = plan(
        client, (8192, 64), rate=1.0, slo={"ttft_ms_p50_max": 200.0}, disaggregation=ratios
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["configurations"] == []
    (rejection,) = answer["rejected"]
    assert rejection["code"] == "misses_slo"
    assert "colocated replicas meet them" in rejection["reason"]


@pytest.mark.parametrize("bad", ["all", [], [{"prefill_replicas": 0, "decode_replicas": 1}]])
def test_plan_bad_ratios_are_422s(client: TestClient, bad: Any) -> None:
    response = plan(client, disaggregation=bad)
    assert response.status_code == 422
    assert any(e["field"].startswith("traffic.disaggregation") for e in response.json()["errors"])


def test_plan_without_percentile_targets_notes_the_unused_pools(client: TestClient) -> None:
    response = client.post(
        "/v1/plans",
        json={
            "models": ["llama-3.1-8b"],
            "accelerators": ["h100-sxm"],
            "input_tokens": 1024,
            "output_tokens": 128,
            "calibration": "none",
            "slo": {"ttft_ms_max": 1000.0},
            "precisions": [{"weights": "bf16"}],
            "max_gpus_per_replica": 1,
            "traffic": {"disaggregation": "search"},
        },
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert all(row["traffic"] is None for row in answer["configurations"])
    assert any("traffic.disaggregation sizes fleets" in note for note in answer["notes"])


def test_the_schema_lets_pools_take_targets(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["TrafficIn"]
    assert "if" not in schema and "then" not in schema
    assert "per group" in schema["properties"]["disaggregation"]["description"]
