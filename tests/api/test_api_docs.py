"""/docs and /redoc load every asset from the service itself, so they work offline."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

ASSET_REFERENCE = re.compile(r"""(?:src|href|url)\s*[=:(]\s*['"]?([^'")\s>]+)""")


def referenced_urls(html: str) -> list[str]:
    """Return every URL the page's src/href/url attributes or settings point at."""
    return ASSET_REFERENCE.findall(html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_reference_only_local_assets_that_are_served(
    client: TestClient, page: str
) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    urls = referenced_urls(response.text)
    assert "/openapi.json" in urls
    assets = [url for url in urls if url != "/openapi.json"]
    assert assets, "the page loads no script or style at all"
    for url in urls:
        assert url.startswith("/"), f"{page} references a non-local URL: {url}"
        assert not url.startswith("//"), f"{page} references a protocol-relative URL: {url}"
    assert not re.search(r"https?://", response.text), f"{page} names an absolute URL"
    for url in assets:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url


def test_swagger_ui_bundle_is_the_real_script(client: TestClient) -> None:
    html = client.get("/docs").text
    assert "/docs-assets/swagger-ui-bundle.js" in html
    script = client.get("/docs-assets/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"]
    assert "SwaggerUIBundle" in script.text


def test_openapi_document_and_docs_are_labelled_by_route_in_metrics(client: TestClient) -> None:
    assert client.get("/openapi.json").json()["info"]["title"] == "Ridgeline"
    client.get("/docs")
    text = client.get("/metrics").text
    assert 'route="/openapi.json",status="200"' in text
    assert 'route="/docs",status="200"' in text
    assert 'route="unmatched",status="200"' not in text
