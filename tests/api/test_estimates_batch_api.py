"""HTTP tests of POST /v1/estimates/batch: per-item answers and problems, grouping, limits."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.services.catalog import CatalogService


def item(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1, 32],
    }
    request.update(overrides)
    return request


def batch(client: TestClient, items: list[Any]) -> list[dict[str, Any]]:
    response = client.post("/v1/estimates/batch", json={"items": items})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["items"]
    assert len(results) == len(items)
    return results


def single(client: TestClient, request: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/estimates", json=request)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_good_and_bad_items_mixed(client: TestClient) -> None:
    good = item(mode="serving")
    results = batch(
        client,
        [
            good,
            item(batch_sizes=[0]),
            item(model="no-such-model"),
            item(parallelism={"tp": 3}),
            "not an object",
            item(calibration="profile-123"),
        ],
    )
    assert results[0] == single(client, good)
    assert results[1]["status"] == 422
    assert [e["field"] for e in results[1]["errors"]] == ["batch_sizes.0"]
    assert results[2]["status"] == 404 and "no-such-model" in results[2]["detail"]
    assert results[3]["status"] == 422
    assert [e["field"] for e in results[3]["errors"]] == ["parallelism.tp"]
    assert results[4]["status"] == 422 and results[4]["errors"][0]["field"] == "item"
    assert results[5]["status"] == 404 and "calibration profile" in results[5]["detail"]
    for problem in results[1:]:
        assert {"type", "title", "status", "detail"} <= set(problem)


def test_grouped_items_equal_separate_requests(client: TestClient) -> None:
    requests = [
        item(batch_sizes=[4]),
        item(batch_sizes=[1, 256, 8]),
        item(batch_sizes=[4], mode="serving"),
        item(batch_sizes=[64, 2], mode="serving"),
        item(model="mixtral-8x7b", parallelism={"tp": 2}, batch_sizes=[16]),
        item(batch_sizes=[4], output_tokens=512),
        item(batch_sizes=[4], price_usd_per_hour=1.0),
    ]
    results = batch(client, requests)
    for request, result in zip(requests, results, strict=True):
        assert result == single(client, request)
    assert results[0]["points"][0] != results[2]["points"][0]  # static vs serving differ
    assert results[0]["points"][0] != results[5]["points"][0]


def test_each_model_and_accelerator_loaded_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    model_shape = CatalogService.model_shape
    accelerator = CatalogService.accelerator

    def count_model(self: CatalogService, model_id: str) -> Any:
        calls.append(f"model:{model_id}")
        return model_shape(self, model_id)

    def count_accelerator(self: CatalogService, accelerator_id: str) -> Any:
        calls.append(f"accelerator:{accelerator_id}")
        return accelerator(self, accelerator_id)

    monkeypatch.setattr(CatalogService, "model_shape", count_model)
    monkeypatch.setattr(CatalogService, "accelerator", count_accelerator)
    requests = [item(batch_sizes=[b], output_tokens=64 + b) for b in range(1, 21)]
    requests += [item(model="qwen3-8b", accelerator="h200-sxm", batch_sizes=[b]) for b in (1, 2)]
    results = batch(client, requests)
    assert all("points" in result for result in results)
    assert sorted(calls) == [
        "accelerator:h100-sxm",
        "accelerator:h200-sxm",
        "model:llama-3.1-8b",
        "model:qwen3-8b",
    ]


def test_256_items_accepted(client: TestClient) -> None:
    results = batch(client, [item(batch_sizes=[b]) for b in range(1, 257)])
    assert [r["points"][0]["batch_size"] for r in results] == list(range(1, 257))


@pytest.mark.parametrize("items", [[item()] * 257, []])
def test_item_count_limits(client: TestClient, items: list[Any]) -> None:
    response = client.post("/v1/estimates/batch", json={"items": items})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "items" in [e["field"] for e in response.json()["errors"]]


def test_missing_items_is_422(client: TestClient) -> None:
    response = client.post("/v1/estimates/batch", json=item())
    assert response.status_code == 422
    fields = [e["field"] for e in response.json()["errors"]]
    assert "items" in fields


def test_nul_in_an_item_is_that_items_422(client: TestClient) -> None:
    good = item()
    results = batch(
        client,
        [good, item(calibration="a\x00b"), {"x\x00y": 1}, ["\x00"], "\x00"],
    )
    assert results[0] == single(client, good)
    fields = [[e["field"] for e in r["errors"]] for r in results[1:]]
    assert fields == [["calibration"], ["xy"], ["0"], ["item"]]
    assert all(r["status"] == 422 and "NUL" in r["errors"][0]["message"] for r in results[1:])


def test_nul_outside_the_items_refuses_the_batch(client: TestClient) -> None:
    response = client.post("/v1/estimates/batch", json={"items": [item()], "x\x00": 1})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["x"]
