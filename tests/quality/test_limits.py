"""Per-request and per-client limits: token buckets, 429 with Retry-After, size and count caps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.limits import (
    MAX_BATCH_SIZES_PER_ESTIMATE,
    MAX_ITEMS_PER_ESTIMATE_BATCH,
    MAX_MEASUREMENTS_PER_CALIBRATION,
    MAX_PAGE_SIZE,
)
from service.api.ratelimit import RateRule, TokenBuckets
from service.settings import Settings

ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1],
}
RULE = RateRule("estimates", frozenset({("POST", "/v1/estimates")}), per_second=2.0, burst=3)


class FakeClock:
    """A monotonic clock the test advances by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_the_burst_then_asks_to_wait_until_a_token_refills() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(clock=clock)
    assert [buckets.take(RULE, "a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take(RULE, "a") == pytest.approx(1 / RULE.per_second)
    clock.now += 0.25
    assert buckets.take(RULE, "a") == pytest.approx(0.25)
    clock.now += 0.25
    assert buckets.take(RULE, "a") == 0.0


def test_bucket_refills_no_higher_than_the_burst() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(clock=clock)
    buckets.take(RULE, "a")
    clock.now += 3600
    assert [buckets.take(RULE, "a") for _ in range(RULE.burst)] == [0.0] * RULE.burst
    assert buckets.take(RULE, "a") > 0


def test_clients_have_separate_buckets_and_old_clients_are_forgotten() -> None:
    buckets = TokenBuckets(clock=FakeClock(), max_clients=2)
    for _ in range(RULE.burst):
        buckets.take(RULE, "a")
    assert buckets.take(RULE, "a") > 0
    assert buckets.take(RULE, "b") == 0.0
    buckets.take(RULE, "c")  # evicts "a", the least recently used
    assert buckets.take(RULE, "a") == 0.0


@pytest.fixture
def limited_client(settings: Settings) -> Any:
    """A client on an app whose estimate bucket holds 3 requests and refills slowly."""
    limited = settings.model_copy(
        update={"rate_limit_estimates_burst": 3, "rate_limit_estimates_per_s": 0.01}
    )
    with TestClient(create_app(limited), raise_server_exceptions=False) as client:
        yield client


def test_rate_limited_estimates_get_429_problem_with_retry_after(
    limited_client: TestClient, make_api_key: Callable[..., str]
) -> None:
    key = {"X-API-Key": make_api_key("read")}
    statuses = [limited_client.post("/v1/estimates", json=ESTIMATE, headers=key).status_code]
    statuses += [
        limited_client.post("/v1/estimates", json=ESTIMATE, headers=key).status_code
        for _ in range(3)
    ]
    assert statuses == [200, 200, 200, 429]
    refused = limited_client.post("/v1/estimates", json=ESTIMATE, headers=key)
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-request-id"]
    assert refused.json()["status"] == 429
    # Another client, and unlimited operations, are unaffected.
    other = {"X-API-Key": make_api_key("read", name="other")}
    assert limited_client.post("/v1/estimates", json=ESTIMATE, headers=other).status_code == 200
    assert limited_client.get("/v1/accelerators/h100-sxm", headers=key).status_code == 200


def test_rate_limits_can_be_disabled(settings: Settings) -> None:
    off = settings.model_copy(update={"rate_limit_enabled": False, "rate_limit_estimates_burst": 1})
    with TestClient(create_app(off)) as client:
        statuses = {client.post("/v1/estimates", json=ESTIMATE).status_code for _ in range(5)}
    assert statuses == {200}


def test_openapi_declares_limit_and_auth_problems(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    estimate = paths["/v1/estimates"]["post"]["responses"]
    assert "Retry-After" in estimate["429"]["headers"]
    assert "application/problem+json" in estimate["413"]["content"]
    assert {"401", "403"} <= set(paths["/v1/accelerators"]["post"]["responses"])
    assert "401" not in paths["/v1/accelerators"]["get"]["responses"]
    for item in paths.values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], status


def test_too_many_batch_sizes_is_422(client: TestClient) -> None:
    body = {**ESTIMATE, "batch_sizes": [1] * (MAX_BATCH_SIZES_PER_ESTIMATE + 1)}
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "batch_sizes"


def test_too_many_batch_items_is_422(client: TestClient) -> None:
    body = {"items": [ESTIMATE] * (MAX_ITEMS_PER_ESTIMATE_BATCH + 1)}
    response = client.post("/v1/estimates/batch", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "items"


@pytest.mark.parametrize("path", ["/v1/accelerators", "/v1/models"])
def test_page_size_is_capped(client: TestClient, path: str) -> None:
    assert client.get(path, params={"limit": MAX_PAGE_SIZE}).status_code == 200
    response = client.get(path, params={"limit": MAX_PAGE_SIZE + 1})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "limit"


def test_oversized_estimate_body_is_413(client: TestClient, settings: Settings) -> None:
    body = {**ESTIMATE, "backend": "x" * settings.max_body_bytes}
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"


def test_measurements_per_calibration_are_capped(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    row = {"kind": "gemm", "dtype": "bf16", "m": 16, "n": 4096, "k": 4096, "latency_ms": 0.03}
    body = {
        "accelerator": "h100-sxm",
        "name": "too many",
        "measurements": [row] * (MAX_MEASUREMENTS_PER_CALIBRATION + 1),
    }
    response = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert response.status_code == 422, response.text
    assert any(e["field"].startswith("measurements") for e in response.json()["errors"])


def test_calibration_uploads_have_their_own_body_limit(
    client: TestClient, settings: Settings, auth_headers: dict[str, str]
) -> None:
    # Over the general 1 MiB limit but under the calibration limit: read and validated (422 for
    # the bad row), not refused for size; over the calibration limit: 413.
    padding = "x" * (settings.max_body_bytes + 1)
    body = {"accelerator": "h100-sxm", "name": padding, "measurements": [{"kind": "gemm"}]}
    response = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert response.status_code == 422, response.text
    body["name"] = "x" * (settings.max_calibration_body_bytes + 1)
    response = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert response.status_code == 413
