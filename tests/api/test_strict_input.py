"""Request bodies take JSON integers and booleans as the OpenAPI document types them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

ESTIMATE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 512,
    "output_tokens": 64,
    "batch_sizes": [1, 8],
}


@pytest.mark.parametrize("value", [True, "64", 64.5])
def test_non_integer_output_tokens_is_422_naming_the_field(
    client: TestClient, value: object
) -> None:
    response = client.post("/v1/estimates", json={**ESTIMATE, "output_tokens": value})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "output_tokens"


def test_an_integral_number_is_an_integer(client: TestClient) -> None:
    # JSON Schema counts 64.0 as an integer, so the server does too.
    exact = client.post("/v1/estimates", json=ESTIMATE).json()
    response = client.post("/v1/estimates", json={**ESTIMATE, "output_tokens": 64.0})
    assert response.status_code == 200
    assert response.json()["points"] == exact["points"]


def test_model_flags_must_be_json_booleans(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = client.patch("/v1/models/qwen3-8b", json={"qk_norm": 1}, headers=auth_headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "qk_norm"
