"""What both clients share: settings, request building and the outcome of each attempt."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from service.client.calls import Call
from service.client.errors import error_from_response, error_from_transport
from service.client.retry import RetryPolicy

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "ridgeline-python-client/1"


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """The call finished with this value."""

    value: T


@dataclass(frozen=True, slots=True)
class Wait:
    """Retry the call after this many seconds."""

    delay_s: float


class ClientCore:
    """Builds requests and decides, after each attempt, to return, raise or retry."""

    def __init__(
        self,
        api_key: str | None,
        timeout_s: float,
        retry: RetryPolicy,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api_key = api_key
        self.timeout = httpx.Timeout(timeout_s)
        self.retry = retry
        self.jitter = jitter

    def request(self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        """Build the HTTP request of a call (relative to the HTTP client's base URL)."""
        headers = {"Accept": "application/json, application/problem+json, */*", **call.headers}
        headers["User-Agent"] = USER_AGENT
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        return http.build_request(
            call.method,
            call.path,
            params=call.params,
            json=call.json if call.content is None else None,
            content=call.content,
            headers=headers,
            timeout=self.timeout,
        )

    def after_response(
        self, call: Call[T], attempt: int, response: httpx.Response
    ) -> Done[T] | Wait:
        """Parse a success, schedule a retry for 429/503, or raise the mapped error."""
        if response.is_success:
            return Done(call.parse(response))
        if response.status_code in self.retry.retry_statuses:
            delay = self.retry.delay_s(attempt, response.headers.get("Retry-After"), self.jitter())
            if delay is not None:
                return Wait(delay)
        raise error_from_response(response)

    def after_error(self, call: Call[Any], attempt: int, exc: httpx.TransportError) -> Wait:
        """Schedule a retry of an idempotent call after a connection error, else raise."""
        if call.idempotent and not isinstance(exc, httpx.UnsupportedProtocol):
            delay = self.retry.delay_s(attempt, None, self.jitter())
            if delay is not None:
                return Wait(delay)
        raise error_from_transport(exc) from exc


def resolve_base_url(base_url: str | None) -> str:
    """Use the given URL, else RIDGELINE_URL, else the local default server."""
    return (base_url or os.environ.get("RIDGELINE_URL") or DEFAULT_URL).rstrip("/")


def resolve_api_key(api_key: str | None) -> str | None:
    """Use the given key, else RIDGELINE_API_KEY, else none."""
    return api_key or os.environ.get("RIDGELINE_API_KEY") or None
