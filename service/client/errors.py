"""Exceptions raised by the client, carrying the RFC 9457 problem details of the response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

PROBLEM_FIELDS = ("type", "title", "status", "detail")


class RidgelineError(Exception):
    """A failed call; ``status`` is None when no HTTP response arrived."""

    def __init__(
        self,
        status: int | None,
        title: str,
        detail: str = "",
        *,
        type: str = "about:blank",
        errors: list[dict[str, Any]] | None = None,
        problem: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}" if status else f"{title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.errors = list(errors or [])
        self.problem: dict[str, Any] = dict(problem or {})
        self.headers: dict[str, str] = dict(headers or {})

    @property
    def fields(self) -> list[str]:
        """Names of the offending fields listed by a validation problem."""
        return [str(e.get("field", "")) for e in self.errors]


class RidgelineConnectionError(RidgelineError):
    """The server could not be reached or the connection broke."""


class RidgelineTimeoutError(RidgelineConnectionError):
    """The server did not answer within the timeout."""


class BadRequestError(RidgelineError):
    """400: the request is malformed."""


class AuthenticationError(RidgelineError):
    """401: the API key is missing, unknown or revoked."""


class PermissionDeniedError(RidgelineError):
    """403: the API key lacks the needed scope."""


class NotFoundError(RidgelineError):
    """404: no such resource."""


class ConflictError(RidgelineError):
    """409: a resource with this id already exists."""


class PreconditionFailedError(RidgelineError):
    """412: the If-Match ETag is stale."""


class PayloadTooLargeError(RidgelineError):
    """413: the body exceeds the server's limit."""


class InvalidRequestError(RidgelineError):
    """422: a field is invalid; ``errors`` lists the offending fields."""


class RateLimitError(RidgelineError):
    """429: too many requests (still failing after the allowed retries)."""


class ServerError(RidgelineError):
    """5xx: the server failed."""


class ServiceUnavailableError(ServerError):
    """503: the server is not ready or overloaded."""


_BY_STATUS: dict[int, type[RidgelineError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_class(status: int) -> type[RidgelineError]:
    """Return the exception class for an HTTP error status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else RidgelineError


def _decode_problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def error_from_response(response: httpx.Response) -> RidgelineError:
    """Build the exception for an error response from its problem+json body (or its text)."""
    problem = _decode_problem(response)
    status = response.status_code
    title = str(problem.get("title") or response.reason_phrase or "HTTP error")
    detail = problem.get("detail")
    if detail is None:
        detail = "" if problem else response.text[:500]
    errors = problem.get("errors")
    return error_class(status)(
        status,
        title,
        str(detail),
        type=str(problem.get("type") or "about:blank"),
        errors=[e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else None,
        problem=problem,
        headers=dict(response.headers),
    )


def error_from_problem(problem: Mapping[str, Any]) -> RidgelineError:
    """Build the exception for a problem object embedded in a response (batch items)."""
    status = int(problem.get("status") or 0)
    errors = problem.get("errors")
    return error_class(status)(
        status,
        str(problem.get("title") or "error"),
        str(problem.get("detail") or ""),
        type=str(problem.get("type") or "about:blank"),
        errors=[e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else None,
        problem=problem,
    )


def error_from_transport(exc: httpx.TransportError) -> RidgelineConnectionError:
    """Build the exception for a request that got no response."""
    cls = (
        RidgelineTimeoutError
        if isinstance(exc, httpx.TimeoutException)
        else (RidgelineConnectionError)
    )
    return cls(None, type(exc).__name__, str(exc) or repr(exc))
