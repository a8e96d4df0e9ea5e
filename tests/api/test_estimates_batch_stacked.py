"""POST /v1/estimates/batch: items differing only in lengths (one stacked engine pass) answer as
POST /v1/estimates does for each item on its own."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def close(got: Any, want: Any, path: str = "") -> None:
    """Assert two JSON values are equal, numbers to a relative 1e-9."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            close(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            close(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-9), path
    else:
        assert got == want, path


@pytest.mark.parametrize("mode", ["static", "serving"])
def test_items_differing_in_lengths_match_single_estimates(client: TestClient, mode: str) -> None:
    base = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "mode": mode}
    items = [
        {**base, "input_tokens": 256 + 97 * i, "output_tokens": 32 + 11 * i, "batch_sizes": [1 + i]}
        for i in range(5)
    ]
    items.append({**base, "input_tokens": 256, "output_tokens": 32, "batch_sizes": [4, 64]})
    items.append({**base, "input_tokens": 9000, "output_tokens": 300, "batch_sizes": [2, 8, 3]})
    items.append(
        {
            **base,
            "accelerator": "no-such-accelerator",
            "input_tokens": 1,
            "output_tokens": 1,
            "batch_sizes": [1],
        }
    )
    response = client.post("/v1/estimates/batch", json={"items": items})
    assert response.status_code == 200, response.text
    answers = response.json()["items"]
    for item, answer in zip(items[:-1], answers, strict=False):
        single = client.post("/v1/estimates", json=item)
        assert single.status_code == 200, single.text
        close(answer, single.json())
    assert answers[-1]["status"] == 404
