"""Request dependencies: settings, the per-request session (committed once) and API-key auth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from service.services.auth import authorise
from service.services.catalog import CatalogService
from service.settings import Settings


def get_settings(request: Request) -> Settings:
    """Return the settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


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


def require_write(session: SessionDep, settings: SettingsDep, api_key: ApiKeyHeader = None) -> None:
    """Require a valid key with the ``write`` scope."""
    authorise(session, settings.api_key_pepper, api_key, "write")


def require_read(session: SessionDep, settings: SettingsDep, api_key: ApiKeyHeader = None) -> None:
    """Require a key with the ``read`` scope when the operator configured reads as protected."""
    if settings.require_key_for_reads:
        authorise(session, settings.api_key_pepper, api_key, "read")


def get_catalog(session: SessionDep) -> CatalogService:
    """Return the catalog service bound to this request's session."""
    return CatalogService(session)


CatalogDep = Annotated[CatalogService, Depends(get_catalog, scope="function")]
WriteAccess = Depends(require_write, scope="function")
ReadAccess = Depends(require_read, scope="function")
