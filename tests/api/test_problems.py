"""One problem mapper (service.api.problems.error_problem) for every route's errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.problems import PROBLEM_BASE, error_problem
from service.engine.errors import (
    ContextWindowError,
    InvalidLayoutError,
    InvalidShapeError,
    UnsupportedDtypeError,
)
from service.services.errors import (
    ConflictError,
    FieldError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
)


@pytest.mark.parametrize(
    ("error", "status", "field"),
    [
        (NotFoundError("model", "nope"), 404, None),
        (ConflictError("model", "dup"), 409, None),
        (PreconditionFailedError("stale"), 412, None),
        (PermissionDeniedError("seeded"), 403, None),
        (FieldError("batch_sizes", "too many"), 422, "batch_sizes"),
        (InvalidLayoutError("tp=3 does not divide 32 heads"), 422, "parallelism.tp"),
        (InvalidLayoutError("attention_dp=2 needs ep"), 422, "parallelism.attention_dp"),
        (UnsupportedDtypeError("no fp4 peak"), 422, "precision"),
        (ContextWindowError("input_tokens + output_tokens", 9, 8, "m"), 422, "input_tokens"),
        (ContextWindowError("context_tokens", 9, 8, "m"), 422, "context_tokens"),
        (InvalidShapeError("num_layers", "must be a positive integer"), 422, "num_layers"),
    ],
)
def test_each_error_maps_to_its_status_and_field(
    error: Exception, status: int, field: str | None
) -> None:
    body = error_problem(error)
    assert body["status"] == status and body["detail"] == str(error)
    assert body["type"].startswith(PROBLEM_BASE)
    if field is None:
        assert "errors" not in body
    else:
        assert body["errors"] == [{"field": field, "message": body["errors"][0]["message"]}]


def test_a_shape_error_about_a_stored_model_names_the_request_field() -> None:
    body = error_problem(InvalidShapeError("num_layers", "bad"), shape_field="model")
    assert body["errors"][0]["field"] == "model"


@pytest.mark.parametrize(
    ("error", "field"),
    [
        (InvalidLayoutError("tp=3 does not divide 32 heads"), "tp"),
        (InvalidLayoutError("pp=5 does not divide 32 layers"), "pp"),
        (InvalidLayoutError("layout needs more GPUs"), "tp"),
        (UnsupportedDtypeError("no fp4 peak"), "precision"),
        (InvalidShapeError("num_layers", "bad"), "model"),
        (ContextWindowError("context_tokens", 9, 8, "m"), "context_tokens"),
    ],
)
def test_chart_errors_name_their_query_parameter(error: Exception, field: str) -> None:
    body = error_problem(error, shape_field="model", in_query=True)
    assert body["status"] == 422
    assert body["errors"] == [{"field": field, "message": str(error)}]


def test_other_exceptions_are_not_mapped() -> None:
    with pytest.raises(KeyError):
        error_problem(KeyError("x"))


def _estimate(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "deepseek-v3",
        "accelerator": "h200-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1],
    }
    return {**request, **overrides}


def test_an_estimate_error_is_the_same_problem_alone_and_in_a_batch(client: TestClient) -> None:
    bad = _estimate(parallelism={"tp": 8, "ep": 16})
    alone = client.post("/v1/estimates", json=bad)
    assert alone.status_code == 422
    assert alone.headers["content-type"] == "application/problem+json"
    batch = client.post("/v1/estimates/batch", json={"items": [bad, _estimate(model="nope")]})
    assert batch.status_code == 200
    items = batch.json()["items"]
    assert items[0] == alone.json()
    assert items[0]["errors"][0]["field"] == "parallelism.ep"
    missing = client.post("/v1/estimates", json=_estimate(model="nope"))
    assert missing.status_code == 404 and items[1] == missing.json()
    assert set(missing.json()) == {"type", "title", "status", "detail"}
