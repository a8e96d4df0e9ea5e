"""Slow clients (issue 15, finding 7): writes authenticated before the body, body read timeout.

The app is driven at the ASGI level with a ``receive`` that stalls, as a client that sends its
headers and then trickles (or withholds) the body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

EIGHT_MIB = 8 * 1024 * 1024


def http_scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("192.0.2.1", 5000),
        "server": ("testserver", 80),
    }


def drive(client: TestClient, scope: dict[str, Any], first_chunk: bytes | None) -> list[Any]:
    """Run one request whose body stalls after ``first_chunk``; return the messages sent."""
    sent: list[Any] = []
    app = client.app

    async def run() -> None:
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if first_chunk is not None and not delivered:
                delivered = True
                return {"type": "http.request", "body": first_chunk, "more_body": True}
            await asyncio.sleep(3600)  # the client never sends the rest
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 10)  # type: ignore[arg-type]

    assert client.portal is not None
    client.portal.call(run)
    return sent


@pytest.fixture
def impatient(settings: Settings) -> Iterator[TestClient]:
    quick = settings.model_copy(update={"body_read_timeout_s": 0.3})
    with TestClient(create_app(quick), raise_server_exceptions=False) as client:
        yield client


def status_of(messages: list[Any]) -> int:
    starts = [m for m in messages if m["type"] == "http.response.start"]
    assert starts, messages
    return int(starts[0]["status"])


@pytest.mark.parametrize(
    "headers",
    [{}, {"X-API-Key": "rl_000000000000_made-up"}, {"X-API-Key": "not-a-key"}],
    ids=["no key", "unknown key", "malformed key"],
)
def test_a_keyless_upload_is_refused_before_its_body_is_read(
    client: TestClient, headers: dict[str, str]
) -> None:
    scope = http_scope(
        "POST",
        "/v1/calibrations",
        {**headers, "Content-Type": "text/csv", "Content-Length": str(EIGHT_MIB - 1)},
    )
    messages = drive(client, scope, first_chunk=None)
    assert status_of(messages) == 401


def test_a_stalled_body_gets_408_after_the_read_timeout(impatient: TestClient) -> None:
    scope = http_scope(
        "POST",
        "/v1/estimates",
        {"Content-Type": "application/json", "Content-Length": "1000"},
    )
    messages = drive(impatient, scope, first_chunk=b'{"model": ')
    assert status_of(messages) == 408
    headers = dict(messages[0]["headers"])
    assert headers[b"connection"] == b"close"


def test_a_valid_key_still_uploads(client: TestClient, auth_headers: dict[str, str]) -> None:
    body = "model,batch_size,input_tokens,output_tokens\n"
    response = client.post(
        "/v1/calibrations",
        content=body,
        params={"accelerator": "h100-sxm"},
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert response.status_code == 422  # read and validated (no rows), not refused
