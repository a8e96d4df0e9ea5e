"""The dashboard page loads only this server's assets, and each of them is served."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

ASSET = re.compile(r'(?:src|href)="([^"]+)"')


def test_page_references_only_local_assets_that_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assets = ASSET.findall(page.text)
    assert "/static/traffic.js" in assets and "/static/dashboard.js" in assets
    # traffic.js defines what dashboard.js calls, so it must come first.
    assert assets.index("/static/traffic.js") < assets.index("/static/dashboard.js")
    for asset in assets:
        if asset.startswith("data:"):
            continue
        assert asset.startswith("/static/"), asset  # no CDN, no other origin
        response = client.get(asset)
        assert response.status_code == 200, asset
    script = client.get("/static/traffic.js")
    assert script.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert "RidgelineTraffic" in script.text and "/v1/estimates" in script.text


def test_card_template_has_the_rate_slider_and_percentile_table(client: TestClient) -> None:
    page = client.get("/").text
    assert 'class="rate-slider" type="range"' in page
    assert 'class="rate-number" type="number"' in page
    for field in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "queue_wait_ms"):
        assert f'data-field="{field}"' in page
    assert 'class="chart-traffic"' in page
