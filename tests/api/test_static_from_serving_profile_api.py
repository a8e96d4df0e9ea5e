"""A static estimate from a profile fitted on serving runs alone: its TTFT (the batch's prefill)
widens for the mode by the serving → static spread, and not at all for an output length the
runs did not cover, which a prefill does not depend on (``intervals._mode_key``,
``domain.extrapolation_amounts(prefill_only=True)``)."""

from __future__ import annotations

import math
from typing import Any

from fastapi.testclient import TestClient
from support import upload_serving_runs

from service.engine.calibration.intervals import DEFAULT_SPREADS, Z_90

FP8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}


def _estimate(client: TestClient, profile: str, mode: str, output_tokens: int) -> dict[str, Any]:
    body = {
        "model": "qwen3-32b", "accelerator": "h100-sxm", "parallelism": {"tp": 2},
        "precision": FP8, "input_tokens": 1024, "output_tokens": output_tokens,
        "batch_sizes": [16], "mode": mode, "backend": "trtllm", "calibration": profile,
    }  # fmt: skip
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _half_width(point: dict[str, Any]) -> float:
    return math.log(point["ttft_ms_p90"] / point["ttft_ms_p10"]) / 2.0


def test_a_static_ttft_from_a_serving_profile_widens_for_the_mode_alone(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    profile = upload_serving_runs(client, auth_headers)
    # the runs cover 128–512 output tokens: one output token lies 7 doublings below them
    one, covered = (_estimate(client, profile, "static", n) for n in (1, 128))
    kinds = {e["dimension"] for e in one["calibration"]["extrapolation"]}
    assert {"mode", "output_tokens"} <= kinds
    (a,), (b,) = one["points"], covered["points"]
    assert a["ttft_ms"] == b["ttft_ms"]
    assert _half_width(a) == _half_width(b)
    # the serving band (what a serving estimate inside the domain gets) widened in quadrature
    # by the serving → static spread, not the static → serving TTFT one
    (serving,) = _estimate(client, profile, "serving", 128)["points"]
    s = DEFAULT_SPREADS["static.latency_ms"]["mode"].log_sigma
    expected = math.hypot(_half_width(serving), Z_90 * s)
    assert abs(_half_width(a) - expected) < 1e-6
