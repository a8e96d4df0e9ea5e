"""The OpenAPI document, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, all served locally.

The Swagger UI and ReDoc bundles come from the ``fastapi-offline`` package (MIT), served under
``/docs-assets`` so the pages work with no network. The routes are FastAPI routes (not
Starlette's), so request metrics label them by their path instead of "unmatched".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_URL = "/docs-assets"
OPENAPI_URL = "/openapi.json"
SWAGGER_URL = "/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
REDOC_URL = "/redoc"


def _drop_null(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a parameter schema without its ``null`` alternative (``X | None`` → ``X``)."""
    variants = schema.get("anyOf")
    if not isinstance(variants, list):
        return schema
    kept = [v for v in variants if v != {"type": "null"}]
    if len(kept) == len(variants):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}


def describe_optional_parameters(document: dict[str, Any]) -> dict[str, Any]:
    """Say "may be left out" as ``required: false``, not as a ``null`` value.

    An optional query parameter or header is absent or a string; ``null`` cannot be sent (a
    client that sends the text "null" sends a string the server reads as such).
    """
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if "schema" in parameter and not parameter.get("required"):
                    parameter["schema"] = _drop_null(parameter["schema"])
    return document


def mount_api_docs(app: FastAPI) -> None:
    """Serve the OpenAPI document and both documentation pages from ``app`` itself."""
    router = APIRouter(include_in_schema=False)
    build = app.openapi

    def openapi() -> dict[str, Any]:
        return describe_optional_parameters(build())

    app.openapi = openapi  # type: ignore[method-assign]

    @router.get(OPENAPI_URL)
    def openapi_document() -> JSONResponse:
        """Return the OpenAPI document (built once by FastAPI and cached on the app)."""
        document: dict[str, Any] = app.openapi()
        return JSONResponse(document)

    @router.get(SWAGGER_URL)
    def swagger_ui(request: Request) -> HTMLResponse:
        """Return the Swagger UI page, pointing at the local assets."""
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{OPENAPI_URL}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            # No online validator badge: it would load an image from swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @router.get(OAUTH2_REDIRECT_URL)
    def swagger_ui_redirect() -> HTMLResponse:
        """Return Swagger UI's OAuth2 redirect helper page."""
        return get_swagger_ui_oauth2_redirect_html()

    @router.get(REDOC_URL)
    def redoc(request: Request) -> HTMLResponse:
        """Return the ReDoc page, pointing at the local bundle (no web fonts)."""
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{OPENAPI_URL}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
