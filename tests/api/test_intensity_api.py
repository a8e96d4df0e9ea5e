"""HTTP tests of POST /v1/intensity: ridge point, operator table, engine agreement, errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from service.api.schemas.analysis import IntensityResponse
from service.engine.efficiency import spec_sheet_efficiency
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import analyze_intensity
from service.services.catalog import CatalogService

ROW_FIELDS = {"flops", "bytes", "arithmetic_intensity_flop_per_byte", "bound", "time_ms"}


def body(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "llama-3.1-70b",
        "accelerator": "h100-sxm",
        "phase": "decode",
        "batch_size": 8,
        "context_tokens": 2048,
    }
    request.update(overrides)
    return request


def post(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/intensity", json=body(**overrides))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_contract_fields_and_defaults(client: TestClient) -> None:
    answer = post(client)
    IntensityResponse.model_validate(answer)  # the documented response schema holds
    assert answer["model"] == "llama-3.1-70b" and answer["accelerator"] == "h100-sxm"
    assert answer["precision"] == {
        "weights": "bf16",
        "activations": "bf16",
        "kv_cache": "bf16",
        "weights_source": "native",  # no weights dtype asked: llama ships bf16
        "ssm_state": None,  # no Mamba2 layers: the SSM state dtype does not apply
    }
    assert answer["parallelism"] == {
        "tp": 1, "pp": 1, "ep": 1, "attention_dp": 1, "pp_virtual_stages": 1, "dp": 1,
    }  # fmt: skip
    assert answer["calibration"] is None
    assert isinstance(answer["critical_batch_size"], int)
    assert set(answer["total"]) >= ROW_FIELDS
    names = [row["name"] for row in answer["operators"]]
    assert {"qkv_projection", "attention", "output_projection", "ffn", "lm_head"} <= set(names)
    for row in answer["operators"]:
        assert set(row) >= ROW_FIELDS
        assert row["bound"] in {"memory", "compute", "communication"}


def test_h100_ridge_point_is_295(client: TestClient) -> None:
    assert post(client)["ridge_point_flop_per_byte"] == pytest.approx(295, abs=1)


def test_ridge_point_follows_catalog_for_compute_dtype(client: TestClient) -> None:
    accelerator = client.get("/v1/accelerators/h100-sxm").json()
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    answer = post(client, precision=fp8)
    # TFLOP/s ÷ GB/s = 1e12 / 1e9 FLOP per byte.
    expected = accelerator["peak_tflops"]["fp8"] * 1e3 / accelerator["memory_bandwidth_gb_s"]
    assert answer["compute_dtype"] == "fp8"
    assert answer["ridge_point_flop_per_byte"] == pytest.approx(expected, rel=1e-12)


def test_matches_engine_called_directly(client: TestClient, db_session: Session) -> None:
    catalog = CatalogService(db_session)
    precision = {"weights": "fp8", "activations": "bf16", "kv_cache": "fp8"}
    answer = post(
        client,
        model="mixtral-8x7b",
        phase="prefill",
        batch_size=4,
        context_tokens=512,
        precision=precision,
        parallelism={"tp": 2, "ep": 2},
    )
    h100 = catalog.accelerator("h100-sxm")
    direct = analyze_intensity(
        catalog.model_shape("mixtral-8x7b"),
        h100,
        params=spec_sheet_efficiency(h100),  # uncalibrated: measured matmul fractions
        phase="prefill",
        batch_size=4,
        context_tokens=512,
        precision=Precision(**precision),
        parallelism=Parallelism(tp=2, ep=2),
    )
    assert answer["critical_batch_size"] == direct.critical_batch_size
    assert [row["name"] for row in answer["operators"]] == [row.name for row in direct.operators]
    for got, row in zip(answer["operators"], direct.operators, strict=True):
        assert got["flops"] == row.flops and got["bytes"] == row.bytes
        assert got["time_ms"] == row.time_ms and got["bound"] == row.bound
    assert answer["total"]["time_ms"] == direct.total.time_ms
    assert {"router", "experts", "tp_all_reduce"} <= {row["name"] for row in answer["operators"]}


def test_total_is_sum_of_operators(client: TestClient) -> None:
    answer = post(client, parallelism={"tp": 4})
    rows = answer["operators"]
    total = answer["total"]
    assert total["flops"] == pytest.approx(sum(r["flops"] for r in rows), rel=1e-9)
    assert total["bytes"] == pytest.approx(sum(r["bytes"] for r in rows), rel=1e-9)
    op_time = sum(r["time_ms"] for r in rows) + answer["overhead_ms"]
    assert total["time_ms"] == pytest.approx(op_time, rel=1e-9)
    assert total["arithmetic_intensity_flop_per_byte"] == pytest.approx(
        total["flops"] / total["bytes"]
    )


def test_decode_memory_bound_prefill_compute_bound(client: TestClient) -> None:
    decode = post(client, batch_size=1)
    prefill = post(client, phase="prefill", batch_size=4, context_tokens=4096)
    assert decode["total"]["bound"] == "memory"
    assert prefill["total"]["bound"] == "compute"
    ridge = decode["ridge_point_flop_per_byte"]
    assert decode["total"]["arithmetic_intensity_flop_per_byte"] < ridge
    assert prefill["total"]["arithmetic_intensity_flop_per_byte"] > ridge


def test_calibration_none_equals_auto(client: TestClient) -> None:
    """With no profile stored, auto answers as none does and says why."""
    none, auto = post(client, calibration="none"), post(client, calibration="auto")
    assert none.pop("calibration_note") is None
    assert auto.pop("calibration_note").startswith("auto: no profile")
    assert none == auto


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"phase": "both"}, "phase"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 65_537}, "batch_size"),
        ({"context_tokens": 1_048_577}, "context_tokens"),
        ({"precision": {"weights": "fp6"}}, "precision.weights"),
        ({"precision": {"activations": "int4"}}, "precision.activations"),
        ({"parallelism": {"tp": 0}}, "parallelism.tp"),
        ({"parallelism": {"pp": 100_000}}, "parallelism.pp"),
        ({"parallelism": {"tp": 3}}, "parallelism.tp"),
        ({"parallelism": {"tp": 2, "ep": 2}}, "parallelism.ep"),
        ({"precision": {"weights": "fp4", "activations": "fp4"}}, "precision"),
        ({"model": "Not A Slug"}, "model"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_requests_name_the_field(
    client: TestClient, overrides: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/intensity", json=body(**overrides))
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 422 and problem["detail"]
    assert field in [error["field"] for error in problem["errors"]]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"model": "no-such-model"}, "no-such-model"),
        ({"accelerator": "no-such-gpu"}, "no-such-gpu"),
        ({"calibration": "profile-123"}, "calibration profile"),
    ],
)
def test_unknown_ids_are_404(client: TestClient, overrides: dict[str, Any], needle: str) -> None:
    response = client.post("/v1/intensity", json=body(**overrides))
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert needle in response.json()["detail"]


def test_decode_past_the_context_window_is_a_422(client: TestClient) -> None:
    # Llama-3-8B holds 8192 tokens: a decode step after 8192 cached tokens would be the 8193rd.
    request = {"model": "llama-3-8b", "accelerator": "h100-sxm", "context_tokens": 8192}
    response = client.post("/v1/intensity", json=request)
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "context_tokens"
    assert "max_context_tokens=8192" in error["message"]
    ok = client.post("/v1/intensity", json={**request, "context_tokens": 8191})
    assert ok.status_code == 200
