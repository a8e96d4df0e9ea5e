"""HTTP tests of /v1/calibrations: uploads (JSON, CSV, multipart, vllm bench), fit quality, bad
rows, idempotency, limits, auth, and estimates that use the stored profiles."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api.routers import calibrations as calibration_routes
from service.api.schemas.analysis import EstimateResponse
from service.api.schemas.calibrations import CalibrationProfileOut
from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.client.measurement_files import read_measurement_file
from service.db.calibration_repository import CalibrationRepository
from service.db.session import make_engine, make_session_factory, session_scope
from service.engine.calibration.fit import CalibrationResult
from service.engine.calibration.intervals import DEFAULT_SPREADS, Z_90
from service.engine.efficiency import EfficiencyParams
from service.engine.estimate import estimate as engine_estimate
from service.engine.precision import Precision
from service.services.calibration import CalibrationService
from service.services.efficiency_lookup import INTERVAL_FIELDS
from service.settings import Settings

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
GEMM = DATA / "h100_gemm_subset.csv"
DECODE = DATA / "h100_decode_attention_subset.csv"
SERVING = DATA / "h100_serving_qwen3_32b_subset.csv"
ARGONNE_TTFT = DATA / "argonne_ttft.csv"

# One row of h100_serving_qwen3_32b_subset.csv (sglang 0.5.8.post1, Qwen3-32B, ISL 1024, OSL 128,
# concurrency 16, TP 1) written as `vllm bench serve --save-result` would store it: 160 prompts.
VLLM_RESULT: dict[str, Any] = {
    "date": "20250901-120000",
    "backend": "sglang",
    "model_id": "Qwen/Qwen3-32B",
    "tokenizer_id": "Qwen/Qwen3-32B",
    "num_prompts": 160,
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 16,
    "duration": 200.5,
    "completed": 160,
    "total_input_tokens": 160 * 1024,
    "total_output_tokens": 160 * 128,
    "request_throughput": 0.798,
    "output_throughput": 102.1,
    "total_token_throughput": 919.3,
    "mean_ttft_ms": 6775.53813289375,
    "median_ttft_ms": 6700.0,
    "p99_ttft_ms": 9000.0,
    "mean_tpot_ms": 25.47610364375,
    "median_tpot_ms": 25.4,
    "p99_tpot_ms": 27.0,
    "mean_itl_ms": 25.4,
    "mean_e2el_ms": 10010.0,
    "custom_tag": "not a vllm field",
}


def measurements(path: Path) -> list[dict[str, Any]]:
    """The file's rows as API measurement objects."""
    return read_measurement_file(path, accelerator="h100-sxm").measurements


def json_body(path: Path, **meta: Any) -> dict[str, Any]:
    return {
        "accelerator": "h100-sxm",
        "name": path.stem,
        **meta,
        "measurements": measurements(path),
    }


def created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    profile: dict[str, Any] = response.json()
    CalibrationProfileOut.model_validate(profile)
    return profile


def stored_count(client: TestClient) -> int:
    return len(client.get("/v1/calibrations", params={"limit": 200}).json()["items"])


