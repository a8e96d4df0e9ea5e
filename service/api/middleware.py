"""ASGI middleware: request ids, access logs, metrics, last-resort 500s and body-size limits."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.early_auth import EarlyAuth
from service.api.input_guard import NUL_MESSAGE, body_problem, nul_in_path, nul_query_field
from service.api.logs import log_info
from service.api.metrics import RequestMetrics
from service.api.problems import (
    DATABASE_RETRY_AFTER_S,
    PROBLEM_MEDIA_TYPE,
    database_unavailable,
    problem_body,
)

REQUEST_ID_HEADER = b"x-request-id"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _problem_bytes(
    status: int, title: str, detail: str, slug: str, errors: list[dict[str, str]] | None = None
) -> bytes:
    return json.dumps(problem_body(status, title, detail, slug, errors)).encode()


async def send_problem(
    send: Send,
    status: int,
    title: str,
    detail: str,
    slug: str,
    errors: list[dict[str, str]] | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send a complete problem+json response from ASGI middleware."""
    body = _problem_bytes(status, title, detail, slug, errors)
    headers = [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    if status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_invalid(send: Send, field: str, message: str) -> None:
    await send_problem(
        send,
        422,
        "Validation failed",
        f"{field} {message}",
        "validation-error",
        errors=[{"field": field, "message": message}],
    )


def _header(scope: Scope, wanted: bytes) -> str:
    for name, value in scope["headers"]:
        if name == wanted:
            return str(value.decode("latin-1"))
    return ""


class BodySizeLimitMiddleware:
    """Reject bodies over the limit with 413, by Content-Length and by streamed size.

    ``max_bytes`` applies everywhere except under the path prefixes of ``prefix_limits``. The
    path, query string and buffered body are also checked for NUL characters (422 naming the
    field; see ``input_guard``), except inside the ``items`` of a body sent to one of
    ``per_item_paths`` (batches: the endpoint answers each item on its own).
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        prefix_limits: Mapping[str, int] | None = None,
        read_timeout_s: float | None = None,
        early_auth: EarlyAuth | None = None,
        per_item_paths: Collection[str] = (),
    ) -> None:
        self.app = app
        self.per_item_paths = frozenset(per_item_paths)
        self.max_bytes = max_bytes
        self.prefix_limits = dict(prefix_limits or {})
        self.read_timeout_s = read_timeout_s
        self.early_auth = early_auth

    def limit_for(self, path: str) -> int:
        """Return the body limit in bytes for a request path."""
        for prefix, limit in self.prefix_limits.items():
            if path.startswith(prefix):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if nul_in_path(scope["path"]):
            await _send_invalid(send, "path", NUL_MESSAGE)
            return
        query_field = nul_query_field(scope.get("query_string", b""))
        if query_field is not None:
            await _send_invalid(send, query_field, NUL_MESSAGE)
            return
        if self.early_auth is not None and self.early_auth.is_write(scope):
            refusal = await self.early_auth.refusal(scope)
            if refusal is not None:
                await send_problem(
                    send,
                    401,
                    "Unauthorized",
                    refusal,
                    "unauthorized",
                    headers=[(b"www-authenticate", b"ApiKey"), (b"connection", b"close")],
                )
                return
        max_bytes = self.limit_for(scope["path"])
        detail = f"request body exceeds the limit of {max_bytes} bytes"
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
                await send_problem(send, 413, "Content Too Large", detail, "content-too-large")
                return
        # Buffer the body (bounded by the limit) so an oversized stream is refused before the app.
        messages: list[Message] = []
        received = 0
        while True:
            try:
                # asyncio.timeout, not wait_for: no task per message (wait_for wraps the
                # receive in one), the same TimeoutError when nothing arrives in time.
                async with asyncio.timeout(self.read_timeout_s):
                    message = await receive()
            except TimeoutError:
                await send_problem(
                    send,
                    408,
                    "Request Timeout",
                    f"no part of the request body arrived for {self.read_timeout_s:g} s",
                    "request-timeout",
                    headers=[(b"connection", b"close")],
                )
                return
            messages.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > max_bytes:
                await send_problem(send, 413, "Content Too Large", detail, "content-too-large")
                return
            if not message.get("more_body", False):
                break
        if received:
            body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
            found = body_problem(
                body,
                _header(scope, b"content-type"),
                per_item=scope["path"] in self.per_item_paths,
            )
            if found is not None:
                await _send_invalid(send, *found)
                return

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


class RequestContextMiddleware:
    """Tag responses with X-Request-ID, log one JSON line per request and record metrics."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics, logger: logging.Logger) -> None:
        self.app = app
        self.metrics = metrics
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status = message["status"]
                started = True
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER, request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if database_unavailable(exc) and not started:
                self.logger.warning(
                    "database unavailable",
                    extra={"fields": {"request_id": request_id, "error": type(exc).__name__}},
                )
                await send_problem(
                    send_with_id,
                    503,
                    "Service Unavailable",
                    "the database is busy or unreachable; retry shortly",
                    "service-unavailable",
                    headers=[(b"retry-after", str(DATABASE_RETRY_AFTER_S).encode())],
                )
                return
            self.logger.exception("unhandled error", extra={"fields": {"request_id": request_id}})
            if not started:
                await send_problem(
                    send_with_id,
                    500,
                    "Internal Server Error",
                    f"an unexpected error occurred; quote request id {request_id}",
                    "internal-error",
                )
        finally:
            elapsed_s = time.perf_counter() - start
            route = _route_template(scope)
            self.metrics.observe(route, scope["method"], status, elapsed_s)
            log_info(
                self.logger,
                "request",
                {
                    "request_id": request_id,
                    "method": scope["method"],
                    "path": scope["path"],
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed_s * 1000, 3),
                },
            )


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER:
            text = value.decode("latin-1")
            return text if _VALID_REQUEST_ID.match(text) else None
    return None


def _route_template(scope: Scope) -> str:
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
