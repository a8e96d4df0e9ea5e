"""Per-client token buckets: 429 problem+json with Retry-After once a client's bucket is empty.

A client is its API key (hashed) when it sends one, else its IP address. Buckets live in each
worker process, so with N workers a client can get up to N times the configured rate.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.problems import PROBLEM_BASE, PROBLEM_MEDIA_TYPE

MAX_TRACKED_CLIENTS = 10_000


@dataclass(frozen=True)
class RateRule:
    """A bucket shared by the listed ``(method, path)`` operations: sustained rate and burst."""

    name: str
    operations: frozenset[tuple[str, str]]
    per_second: float
    burst: int


@dataclass
class Bucket:
    """Tokens left and when they were last refilled (monotonic seconds)."""

    tokens: float
    updated_s: float


class TokenBuckets:
    """Token buckets keyed by (rule, client), the least recently used dropped beyond a bound."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
    ) -> None:
        self._clock = clock
        self._max_clients = max_clients
        self._buckets: OrderedDict[tuple[str, str], Bucket] = OrderedDict()

    def take(self, rule: RateRule, client: str) -> float:
        """Spend one token; return 0 if allowed, else the seconds until one is available."""
        now = self._clock()
        key = (rule.name, client)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = Bucket(tokens=float(rule.burst), updated_s=now)
            self._buckets[key] = bucket
            if len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            elapsed = max(0.0, now - bucket.updated_s)
            bucket.tokens = min(float(rule.burst), bucket.tokens + elapsed * rule.per_second)
            bucket.updated_s = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rule.per_second


def client_identity(scope: Scope) -> str:
    """Return the caller's identity: a hash of its API key, else its IP address."""
    for name, value in scope["headers"]:
        if name == b"x-api-key" and value:
            return "key:" + hashlib.sha256(value).hexdigest()[:32]
    client = scope.get("client")
    return "ip:" + (client[0] if client else "unknown")


def _too_many(rule: RateRule, retry_after_s: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(
        {
            "type": PROBLEM_BASE + "rate-limited",
            "title": "Too Many Requests",
            "status": 429,
            "detail": f"rate limit of {rule.per_second:g} requests/s (burst {rule.burst}) on "
            f"{rule.name} exceeded; retry after {retry_after_s} s",
        }
    ).encode()
    headers = [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after_s).encode()),
    ]
    return headers, body


class RateLimitMiddleware:
    """Answer 429 with Retry-After when the caller's bucket for this operation is empty."""

    def __init__(
        self, app: ASGIApp, rules: tuple[RateRule, ...], buckets: TokenBuckets | None = None
    ) -> None:
        self.app = app
        self.buckets = buckets or TokenBuckets()
        self._rules = {op: rule for rule in rules for op in rule.operations}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            rule = self._rules.get((scope["method"], scope["path"].rstrip("/") or "/"))
            if rule is not None:
                wait_s = self.buckets.take(rule, client_identity(scope))
                if wait_s > 0:
                    headers, body = _too_many(rule, max(1, math.ceil(wait_s)))
                    await send({"type": "http.response.start", "status": 429, "headers": headers})
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)
