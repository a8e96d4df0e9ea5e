"""Baseline for the load benchmark: a bare FastAPI app with one pydantic-validated POST.

Run: .venv/bin/python benchmarks/load/bare_app.py --port 8001 --workers 2
(``loadgen.py`` starts it itself next to ``ridgeline serve``.) It is served exactly as
``ridgeline serve --workers N`` serves Ridgeline: the same supervisor and one SO_REUSEPORT
socket per worker (service/api/workers.py), the same uvicorn options (HTTP protocol class,
keep-alive timeout, connection limit: ``uvicorn_options``), uvicorn's access log off. What it
leaves out is everything Ridgeline adds: middleware, access log line, metrics, dependencies,
database, engine. ``POST /estimate`` validates a body shaped like loadgen's single-point
estimate (same fields, same strictness: unknown fields refused) and returns a small JSON, so
the ratio Ridgeline ÷ bare says what share of the framework's own ceiling Ridgeline reaches.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Annotated, Literal

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from service.api.logs import configure_logging
from service.api.workers import Supervisor, WorkerConfig, uvicorn_options
from service.settings import get_settings

Tokens = Annotated[int, Field(ge=1, le=1_048_576, strict=True)]


class BareEstimateIn(BaseModel):
    """The fields of loadgen's single-point estimate, validated as strictly as Ridgeline's."""

    model_config = ConfigDict(extra="forbid")

    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=100)]
    accelerator: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=100)]
    input_tokens: Tokens
    output_tokens: Tokens
    batch_sizes: Annotated[list[Annotated[int, Field(ge=1, le=65_536)]], Field(max_length=1024)]
    calibration: Literal["none", "auto"] = "auto"


class BareEstimateOut(BaseModel):
    """A small answer: what was asked, and one number per batch size."""

    model: str
    accelerator: str
    tokens: list[int]


def create_app() -> FastAPI:
    """The baseline app: one POST route, no middleware."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.post("/estimate")
    async def estimate(body: BareEstimateIn) -> BareEstimateOut:
        return BareEstimateOut(
            model=body.model,
            accelerator=body.accelerator,
            tokens=[b * (body.input_tokens + body.output_tokens) for b in body.batch_sizes],
        )

    return app


@dataclass(frozen=True)
class BareWorkerConfig(WorkerConfig):
    """Ridgeline's worker configuration, serving the bare app instead."""

    def uvicorn_config(self) -> uvicorn.Config:
        return uvicorn.Config(
            create_app,
            factory=True,
            host=self.host,
            port=self.port,
            access_log=False,
            log_level=self.log_level,
            **uvicorn_options(get_settings()),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    settings = get_settings()
    configure_logging(settings.log_level)
    Supervisor(
        BareWorkerConfig(args.host, args.port, settings.log_level.lower()), args.workers
    ).run()


if __name__ == "__main__":
    main()
