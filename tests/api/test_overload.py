"""An exhausted database pool is an overload (503 + Retry-After), never a 500."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from service.api.problems import install_problem_handlers


def test_pool_timeout_is_503_with_retry_after() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/busy")
    def busy() -> None:
        raise PoolTimeoutError("QueuePool limit of size 10 overflow 20 reached")

    response = TestClient(app, raise_server_exceptions=False).get("/busy")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"] == "application/problem+json"
    assert "QueuePool" not in response.text
