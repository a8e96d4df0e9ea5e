"""The charts take the estimates' newer precision and layout fields as query parameters.

``ssm_state`` (precision.ssm_state), ``attention_dp`` and ``pp_virtual_stages`` (parallelism)
reach the same services as POST /v1/estimates and /v1/intensity, and their 422s name the
query parameter.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

SWEEP = "/v1/charts/sweep"
ROOFLINE = "/v1/charts/roofline"
BATCHES = [1, 64]


def chart_tpot_ms(client: TestClient, params: dict[str, Any]) -> dict[int, float]:
    """Return the sweep chart's TPOT per batch size (its Vega-Lite data rows)."""
    query = {**params, "batch_sizes": ",".join(map(str, BATCHES)), "mode": "static"}
    response = client.get(SWEEP, params={**query, "format": "vega"})
    assert response.status_code == 200, response.text
    rows = [row for values in response.json()["datasets"].values() for row in values]
    return {r["batch_size"]: r["value"] for r in rows if r.get("metric") == "TPOT (ms)"}


def estimate_tpot_ms(
    client: TestClient, model: str, precision: dict[str, str], parallelism: dict[str, int]
) -> dict[int, float]:
    """Return POST /v1/estimates' TPOT per batch size for the sweep chart's defaults."""
    body = {
        "model": model,
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 256,
        "mode": "static",
        "batch_sizes": BATCHES,
        "precision": {"weights": "bf16", **precision},
        "parallelism": parallelism,
    }
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    return {p["batch_size"]: p["tpot_ms"] for p in response.json()["points"]}


def test_sweep_ssm_state_is_the_estimates_precision_ssm_state(client: TestClient) -> None:
    base = {"accelerator": "h100-sxm", "model": "nemotron-h-56b", "tp": 2}
    drawn = {
        dtype: chart_tpot_ms(client, {**base, "ssm_state": dtype}) for dtype in ("bf16", "fp32")
    }
    for dtype, tpot in drawn.items():
        expected = estimate_tpot_ms(client, "nemotron-h-56b", {"ssm_state": dtype}, {"tp": 2})
        assert tpot == pytest.approx(expected)
    # An fp32 state is read and written each decode step: twice the bytes of bf16.
    assert drawn["fp32"][64] > drawn["bf16"][64]


def test_sweep_pp_virtual_stages_is_the_estimates_field(client: TestClient) -> None:
    base = {"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 2, "pp": 2}
    interleaved = chart_tpot_ms(client, {**base, "pp_virtual_stages": 2})
    layout = {"tp": 2, "pp": 2, "pp_virtual_stages": 2}
    assert interleaved == pytest.approx(estimate_tpot_ms(client, "llama-3.1-70b", {}, layout))
    # pp·v − 1 = 3 stage sends per pass instead of 1.
    assert interleaved[1] > chart_tpot_ms(client, base)[1]


def test_sweep_attention_dp_is_the_estimates_field(client: TestClient) -> None:
    base = {"accelerator": "h100-sxm", "model": "qwen3-30b-a3b", "attention_dp": 2, "ep": 2}
    drawn = chart_tpot_ms(client, base)
    layout = {"attention_dp": 2, "ep": 2}
    assert drawn == pytest.approx(estimate_tpot_ms(client, "qwen3-30b-a3b", {}, layout))
    assert drawn != pytest.approx(chart_tpot_ms(client, {**base, "attention_dp": 1, "ep": 1}))


def test_roofline_ssm_state_matches_intensity(client: TestClient) -> None:
    params = {
        "accelerator": "h100-sxm",
        "model": "nemotron-h-56b",
        "batch_sizes": "64",
        "phase": "decode",
        "tp": 2,
        "ssm_state": "fp32",
        "format": "vega",
    }
    spec = client.get(ROOFLINE, params=params).json()
    drawn = {
        r["operator"]: r["arithmetic_intensity_flop_per_byte"]
        for values in spec["datasets"].values()
        for r in values
        if "operator" in r
    }
    body = {
        "model": "nemotron-h-56b",
        "accelerator": "h100-sxm",
        "phase": "decode",
        "batch_size": 64,
        "context_tokens": 2048,
        "precision": {"weights": "bf16", "ssm_state": "fp32"},
        "parallelism": {"tp": 2},
    }
    table = client.post("/v1/intensity", json=body).json()
    total = table["total"]
    assert drawn[total["name"]] == pytest.approx(total["arithmetic_intensity_flop_per_byte"])
    bf16 = client.get(ROOFLINE, params={**params, "ssm_state": "bf16"}).json()
    bf16_total = next(
        r["arithmetic_intensity_flop_per_byte"]
        for values in bf16["datasets"].values()
        for r in values
        if r.get("operator") == total["name"]
    )
    assert drawn[total["name"]] != pytest.approx(bf16_total)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        (SWEEP, {"model": "llama-3.1-70b", "tp": 2, "pp_virtual_stages": 2}, "pp_virtual_stages"),
        (
            "/v1/charts/traffic",
            {"model": "llama-3.1-70b", "tp": 4, "pp_virtual_stages": 2, "rates": "1"},
            "pp_virtual_stages",
        ),
        (ROOFLINE, {"model": "llama-3.1-70b", "tp": 2, "ssm_state": "fp8"}, "ssm_state"),
        (ROOFLINE, {"model": "llama-3.1-70b", "tp": 2, "attention_dp": 2}, "attention_dp"),
        (ROOFLINE, {"model": "llama-3.1-70b", "pp_virtual_stages": 0}, "pp_virtual_stages"),
    ],
)
def test_bad_layout_and_precision_parameters_name_themselves(
    client: TestClient, path: str, params: dict[str, Any], field: str
) -> None:
    response = client.get(path, params={"accelerator": "h100-sxm", **params})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert any(e["field"].startswith(field) for e in response.json()["errors"]), response.text


