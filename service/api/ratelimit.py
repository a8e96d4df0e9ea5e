"""Per-client token buckets: 429 problem+json with Retry-After once a client's bucket is empty.

A client is its API key once the key is verified (``keys.KeyVerifier``); requests without a
key, or with a key that is not valid, share the bucket of their address (``keys.client_address``:
``X-Forwarded-For`` counts only from trusted proxies). Sending made-up keys or forged
forwarding headers therefore buys no extra requests.

Buckets are shared by every worker process and replica through the database
(``rate_limit_buckets``, ``rate_limit_shared``):

- PostgreSQL (replicas): every limited request takes its tokens in the database, one atomic
  conditional upsert per bucket (``rate_limit_repository.take``) refilled on the database's
  clock, all of the operation's buckets in one transaction. However many replicas and workers
  serve a client, together they admit no more than the configured burst plus rate x elapsed
  time: the bound is exact. One database round trip per rate-limited request (only those).
- SQLite (one node): each process spends from a local copy of each bucket and, at most every
  ``sync_s`` seconds (and ``sync_s`` after any unsynced spending at the latest), adds what it
  spent to the shared bucket in one atomic statement per bucket and takes the shared balance as
  its new local balance. Bound: between two syncs each of P worker processes may spend what it
  last saw plus the refill, so a client can exceed its limit by at most
  (P - 1) x (burst + rate x sync_s) requests while its processes learn the shared balance;
  after that the shared balance (debts included) governs, and the long-run rate holds.

If the database cannot be reached, a process falls back to its local buckets (the route then
answers the outage itself).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.keys import KeyVerifier, Network, api_key_header, client_address
from service.api.problems import PROBLEM_MEDIA_TYPE, problem_body
from service.db import rate_limit_repository
from service.db.session import WRITE_TRANSACTION

MAX_TRACKED_CLIENTS = 10_000
IDLE_BUCKET_S = 3600.0  # shared buckets untouched this long are deleted (they would be full)
FORGET_EVERY_S = 60.0  # how often an atomic-take process deletes idle shared buckets
logger = logging.getLogger("ridgeline.ratelimit")


@dataclass(frozen=True)
class RateRule:
    """A bucket shared by the listed ``(method, path)`` operations: sustained rate and burst."""

    name: str
    operations: frozenset[tuple[str, str]]
    per_second: float
    burst: int


@dataclass
class Bucket:
    """Tokens left and when they were last refilled (monotonic seconds); spent since sync."""

    tokens: float
    updated_s: float
    spent: float = 0.0


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
        self.rules: dict[str, RateRule] = {}

    def _bucket(self, rule: RateRule, client: str) -> Bucket:
        now = self._clock()
        key = (rule.name, client)
        bucket = self._buckets.get(key)
        if bucket is None:
            self.rules[rule.name] = rule
            bucket = Bucket(tokens=float(rule.burst), updated_s=now)
            self._buckets[key] = bucket
            if len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            elapsed = max(0.0, now - bucket.updated_s)
            bucket.tokens = min(float(rule.burst), bucket.tokens + elapsed * rule.per_second)
            bucket.updated_s = now
        return bucket

    def take(self, rule: RateRule, client: str) -> float:
        """Spend one token; return 0 if allowed, else the seconds until one is available."""
        bucket = self._bucket(rule, client)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            bucket.spent += 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rule.per_second

    def drain_spent(self) -> dict[tuple[str, str], float]:
        """Return and reset what each bucket spent since the last drain (non-zero only)."""
        spent = {
            key: b.spent
            for key, b in self._buckets.items()
            if b.spent > 0 and key[0] != KEY_LOOKUPS.name
        }
        for key in spent:
            self._buckets[key].spent = 0.0
        return spent

    def unsynced(self) -> bool:
        """Whether any shared bucket has spending not yet sent."""
        return any(b.spent > 0 and key[0] != KEY_LOOKUPS.name for key, b in self._buckets.items())

    def restore_spent(self, spent: dict[tuple[str, str], float]) -> None:
        """Put back spending a failed sync could not record (it is sent with the next one)."""
        for key, amount in spent.items():
            bucket = self._buckets.get(key)
            if bucket is not None:
                bucket.spent += amount

    def adopt(self, key: tuple[str, str], shared_tokens: float) -> None:
        """Take the shared balance as this bucket's, less what was spent during the sync."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = shared_tokens - bucket.spent
            bucket.updated_s = self._clock()


