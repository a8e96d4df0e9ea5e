"""HTTP tests of /v1/charts: formats, content types, data agreeing with /v1/intensity, errors."""

from __future__ import annotations

import itertools
import json
from typing import Any
from xml.etree import ElementTree

import pytest
from fastapi.testclient import TestClient

ROOFLINE = "/v1/charts/roofline"
BASE = {"accelerator": "h100-sxm", "model": "llama-3.1-70b", "batch_sizes": "1,64,512"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def svg_text(body: bytes) -> str:
    """Parse an SVG document and return all its text content joined."""
    root = ElementTree.fromstring(body)
    assert root.tag.endswith("svg")
    return " ".join("".join(el.itertext()) for el in root.iter() if el.tag.endswith("text"))


def dataset_rows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Return every inline data row of a Vega-Lite spec (top-level datasets and layer data)."""
    rows: list[dict[str, Any]] = []
    for values in spec.get("datasets", {}).values():
        rows.extend(values)
    return rows


def test_roofline_svg_has_ridge_label(client: TestClient) -> None:
    response = client.get(ROOFLINE, params={**BASE, "phase": "decode", "format": "svg"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    text = svg_text(response.content)
    ridge = client.get("/v1/accelerators/h100-sxm").json()["ridge_point_flop_per_byte"]["bf16"]
    assert f"ridge {ridge:,.0f} FLOP/byte" in text
    assert "decode B=64" in text and "decode B=512" in text


def test_roofline_png(client: TestClient) -> None:
    response = client.get(ROOFLINE, params={**BASE, "phase": "both", "format": "png"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.content.startswith(PNG_MAGIC)


def test_roofline_vega_points_match_intensity_endpoint(client: TestClient) -> None:
    params = {**BASE, "phase": "both", "context_tokens": 1024, "tp": 2, "format": "vega"}
    response = client.get(ROOFLINE, params=params)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    spec = response.json()
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    points = {
        (r["phase"], r["batch_size"], r["operator"]): r["arithmetic_intensity_flop_per_byte"]
        for r in dataset_rows(spec)
        if "operator" in r
    }
    compared = 0
    for phase in ("prefill", "decode"):
        for batch in (1, 64, 512):
            body = {
                "model": "llama-3.1-70b",
                "accelerator": "h100-sxm",
                "phase": phase,
                "batch_size": batch,
                "context_tokens": 1024,
                "parallelism": {"tp": 2},
            }
            table = client.post("/v1/intensity", json=body).json()
            for row in [*table["operators"], table["total"]]:
                key = (phase, batch, row["name"])
                if row["flops"] > 0:  # a log axis cannot place zero-FLOP operators
                    assert points[key] == pytest.approx(row["arithmetic_intensity_flop_per_byte"])
                    compared += 1
                else:
                    assert key not in points
    assert compared >= 2 * 3 * 5


def test_roofline_draws_a_ceiling_per_supported_dtype(client: TestClient) -> None:
    spec = client.get(ROOFLINE, params={**BASE, "format": "vega"}).json()
    peaks = client.get("/v1/accelerators/h100-sxm").json()["peak_tflops"]
    ceilings = {r["label"] for r in dataset_rows(spec) if "x2" in r}
    labelled = " ".join(ceilings)
    for dtype in peaks:
        assert dtype in labelled


def test_sweep_svg_marks_memory_limit(client: TestClient) -> None:
    params = {
        "accelerator": "h100-sxm",
        "model": "llama-3.1-8b",
        "input_tokens": 1024,
        "output_tokens": 256,
        "mode": "serving",
    }
    response = client.get("/v1/charts/sweep", params=params)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    estimate = client.post(
        "/v1/estimates",
        json={**params, "batch_sizes": [1], "mode": "serving"},
    ).json()
    assert f"memory limit {estimate['max_batch_size']}" in svg_text(response.content)


def test_sweep_vega_carries_each_metric(client: TestClient) -> None:
    params = {
        "accelerator": "h100-sxm",
        "model": "llama-3.1-8b",
        "mode": "static",
        "batch_sizes": "1,8,64",
        "format": "vega",
    }
    spec = client.get("/v1/charts/sweep", params=params).json()
    rows = [r for r in dataset_rows(spec) if "metric" in r]
    assert {r["metric"] for r in rows} == {"TTFT (ms)", "TPOT (ms)", "output tokens/s"}
    assert sorted({r["batch_size"] for r in rows}) == [1, 8, 64]


def test_frontier_png_and_vega(client: TestClient) -> None:
    params = {"models": "llama-3.1-8b", "accelerators": "h100-sxm,l40s", "workload": "chat"}
    png = client.get("/v1/charts/frontier", params={**params, "format": "png"})
    assert png.status_code == 200 and png.content.startswith(PNG_MAGIC)
    spec = client.get("/v1/charts/frontier", params={**params, "format": "vega"}).json()
    rows = [r for r in dataset_rows(spec) if "tokens_per_s_per_user" in r]
    assert {r["accelerator"] for r in rows} == {"h100-sxm", "l40s"}
    for accelerator in ("h100-sxm", "l40s"):
        mine = sorted(
            (r for r in rows if r["accelerator"] == accelerator),
            key=lambda r: r["tokens_per_s_per_user"],
        )
        per_gpu = [r["output_tokens_per_s_per_gpu"] for r in mine]
        # A frontier trades per-user speed for per-GPU throughput: strictly decreasing.
        assert all(a > b for a, b in itertools.pairwise(per_gpu))
        assert all(r["tpot_ms"] <= 50 and r["ttft_ms"] <= 1000 for r in mine if r["meets_slo"])


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        (ROOFLINE, {**BASE, "format": "gif"}, "format"),
        (ROOFLINE, {**BASE, "phase": "both-ways"}, "phase"),
        (ROOFLINE, {**BASE, "batch_sizes": "1,x"}, "batch_sizes"),
        (ROOFLINE, {**BASE, "batch_sizes": "0,4"}, "batch_sizes"),
        (ROOFLINE, {**BASE, "weights": "fp7"}, "weights"),
        (ROOFLINE, {**BASE, "tp": 3}, "tp"),
        (
            ROOFLINE,
            {**BASE, "accelerator": "tpu-v5e", "weights": "fp32", "activations": "fp32"},
            "precision",
        ),
        (ROOFLINE, {"model": "llama-3.1-70b"}, "accelerator"),
        ("/v1/charts/sweep", {**BASE, "mode": "warp"}, "mode"),
        ("/v1/charts/sweep", {**BASE, "input_tokens": 0}, "input_tokens"),
        ("/v1/charts/frontier", {"models": "llama-3.1-8b", "workload": "nope"}, "workload"),
        (
            "/v1/charts/frontier",
            {"models": "llama-3.1-8b", "workload": "chat", "precisions": "bf16/bf16/bf16/x"},
            "precisions",
        ),
    ],
)
def test_bad_parameters_are_422_problems(
    client: TestClient, path: str, params: dict[str, Any], field: str
) -> None:
    response = client.get(path, params=params)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert any(error["field"].startswith(field) for error in body["errors"]), body


@pytest.mark.parametrize(
    ("path", "params"),
    [
        (ROOFLINE, {**BASE, "model": "no-such-model"}),
        (ROOFLINE, {**BASE, "accelerator": "no-such-chip"}),
        ("/v1/charts/sweep", {"accelerator": "h100-sxm", "model": "no-such-model"}),
        (
            "/v1/charts/frontier",
            {"models": "llama-3.1-8b", "accelerators": "no-such-chip", "workload": "chat"},
        ),
    ],
)
def test_unknown_ids_are_404_problems(
    client: TestClient, path: str, params: dict[str, Any]
) -> None:
    response = client.get(path, params=params)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "no-such" in json.loads(response.content)["detail"]
