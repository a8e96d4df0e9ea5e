"""AsyncRidgeline: same answers as the API over an ASGI transport, async retries and paging."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.client import AsyncRidgeline, NotFoundError, RateLimitError, WorkloadOut

T = TypeVar("T")
ESTIMATE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "accelerator": "h200-sxm",
    "input_tokens": 512,
    "output_tokens": 64,
    "batch_sizes": [1, 16],
    "mode": "serving",
    "calibration": "none",
}
CHAT = {
    "id": "chat",
    "input_tokens": 1000,
    "output_tokens": 200,
    "ttft_ms_max": 500.0,
    "tpot_ms_max": 50.0,
    "objective": "min_cost_per_million_tokens",
    "mode": "serving",
    "description": "d",
    "rationale": "r",
}


def run_on_app(app: FastAPI, api_key: str, body: Callable[[AsyncRidgeline], Awaitable[T]]) -> T:
    """Run ``body`` with an async client on the app (lifespan started, as a server would)."""

    async def main() -> T:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with AsyncRidgeline("http://app", api_key=api_key, transport=transport) as rl:
                return await body(rl)

    return asyncio.run(main())


def test_async_estimate_and_paging_match_the_api(app: FastAPI, api_key: str) -> None:
    async def body(rl: AsyncRidgeline) -> tuple[Any, list[str], str]:
        answer = await rl.estimate(ESTIMATE)
        ids = [a.id async for a in rl.list_accelerators(limit=5)]
        try:
            await rl.get_model("no-such-model")
        except NotFoundError as exc:
            return answer, ids, exc.detail
        raise AssertionError("expected NotFoundError")

    answer, ids, detail = run_on_app(app, api_key, body)
    with TestClient(app) as client:
        raw = client.post("/v1/estimates", json=ESTIMATE).json()
        pages = client.get("/v1/accelerators", params={"limit": 200}).json()["items"]
    assert answer.model_dump(mode="json") == raw
    assert ids == [item["id"] for item in pages]
    assert "no-such-model" in detail


def test_async_retry_awaits_the_injected_sleep() -> None:
    replies = [
        httpx.Response(429, headers={"Retry-After": "3"}),
        httpx.Response(429, headers={"Retry-After": "4"}),
        httpx.Response(200, json={"items": [CHAT]}),
    ]

    async def handler(_: httpx.Request) -> httpx.Response:
        return replies.pop(0)

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def main() -> list[WorkloadOut]:
        transport = httpx.MockTransport(handler)
        async with AsyncRidgeline("http://x", transport=transport, sleep=sleep) as rl:
            return list(await rl.workloads())

    assert [w.model_dump(exclude_none=True) for w in asyncio.run(main())] == [CHAT]
    assert slept == [3.0, 4.0]


def test_async_gives_up_with_rate_limit_error() -> None:
    async def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "1"})

    async def noop(_: float) -> None:
        return None

    async def main() -> None:
        transport = httpx.MockTransport(handler)
        async with AsyncRidgeline("http://x", transport=transport, sleep=noop, max_retries=1) as rl:
            await rl.get_accelerator("h100-sxm")

    with pytest.raises(RateLimitError):
        asyncio.run(main())


def test_async_calibrate_per_backend_stores_one_profile_per_engine(
    app: FastAPI, api_key: str
) -> None:
    """Runs of two engines in one body: one stored profile each, taking its runs' backend."""
    run = {"kind": "serving", "model": "qwen3-32b", "parallelism": {"tp": 2}}
    runs = [
        {**run, "backend": backend, "input_tokens": 1024, "output_tokens": 128,
         "concurrency": c, "ttft_ms": ttft, "tpot_ms": tpot}
        for backend, c, ttft, tpot in (
            ("vllm", 8, 160.0, 16.0), ("vllm", 32, 420.0, 21.0),
            ("trtllm", 8, 140.0, 15.0), ("trtllm", 32, 380.0, 19.0),
        )
    ]  # fmt: skip

    async def body(rl: AsyncRidgeline) -> list[Any]:
        return await rl.calibrate_per_backend(accelerator="h100-sxm", measurements=runs)

    profiles = run_on_app(app, api_key, body)
    assert sorted(p.backend for p in profiles) == ["trtllm", "vllm"]
    assert all(p.fit.n_measurements == 2 for p in profiles)
