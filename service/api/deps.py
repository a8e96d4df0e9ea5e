"""Request dependencies: settings, the per-request session (committed once) and API-key auth.

``get_settings`` and ``require_read`` are ``async`` so that open reads cost no thread-pool hop
(FastAPI runs every sync dependency in a worker thread); a read key is checked in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from service.api.keys import KeyVerifier
from service.db.session import session_scope
from service.services.auth import authorise, has_scope
from service.services.catalog import CatalogService
from service.settings import Settings


async def get_settings(request: Request) -> Settings:
    """Return the settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


T = TypeVar("T")


def get_session(request: Request) -> Iterator[Session]:
    """Yield a session for this request; commit once after the handler, roll back on error."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ApiKeyHeader = Annotated[str | None, Header(alias="X-API-Key", include_in_schema=False)]


def _authorise(request: Request, settings: Settings, api_key: str | None, scope: str) -> None:
    # Own short session: the request's session stays untouched until its writes begin.
    with session_scope(request.app.state.session_factory) as session:
        row = authorise(session, settings.api_key_pepper, api_key, scope)
        request.state.api_key_scopes = list(row.scopes)
        request.state.api_key_prefix = row.prefix


def caller_is_admin(request: Request) -> bool:
    """Return whether this request's authorised key (if any) has the ``admin`` scope."""
    return has_scope(getattr(request.state, "api_key_scopes", []), "admin")


def require_write(request: Request, settings: SettingsDep, api_key: ApiKeyHeader = None) -> None:
    """Require a valid key with the ``write`` scope."""
    _authorise(request, settings, api_key, "write")


async def require_read(
    request: Request, settings: SettingsDep, api_key: ApiKeyHeader = None
) -> None:
    """Require a key with the ``read`` scope when the operator configured reads as protected."""
    if settings.require_key_for_reads:
        await run_in_threadpool(_authorise, request, settings, api_key, "read")


async def get_viewer(request: Request, api_key: ApiKeyHeader = None) -> str:
    """Return the lookup prefix of the caller's verified API key ("" without a valid key).

    Calibration profiles are listed, read and chosen for this viewer: published ones, and
    private ones it owns. A made-up key is anonymous here (it sees published profiles only).
    The verifier caches a key's answer for ``KEY_CACHE_TTL_S``, but a revoked key's private
    profiles are hidden from the next request on: ``calibration_repository.visible_to``
    checks in SQL that the viewer's key is not revoked.
    """
    authorised: str | None = getattr(request.state, "api_key_prefix", None)
    if authorised is not None:
        return authorised
    if not api_key:
        return ""
    verifier: KeyVerifier = request.app.state.key_verifier
    known, prefix = verifier.cached(api_key)
    if not known:
        state = request.app.state
        prefix = await run_in_threadpool(
            verifier.verify, state.session_factory, state.settings.api_key_pepper, api_key
        )
    return prefix or ""


Viewer = Annotated[str, Depends(get_viewer)]


def get_catalog(session: SessionDep, request: Request) -> CatalogService:
    """Return the catalog service bound to this request's session.

    Seeded rows may be replaced or deleted only with an ``admin`` key (``require_write``
    records the key's scopes before this runs).
    """
    return CatalogService(session, may_edit_seeded=caller_is_admin(request))


def _read_in_session(factory: sessionmaker[Session], read: Callable[[CatalogService], T]) -> T:
    with session_scope(factory) as session:
        return read(CatalogService(session))


async def read_catalog(request: Request, read: Callable[[CatalogService], T]) -> T:
    """Run a catalog read with its own short session in one worker-thread hop.

    A sync endpoint with ``CatalogDep`` crosses to a thread three times (session open, handler,
    commit); an ``async`` read endpoint calling this crosses once.
    """
    factory: sessionmaker[Session] = request.app.state.session_factory
    return await run_in_threadpool(_read_in_session, factory, read)


CatalogDep = Annotated[CatalogService, Depends(get_catalog, scope="function")]
WriteAccess = Depends(require_write, scope="function")
ReadAccess = Depends(require_read, scope="function")


def route_writes(route: APIRoute) -> bool:
    """Return whether ``route`` depends on ``require_write`` (directly or through another)."""
    stack = list(route.dependant.dependencies)
    while stack:
        dependant = stack.pop()
        if dependant.call is require_write:
            return True
        stack.extend(dependant.dependencies)
    return False
