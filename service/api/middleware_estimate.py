"""A direct path for plain ``POST /v1/estimates`` requests, past routing and dependency solving.

FastAPI finds the route by trying every route in turn and then solves the endpoint's
dependencies (settings, read access, viewer, ``Accept``) before validating the body: about
0.15 ms of CPU per estimate, as much as the rest of the framework. For the common request
(JSON body, no API key, reads open) none of that decides anything, so this innermost
middleware answers it itself with the same pieces FastAPI would use:

- the body is parsed as Starlette's ``Request.json`` does and validated by the route's own
  body field (the same pydantic adapter, the same ``loc``);
- the endpoint function itself is called, with the viewer ``get_viewer`` gives a request
  without a key ("") and the first ``Accept`` header, as FastAPI's ``Header()`` reads it;
- exceptions go through a ``ExceptionMiddleware`` built from the app's own handlers, and
  ``scope["route"]`` is set, so metrics and the access log name the route as before.

Anything else (another content type, a key, protected reads, a body that is not JSON or does
not validate) is passed on unchanged, with the body replayed, to the full stack, which
answers it (errors included) exactly as before. ``tests/api/test_estimate_fast_path.py``
compares both paths byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.routers.analysis import post_estimates

ESTIMATE_PATH = "/v1/estimates"
_JSON = b"application/json"


class _Route:
    """What the direct path needs from the app, resolved once all routes are included."""

    def __init__(self, app: FastAPI, handle: ASGIApp) -> None:
        route = _find_route(app)
        params = route.dependant.body_params
        if len(params) != 1:
            raise RuntimeError(f"{ESTIMATE_PATH} should take exactly one body model")
        self.route = route
        self.body_field = params[0]
        handlers = {k: v for k, v in app.exception_handlers.items() if k not in (500, Exception)}
        self.with_handlers = ExceptionMiddleware(handle, handlers=handlers, debug=app.debug)


def _find_route(app: FastAPI) -> APIRoute:
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if (
            isinstance(route, APIRoute)
            and context.path_format == ESTIMATE_PATH
            and "POST" in (route.methods or ())
        ):
            return route
    raise RuntimeError(f"no POST {ESTIMATE_PATH} route")


def _plain(scope: Scope) -> tuple[bool, str | None]:
    """Whether the headers let the direct path answer, and the first ``Accept`` value."""
    content_type: bytes | None = None
    accept: str | None = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            if content_type is None:
                content_type = value
        elif name == b"accept":
            if accept is None:
                accept = value.decode("latin-1")
        elif name == b"x-api-key":
            return False, None
    return content_type == _JSON, accept


class EstimateFastPath:
    """Answer plain single estimates directly; pass everything else on (see the module doc)."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self._route: _Route | None = None

    def _resolved(self) -> _Route:
        if self._route is None:
            self._route = _Route(self.fastapi_app, self._answer)
        return self._route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != ESTIMATE_PATH
            or scope["method"] != "POST"
            or scope.get("root_path")
            or self.fastapi_app.state.settings.require_key_for_reads
            or "api_key_prefix" in scope.get("state", {})
        ):
            await self.app(scope, receive, send)
            return
        plain, accept = _plain(scope)
        messages: list[Message] = []
        body = b""
        if plain:
            while True:
                message = await receive()
                messages.append(message)
                if message["type"] != "http.request":
                    break
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        validated = self._validated(body) if plain and body else None
        if validated is None:

            async def replay() -> Message:
                if messages:
                    return messages.pop(0)
                return await receive()

            await self.app(scope, replay, send)
            return
        route = self._resolved()
        scope["route"] = route.route
        scope["endpoint"] = route.route.endpoint
        scope.setdefault("path_params", {})
        scope["ridgeline.estimate"] = (validated, accept)
        await route.with_handlers(scope, receive, send)

    def _validated(self, body: bytes) -> Any:
        """The body validated as FastAPI would, or None when the full stack should answer."""
        try:
            document = json.loads(body)
            value, errors = self._resolved().body_field.validate(document, {}, loc=("body",))
        except Exception:  # not JSON, too deep: the full stack answers (400 or 422)
            return None
        return None if errors else value

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, accept = scope.pop("ridgeline.estimate")
        request = Request(scope, receive, send)
        response = await post_estimates(body, request, "", accept)
        await response(scope, receive, send)
