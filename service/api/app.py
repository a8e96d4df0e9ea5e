"""FastAPI application factory; ``app`` is the module-level instance for uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.api.early_auth import EarlyAuth
from service.api.heavy import HeavyWork
from service.api.keys import KeyVerifier
from service.api.limits import install_limits
from service.api.logs import configure_logging
from service.api.metrics import RequestMetrics
from service.api.middleware import BodySizeLimitMiddleware, RequestContextMiddleware
from service.api.middleware_estimate import EstimateFastPath
from service.api.problems import install_problem_handlers
from service.api.routers import accelerators, analysis, calibrations, charts, health, models
from service.api.routers import planning as planning_routes
from service.api.routers.api_docs import mount_api_docs
from service.api.routers.dashboard import mount_dashboard
from service.api.security_headers import SecurityHeadersMiddleware, install_cors
from service.api.startup import StartupGateMiddleware, StartupState, attempt, wait_for_database
from service.db.reader import AutocommitReader
from service.db.session import make_engine, make_session_factory
from service.settings import Settings

API_TITLE = "Ridgeline"
API_VERSION = "1.0.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app: routers, problem+json handlers, middleware and a database lifespan."""
    settings = settings or Settings()
    logger = configure_logging(settings.log_level)
    metrics = RequestMetrics()

    startup = StartupState()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(
            settings.database_url,
            pool_size=settings.pool_size_per_worker,
            max_overflow=0,
            pool_timeout_s=settings.db_pool_timeout_s,
        )
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        app.state.reader = AutocommitReader(settings.database_url)
        waiting: asyncio.Task[None] | None = None
        if not await attempt(startup, settings, engine):
            waiting = asyncio.create_task(wait_for_database(startup, settings, engine))
        try:
            yield
        finally:
            if waiting is not None:
                waiting.cancel()
            app.state.heavy.close()
            app.state.reader.close()
            engine.dispose()

    app = FastAPI(
        title=API_TITLE,
        version=API_VERSION,
        summary="Roofline estimates of LLM inference speed and cost per accelerator.",
        lifespan=lifespan,
        # Served by mount_api_docs with local assets instead of FastAPI's CDN-based pages.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # No OpenTelemetry here (metrics are Prometheus): skips FastAPI's per-request checks.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.startup = startup
    app.state.heavy = HeavyWork(
        settings.heavy_workers, settings.heavy_queue, settings.heavy_processes
    )
    app.state.metrics = metrics
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(accelerators.router)
    app.include_router(models.router)
    app.include_router(analysis.router)
    app.include_router(calibrations.router)
    app.include_router(planning_routes.router)
    app.include_router(charts.router)
    mount_api_docs(app)
    mount_dashboard(app)
    # Added last = outermost: the request context wraps the body-size check.
    verifier = app.state.key_verifier = KeyVerifier()
    # Innermost: plain single estimates skip routing and dependency solving (same answers).
    app.add_middleware(EstimateFastPath, fastapi_app=app)
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        prefix_limits={"/v1/calibrations": settings.max_calibration_body_bytes},
        read_timeout_s=settings.body_read_timeout_s,
        early_auth=EarlyAuth(verifier),
        per_item_paths=("/v1/estimates/batch",),
    )
    # Rate limits sit inside the request context (429s get request ids) and before the body.
    install_limits(app, settings, verifier)
    app.add_middleware(StartupGateMiddleware, state=startup)
    install_cors(app, settings.cors_origins)  # answers preflights before the limits
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(RequestContextMiddleware, metrics=metrics, logger=logger)
    return app


app = create_app()
