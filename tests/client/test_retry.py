"""Retries on 429/503 honouring Retry-After, capped backoff, connection errors and timeouts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from service.client import (
    RateLimitError,
    RetryPolicy,
    Ridgeline,
    RidgelineConnectionError,
    RidgelineTimeoutError,
    ServiceUnavailableError,
    parse_retry_after,
)

ACCELERATOR = {
    "id": "x",
    "vendor": "v",
    "name": "n",
    "memory_gb": 1.0,
    "memory_type": "",
    "memory_bandwidth_gb_s": 1.0,
    "peak_tflops": {"bf16": 1.0},
    "interconnect_gb_s": 0.0,
    "tdp_w": None,
    "price_usd_per_hour": None,
    "price": None,
    "confidence": None,
    "notes": "",
    "sources": [],
    "field_sources": {},
    "ridge_point_flop_per_byte": {"bf16": 1000.0},
    "origin": "user",
    "version": 1,
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}
PROBLEM_429 = {"type": "about:blank", "title": "Too Many Requests", "status": 429, "detail": "slow"}


def scripted(
    *responses: httpx.Response | Exception,
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering each request with the next scripted response (or raising it)."""
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return httpx.MockTransport(handler), seen


def make_client(transport: httpx.MockTransport, sleeps: list[float], **kwargs: object) -> Ridgeline:
    return Ridgeline(
        "http://ridgeline.test",
        transport=transport,
        sleep=sleeps.append,
        jitter=lambda: 1.0,
        **kwargs,  # type: ignore[arg-type]
    )


def ok() -> httpx.Response:
    return httpx.Response(200, json=ACCELERATOR)


def test_429_then_200_waits_retry_after_seconds() -> None:
    transport, seen = scripted(
        httpx.Response(429, json=PROBLEM_429, headers={"Retry-After": "7"}), ok()
    )
    sleeps: list[float] = []
    assert make_client(transport, sleeps).get_accelerator("x").id == "x"
    assert sleeps == [7.0]
    assert len(seen) == 2


def test_retry_after_http_date_is_honoured() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    transport, _ = scripted(
        httpx.Response(503, headers={"Retry-After": format_datetime(when, usegmt=True)}), ok()
    )
    sleeps: list[float] = []
    make_client(transport, sleeps).get_accelerator("x")
    assert len(sleeps) == 1 and 25.0 <= sleeps[0] <= 30.0


def test_without_retry_after_backoff_doubles_up_to_the_cap() -> None:
    transport, seen = scripted(*[httpx.Response(503) for _ in range(5)], ok())
    sleeps: list[float] = []
    policy = RetryPolicy(max_retries=5, backoff_base_s=1.0, backoff_max_s=5.0)
    make_client(transport, sleeps, retry=policy).get_accelerator("x")
    assert sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert len(seen) == 6


def test_gives_up_after_max_retries_with_the_problem() -> None:
    transport, seen = scripted(
        *[httpx.Response(429, json=PROBLEM_429, headers={"Retry-After": "1"}) for _ in range(3)]
    )
    sleeps: list[float] = []
    with pytest.raises(RateLimitError) as info:
        make_client(transport, sleeps, max_retries=2).get_accelerator("x")
    assert len(seen) == 3 and sleeps == [1.0, 1.0]
    assert info.value.status == 429 and info.value.detail == "slow"
    assert info.value.headers["retry-after"] == "1"


def test_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    transport, seen = scripted(httpx.Response(503, headers={"Retry-After": "3600"}), ok())
    sleeps: list[float] = []
    with pytest.raises(ServiceUnavailableError):
        make_client(transport, sleeps).get_accelerator("x")
    assert sleeps == [] and len(seen) == 1


def test_writes_are_retried_on_429() -> None:
    transport, seen = scripted(httpx.Response(429, headers={"Retry-After": "0"}), ok())
    sleeps: list[float] = []
    make_client(transport, sleeps).create_accelerator(id="x")
    assert [r.method for r in seen] == ["POST", "POST"] and sleeps == [0.0]


def test_connection_errors_retry_idempotent_calls_only() -> None:
    refused = httpx.ConnectError("refused")
    transport, seen = scripted(refused, ok())
    sleeps: list[float] = []
    make_client(transport, sleeps).get_accelerator("x")
    assert len(seen) == 2 and len(sleeps) == 1

    transport, seen = scripted(refused, ok())
    with pytest.raises(RidgelineConnectionError) as info:
        make_client(transport, sleeps).calibrate(accelerator="x", measurements=[])
    assert len(seen) == 1 and info.value.status is None


def test_timeouts_raise_after_retries() -> None:
    transport, seen = scripted(*[httpx.ReadTimeout("slow") for _ in range(2)])
    sleeps: list[float] = []
    with pytest.raises(RidgelineTimeoutError):
        make_client(transport, sleeps, max_retries=1).get_accelerator("x")
    assert len(seen) == 2


def test_requests_carry_key_timeout_and_if_match() -> None:
    transport, seen = scripted(ok())
    client = make_client(transport, [], api_key="secret", timeout_s=2.5)
    client.update_accelerator("x", {"memory_gb": 2}, if_match='"abc"')
    request = seen[0]
    assert request.method == "PATCH" and request.url.path == "/v1/accelerators/x"
    assert request.headers["X-API-Key"] == "secret"
    assert request.headers["If-Match"] == '"abc"'
    assert request.extensions["timeout"]["read"] == 2.5


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0.0), ("120", 120.0), ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0), ("soon", None)],
)
def test_parse_retry_after(value: str, expected: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert parse_retry_after(value, now) == expected


def test_past_http_date_means_no_wait() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now) == 0.0


def test_jitter_keeps_backoff_within_half_and_full() -> None:
    policy = RetryPolicy(backoff_base_s=2.0, backoff_max_s=100.0)
    low: Callable[[int], float] = lambda attempt: policy.backoff_s(attempt, 0.0)  # noqa: E731
    assert [low(a) for a in range(3)] == [1.0, 2.0, 4.0]
    assert [policy.backoff_s(a, 1.0) for a in range(3)] == [2.0, 4.0, 8.0]
