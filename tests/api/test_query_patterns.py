"""The patterns of comma-separated query values admit exactly the lists the server reads."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from service.api.query_patterns import int_list, int_range, slug_list


@pytest.mark.parametrize(("low", "high"), [(1, 64), (1, 1024), (0, 9), (7, 123), (1, 65536)])
def test_int_range_matches_exactly_the_integers_in_range(low: int, high: int) -> None:
    pattern = re.compile(f"^{int_range(low, high)}$")
    for n in range(0, high + 1500):
        assert bool(pattern.match(str(n))) == (low <= n <= high), n
    assert not pattern.match(f"0{max(low, 1)}")  # no leading zeros
    assert not pattern.match(f"{low} ")


def test_lists_bound_their_length_and_items() -> None:
    pattern = re.compile(int_list(1, 64, 3))
    assert pattern.match("1,2,64") and not pattern.match("1,2,3,4")
    assert not pattern.match("1,,2") and not pattern.match("1, 2") and not pattern.match("65")
    slugs = re.compile(slug_list(2))
    assert slugs.match("h100-sxm,mi300x") and not slugs.match("H100") and not slugs.match("a,b,c")


def test_charts_refuse_what_the_pattern_refuses(client: TestClient) -> None:
    base = {"accelerator": "h100-sxm", "model": "llama-3.1-8b", "format": "vega"}
    assert client.get("/v1/charts/roofline", params={**base, "batch_sizes": "1,64"}).is_success
    for bad in ("01", "1, 64", "0", "65537", "1,2,3,4,5,6,7,8,9"):
        response = client.get("/v1/charts/roofline", params={**base, "batch_sizes": bad})
        assert response.status_code == 422, bad
        assert response.json()["errors"][0]["field"] == "batch_sizes"


def test_frontier_takes_model_and_accelerator_and_the_old_names(client: TestClient) -> None:
    query = {"workload": "chat", "format": "vega", "max_gpus_per_replica": 2, "tp": "1,2"}
    new = client.get(
        "/v1/charts/frontier", params={**query, "model": "llama-3.1-8b", "accelerator": "l40s"}
    )
    old = client.get(
        "/v1/charts/frontier", params={**query, "models": "llama-3.1-8b", "accelerators": "l40s"}
    )
    assert new.status_code == 200, new.text
    assert new.json() == old.json()
    both = client.get(
        "/v1/charts/frontier", params={**query, "model": "llama-3.1-8b", "models": "qwen3-8b"}
    )
    assert both.status_code == 422 and both.json()["errors"][0]["field"] == "model"
    missing = client.get("/v1/charts/frontier", params=query)
    assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "model"
    document = client.get("/openapi.json").json()
    names = [p["name"] for p in document["paths"]["/v1/charts/frontier"]["get"]["parameters"]]
    assert "model" in names and "accelerator" in names and "models" not in names
