"""Structured JSON logging: one object per line on stderr."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

LOGGER_NAME = "ridgeline"


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object, merging the ``fields`` passed via ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # which worker process wrote the line
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(payload, default=str).decode()


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Write to whatever ``sys.stderr`` is at emit time (test capture swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str) -> logging.Logger:
    """Attach one JSON handler to the ``ridgeline`` logger (idempotent) and set its level."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    if not any(getattr(h, "_ridgeline", False) for h in logger.handlers):
        handler = StderrHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._ridgeline = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    return logger
