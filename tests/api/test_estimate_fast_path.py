"""The direct path for plain POST /v1/estimates answers exactly as the full FastAPI stack does.

The same body is sent twice: with ``Content-Type: application/json`` (taken by
``service.api.middleware_estimate``) and with ``application/json; charset=utf-8`` (passed on
to routing, dependencies and FastAPI's body validation). Status, headers (less the request id)
and body bytes must be identical, and the direct path must have answered the first only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

import service.api.middleware_estimate as direct

BASE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [8],
    "calibration": "none",
}
CASES: list[tuple[dict[str, Any], dict[str, str]]] = [
    ({}, {}),
    ({"batch_sizes": list(range(1, 65))}, {}),
    ({"calibration": "auto"}, {}),
    ({"mode": "serving", "batch_sizes": [1, 16, 64]}, {}),
    ({"precision": {"weights": "fp8"}, "parallelism": {"tp": 2}}, {}),
    ({"price_usd_per_hour": 2.5, "backend": "vllm"}, {}),
    ({}, {"Accept": "text/csv"}),
    ({"model": "no-such-model"}, {}),  # 404 from the endpoint
    ({"parallelism": {"tp": 3}}, {}),  # 422 from the engine's layout check
    ({"input_tokens": 200_000}, {}),  # 422: beyond the context window
    ({"mode": "serving", "traffic": {"request_rate_per_s": 4.0}, "batch_sizes": [4]}, {}),
]


@pytest.fixture
def direct_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the requests the direct path answered."""
    calls: list[int] = []
    endpoint = direct.post_estimates

    async def counted(*args: Any) -> Any:
        calls.append(1)
        return await endpoint(*args)

    monkeypatch.setattr(direct, "post_estimates", counted)
    return calls


def send(client: TestClient, body: dict[str, Any], content_type: str, **headers: str) -> Any:
    return client.post(
        "/v1/estimates",
        content=json.dumps(body).encode(),
        headers={"Content-Type": content_type, **headers},
    )


def comparable(response: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = [(k, v) for k, v in response.headers.multi_items() if k != "x-request-id"]
    return response.status_code, headers, response.content


@pytest.mark.parametrize(("overrides", "headers"), CASES)
def test_direct_path_answers_like_the_full_stack(
    client: TestClient,
    direct_calls: list[int],
    overrides: dict[str, Any],
    headers: dict[str, str],
) -> None:
    body = {**BASE, **overrides}
    fast = send(client, body, "application/json", **headers)
    assert len(direct_calls) == 1
    full = send(client, body, "application/json; charset=utf-8", **headers)
    assert len(direct_calls) == 1
    assert comparable(fast) == comparable(full)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "llama-3.1-8b"',  # not JSON: 400/422 from the full stack
        json.dumps({**BASE, "batch_sizes": [0]}).encode(),  # schema violation: 422
        json.dumps({**BASE, "unknown": 1}).encode(),
        b"[]",
    ],
)
def test_bodies_the_schema_refuses_go_to_the_full_stack(
    client: TestClient, direct_calls: list[int], raw: bytes
) -> None:
    response = client.post(
        "/v1/estimates", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 422)
    assert response.headers["content-type"] == "application/problem+json"
    assert direct_calls == []


def test_a_keyed_request_goes_to_the_full_stack(
    client: TestClient, direct_calls: list[int], make_api_key: Callable[..., str]
) -> None:
    key = make_api_key("read")
    response = send(client, BASE, "application/json", **{"X-API-Key": key})
    assert response.status_code == 200
    assert direct_calls == []


def test_the_direct_path_names_the_route_in_metrics(
    client: TestClient, direct_calls: list[int]
) -> None:
    assert send(client, BASE, "application/json").status_code == 200
    assert direct_calls == [1]
    metrics = client.get("/metrics").text
    assert 'route="/v1/estimates",status="200"' in metrics


def test_the_direct_path_knows_every_dependency_of_the_route(client: TestClient) -> None:
    """The direct path stands in for exactly these: reads open (``require_read``, checked on
    ``settings.require_key_for_reads``), no key (``get_viewer`` gives ""), the Accept header.
    A dependency added to the route must be taught to the direct path (or the path removed):
    this test fails first."""
    route = direct._find_route(client.app)  # type: ignore[arg-type]

    def names(dependant: Any) -> list[str]:
        out: list[str] = []
        for sub in dependant.dependencies:
            out += [sub.call.__qualname__, *names(sub)]
        return out

    assert names(route.dependant) == ["require_read", "get_settings", "get_viewer"]
    assert [p.name for p in route.dependant.header_params] == ["accept"]
    assert [p.name for p in route.dependant.body_params] == ["body"]
