"""RFC 9457 problem+json responses and the exception handlers that produce them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from service.api.heavy import HEAVY_RETRY_AFTER_S, HeavyWorkFullError
from service.engine.errors import InvalidLayoutError, InvalidShapeError, UnsupportedDtypeError
from service.services.errors import (
    NESTING_MESSAGE,
    AuthenticationError,
    ConflictError,
    FieldError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE = "https://ridgeline.dev/problems/"
FASTAPI_BODY_ERROR = "There was an error parsing the body"
_LOCATION_KINDS = {"body", "query", "path", "header", "cookie"}


def problem(
    status: int,
    title: str,
    detail: str,
    slug: str,
    errors: Sequence[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """Build a problem+json response."""
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = list(errors)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def field_name(loc: Sequence[int | str]) -> str:
    """Turn a pydantic error location into a dotted field name without its location kind."""
    parts = [part for part in loc if part != "[key]"]
    if parts and parts[0] in _LOCATION_KINDS:
        parts = parts[1:]
    return ".".join(str(part) for part in parts) or "body"


def validation_problem(errors: Sequence[dict[str, str]], detail: str | None = None) -> JSONResponse:
    """Build the 422 problem that lists the offending fields."""
    names = ", ".join(e["field"] for e in errors)
    return problem(
        422,
        "Validation failed",
        detail or f"invalid value for: {names}",
        "validation-error",
        errors=errors,
    )


async def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": field_name(err.get("loc", ())), "message": str(err.get("msg", "invalid"))}
        for err in exc.errors()
    ]
    return validation_problem(errors)


def allowed_methods(request: Request) -> list[str]:
    """Return, sorted, the methods of the most literal route templates matching the path.

    ``/v1/models/import`` matches both ``/v1/models/import`` and ``/v1/models/{model_id}``; like
    the OpenAPI document, the literal template names the resource, so only its methods count.
    """
    path: str = request.scope["path"]
    root_path: str = request.scope.get("root_path", "")
    if root_path and path.startswith(root_path):
        path = path[len(root_path) :]
    by_params: dict[int, set[str]] = {}
    for route in iter_route_contexts(request.app.router.routes):
        if route.path and route.methods and compile_path(route.path)[0].match(path):
            by_params.setdefault(route.path.count("{"), set()).update(route.methods)
    return sorted(by_params[min(by_params)]) if by_params else []


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers) if exc.headers else {}
    if exc.status_code == 400:
        detail = str(exc.detail)
        if detail == FASTAPI_BODY_ERROR and isinstance(exc.__cause__, RecursionError):
            # Python's JSON parser recurses per nesting level: a 100,000-deep body is bad input.
            return validation_problem(
                [{"field": "body", "message": NESTING_MESSAGE}], detail=f"body {NESTING_MESSAGE}"
            )
        if detail == FASTAPI_BODY_ERROR:
            # FastAPI's answer to a body it cannot decode (not UTF-8, or otherwise unreadable).
            cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
            detail = f"The request body could not be read as UTF-8 JSON{cause}."
        return problem(400, "Malformed request body", detail, "malformed-body", headers=headers)
    if exc.status_code == 405:
        methods = allowed_methods(request)
        if methods:
            headers["Allow"] = ", ".join(methods)
    titles = {404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large"}
    title = titles.get(exc.status_code, "HTTP error")
    slug = title.lower().replace(" ", "-")
    return problem(exc.status_code, title, str(exc.detail), slug, headers=headers or None)


async def _not_found(_: Request, exc: Exception) -> JSONResponse:
    return problem(404, "Not Found", str(exc), "not-found")


async def _conflict(_: Request, exc: Exception) -> JSONResponse:
    return problem(409, "Conflict", str(exc), "conflict")


async def _precondition(_: Request, exc: Exception) -> JSONResponse:
    return problem(412, "Precondition Failed", str(exc), "precondition-failed")


async def _unauthenticated(_: Request, exc: Exception) -> JSONResponse:
    return problem(
        401, "Unauthorized", str(exc), "unauthorized", headers={"WWW-Authenticate": "ApiKey"}
    )


async def _forbidden(_: Request, exc: Exception) -> JSONResponse:
    return problem(403, "Forbidden", str(exc), "forbidden")


async def _field_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FieldError | InvalidShapeError)
    return validation_problem([{"field": exc.field, "message": exc.message}], detail=str(exc))


async def _engine_error(_: Request, exc: Exception) -> JSONResponse:
    field = "parallelism" if isinstance(exc, InvalidLayoutError) else "precision"
    return validation_problem([{"field": field, "message": str(exc)}], detail=str(exc))


DATABASE_RETRY_AFTER_S = 1


def database_unavailable(exc: BaseException) -> bool:
    """Return whether ``exc`` means the database cannot be reached or is overloaded right now.

    Pool exhaustion, refused or dropped connections, "too many clients", a server restarting,
    SQLite's "database is locked": all pass with time, so the answer is 503, not 500.
    """
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeoutError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


async def _database_busy(_: Request, exc: Exception) -> JSONResponse:
    if not database_unavailable(exc):
        raise exc
    # The pool stayed busy past its timeout, or the database refused or dropped the connection.
    return problem(
        503,
        "Service Unavailable",
        "the database is busy or unreachable; retry shortly",
        "service-unavailable",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


async def _heavy_full(_: Request, exc: Exception) -> JSONResponse:
    return problem(
        503,
        "Service Unavailable",
        str(exc),
        "heavy-work-queue-full",
        headers={"Retry-After": str(HEAVY_RETRY_AFTER_S)},
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Register every exception-to-problem mapping on ``app``."""
    app.add_exception_handler(HeavyWorkFullError, _heavy_full)
    app.add_exception_handler(PoolTimeoutError, _database_busy)
    app.add_exception_handler(OperationalError, _database_busy)
    app.add_exception_handler(InterfaceError, _database_busy)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(ConflictError, _conflict)
    app.add_exception_handler(PreconditionFailedError, _precondition)
    app.add_exception_handler(AuthenticationError, _unauthenticated)
    app.add_exception_handler(PermissionDeniedError, _forbidden)
    app.add_exception_handler(FieldError, _field_error)
    app.add_exception_handler(InvalidShapeError, _field_error)
    app.add_exception_handler(InvalidLayoutError, _engine_error)
    app.add_exception_handler(UnsupportedDtypeError, _engine_error)
