"""Cross-cutting HTTP behaviour: problem+json, body limits, request ids, health, metrics, logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

ONE_MIB = 1024 * 1024


def oversized_body() -> bytes:
    """A syntactically valid JSON body of about 1.1 MiB."""
    return json.dumps({"id": "huge", "notes": "x" * int(1.1 * ONE_MIB)}).encode()


def test_body_over_limit_by_content_length_is_413(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = oversized_body()
    assert len(body) > ONE_MIB
    response = client.post(
        "/v1/accelerators",
        content=body,
        headers={**auth_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 413
    assert response.headers["x-request-id"]


def test_streamed_body_over_limit_is_413(client: TestClient, auth_headers: dict[str, str]) -> None:
    body = oversized_body()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    response = client.post(
        "/v1/accelerators",
        content=chunks(),
        headers={**auth_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 413


def test_body_under_limit_passes_the_size_check(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = json.dumps({"id": "big-but-fine", "notes": "x" * (ONE_MIB // 2)})
    response = client.post(
        "/v1/accelerators",
        content=body,
        headers={**auth_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422  # reaches validation: fields are missing


def test_unhandled_error_is_500_problem_without_traceback(settings: Settings) -> None:
    app = create_app(settings)

    def explode() -> None:
        raise RuntimeError("secret internal detail")

    app.add_api_route("/explode", explode)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/explode", headers={"X-Request-ID": "req-123"})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-request-id"] == "req-123"
    text = response.text
    assert "secret internal detail" not in text and "Traceback" not in text
    assert response.json()["title"] == "Internal Server Error"


def test_unknown_route_is_404_problem(client: TestClient) -> None:
    response = client.get("/v1/nowhere")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_request_id_is_echoed_or_generated(client: TestClient) -> None:
    echoed = client.get("/healthz", headers={"X-Request-ID": "abc-42"})
    assert echoed.headers["x-request-id"] == "abc-42"
    first = client.get("/healthz").headers["x-request-id"]
    second = client.get("/healthz").headers["x-request-id"]
    assert first and second and first != second
    unsafe = client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert unsafe.headers["x-request-id"] != "bad id\twith spaces"


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": True, "migrations": True}


def test_readyz_is_503_before_migrations(database_factory: Any, settings: Settings) -> None:
    empty = settings.model_copy(update={"database_url": database_factory.empty()})
    with TestClient(create_app(empty)) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["database"] is True
        assert response.json()["checks"]["migrations"] is False
        assert client.get("/healthz").status_code == 200


def test_readyz_is_503_when_database_unreachable(settings: Settings) -> None:
    broken = settings.model_copy(
        update={"database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    )
    with TestClient(create_app(broken)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] is False


def test_metrics_are_labelled_by_route_template(client: TestClient) -> None:
    client.get("/v1/accelerators/h100-sxm")
    client.get("/v1/accelerators/no-such-gpu")
    text = client.get("/metrics").text
    assert (
        'ridgeline_http_requests_total{method="GET",route="/v1/accelerators/{accelerator_id}",'
        'status="200"} 1.0' in text
    )
    assert 'route="/v1/accelerators/{accelerator_id}",status="404"} 1.0' in text
    assert "ridgeline_http_request_duration_seconds_bucket" in text
    assert "h100-sxm" not in text


def test_one_json_log_line_per_request(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(settings.model_copy(update={"log_level": "INFO"}))
    with TestClient(app) as client:
        capsys.readouterr()
        client.get("/v1/accelerators/h100-sxm", headers={"X-Request-ID": "log-check"})
        err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    mine = [line for line in lines if line.get("request_id") == "log-check"]
    assert len(mine) == 1
    assert mine[0]["status"] == 200
    assert mine[0]["route"] == "/v1/accelerators/{accelerator_id}"
    assert mine[0]["duration_ms"] >= 0


def test_openapi_lists_catalog_paths(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    for path in ("/v1/accelerators", "/v1/accelerators/{accelerator_id}", "/v1/models/import"):
        assert path in paths
    assert {"get", "put", "patch", "delete"} <= set(paths["/v1/models/{model_id}"])
