"""RFC 9457 problem+json responses and the exception handlers that produce them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
from service.engine.errors import (
    ContextWindowError,
    EngineError,
    InvalidLayoutError,
    InvalidShapeError,
    UnsupportedDtypeError,
)
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
_LAYOUT_FIELD = re.compile(r"^(tp|pp_virtual_stages|pp|ep|attention_dp|dp)\b")


def problem_body(
    status: int,
    title: str,
    detail: str,
    slug: str,
    errors: Sequence[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Return an RFC 9457 problem object: ``type``, ``title``, ``status``, ``detail``, and
    ``errors`` (``[{"field", "message"}]``) for validation problems."""
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = list(errors)
    return body


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    """Send a problem object as problem+json with its status."""
    return JSONResponse(
        body, status_code=body["status"], media_type=PROBLEM_MEDIA_TYPE, headers=headers
    )


def problem(
    status: int,
    title: str,
    detail: str,
    slug: str,
    errors: Sequence[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """Build a problem+json response."""
    return problem_response(problem_body(status, title, detail, slug, errors), headers)


def field_name(loc: Sequence[int | str]) -> str:
    """Turn a pydantic error location into a dotted field name without its location kind."""
    parts = [part for part in loc if part != "[key]"]
    if parts and parts[0] in _LOCATION_KINDS:
        parts = parts[1:]
    return ".".join(str(part) for part in parts) or "body"


def validation_body(errors: Sequence[dict[str, str]], detail: str | None = None) -> dict[str, Any]:
    """Return the 422 problem object that lists the offending fields."""
    names = ", ".join(e["field"] for e in errors)
    return problem_body(
        422,
        "Validation failed",
        detail or f"invalid value for: {names}",
        "validation-error",
        errors,
    )


def validation_problem(errors: Sequence[dict[str, str]], detail: str | None = None) -> JSONResponse:
    """Build the 422 problem that lists the offending fields."""
    return problem_response(validation_body(errors, detail))


def pydantic_errors(
    errors: Sequence[Mapping[str, Any]], root: str = "body"
) -> list[dict[str, str]]:
    """Name each pydantic error's field (``root`` when it has no location) and message."""
    return [
        {
            "field": field_name(err["loc"]) if err.get("loc") else root,
            "message": str(err.get("msg", "invalid")),
        }
        for err in errors
    ]


def engine_error_field(
    exc: EngineError, shape_field: str | None = None, *, in_query: bool = False
) -> str:
    """Name the request field an engine error is about.

    A layout error names the ``parallelism`` member it is about, a context-window error the
    token field, a dtype error ``precision``. A shape error names its shape field, or
    ``shape_field`` when the request refers to a stored model rather than sending a shape.
    ``in_query``: the request's fields are query parameters (the charts), so a layout error
    names the parameter itself (``tp``, ``pp``, ``ep``; ``tp`` when it names none) and an
    error about no one field names ``query``.
    """
    if isinstance(exc, InvalidShapeError):
        return shape_field or exc.field
    if isinstance(exc, InvalidLayoutError):
        match = _LAYOUT_FIELD.match(str(exc))
        if in_query:
            return match.group(1) if match else "tp"
        return f"parallelism.{match.group(1)}" if match else "parallelism"
    if isinstance(exc, UnsupportedDtypeError):
        return "precision"
    if isinstance(exc, ContextWindowError):
        return "input_tokens" if exc.field.startswith("input_tokens") else exc.field
    return "query" if in_query else "body"


def error_problem(
    exc: Exception, *, shape_field: str | None = None, in_query: bool = False
) -> dict[str, Any]:
    """Map a service or engine error to its problem object; re-raise anything else.

    The one mapper behind the exception handlers, batch items, heavy calls and charts: 404 for
    an unknown id, 409, 412, 401, 403 for what they mean, 422 naming the field for bad input
    (``shape_field`` and ``in_query`` as for ``engine_error_field``).
    """
    if isinstance(exc, NotFoundError):
        return problem_body(404, "Not Found", str(exc), "not-found")
    if isinstance(exc, ConflictError):
        return problem_body(409, "Conflict", str(exc), "conflict")
    if isinstance(exc, PreconditionFailedError):
        return problem_body(412, "Precondition Failed", str(exc), "precondition-failed")
    if isinstance(exc, AuthenticationError):
        return problem_body(401, "Unauthorized", str(exc), "unauthorized")
    if isinstance(exc, PermissionDeniedError):
        return problem_body(403, "Forbidden", str(exc), "forbidden")
    if isinstance(exc, FieldError):
        return validation_body([{"field": exc.field, "message": exc.message}], str(exc))
    if isinstance(exc, EngineError):
        field = engine_error_field(exc, shape_field, in_query=in_query)
        return validation_body([{"field": field, "message": str(exc)}], str(exc))
    raise exc


async def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_problem(pydantic_errors(exc.errors()))


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


async def _mapped(_: Request, exc: Exception) -> JSONResponse:
    body = error_problem(exc)
    headers = {"WWW-Authenticate": "ApiKey"} if body["status"] == 401 else None
    return problem_response(body, headers)


DATABASE_RETRY_AFTER_S = 1


def database_unavailable(exc: BaseException) -> bool:
    """Return whether ``exc`` means the database cannot be reached or is overloaded right now.

    Pool exhaustion, refused or dropped connections, "too many clients", a server restarting,
    SQLite's "database is locked": all pass with time, so the answer is 503, not 500.
    """
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeoutError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def database_problem() -> JSONResponse:
    """The 503 answer when the database is busy or unreachable (``database_unavailable``)."""
    return problem(
        503,
        "Service Unavailable",
        "the database is busy or unreachable; retry shortly",
        "service-unavailable",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


async def _database_busy(_: Request, exc: Exception) -> JSONResponse:
    if not database_unavailable(exc):
        raise exc
    # The pool stayed busy past its timeout, or the database refused or dropped the connection.
    return database_problem()


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
    for mapped in (
        NotFoundError,
        ConflictError,
        PreconditionFailedError,
        AuthenticationError,
        PermissionDeniedError,
        FieldError,
        EngineError,
    ):
        app.add_exception_handler(mapped, _mapped)
