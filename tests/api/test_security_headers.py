"""Security headers on every response, CSP on the dashboard, CORS only when configured."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings


def test_every_response_says_nosniff_and_no_referrer(client: TestClient) -> None:
    for response in (
        client.get("/v1/accelerators/h100-sxm"),
        client.get("/v1/accelerators/nothing"),
        client.get("/healthz"),
    ):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "no-referrer"
    assert "Content-Security-Policy" not in client.get("/healthz").headers


def test_the_dashboard_has_a_content_security_policy(client: TestClient) -> None:
    page = client.get("/")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy
    assert client.get("/static/dashboard.js").headers["Content-Security-Policy"] == policy


def test_cors_is_off_by_default_and_opt_in(client: TestClient, settings: Settings) -> None:
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    plain = client.get("/v1/models", headers={"Origin": "https://app.example"})
    assert "access-control-allow-origin" not in plain.headers
    allowed = settings.model_copy(update={"cors_origins": "https://app.example"})
    with TestClient(create_app(allowed)) as cors:
        answer = cors.options("/v1/estimates", headers=preflight)
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        other = cors.get("/v1/models", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