# Database lookups of API keys not verified lately, per client address (not shared).
KEY_LOOKUPS = RateRule("key-lookups", frozenset(), per_second=5.0, burst=20)


def _shared_name(key: tuple[str, str]) -> str:
    return f"{key[0]}|{key[1]}"[:200]


class SharedBuckets:
    """Buckets in the database: atomic takes (PostgreSQL) or periodic exchange of spending."""

    def __init__(
        self,
        buckets: TokenBuckets,
        sync_s: float,
        clock: Callable[[], float] = time.time,
        atomic: bool | None = None,
    ) -> None:
        self.buckets = buckets
        self.sync_s = sync_s
        self._clock = clock
        self._atomic = atomic
        self._last_s = 0.0
        self._forgot_s = 0.0
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def atomic(self, engine: Engine) -> bool:
        """Whether tokens are taken in the database per request (default: on PostgreSQL)."""
        return engine.dialect.name == "postgresql" if self._atomic is None else self._atomic

    async def take(
        self, engine: Engine, rules: list[RateRule], client: str
    ) -> tuple[RateRule | None, float]:
        """Take a token of every rule's shared bucket; return the refusing rule and its wait."""
        try:
            refused = await run_in_threadpool(self._take, engine, rules, client)
        except Exception as exc:  # the limiter must not fail requests: use local buckets
            if not self._failing:
                logger.warning("shared rate-limit take failed: %s", type(exc).__name__)
            self._failing = True
            return take_local(self.buckets, rules, client)
        self._failing = False
        if refused is None:
            return None, 0.0
        index, tokens = refused
        rule = rules[index]
        return rule, (1.0 - tokens) / rule.per_second

    def _take(self, engine: Engine, rules: list[RateRule], client: str) -> tuple[int, float] | None:
        wanted = [
            (_shared_name((rule.name, client)), rule.per_second, float(rule.burst))
            for rule in rules
        ]
        with engine.connect().execution_options(**{WRITE_TRANSACTION: True}) as connection:
            transaction = connection.begin()
            refused = rate_limit_repository.take(connection, wanted)
            if refused is None:
                transaction.commit()
            else:
                transaction.rollback()  # the buckets that gave a token keep it
            now_s = self._clock()
            if now_s - self._forgot_s >= FORGET_EVERY_S:
                self._forgot_s = now_s
                with connection.begin():
                    rate_limit_repository.forget_idle(connection, now_s - IDLE_BUCKET_S)
        return refused

    def schedule(self, engine: Engine) -> None:
        """Sync now if due, else once the interval has passed (one sync at a time)."""
        if self._task is None:
            delay_s = max(0.0, self._last_s + self.sync_s - self._clock())
            self._task = asyncio.get_running_loop().create_task(self._run(engine, delay_s))

    async def _run(self, engine: Engine, delay_s: float) -> None:
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            self._last_s = self._clock()
            spent = self.buckets.drain_spent()
            try:
                if spent:
                    balances = await run_in_threadpool(self.sync, engine, spent)
                    for key, tokens in balances.items():
                        self.buckets.adopt(key, tokens)
            except Exception as exc:  # the limiter must not fail requests: keep local buckets
                self.buckets.restore_spent(spent)
                logger.warning("rate-limit sync failed: %s", type(exc).__name__)
        finally:
            self._task = None
        if self.buckets.unsynced():  # spent during this sync (or a failed one): flush it too
            self.schedule(engine)

    def sync(
        self, engine: Engine, spent: dict[tuple[str, str], float]
    ) -> dict[tuple[str, str], float]:
        """Record ``spent`` in the shared buckets; return each bucket's shared balance."""
        now_s = self._clock()
        rules = self.buckets.rules
        wanted = {
            _shared_name(key): (amount, rules[key[0]].per_second, float(rules[key[0]].burst))
            for key, amount in spent.items()
        }
        with engine.begin() as connection:
            balances = rate_limit_repository.spend_all(connection, wanted, now_s)
            rate_limit_repository.forget_idle(connection, now_s - IDLE_BUCKET_S)
        return {key: balances[_shared_name(key)] for key in spent}


