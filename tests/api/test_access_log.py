"""The access log: one JSON line per request on stderr, with a fixed set of fields in order.

The server's set-up writes the line without the logging machinery (``logs.log_info``); any
other handler set-up goes through ``logger.info`` and ``JsonFormatter``. Both give the same line.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.logs import LOGGER_NAME, JsonFormatter
from service.settings import Settings

FIELDS = [
    "time",
    "level",
    "logger",
    "pid",
    "message",
    "request_id",
    "method",
    "path",
    "route",
    "status",
    "duration_ms",
]
ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [8],
    "calibration": "none",
}


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"log_level": "INFO"}))
    with TestClient(app) as test_client:
        yield test_client


def access_lines(text: str, request_id: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line for line in lines if line.get("request_id") == request_id]


def logged(
    client: TestClient, capsys: pytest.CaptureFixture[str], request_id: str, *args: Any, **kw: Any
) -> dict[str, Any]:
    """Send one request; return its access line from stderr."""
    capsys.readouterr()
    client.request(*args, headers={"X-Request-ID": request_id}, **kw)
    mine = access_lines(capsys.readouterr().err, request_id)
    assert len(mine) == 1
    return mine[0]


def test_estimate_access_line_has_every_field(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    line = logged(client, capsys, "estimate-line", "POST", "/v1/estimates", json=ESTIMATE)
    assert list(line) == FIELDS
    assert line["level"] == "info"
    assert line["logger"] == LOGGER_NAME
    assert line["pid"] == os.getpid()
    assert line["message"] == "request"
    assert line["method"] == "POST"
    assert line["path"] == "/v1/estimates"
    assert line["route"] == "/v1/estimates"
    assert line["status"] == 200
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert datetime.fromisoformat(line["time"]).utcoffset() == UTC.utcoffset(None)


def test_unmatched_request_is_logged_with_its_status(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    line = logged(client, capsys, "missing-line", "GET", "/no/such/path")
    assert list(line) == FIELDS
    assert (line["method"], line["path"], line["route"], line["status"]) == (
        "GET",
        "/no/such/path",
        "unmatched",
        404,
    )


def test_direct_line_equals_the_formatters_line(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    direct = logged(client, capsys, "same-line", "POST", "/v1/estimates", json=ESTIMATE)
    # A second handler makes the logger take the logging path (LogRecord, JsonFormatter).
    captured = io.StringIO()
    extra = logging.StreamHandler(captured)
    extra.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(extra)
    try:
        through_logging = logged(
            client, capsys, "same-line", "POST", "/v1/estimates", json=ESTIMATE
        )
    finally:
        logger.removeHandler(extra)
    assert access_lines(captured.getvalue(), "same-line") == [through_logging]
    assert list(through_logging) == list(direct) == FIELDS
    varying = ("time", "duration_ms")
    assert {k: v for k, v in direct.items() if k not in varying} == {
        k: v for k, v in through_logging.items() if k not in varying
    }


def test_no_line_below_its_level(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    app = create_app(settings.model_copy(update={"log_level": "WARNING"}))
    with TestClient(app) as quiet:
        capsys.readouterr()
        quiet.post("/v1/estimates", json=ESTIMATE, headers={"X-Request-ID": "quiet-line"})
        assert access_lines(capsys.readouterr().err, "quiet-line") == []
