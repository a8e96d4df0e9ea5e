"""Client fixtures: a ``Ridgeline`` over the in-process ASGI app (TestClient) with a write key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.client import Ridgeline


@pytest.fixture
def ridgeline(client: TestClient, api_key: str) -> Iterator[Ridgeline]:
    """A client with a write key on the test app, retrying without sleeping."""
    with Ridgeline(http_client=client, api_key=api_key, sleep=lambda _: None) as rl:
        yield rl


@pytest.fixture
def anonymous(client: TestClient) -> Ridgeline:
    """A client without an API key."""
    return Ridgeline(http_client=client, api_key="", sleep=lambda _: None)
