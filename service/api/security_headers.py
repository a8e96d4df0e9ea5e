"""Security headers on every response, a CSP on the dashboard, and opt-in CORS.

``X-Content-Type-Options: nosniff`` (browsers must not guess a type: a problem+json or CSV
answer is never run as script) and ``Referrer-Policy: no-referrer`` go on every response. The
dashboard page (``/``) and its assets (``/static``) also get a Content-Security-Policy that
allows only this origin's scripts, styles, images and API calls (the page loads nothing from
elsewhere; inline styles stay allowed because charts are inserted as SVG with style
attributes) and forbids framing. Cross-origin browser access is off unless
``RIDGELINE_CORS_ORIGINS`` lists the origins to allow.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
_DASHBOARD = [(b"content-security-policy", DASHBOARD_CSP.encode()), (b"x-frame-options", b"DENY")]


def is_dashboard(path: str) -> bool:
    """Return whether ``path`` serves the dashboard page or its static assets."""
    return path == "/" or path.startswith("/static/")


class SecurityHeadersMiddleware:
    """Add the security headers to every HTTP response start."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _ALWAYS + _DASHBOARD if is_dashboard(scope["path"]) else _ALWAYS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install_cors(app: FastAPI, origins: str) -> None:
    """Allow cross-origin requests from the comma-separated ``origins`` (none when empty)."""
    allowed = [origin.strip() for origin in origins.split(",") if origin.strip()]
    if not allowed:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=allowed,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=[
            "Content-Type",
            "X-API-Key",
            "If-Match",
            "If-None-Match",
            "Idempotency-Key",
            "X-Request-ID",
        ],
        expose_headers=["ETag", "Location", "Retry-After", "X-Request-ID"],
        max_age=600,
    )
