"""Request limits in one place, and the problem+json responses the OpenAPI document declares."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from service.api.deps import route_writes
from service.api.keys import KeyVerifier, parse_networks
from service.api.problems import PROBLEM_MEDIA_TYPE
from service.api.ratelimit import RateLimitMiddleware, RateRule
from service.settings import Settings

# Per-request bounds a client cannot exceed (the settings hold the operator-tunable ones).
MAX_PAGE_SIZE = 200
MAX_BATCH_SIZES_PER_ESTIMATE = 1_024
MAX_ITEMS_PER_ESTIMATE_BATCH = 256
MAX_MEASUREMENTS_PER_CALIBRATION = 20_000

# Operations that spend CPU per request, rate-limited per client.
ESTIMATE_OPERATIONS = frozenset(
    {
        ("POST", "/v1/estimates"),
        ("POST", "/v1/estimates/batch"),
        ("POST", "/v1/intensity"),
        ("POST", "/v1/plans"),
        ("GET", "/v1/charts/roofline"),
        ("GET", "/v1/charts/sweep"),
        ("GET", "/v1/charts/frontier"),
    }
)
CALIBRATION_OPERATIONS = frozenset({("POST", "/v1/calibrations")})
# Operations that run in the heavy-work slots (service/api/heavy.py): a quota of their own.
HEAVY_OPERATIONS = frozenset(
    {
        ("POST", "/v1/estimates/batch"),
        ("POST", "/v1/plans"),
        ("GET", "/v1/charts/roofline"),
        ("GET", "/v1/charts/sweep"),
        ("GET", "/v1/charts/frontier"),
    }
)

PROBLEM_SCHEMA_NAME = "Problem"
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": PROBLEM_SCHEMA_NAME,
    "description": "An RFC 9457 problem; validation problems list the offending fields.",
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}
_PROBLEM_REF = {"$ref": f"#/components/schemas/{PROBLEM_SCHEMA_NAME}"}

PROBLEM_DESCRIPTIONS: dict[int, str] = {
    400: "The body could not be parsed (not UTF-8 JSON).",
    401: "Missing or unknown API key.",
    403: "The API key lacks the scope this operation needs.",
    404: "A named resource does not exist.",
    409: "The resource already exists or conflicts with another.",
    412: "If-Match does not match the current ETag.",
    413: "The request body exceeds the configured size limit.",
    422: "Invalid request; `errors` names each offending field.",
    429: "Rate limit exceeded; retry after `Retry-After` seconds.",
    503: "Overloaded or the database is unreachable; retry after `Retry-After` seconds.",
}
_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds until a request will be accepted again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def problem_response(status: int) -> dict[str, Any]:
    """Return the OpenAPI response object of a problem+json answer with ``status``."""
    response: dict[str, Any] = {
        "description": PROBLEM_DESCRIPTIONS.get(status, "Problem."),
        "content": {PROBLEM_MEDIA_TYPE: {"schema": _PROBLEM_REF}},
    }
    if status in (429, 503):
        response["headers"] = _RETRY_AFTER_HEADER
    return response


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Return a ``responses=`` mapping for a route declaring these problem+json statuses."""
    return {status: problem_response(status) for status in statuses}


# Reusable by routers: ``@router.post(..., responses=PROBLEM_RESPONSES)`` declares them all.
PROBLEM_RESPONSES = problem_responses(401, 403, 404, 409, 412, 413, 422, 429)


def _api_routes(app: FastAPI) -> list[tuple[str, str, APIRoute]]:
    """List ``(method, path, route)`` of every API route, including those of included routers."""
    found: list[tuple[str, str, APIRoute]] = []
    for context in iter_route_contexts(app.routes):
        route, path = context.original_route, context.path_format
        if isinstance(route, APIRoute) and path is not None:
            found.extend((method, path, route) for method in route.methods or ())
    return found


def _document_operation(
    operation: dict[str, Any], *, writes: bool, rate_limited: bool, has_body: bool
) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    wanted: set[int] = set()
    if writes:
        wanted |= {401, 403}
    if rate_limited:
        wanted.add(429)
    if has_body:
        wanted |= {400, 413}
    if any(p.get("in") == "path" for p in operation.get("parameters", [])):
        wanted.add(404)
    if any(p.get("name", "").lower() == "if-match" for p in operation.get("parameters", [])):
        wanted.add(412)
    for status in wanted:
        responses.setdefault(str(status), problem_response(status))
    if any(p.get("name", "").lower() == "if-none-match" for p in operation.get("parameters", [])):
        responses.setdefault("304", {"description": "Not Modified: If-None-Match matched."})
    for code, response in responses.items():
        if code.isdigit() and int(code) >= 400:
            # FastAPI documents its 422 as application/json; errors are sent as problem+json.
            content = response.setdefault("content", {})
            schema = content.pop("application/json", {}).get("schema", _PROBLEM_REF)
            if schema.get("$ref", "").endswith("/HTTPValidationError"):
                schema = _PROBLEM_REF
            content.setdefault(PROBLEM_MEDIA_TYPE, {"schema": schema})


def document_problems(app: FastAPI, rate_limited: set[tuple[str, str]]) -> None:
    """Make ``app.openapi()`` declare the problems every operation can answer with.

    Cross-cutting answers are added per operation: 401/403 where a write key is required,
    400/413 where a body is read, 429 on rate-limited ``(method, path)`` pairs, 404 with a path
    parameter, 412 with If-Match, 304 with If-None-Match. Every 4xx is problem+json.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        document.setdefault("components", {}).setdefault("schemas", {})
        document["components"]["schemas"].setdefault(PROBLEM_SCHEMA_NAME, PROBLEM_SCHEMA)
        routes = {(method.lower(), path): route for method, path, route in _api_routes(app)}
        for path, item in document.get("paths", {}).items():
            for method, operation in item.items():
                route = routes.get((method, path))
                if route is None or not isinstance(operation, dict):
                    continue
                _document_operation(
                    operation,
                    writes=route_writes(route),
                    rate_limited=(method.upper(), path) in rate_limited,
                    has_body="requestBody" in operation,
                )
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def rate_rules(settings: Settings) -> tuple[RateRule, ...]:
    """Return the rate-limit rules the settings configure (none when disabled)."""
    if not settings.rate_limit_enabled:
        return ()
    return (
        RateRule(
            "estimates",
            ESTIMATE_OPERATIONS,
            settings.rate_limit_estimates_per_s,
            settings.rate_limit_estimates_burst,
        ),
        RateRule(
            "heavy",
            HEAVY_OPERATIONS,
            settings.rate_limit_heavy_per_s,
            settings.rate_limit_heavy_burst,
        ),
        RateRule(
            "calibrations",
            CALIBRATION_OPERATIONS,
            settings.rate_limit_calibrations_per_s,
            settings.rate_limit_calibrations_burst,
        ),
    )


def install_limits(app: FastAPI, settings: Settings, verifier: KeyVerifier | None = None) -> None:
    """Add the rate-limit middleware and declare the limit and auth problems in the document."""
    rules = rate_rules(settings)
    if rules:
        app.add_middleware(
            RateLimitMiddleware,
            rules=rules,
            trusted_proxies=parse_networks(settings.trusted_proxies),
            sync_s=settings.rate_limit_sync_s if settings.rate_limit_shared else None,
            verifier=verifier,
        )
    document_problems(app, {op for rule in rules for op in rule.operations})