def test_frontier_precisions_take_an_ssm_state(client: TestClient) -> None:
    params = {
        "model": "nemotron-h-56b",
        "accelerator": "h100-sxm",
        "workload": "chat",
        "tp": "2",
        "precisions": "bf16/bf16/bf16/fp32",
        "format": "vega",
    }
    response = client.get("/v1/charts/frontier", params=params)
    assert response.status_code == 200, response.text
    rows = [
        r
        for values in response.json()["datasets"].values()
        for r in values
        if "tokens_per_s_per_user" in r
    ]
    assert rows and all("fp32" in r["precision"].split("/") for r in rows)


def test_the_sweep_takes_the_estimates_load_pattern(client: TestClient) -> None:
    """The sweep is an estimate (closed loop by default) and the frontier a plan (open loop by
    default, the next test); ``load_pattern`` reaches both. SGLang's scheduler keeps a closed
    loop's clients in lockstep waves, so the two loads differ in TTFT there."""
    base = {"accelerator": "h100-sxm", "model": "llama-3.1-8b", "backend": "sglang"}
    query = {**base, "batch_sizes": "1,64", "mode": "serving", "format": "vega"}

    def chart_ttft_ms(**extra: str) -> dict[int, float]:
        response = client.get(SWEEP, params={**query, **extra})
        assert response.status_code == 200, response.text
        rows = [row for values in response.json()["datasets"].values() for row in values]
        return {r["batch_size"]: r["value"] for r in rows if r.get("metric") == "TTFT (ms)"}

    for pattern in ("closed_loop", "open_loop"):
        body = {**base, "input_tokens": 1024, "output_tokens": 256, "mode": "serving",
                "batch_sizes": [1, 64], "precision": {"weights": "bf16"},
                "load_pattern": pattern}  # fmt: skip
        answer = client.post("/v1/estimates", json=body).json()
        expected = {p["batch_size"]: p["ttft_ms"] for p in answer["points"]}
        assert chart_ttft_ms(load_pattern=pattern) == pytest.approx(expected)
    assert chart_ttft_ms() == chart_ttft_ms(load_pattern="closed_loop")
    assert chart_ttft_ms()[64] > chart_ttft_ms(load_pattern="open_loop")[64]
    refused = client.get(SWEEP, params={**query, "mode": "static", "load_pattern": "offline"})
    assert refused.status_code == 422
    assert "load_pattern" in [e["field"] for e in refused.json()["errors"]]


def test_the_frontier_takes_the_plans_load_pattern(client: TestClient) -> None:
    frontier = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "workload": "chat",
                "backend": "sglang", "format": "vega"}  # fmt: skip

    def frontier_ttft_ms(**extra: str) -> list[float]:
        response = client.get("/v1/charts/frontier", params={**frontier, **extra})
        assert response.status_code == 200, response.text
        rows = [row for values in response.json()["datasets"].values() for row in values]
        return sorted(r["ttft_ms"] for r in rows if "ttft_ms" in r)

    assert frontier_ttft_ms() == frontier_ttft_ms(load_pattern="open_loop")
    assert frontier_ttft_ms() != frontier_ttft_ms(load_pattern="closed_loop")