def take_local(
    buckets: TokenBuckets, rules: list[RateRule], client: str
) -> tuple[RateRule | None, float]:
    """Take a token of every rule's local bucket; return the refusing rule and its wait."""
    for rule in rules:  # every bucket of the operation must hold a token
        wait_s = buckets.take(rule, client)
        if wait_s > 0:
            return rule, wait_s
    return None, 0.0


def _too_many(rule: RateRule, retry_after_s: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    detail = (
        f"rate limit of {rule.per_second:g} requests/s (burst {rule.burst}) on "
        f"{rule.name} exceeded; retry after {retry_after_s} s"
    )
    body = json.dumps(problem_body(429, "Too Many Requests", detail, "rate-limited")).encode()
    headers = [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after_s).encode()),
    ]
    return headers, body


class RateLimitMiddleware:
    """Answer 429 with Retry-After when the caller's bucket for this operation is empty."""

    def __init__(
        self,
        app: ASGIApp,
        rules: tuple[RateRule, ...],
        buckets: TokenBuckets | None = None,
        trusted_proxies: tuple[Network, ...] = (),
        sync_s: float | None = None,
        verifier: KeyVerifier | None = None,
    ) -> None:
        self.app = app
        self.buckets = buckets or TokenBuckets()
        self.trusted_proxies = trusted_proxies
        self.verifier = verifier or KeyVerifier()
        self.shared = SharedBuckets(self.buckets, sync_s) if sync_s is not None else None
        self._rules: dict[tuple[str, str], list[RateRule]] = {}
        for rule in rules:
            for op in rule.operations:
                self._rules.setdefault(op, []).append(rule)

    async def _client(self, scope: Scope) -> str:
        """Return the caller's bucket name: its verified key, else its address."""
        anonymous = "ip:" + client_address(scope, self.trusted_proxies)
        key = api_key_header(scope)
        if key is None:
            return anonymous
        known, prefix = self.verifier.cached(key)
        if not known:
            # Keys not seen lately are looked up at a bounded rate per address, so made-up
            # keys cannot buy unbounded database lookups; past it they count as anonymous.
            if self.buckets.take(KEY_LOOKUPS, anonymous) > 0:
                return anonymous
            state = scope["app"].state
            try:
                prefix = await run_in_threadpool(
                    self.verifier.verify,
                    state.session_factory,
                    state.settings.api_key_pepper,
                    key,
                )
            except Exception:  # database trouble: the route answers it; count the address
                return anonymous
        return "key:" + prefix if prefix else anonymous

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            rules = self._rules.get((scope["method"], scope["path"].rstrip("/") or "/"))
            if rules is not None:
                client = await self._client(scope)
                shared, engine = self.shared, getattr(scope["app"].state, "engine", None)
                if shared is not None and engine is not None and shared.atomic(engine):
                    refused, wait_s = await shared.take(engine, rules, client)
                else:
                    refused, wait_s = take_local(self.buckets, rules, client)
                    if shared is not None and engine is not None:
                        shared.schedule(engine)
                if refused is not None:
                    headers, body = _too_many(refused, max(1, math.ceil(wait_s)))
                    await send({"type": "http.response.start", "status": 429, "headers": headers})
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)
