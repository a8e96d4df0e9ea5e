"""GET /v1/charts/traffic: percentiles per request rate agree with POST /v1/estimates' traffic."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.charts.sources import DEFAULT_LOAD_FRACTIONS

TRAFFIC = "/v1/charts/traffic"
BASE = {
    "accelerator": "h100-sxm",
    "model": "llama-3.1-8b",
    "input_tokens": 512,
    "output_tokens": 128,
    "calibration": "none",
}


def rows(spec: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    found = [r for values in spec["datasets"].values() for r in values if r.get("metric") == metric]
    by_rate = {r["request_rate_per_s"]: r for r in found}  # one row per rate, whatever the layer
    return [by_rate[rate] for rate in sorted(by_rate)]


def estimate_traffic(client: TestClient, rate: float) -> dict[str, Any]:
    body = {**BASE, "mode": "serving", "traffic": {"request_rate_per_s": rate}}
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    return response.json()["traffic"]


def test_chosen_rates_match_the_estimates_endpoint(client: TestClient) -> None:
    spec = client.get(TRAFFIC, params={**BASE, "rates": "2,0.5", "format": "vega"}).json()
    ttft = {r["request_rate_per_s"]: r for r in rows(spec, "TTFT (ms)")}
    assert sorted(ttft) == [0.5, 2.0]
    for rate, row in ttft.items():
        answer = estimate_traffic(client, rate)["ttft_ms"]
        assert (row["p50"], row["p90"], row["p99"]) == pytest.approx(
            (answer["p50"], answer["p90"], answer["p99"])
        )
        assert row["p50"] <= row["p99"]


def test_default_rates_are_shares_of_the_saturation_rate(client: TestClient) -> None:
    spec = client.get(TRAFFIC, params={**BASE, "format": "vega"}).json()
    saturation = estimate_traffic(client, 1.0)["saturation_requests_per_s"]
    rates = sorted(r["request_rate_per_s"] for r in rows(spec, "TPOT (ms)"))
    assert rates == pytest.approx([saturation * share for share in DEFAULT_LOAD_FRACTIONS])
    svg = client.get(TRAFFIC, params={**BASE, "rates": "1"})
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert f"saturation {saturation:,.2f}/s".encode() in svg.content


@pytest.mark.parametrize("rates", ["0", "1,,2", "-1", "2e3"])
def test_bad_rates_are_a_422_naming_them(client: TestClient, rates: str) -> None:
    response = client.get(TRAFFIC, params={**BASE, "rates": rates})
    assert response.status_code == 422
    assert "rates" in response.text
