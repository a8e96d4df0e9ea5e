"""The client's analysis methods return exactly the API's numbers, parsed into its schemas."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.client import (
    EstimateRequest,
    EstimateResponse,
    InvalidRequestError,
    NotFoundError,
    Ridgeline,
)

ESTIMATE: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1, 64, 512],
    "parallelism": {"tp": 4},
    "calibration": "none",
}


def test_estimate_equals_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    raw = client.post("/v1/estimates", json=ESTIMATE)
    assert raw.status_code == 200, raw.text
    answer = ridgeline.estimate(ESTIMATE)
    assert isinstance(answer, EstimateResponse)
    assert answer.model_dump(mode="json") == raw.json()
    assert [p.batch_size for p in answer.points] == [1, 64, 512]


def test_estimate_accepts_keywords_and_request_models(ridgeline: Ridgeline) -> None:
    by_dict = ridgeline.estimate(ESTIMATE)
    by_keywords = ridgeline.estimate(**ESTIMATE)
    by_model = ridgeline.estimate(EstimateRequest.model_validate(ESTIMATE))
    overridden = ridgeline.estimate(ESTIMATE, batch_sizes=[8])
    assert by_keywords == by_dict == by_model
    assert [p.batch_size for p in overridden.points] == [8]


def test_intensity_equals_the_api(ridgeline: Ridgeline, client: TestClient) -> None:
    body = {
        "model": "llama-3.1-70b",
        "accelerator": "h100-sxm",
        "phase": "decode",
        "batch_size": 64,
        "context_tokens": 2048,
    }
    raw = client.post("/v1/intensity", json=body)
    assert raw.status_code == 200, raw.text
    answer = ridgeline.intensity(body)
    assert answer.model_dump(mode="json") == raw.json()
    ridge = ridgeline.get_accelerator("h100-sxm").ridge_point_flop_per_byte["bf16"]
    assert answer.ridge_point_flop_per_byte == pytest.approx(ridge)
    assert answer.operators and answer.total.bound in ("memory", "compute")


def test_estimate_errors_are_raised_with_fields(ridgeline: Ridgeline) -> None:
    with pytest.raises(InvalidRequestError) as info:
        ridgeline.estimate(ESTIMATE, batch_sizes=[0])
    assert any(f.startswith("batch_sizes") for f in info.value.fields)
    with pytest.raises(NotFoundError):
        ridgeline.estimate(ESTIMATE, model="no-such-model")


def test_estimate_batch_returns_errors_in_place(ridgeline: Ridgeline, client: TestClient) -> None:
    items = [ESTIMATE, {**ESTIMATE, "model": "no-such-model"}, {**ESTIMATE, "batch_sizes": [2]}]
    results = ridgeline.estimate_batch(items)
    assert len(results) == 3
    first, missing, third = results
    assert isinstance(first, EstimateResponse) and isinstance(third, EstimateResponse)
    assert first.model_dump(mode="json") == client.post("/v1/estimates", json=ESTIMATE).json()
    assert isinstance(missing, NotFoundError) and missing.status == 404
    assert [p.batch_size for p in third.points] == [2]
