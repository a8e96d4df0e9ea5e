"""Where a command runs: in-process against the local database, or a remote server (--url)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from fastapi import Request

from service.client import Ridgeline

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="RIDGELINE_URL",
        help="Remote Ridgeline server; without it the command runs on the local database.",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="RIDGELINE_API_KEY",
        help="API key for the remote server (writes need one).",
        show_default=False,
    ),
]


def _trusted(request: Request) -> None:
    """Grant access: a local user already owns the database the command opens (as admin)."""
    request.state.api_key_scopes = ["admin"]


@contextmanager
def open_client(url: str | None, api_key: str | None) -> Iterator[Ridgeline]:
    """A client on ``url``, or on the app served in-process (lifespan: migrations and seed)."""
    if url:
        with Ridgeline(url, api_key=api_key) as client:
            yield client
        return
    with warnings.catch_warnings():
        # Starlette deprecates driving its TestClient with httpx; it is still the supported way.
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.api.deps import require_read, require_write
    from service.settings import Settings

    quiet = {} if "RIDGELINE_LOG_LEVEL" in os.environ else {"log_level": "WARNING"}
    app = create_app(Settings(**quiet))  # type: ignore[arg-type]
    app.dependency_overrides[require_read] = _trusted
    app.dependency_overrides[require_write] = _trusted
    with (
        TestClient(app, raise_server_exceptions=False) as http,
        Ridgeline(http_client=http) as client,
    ):
        yield client
