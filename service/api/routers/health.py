"""Liveness, readiness and Prometheus metrics endpoints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from service.api.startup import NOT_READY_RETRY_AFTER_S
from service.db.migrate import is_at_head
from service.db.session import ping

router = APIRouter(tags=["service"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Report that the process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """Report ready only when the database answers and its schema is at the migration head."""
    checks: dict[str, Any] = {"database": False, "migrations": False}
    startup = request.app.state.startup
    if not startup.ready:
        checks["startup"] = startup.describe()
        return JSONResponse(
            {"status": "not ready", "checks": checks},
            status_code=503,
            headers={"Retry-After": str(NOT_READY_RETRY_AFTER_S)},
        )
    try:
        engine = request.app.state.engine
        ping(engine)
        checks["database"] = True
        checks["migrations"] = is_at_head(engine)
    except SQLAlchemyError as exc:
        checks["error"] = type(exc).__name__
    ready = checks["database"] and checks["migrations"]
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """Expose request metrics in the Prometheus text format."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
