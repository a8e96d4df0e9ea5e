"""Work budgets and heavy-work admission (issue 15, finding 1)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.heavy import HeavyWork, HeavyWorkFullError
from service.settings import Settings

DECODE_TABLE = (
    Path(__file__).parents[1] / "data" / "benchmarks" / "h100_decode_attention_subset.csv"
)
ITEM = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": list(range(1, 1025)),
}


def test_a_batch_over_the_point_budget_is_422_naming_it(
    client: TestClient, settings: Settings
) -> None:
    # The request: 251 items x 1,024 batch sizes (a 265 MB answer before).
    response = client.post("/v1/estimates/batch", json={"items": [ITEM] * 251})
    assert response.status_code == 422, response.text[:200]
    error = response.json()["errors"][0]
    assert error["field"] == "items"
    assert str(settings.max_estimate_points) in error["message"]
    assert "split it into 32 or more requests" in error["message"]


def test_a_batch_within_the_budget_is_answered(client: TestClient, settings: Settings) -> None:
    items = settings.max_estimate_points // len(ITEM["batch_sizes"])  # type: ignore[arg-type]
    response = client.post("/v1/estimates/batch", json={"items": [ITEM] * items})
    assert response.status_code == 200
    assert len(response.json()["items"]) == items


def test_a_plan_over_the_point_budget_is_422_naming_it(client: TestClient) -> None:
    # The 700-byte body: 8 models x every accelerator x 8 precisions x 1,024 levels.
    models = [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "qwen3-32b",
        "mixtral-8x7b",
        "llama-3.3-70b",
        "qwen2.5-7b",
        "mistral-7b",
    ]
    known = {m["id"] for m in client.get("/v1/models", params={"limit": 200}).json()["items"]}
    precisions = [
        {"weights": w, "activations": a}
        for w in ("bf16", "fp8", "int8", "int4")
        for a in ("bf16", "fp8")
    ]
    body = {
        "models": [m for m in models if m in known] or sorted(known)[:8],
        "input_tokens": 1024,
        "output_tokens": 256,
        "precisions": precisions,
        "concurrency_levels": 1024,
    }
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 422, response.text[:300]
    error = response.json()["errors"][0]
    assert error["field"] == "concurrency_levels"
    assert "work budget" in error["message"] and "fewer models" in error["message"]


def test_the_default_plan_fits_the_budget(client: TestClient) -> None:
    body = {"models": ["llama-3.1-8b"], "input_tokens": 1024, "output_tokens": 256}
    assert client.post("/v1/plans", json=body).status_code == 200


def test_heavy_work_admits_workers_plus_queue_then_refuses() -> None:
    async def scenario() -> list[str]:
        heavy = HeavyWork(workers=1, queue=1)
        release = asyncio.Event()
        log: list[str] = []

        async def job(name: str) -> None:
            try:
                async with heavy.slot():
                    log.append(f"run {name}")
                    await release.wait()
            except HeavyWorkFullError:
                log.append(f"refused {name}")

        tasks = [asyncio.create_task(job(n)) for n in "abc"]
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
        return log

    assert asyncio.run(scenario()) == ["run a", "refused c", "run b"]


@pytest.fixture
def single_slot(settings: Settings) -> Iterator[TestClient]:
    limited = settings.model_copy(update={"heavy_workers": 1, "heavy_queue": 0})
    with TestClient(create_app(limited), raise_server_exceptions=False) as client:
        yield client


@contextmanager
def slot_taken(client: TestClient) -> Iterator[None]:
    """Hold the app's one heavy-work slot for the block (from the client's event loop)."""
    heavy: HeavyWork = client.app.state.heavy  # type: ignore[attr-defined]
    portal = client.portal
    assert portal is not None
    held, release = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with heavy.slot():
            held.set()
            await release.wait()

    future = portal.start_task_soon(hold)
    portal.call(held.wait)
    try:
        yield
    finally:
        portal.call(release.set)
        future.result(10)


def test_a_full_heavy_queue_answers_503_with_retry_after(single_slot: TestClient) -> None:
    with slot_taken(single_slot):
        response = single_slot.post("/v1/estimates/batch", json={"items": [ITEM]})
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "2"
        assert response.json()["type"].endswith("heavy-work-queue-full")
        # Cheap requests are not gated.
        assert single_slot.get("/v1/accelerators/h100-sxm").status_code == 200
    assert single_slot.post("/v1/estimates/batch", json={"items": [ITEM]}).status_code == 200


def test_a_fit_holds_a_heavy_work_slot(
    single_slot: TestClient, make_api_key: Callable[..., str]
) -> None:
    """Calibration fits are heavy work too: with the one slot taken and no queue, an upload is a
    503 with Retry-After and nothing is stored; once the slot is free the same upload fits."""
    upload = {
        "content": DECODE_TABLE.read_bytes(),
        "params": {"accelerator": "h100-sxm", "name": "slot"},
        "headers": {"X-API-Key": make_api_key("write"), "Content-Type": "text/csv"},
    }
    with slot_taken(single_slot):
        response = single_slot.post("/v1/calibrations", **upload)  # type: ignore[arg-type]
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "2"
        assert response.json()["type"].endswith("heavy-work-queue-full")
        listed = single_slot.get("/v1/calibrations", params={"accelerator": "h100-sxm"}).json()
        assert [p for p in listed["items"] if p["name"] == "slot"] == []
    assert single_slot.post("/v1/calibrations", **upload).status_code == 201  # type: ignore[arg-type]
