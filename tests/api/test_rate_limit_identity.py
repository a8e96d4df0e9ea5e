"""Rate limits that cannot be dodged (issue 15, finding 2) and that hold across processes."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
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
        assert statuses(first, BURST, dict) == [200] * BURST
        time.sleep(0.1)
        statuses(first, 1, dict)  # refused; starts the sync of the spending above
        time.sleep(0.2)
        seen = []
        for _ in range(6):
            seen += statuses(second, 1, dict)
            time.sleep(0.1)
        # The second process spent at most one local token before it learnt the shared balance
        # (with per-process buckets it would get its own burst of 3).
        assert seen.count(200) <= 1, seen
        assert seen[-1] == 429