def stored_measurements(client: TestClient, profile_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/calibrations/{profile_id}/measurements")
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_json_upload_reports_held_out_fit_quality(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = json_body(GEMM, backend="vllm", backend_version="0.24.0")
    profile = created(client.post("/v1/calibrations", json=body, headers=auth_headers))
    assert profile["accelerator"] == "h100-sxm" and profile["backend"] == "vllm"
    assert profile["backend_version"] == "0.24.0" and profile["version"] == 1
    assert profile["format"] == "json" and profile["n_measurements"] == len(body["measurements"])
    fit = profile["fit"]
    assert fit["n_measurements"] == len(body["measurements"])
    assert set(fit["n_by_kind"]) == {"gemm"}
    for group in ("bf16", "fp8"):
        metric = fit["metrics"][f"gemm_{group}.latency_ms"]
        assert metric["held_out"]["n"] == metric["after"]["n"] > 0
        assert math.isfinite(metric["held_out"]["mdape_pct"])
    # an NVIDIA part's priors come from the whole H100 tables (efficiency.VENDOR_KERNEL_PRIORS),
    # so a fit on this subset predicts the shapes it did not see about as well as they do
    for group in ("bf16", "fp8"):
        metric = fit["metrics"][f"gemm_{group}.latency_ms"]
        assert metric["before"]["mdape_pct"] < 12.0
        assert metric["held_out"]["mdape_pct"] < metric["before"]["mdape_pct"] + 2.0
    params = profile["parameters"]
    assert 0.05 <= params["gemm_compute_efficiency_bf16"] <= 1.0
    assert set(profile["standard_errors"]) == set(params)
    assert "gemm_bf16.latency_ms" in profile["intervals"]["residual_quantiles"]
    assert client.get(f"/v1/calibrations/{profile['id']}").json() == profile
    listed = client.get("/v1/calibrations", params={"accelerator": "h100-sxm"}).json()
    assert [p["id"] for p in listed["items"]] == [profile["id"]]
    assert client.get("/v1/calibrations", params={"accelerator": "b200"}).json()["items"] == []
    assert len(stored_measurements(client, profile["id"])) == len(body["measurements"])


def test_csv_text_and_multipart_store_the_same_measurements(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    text = DECODE.read_text()
    as_text = created(
        client.post(
            "/v1/calibrations",
            content=text.encode(),
            params={"accelerator": "h100-sxm", "name": "decode"},
            headers={**auth_headers, "Content-Type": "text/csv"},
        )
    )
    as_form = created(
        client.post(
            "/v1/calibrations",
            files={"file": (DECODE.name, text.encode(), "text/csv")},
            data={"accelerator": "h100-sxm", "name": "decode", "backend": "vllm"},
            headers=auth_headers,
        )
    )
    rows = len(text.strip().splitlines()) - 1
    assert as_text["n_measurements"] == as_form["n_measurements"] == rows
    assert as_text["format"] == as_form["format"] == "decode_attention"
    assert as_text["backend"] is None and as_form["backend"] == "vllm"
    assert stored_measurements(client, as_text["id"]) == stored_measurements(client, as_form["id"])
    # same data, same deterministic fit
    assert as_text["parameters"] == pytest.approx(as_form["parameters"])
    first = stored_measurements(client, as_text["id"])[0]
    assert first["kind"] == "attention" and first["phase"] == "decode"


def test_vllm_bench_result_as_json_and_as_file(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    params = {"accelerator": "h100-sxm", "name": "vllm", "backend": "sglang"}
    direct = created(
        client.post("/v1/calibrations", json=VLLM_RESULT, params=params, headers=auth_headers)
    )
    upload = json.dumps(VLLM_RESULT).encode()
    as_file = created(
        client.post(
            "/v1/calibrations",
            files={"file": ("result.json", upload, "application/json")},
            data=params,
            headers=auth_headers,
        )
    )
    assert direct["format"] == as_file["format"] == "vllm_bench_json"
    assert as_file["version"] == direct["version"] + 1  # same (accelerator, backend, name)
    (stored,) = stored_measurements(client, direct["id"])
    assert stored["kind"] == "serving" and stored["model"] == "qwen3-32b"
    assert (stored["concurrency"], stored["input_tokens"], stored["output_tokens"]) == (
        16,
        1024,
        128,
    )
    assert stored["ttft_ms"] == VLLM_RESULT["mean_ttft_ms"]
    assert stored["tpot_ms"] == VLLM_RESULT["mean_tpot_ms"]
    assert stored["backend"] == "sglang"
    assert any("custom_tag" in w for w in direct["warnings"])


def test_unknown_columns_are_ignored_with_a_warning(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    text = "dtype,m,n,k,latency_ms,gpu_clock_mhz\n" + "".join(
        f"bf16,{m},4096,4096,{0.004 + m * 1e-5},1980\n" for m in (1, 8, 16, 64, 256, 1024, 4096)
    )
    profile = created(
        client.post(
            "/v1/calibrations",
            content=text,
            params={"accelerator": "h100-sxm"},
            headers={**auth_headers, "Content-Type": "text/csv"},
        )
    )
    assert profile["name"] == "gemm upload"
    assert any("gpu_clock_mhz" in w for w in profile["warnings"])


def test_missing_required_columns_are_all_named(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = client.post(
        "/v1/calibrations",
        content="m,n,k,extra\n16,4096,4096,1\n",
        params={"accelerator": "h100-sxm"},
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert "dtype" in problem["detail"] and "latency_ms" in problem["detail"]
    assert stored_count(client) == 0


BAD_JSON_ROWS = [
    ('{"kind": "gemm", "dtype": "bf16", "m": 16, "n": 1024, "k": 1024, "latency_ms": NaN}',
     "measurements.1.latency_ms"),
    ('{"kind": "gemm", "dtype": "bf16", "m": 16, "n": 1024, "k": 1024, "latency_ms": Infinity}',
     "measurements.1.latency_ms"),
    ('{"kind": "gemm", "dtype": "bf16", "m": 16, "n": 1024, "k": 1024, "latency_ms": -1}',
     "measurements.1.latency_ms"),
    ('{"kind": "gemm", "dtype": "bf16", "m": 0, "n": 1024, "k": 1024, "latency_ms": 0.01}',
     "measurements.1.m"),
    ('{"kind": "attention", "phase": "decode", "batch_size": 8, "context_tokens": 1024, '
     '"num_heads": 32, "num_kv_heads": 5, "head_dim": 128, "latency_ms": 0.03}',
     "measurements.1.num_kv_heads"),
    ('{"kind": "static", "model": "no-such-model", "batch_size": 1, "input_tokens": 128, '
     '"output_tokens": 128, "latency_ms": 900}',
     "measurements.1.model"),
    ('{"kind": "serving", "model": "qwen3-32b", "parallelism": {"tp": 3}, "input_tokens": 128, '
     '"output_tokens": 128, "concurrency": 4, "tpot_ms": 20}',
     "measurements.1.parallelism"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "field"), BAD_JSON_ROWS)
def test_bad_json_row_is_named_and_nothing_is_stored(
    client: TestClient, auth_headers: dict[str, str], row: str, field: str
) -> None:
    body = json.dumps(
        {"accelerator": "h100-sxm", "name": "bad", "measurements": ["__ROW__"]}
    ).replace('"__ROW__"', _GOOD + ", " + row)
    response = client.post(
        "/v1/calibrations",
        content=body,
        headers={**auth_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == [field]
    assert "row 2" in problem["detail"]
    assert stored_count(client) == 0


_GOOD = '{"kind": "gemm", "dtype": "bf16", "m": 16, "n": 4096, "k": 4096, "latency_ms": 0.02}'


@pytest.mark.parametrize(
    ("line", "field"),
    [("bf16,16,1024,1024,nan", "latency_ms"), ("bf16,16,1024,1024,0", "latency_ms"),
     ("bf16,16,1024,x,0.01", "k"), ("bf16,16,-4,1024,0.01", "n")],
)  # fmt: skip
def test_bad_csv_row_is_named_and_nothing_is_stored(
    client: TestClient, auth_headers: dict[str, str], line: str, field: str
) -> None:
    text = f"dtype,m,n,k,latency_ms\nbf16,16,4096,4096,0.02\nbf16,32,4096,4096,0.03\n{line}\n"
    response = client.post(
        "/v1/calibrations",
        files={"file": ("gemm.csv", text.encode(), "text/csv")},
        data={"accelerator": "h100-sxm"},
        headers=auth_headers,
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["field"] == field and "row 3" in problem["detail"]
    assert stored_count(client) == 0


def test_unknown_model_in_a_csv_names_its_row(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    header, *rows = SERVING.read_text().strip().splitlines()
    lines = [header, *(r for r in rows if ",sglang," in r)]  # one backend per upload
    bad = lines[3].replace("Qwen/Qwen3-32B", "Acme/Unknown-9B")
    text = "\n".join([*lines[:3], bad, *lines[4:]]) + "\n"
    response = client.post(
        "/v1/calibrations",
        content=text,
        params={"accelerator": "h100-sxm"},
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["field"] == "model"
    assert "row 3" in problem["detail"] and "unknown-9b" in problem["detail"]
    assert stored_count(client) == 0


def test_rows_of_other_accelerators_are_skipped_and_rows_still_named(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    # the H100 rows without TensorRT-LLM: one backend per upload
    lines = [line for line in ARGONNE_TTFT.read_text().splitlines() if ",TensorRT-LLM," not in line]
    text = "\n".join(lines) + "\n"
    data = [line for line in text.splitlines()[1:] if line.strip(", ")]
    h100 = [i for i, line in enumerate(data) if line.startswith("Nvidia H100 GPU")]
    profile = created(
        client.post(
            "/v1/calibrations",
            content=text,
            params={"accelerator": "h100-sxm"},
            headers={**auth_headers, "Content-Type": "text/csv"},
        )
    )
    assert profile["n_measurements"] == len(h100) > 0
    assert any("mi300x" in w and "other accelerators" in w for w in profile["warnings"])
    # an unknown model on the last H100 row is reported with that row's number
    last = h100[-1]
    model = data[last].split(",")[3]
    data[last] = data[last].replace(model, "acme/Unknown-1B")
    bad = "\n".join([text.splitlines()[0], *data]) + "\n"
    response = client.post(
        "/v1/calibrations",
        content=bad,
        params={"accelerator": "h100-sxm"},
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert response.status_code == 422, response.text
    assert f"row {last + 1}:" in response.json()["detail"]
    assert stored_count(client) == 1


def test_metadata_and_media_type_errors(client: TestClient, auth_headers: dict[str, str]) -> None:
    unknown = client.post(
        "/v1/calibrations", json=json_body(GEMM, accelerator="no-such-gpu"), headers=auth_headers
    )
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["field"] == "accelerator"
    missing = client.post(
        "/v1/calibrations",
        content=GEMM.read_text(),
        headers={**auth_headers, "Content-Type": "text/csv"},
    )
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"] == "accelerator"
    xml = client.post(
        "/v1/calibrations",
        content=b"<gemm/>",
        params={"accelerator": "h100-sxm"},
        headers={**auth_headers, "Content-Type": "application/xml"},
    )
    assert xml.status_code == 415
    assert stored_count(client) == 0


def test_writes_need_a_write_key(client: TestClient, make_api_key: Callable[..., str]) -> None:
    body = json_body(GEMM)
    assert client.post("/v1/calibrations", json=body).status_code == 401
    bad_key = {"X-API-Key": "rl_000000000000_nope"}
    assert client.post("/v1/calibrations", json=body, headers=bad_key).status_code == 401
    reader = {"X-API-Key": make_api_key("read")}
    assert client.post("/v1/calibrations", json=body, headers=reader).status_code == 403
    assert stored_count(client) == 0


def test_idempotency_key_replays_and_conflicts(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = json_body(DECODE)
    headers = {**auth_headers, "Idempotency-Key": "upload-1"}
    first = client.post("/v1/calibrations", json=body, headers=headers)
    again = client.post("/v1/calibrations", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert stored_count(client) == 1
    other = {**body, "name": "another name"}
    conflict = client.post("/v1/calibrations", json=other, headers=headers)
    assert conflict.status_code == 422
    assert conflict.json()["errors"][0]["field"] == "Idempotency-Key"
    fresh = client.post(
        "/v1/calibrations", json=body, headers={**auth_headers, "Idempotency-Key": "upload-2"}
    )
    assert created(fresh)["id"] != first.json()["id"] and fresh.json()["version"] == 2
    assert stored_count(client) == 2


def test_concurrent_duplicate_key_replays_the_winner(
    client: TestClient, auth_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that checked the key before another stored it hits the unique constraint."""
    body = json_body(DECODE)
    headers = {**auth_headers, "Idempotency-Key": "race"}
    winner = created(client.post("/v1/calibrations", json=body, headers=headers))
    real_replay = CalibrationService._replay
    calls: list[int] = []

    def late_replay(self: CalibrationService, *args: Any) -> Any:
        calls.append(1)
        return None if len(calls) == 1 else real_replay(self, *args)

    monkeypatch.setattr(CalibrationService, "_replay", late_replay)
    loser = client.post("/v1/calibrations", json=body, headers=headers)
    assert len(calls) == 2  # missed once, then replayed after the IntegrityError
    assert loser.status_code == 201 and loser.json() == winner
    assert stored_count(client) == 1


def test_simultaneous_duplicates_store_one_profile(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """Two requests with one key sent at once: both get the same 201, one profile is stored."""
    body = json_body(DECODE)
    headers = {**auth_headers, "Idempotency-Key": "together"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        responses = list(
            pool.map(lambda _: client.post("/v1/calibrations", json=body, headers=headers), (0, 1))
        )
    assert [r.status_code for r in responses] == [201, 201]
    assert responses[0].json() == responses[1].json()
    assert stored_count(client) == 1
    # without a key, simultaneous uploads of one name get consecutive versions
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = list(
            pool.map(
                lambda _: client.post("/v1/calibrations", json=body, headers=auth_headers), (0, 1)
            )
        )
    assert sorted(created(r)["version"] for r in plain) == [2, 3]


def test_measurement_limit(
    client: TestClient, auth_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration_routes, "MAX_MEASUREMENTS_PER_CALIBRATION", 10)
    response = client.post("/v1/calibrations", json=json_body(DECODE), headers=auth_headers)
    assert response.status_code == 422
    assert "at most 10 measurements" in response.json()["detail"]
    assert stored_count(client) == 0


def test_fit_over_its_time_budget_is_a_503(
    app: FastAPI, client: TestClient, auth_headers: dict[str, str]
) -> None:
    app.state.settings = app.state.settings.model_copy(update={"fit_time_budget_s": 1e-9})
    response = client.post("/v1/calibrations", json=json_body(GEMM), headers=auth_headers)
    assert response.status_code == 503
    assert response.headers["Retry-After"].isdigit()
    assert "time budget" in response.json()["detail"]
    assert stored_count(client) == 0


def test_pagination_and_unknown_profile(client: TestClient, auth_headers: dict[str, str]) -> None:
    body = json_body(DECODE)
    ids = [created(client.post("/v1/calibrations", json=body, headers=auth_headers))["id"]
           for _ in range(3)]  # fmt: skip
    first = client.get("/v1/calibrations", params={"limit": 2}).json()
    second = client.get(
        "/v1/calibrations", params={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [p["id"] for p in first["items"] + second["items"]] == ids
    assert [p["version"] for p in first["items"] + second["items"]] == [1, 2, 3]
    assert second["next_cursor"] is None
    assert client.get("/v1/calibrations/cal_nope").status_code == 404
    assert client.get("/v1/calibrations", params={"cursor": "%%%"}).status_code == 422


# Estimates with stored profiles ------------------------------------------------------------


def estimate(client: TestClient, **overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "qwen3-32b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "batch_sizes": [1, 16, 64],
        "mode": "serving",
        "backend": "trtllm",
    }
    request.update(overrides)
    response = client.post("/v1/estimates", json=request)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    EstimateResponse.model_validate(answer)
    return answer


@pytest.fixture
def serving_profile(client: TestClient, auth_headers: dict[str, str]) -> dict[str, Any]:
    """A profile of the TensorRT-LLM TP1/TP2 serving rows (two held-out groups; a fit of all
    13 groups takes ~20 s, too slow for the default suite)."""
    rows = [
        m
        for m in measurements(SERVING)
        if m["backend"] == "trtllm" and m["parallelism"]["tp"] in (1, 2)
    ]
    assert len(rows) >= 8
    body = {"accelerator": "h100-sxm", "name": "qwen3 serving", "backend": "trtllm",
            "measurements": rows}  # fmt: skip
    return created(client.post("/v1/calibrations", json=body, headers=auth_headers))


def _relative_width(point: dict[str, Any], metric: str) -> float:
    return float(point[f"{metric}_p90"] / point[f"{metric}_p10"])


def test_auto_uses_the_newest_profile_with_intervals(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    serving = serving_profile["fit"]["metrics"]
    assert serving["serving.tpot_ms"]["held_out"]["n"] > 0
    assert serving["serving.ttft_ms"]["held_out"]["n"] > 0
    auto = estimate(client, calibration="auto")
    none = estimate(client, calibration="none")
    outside = auto["calibration"].pop("extrapolation")
    assert auto["calibration"] == {
        "id": serving_profile["id"],
        "name": "qwen3 serving",
        "backend": "trtllm",
        "transferred_from": None,
        "reason": "auto: a profile of backend trtllm for this accelerator, fitted on this "
        "model; the newest such",
    }
    # the profile was fitted on fp8 runs at concurrency >= 8: bf16 and concurrency 1 lie outside
    by_dimension = {e["dimension"]: e for e in outside}
    assert by_dimension["precision"]["requested"] == "bf16"
    assert by_dimension["precision"]["fitted_values"] == ["fp8"]
    assert by_dimension["concurrency"]["requested"] == 1
    assert by_dimension["concurrency"]["fitted_low"] > 1
    assert none["calibration"] is None
    assert [p["tpot_ms"] for p in auto["points"]] != [p["tpot_ms"] for p in none["points"]]
    for point in auto["points"]:
        for metric in ("ttft_ms", "tpot_ms"):
            low, high = point[f"{metric}_p10"], point[f"{metric}_p90"]
            assert 0 < low < high and math.isfinite(high)
    assert all(p[f] is None for p in none["points"] for f in INTERVAL_FIELDS)
    by_id = estimate(client, calibration=serving_profile["id"])
    assert by_id["points"] == auto["points"]
    # another backend falls back to a backend-less profile, of which there is none
    assert estimate(client, backend="vllm")["calibration"] is None


def test_auto_prefers_a_profile_fitted_on_the_model_or_its_kind(
    client: TestClient, auth_headers: dict[str, str], serving_profile: dict[str, Any]
) -> None:
    """A newer TensorRT-LLM profile of kernel tables alone does not displace the one fitted on
    Qwen3-32B runs for Qwen3-32B, nor for Llama-3.1-8B (dense like it); for MoE gpt-oss-120b,
    which no profile was fitted on a model of its kind, the newest is chosen. Plans choose the
    same way, per model, and say why."""
    body = json_body(GEMM, backend="trtllm")
    kernels = created(client.post("/v1/calibrations", json=body, headers=auth_headers))
    cases = {
        "qwen3-32b": (serving_profile["id"], "fitted on this model"),
        "llama-3.1-8b": (
            serving_profile["id"],
            "fitted on dense models like this one (qwen3-32b), none on it",
        ),
        "gpt-oss-120b": (kernels["id"], "none fitted on this model or another moe model"),
    }
    for model, (profile_id, why) in cases.items():
        chosen = estimate(client, model=model)["calibration"]
        assert chosen["id"] == profile_id, model
        assert chosen["reason"] == (
            f"auto: a profile of backend trtllm for this accelerator, {why}; the newest such"
        )
    plan = {
        "models": list(cases),
        "accelerators": ["h100-sxm"],
        "input_tokens": 1024,
        "output_tokens": 128,
        "slo": {"ttft_ms_max": 100000, "tpot_ms_max": 1000},
        "backend": "trtllm",
        "concurrency_levels": 2,
    }
    response = client.post("/v1/plans", json=plan)
    assert response.status_code == 200, response.text
    configs = response.json()["configurations"]
    assert {c["model"] for c in configs} == set(cases)
    for cfg in configs:
        profile_id, why = cases[cfg["model"]]
        assert cfg["calibration"]["id"] == profile_id, cfg["model"]
        assert why in cfg["calibration"]["reason"]


def test_a_backend_is_one_engine_however_it_is_spelled(
    client: TestClient, auth_headers: dict[str, str], serving_profile: dict[str, Any]
) -> None:
    """A request naming "TensorRT-LLM" gets the trtllm profile (and its answers); an upload
    declaring "vLLM" is stored as vllm."""
    auto = estimate(client, calibration="auto")
    spelled = estimate(client, calibration="auto", backend="TensorRT-LLM")
    assert spelled["calibration"]["id"] == serving_profile["id"]
    assert spelled["points"] == auto["points"]
    stored = created(
        client.post("/v1/calibrations", json=json_body(GEMM, backend="vLLM"), headers=auth_headers)
    )
    assert stored["backend"] == "vllm"


def test_estimates_inside_the_domain_report_no_extrapolation_and_narrower_intervals(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    domain = serving_profile["fit"]["domain"]
    assert domain["backends"] == ["trtllm"]
    assert [m["id"] for m in domain["models"]] == ["qwen3-32b"]
    assert domain["models"][0] == {"id": "qwen3-32b", "kind": "dense", "layers": 64,
                                   "hidden_size": 5120}  # fmt: skip
    low, high = domain["ranges"]["concurrency"]["low"], domain["ranges"]["concurrency"]["high"]
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}
    inside = estimate(client, precision=fp8, batch_sizes=[int(low), int(high)])
    assert inside["calibration"]["extrapolation"] == []
    # an fp8 cache on two GPUs runs more than the fitted concurrencies at once
    roomy = {**fp8, "kv_cache": "fp8"}
    far = estimate(client, precision=roomy, parallelism={"tp": 2}, batch_sizes=[int(high) * 8])
    assert far["points"][0]["running_batch_size"] > high
    assert [e["dimension"] for e in far["calibration"]["extrapolation"]] == ["concurrency"]
    assert _relative_width(far["points"][0], "tpot_ms") > _relative_width(
        inside["points"][1], "tpot_ms"
    )
    shifts = serving_profile["fit"]["parameter_shifts"]
    assert serving_profile["fit"]["prior_backend"] == "trtllm"
    assert set(shifts) >= {"step_overhead_us", "sequence_layer_overhead_us"}
    step = shifts["step_overhead_us"]
    assert step["shift_prior_sd"] == pytest.approx(
        (step["fitted"] - step["prior"]) / step["prior_sd"]
    )
    # the queue share is the scheduler's (held at the backend's prior), not the harness's
    assert set(serving_profile["fit"]["harness_terms"]["closed_loop"]) == {
        "admission_wait_steps",
        "prefill_queue_ln_prompts",
    }


def test_each_extrapolation_item_says_how_far_it_widens_the_interval(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    """Moved to an H200 with 8× the largest fitted concurrency of clients, the answer names the
    two kinds it widens under with their measured spreads, and its TPOT band is the in-domain
    band widened by exactly those, in quadrature (the running batch, what the H200's memory
    holds at once, is what lies beyond the fitted concurrencies)."""
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    intervals = serving_profile["intervals"]
    high = serving_profile["fit"]["domain"]["ranges"]["concurrency"]["high"]
    moved = estimate(
        client, accelerator="h200-sxm", calibration=serving_profile["id"], precision=fp8,
        parallelism={"tp": 2}, batch_sizes=[int(high) * 8],
    )  # fmt: skip
    items = {e["dimension"]: e["widening"] for e in moved["calibration"]["extrapolation"]}
    assert set(items) == {"accelerator", "concurrency"}
    crowd, transfer = items["concurrency"], items["accelerator"]
    assert crowd["kind"] == "concurrency_above" and crowd["per_doubling"]
    running = moved["points"][0]["running_batch_size"]
    assert high < running <= 8 * high
    assert crowd["doublings"] == pytest.approx(math.log2(running / high))
    own = intervals["extrapolation_spreads"]["serving.tpot_ms"].get("concurrency_above")
    measured = (
        own["log_sigma"]
        if own is not None
        else DEFAULT_SPREADS["serving.tpot_ms"]["concurrency_above"].log_sigma
    )
    assert crowd["tpot_ms_source"] == ("profile" if own is not None else "default")
    assert crowd["tpot_ms_log_sigma"] == pytest.approx(measured)
    assert transfer == {
        "kind": "accelerator", "per_doubling": False, "doublings": None,
        "ttft_ms_log_sigma": intervals["transfer_log_sigma"], "ttft_ms_source": "transfer",
        "tpot_ms_log_sigma": intervals["transfer_log_sigma"], "tpot_ms_source": "transfer",
    }  # fmt: skip
    band = intervals["residual_quantiles"]["serving.tpot_ms"]
    half = (band["log_high"] - band["log_low"]) / 2.0
    sigma = math.hypot(transfer["tpot_ms_log_sigma"], measured * crowd["doublings"])
    width = 2.0 * math.sqrt(half**2 + (Z_90 * sigma) ** 2)
    assert math.log(_relative_width(moved["points"][0], "tpot_ms")) == pytest.approx(width)


def test_profile_transfers_to_another_accelerator(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    home = estimate(client, calibration=serving_profile["id"])
    moved = estimate(client, accelerator="h200-sxm", calibration=serving_profile["id"])
    assert moved["calibration"]["transferred_from"] == "h100-sxm"
    assert moved["calibration"]["id"] == serving_profile["id"]
    for here, there in zip(home["points"], moved["points"], strict=True):
        assert _relative_width(there, "tpot_ms") > _relative_width(here, "tpot_ms")
    # "auto" never borrows another accelerator's profile
    assert estimate(client, accelerator="h200-sxm")["calibration"] is None
    missing = client.post(
        "/v1/estimates",
        json={"model": "qwen3-32b", "accelerator": "h100-sxm", "input_tokens": 8,
              "output_tokens": 8, "batch_sizes": [1], "calibration": "cal_missing"},
    )  # fmt: skip
    assert missing.status_code == 404


def test_plans_apply_a_profile_within_its_reach_as_estimates_do(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    """Fitted on TP1/TP2, a TP8 plan candidate uses the per-step overhead the TP8 estimate uses
    (moved toward its prior outside the fitted GPU counts), so the two agree exactly, for the
    plan's load pattern: open loop by default (a deployment's users, without the profile's
    closed-loop harness terms), or the closed loop the profile was fitted on."""
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}
    body = {
        "models": ["qwen3-32b"],
        "accelerators": ["h100-sxm"],
        "input_tokens": 1024,
        "output_tokens": 128,
        "slo": {"ttft_ms_max": 100000, "tpot_ms_max": 1000},
        "requests_per_s": 1,
        "precisions": [fp8],
        "tp": [8],
        "max_gpus_per_replica": 8,
        "backend": "trtllm",
        "calibration": serving_profile["id"],
        "concurrency_levels": 4,
    }
    ttft_ms: dict[str, float] = {}
    for pattern in ("open_loop", "closed_loop"):
        asked = body if pattern == "open_loop" else {**body, "load_pattern": pattern}
        response = client.post("/v1/plans", json=asked)
        assert response.status_code == 200, response.text
        assert response.json()["workload"]["load_pattern"] == pattern
        # the notes say which of the profile's fitted terms an open-loop plan leaves out
        left_out = [n for n in response.json()["notes"] if "leaves out" in n]
        assert len(left_out) == (pattern == "open_loop")
        assert all("admission_wait_steps" in n for n in left_out)
        configs = response.json()["configurations"]
        assert configs and all(c["parallelism"]["tp"] == 8 for c in configs)
        for cfg in configs:
            point = estimate(
                client,
                calibration=serving_profile["id"],
                precision=fp8,
                parallelism=cfg["parallelism"],
                batch_sizes=[cfg["concurrency"]],
                load_pattern=pattern,
            )["points"][0]
            assert point["tpot_ms"] == pytest.approx(cfg["tpot_ms"], rel=1e-9)
            assert point["ttft_ms"] == pytest.approx(cfg["ttft_ms"], rel=1e-9)
        ttft_ms[pattern] = configs[0]["ttft_ms"]
    # the closed loop's fitted admission wait (decode steps before a wave's prompt runs) is
    # a load generator's, which a deployment's users do not have
    assert ttft_ms["open_loop"] < ttft_ms["closed_loop"]


def test_offline_estimates_use_the_engine_terms_of_a_closed_loop_profile(
    client: TestClient, serving_profile: dict[str, Any], settings: Settings
) -> None:
    """A profile fitted on closed-loop runs carries the harness's admission wait and queue
    share; an offline question (requests queued at once) is answered without them."""
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}
    harness = serving_profile["fit"]["harness_terms"]["closed_loop"]
    assert harness["admission_wait_steps"] > 0.5  # the fit moved it off its prior
    closed = estimate(client, precision=fp8, batch_sizes=[16])
    offline = estimate(client, precision=fp8, batch_sizes=[16], load_pattern="offline")
    assert closed["load_pattern"] == "closed_loop" and offline["load_pattern"] == "offline"
    (c,), (o,) = closed["points"], offline["points"]
    assert o["queue_wait_ms"] == 0 and c["queue_wait_ms"] == 0  # fewer than the running limit
    # the TTFT says which part is the fitted harness wait: the same steps, more of them
    assert c["admission_wait_ms"] == pytest.approx(
        o["admission_wait_ms"] * harness["admission_wait_steps"] / 0.5
    )
    # The engine with the profile's parameters gives both answers, and the offline one stays
    # the same whatever the harness terms are.
    database = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(database)) as session:
            row = CalibrationRepository(session).get(serving_profile["id"])
            assert row is not None
            result = CalibrationResult.from_dict(row.result)
    finally:
        database.dispose()
    params = result.params_for(gpus=1, backend="trtllm", mode="serving", model_kind="dense")
    records = {str(r["id"]): r for r in load_model_records()}
    qwen = model_from_record(records["qwen3-32b"])
    h100 = next(
        accelerator_from_record(r) for r in load_accelerator_records() if r["id"] == "h100-sxm"
    )
    engine_fp8 = Precision(weights="fp8", activations="fp8", kv_cache="bf16")

    def engine_ttft_ms(load_pattern: str, terms: EfficiencyParams) -> float:
        answer = engine_estimate(
            qwen, h100, precision=engine_fp8, input_tokens=1024, output_tokens=128,
            batch_sizes=[16], mode="serving", params=terms, load_pattern=load_pattern,
        )  # fmt: skip
        return float(answer.ttft_ms[0])

    assert engine_ttft_ms("closed_loop", params) == pytest.approx(c["ttft_ms"], rel=1e-6)
    assert engine_ttft_ms("offline", params) == pytest.approx(o["ttft_ms"], rel=1e-6)
    other = params.replace(admission_wait_steps=40.0, prefill_queue_ln_prompts=1.0)
    assert engine_ttft_ms("closed_loop", other) > 1.5 * c["ttft_ms"]
    assert engine_ttft_ms("offline", other) == pytest.approx(o["ttft_ms"], rel=1e-12)
    bad = client.post(
        "/v1/estimates",
        json={"model": "qwen3-32b", "accelerator": "h100-sxm", "input_tokens": 8,
              "output_tokens": 8, "batch_sizes": [1], "load_pattern": "offline"},
    )  # fmt: skip
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "load_pattern"


def test_queued_requests_beyond_the_running_batch_are_no_extrapolation(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    """Offline queues of 2,000 and 8,000 requests run the same batch at once (KV room caps it):
    the domain check and the TPOT band see that running batch, not the queue; the longer
    queue only waits longer."""
    fp8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    answer = estimate(
        client, precision=fp8, parallelism={"tp": 2}, batch_sizes=[2000, 8000],
        load_pattern="offline",
    )  # fmt: skip
    short, long = answer["points"]
    running = short["running_batch_size"]
    assert running == long["running_batch_size"] < 2000
    assert long["queue_wait_ms"] > short["queue_wait_ms"] > 0
    assert (long["tpot_ms_p10"], long["tpot_ms_p90"]) == (
        short["tpot_ms_p10"],
        short["tpot_ms_p90"],
    )
    items = {e["dimension"]: e for e in answer["calibration"]["extrapolation"]}
    assert items["concurrency"]["requested"] == running
    assert items["concurrency"]["widening"]["doublings"] == pytest.approx(
        math.log2(running / items["concurrency"]["fitted_high"])
    )


def test_sweep_chart_shades_the_calibrated_interval(
    client: TestClient, serving_profile: dict[str, Any]
) -> None:
    answer = estimate(client)
    params = {"model": "qwen3-32b", "accelerator": "h100-sxm", "input_tokens": 1024,
              "output_tokens": 128, "batch_sizes": "1,16,64", "mode": "serving",
              "backend": "trtllm", "format": "vega"}  # fmt: skip
    spec = client.get("/v1/charts/sweep", params=params).json()
    bands = {
        (row["metric"], row["batch_size"]): (row["p10"], row["p90"])
        for values in spec["datasets"].values()
        for row in values
        if row.get("p10") is not None
    }
    for point in answer["points"]:
        for metric, title in (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)")):
            expected = (point[f"{metric}_p10"], point[f"{metric}_p90"])
            assert bands[(title, point["batch_size"])] == pytest.approx(expected)
    areas = [
        layer for panel in spec["hconcat"] for layer in panel["layer"]
        if layer["mark"]["type"] == "area"
    ]  # fmt: skip
    assert [a["encoding"]["y2"]["field"] for a in areas] == ["p90", "p90"]  # TTFT, TPOT panels
