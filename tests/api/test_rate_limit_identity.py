"""Rate limits that cannot be dodged (issue 15, finding 2) and that hold across processes."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.db import rate_limit_repository
from service.db.session import WRITE_TRANSACTION, make_engine
from service.settings import Settings

ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1],
}
BURST = 3


def made_up_key() -> str:
    return f"rl_{secrets.token_hex(6)}_{secrets.token_urlsafe(16).replace('_', '-')}"


def limited(settings: Settings, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "rate_limit_estimates_burst": BURST,
        "rate_limit_estimates_per_s": 0.01,
    }
    values.update(overrides)
    return settings.model_copy(update=values)


@pytest.fixture
def limited_client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(limited(settings)), raise_server_exceptions=False) as client:
        yield client


def statuses(client: TestClient, count: int, headers: Callable[[], dict[str, str]]) -> list[int]:
    return [
        client.post("/v1/estimates", json=ESTIMATE, headers=headers()).status_code
        for _ in range(count)
    ]


def test_made_up_keys_share_the_anonymous_bucket(limited_client: TestClient) -> None:
    got = statuses(limited_client, 10, lambda: {"X-API-Key": made_up_key()})
    assert got == [200] * BURST + [429] * (10 - BURST)
    # Malformed keys and no key at all draw from the same (now empty) bucket.
    assert statuses(limited_client, 1, lambda: {"X-API-Key": "nonsense"}) == [429]
    assert statuses(limited_client, 1, dict) == [429]


def test_a_valid_key_has_its_own_bucket(
    limited_client: TestClient, make_api_key: Callable[..., str]
) -> None:
    assert statuses(limited_client, BURST + 1, dict) == [200] * BURST + [429]
    key = make_api_key("read")
    got = statuses(limited_client, BURST + 1, lambda: {"X-API-Key": key})
    assert got == [200] * BURST + [429]


def test_forwarded_for_counts_only_from_trusted_proxies(settings: Settings) -> None:
    def rotating() -> dict[str, str]:
        return {"X-Forwarded-For": f"10.0.{secrets.randbelow(250)}.{secrets.randbelow(250)}"}

    untrusted = create_app(limited(settings))
    with TestClient(untrusted, client=("192.0.2.10", 4000)) as client:
        assert statuses(client, 6, rotating) == [200] * BURST + [429] * 3
    behind_proxy = create_app(limited(settings, trusted_proxies="192.0.2.0/24"))
    with TestClient(behind_proxy, client=("192.0.2.10", 4000)) as client:
        assert statuses(client, 6, rotating) == [200] * 6  # each forwarded address is a client
        spoofed = {"X-Forwarded-For": "203.0.113.9, 198.51.100.7"}
        # The rightmost untrusted hop is the client; what it wrote to its left is ignored.
        got = statuses(client, BURST + 1, lambda: spoofed)
        assert got == [200] * BURST + [429]


def test_buckets_are_shared_by_processes_on_one_database(settings: Settings) -> None:
    shared = limited(settings, rate_limit_sync_s=0.05)
    with (
        TestClient(create_app(shared), raise_server_exceptions=False) as first,
        TestClient(create_app(shared), raise_server_exceptions=False) as second,
    ):
        assert statuses(first, BURST + 1, dict) == [200] * BURST + [429]
        time.sleep(0.2)  # SQLite: the first process syncs its spending within 0.05 s
        seen = []
        for _ in range(6):
            seen += statuses(second, 1, dict)
            time.sleep(0.1)
        if settings.database_url.startswith("postgresql"):
            # Atomic takes in the database: the second process finds the bucket empty (the
            # refill over these ~1.5 s is 0.015 of a token at 0.01/s).
            assert seen == [429] * 6
        else:
            # SQLite: the second process may spend from its fresh local copy until its first
            # sync (started by its first request) returns; afterwards the shared bucket rules
            # (with per-process buckets it would get its own burst of 3).
            assert seen[-3:] == [429] * 3, seen


def engine_for(settings: Settings) -> Engine:
    return make_engine(settings.database_url)


def test_atomic_takes_refill_on_the_given_clock_and_refuse_without_going_negative(
    settings: Settings,
) -> None:
    """Bucket rate 2/s, burst 3, taken at t = 100 s: 3 tokens, then none (balance 0).

    At 100.25 s the refill is 0.25 x 2 = 0.5 token: refused with 0.5 left. At 100.5 s it holds
    1.0 token: admitted, leaving 0. A clock that goes back (99 s) refills nothing.
    """
    engine = engine_for(settings)
    bucket = [("test|a", 2.0, 3.0)]
    try:

        def take(now_s: float) -> tuple[int, float] | None:
            with engine.begin() as connection:
                return rate_limit_repository.take(connection, bucket, now_s)

        assert [take(100.0) for _ in range(3)] == [None, None, None]
        assert take(100.0) == (0, 0.0)
        assert take(100.25) == (0, pytest.approx(0.5))
        assert take(100.5) is None
        assert take(99.0) == (0, 0.0)
    finally:
        engine.dispose()


def test_a_refused_bucket_leaves_the_operations_other_buckets_untouched(
    settings: Settings,
) -> None:
    """ "wide" (burst 2) gives its token, "narrow" (burst 1, already spent) has none: the
    caller rolls back, so "wide" still holds 2 - 1 = 1 token after one admitted request."""
    engine = engine_for(settings)
    wide, narrow = ("test|wide", 0.001, 2.0), ("test|narrow", 0.001, 1.0)
    try:
        with engine.begin() as connection:
            assert rate_limit_repository.take(connection, [narrow], 50.0) is None
        with engine.connect() as connection:
            transaction = connection.begin()
            assert rate_limit_repository.take(connection, [wide, narrow], 50.0) == (1, 0.0)
            transaction.rollback()
        with engine.begin() as connection:
            assert rate_limit_repository.take(connection, [wide], 50.0) is None
            assert rate_limit_repository.take(connection, [wide], 50.0) is None
            assert rate_limit_repository.take(connection, [wide], 50.0) == (0, 0.0)
    finally:
        engine.dispose()


def test_concurrent_takers_never_spend_more_than_the_bucket_holds(settings: Settings) -> None:
    """8 threads x 10 takes on one bucket of burst 20 that refills 1e-9 token/s: exactly 20
    are admitted, whatever the interleaving (the database clock is used)."""
    engine = make_engine(settings.database_url, pool_size=8)
    bucket = [("test|shared", 1e-9, 20.0)]

    def takes(_: int) -> int:
        admitted = 0
        for _ in range(10):
            connection = engine.connect().execution_options(**{WRITE_TRANSACTION: True})
            with connection, connection.begin():
                admitted += rate_limit_repository.take(connection, bucket) is None
        return admitted

    try:
        with ThreadPoolExecutor(8) as pool:
            assert sum(pool.map(takes, range(8))) == 20
    finally:
        engine.dispose()
