"""Heavy requests answered from a child process (``heavy_processes`` > 0), errors included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from support import make_test_settings

from service.api.app import create_app
from service.settings import Settings

ITEM = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1, 8],
}


@pytest.fixture(scope="module")
def in_child(
    database_factory: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:

    url = database_factory.seeded()  # type: ignore[attr-defined]
    settings: Settings = make_test_settings(
        url, tmp_path_factory.mktemp("heavy"), heavy_processes=1
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_batch_plan_and_chart_come_from_the_child(in_child: TestClient) -> None:
    batch = in_child.post("/v1/estimates/batch", json={"items": [ITEM, {**ITEM, "model": "x"}]})
    assert batch.status_code == 200
    items = batch.json()["items"]
    assert len(items[0]["points"]) == 2 and items[1]["status"] == 404
    plan = in_child.post(
        "/v1/plans",
        json={
            "models": ["llama-3.1-8b"],
            "accelerators": ["h100-sxm"],
            "input_tokens": 512,
            "output_tokens": 128,
        },
    )
    assert plan.status_code == 200 and plan.json()["candidates_evaluated"] > 0
    chart = in_child.get(
        "/v1/charts/sweep", params={"model": "llama-3.1-8b", "accelerator": "h100-sxm"}
    )
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg")
    heavy = in_child.app.state.heavy  # type: ignore[attr-defined]
    assert heavy.pool() is not None


def test_errors_in_the_child_become_problems(in_child: TestClient) -> None:
    missing = in_child.get(
        "/v1/charts/sweep", params={"model": "no-such-model", "accelerator": "h100-sxm"}
    )
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    over = in_child.post(
        "/v1/estimates/batch", json={"items": [{**ITEM, "batch_sizes": list(range(1, 1025))}] * 9}
    )
    assert over.status_code == 422 and over.json()["errors"][0]["field"] == "items"
    bad_tp = in_child.get(
        "/v1/charts/sweep", params={"model": "llama-3.1-8b", "accelerator": "h100-sxm", "tp": 3}
    )
    assert bad_tp.status_code == 422
