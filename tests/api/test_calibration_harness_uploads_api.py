"""Harness result files through POST /v1/calibrations (as JSON, JSON lines and multipart), the
explicit ``format``, and uploads that mix backends (refused, nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

DATA = Path(__file__).parents[1] / "data"
SAMPLES = DATA / "harness_samples"
SERVING = DATA / "benchmarks" / "h100_serving_qwen3_32b_subset.csv"


def post(client: TestClient, headers: dict[str, str], content: bytes, media: str,
         **params: Any) -> Any:  # fmt: skip
    return client.post(
        "/v1/calibrations",
        content=content,
        params={"accelerator": "h100-sxm", **params},
        headers={**headers, "Content-Type": media},
    )


def stored_count(client: TestClient) -> int:
    return len(client.get("/v1/calibrations", params={"limit": 200}).json()["items"])


def stored(client: TestClient, profile_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(f"/v1/calibrations/{profile_id}/measurements").json()[
        "items"
    ]
    return items


@pytest.mark.parametrize(
    ("name", "fmt", "params", "patterns"),
    [
        ("sglang_bench_serving.jsonl", "sglang_bench_serving", {"model": "Qwen/Qwen3-32B"},
         ["closed_loop", "open_loop"]),
        ("genai_perf_concurrency.json", "genai_perf", {}, ["closed_loop"]),
        ("genai_perf_request_rate.json", "genai_perf", {}, ["open_loop"]),
        ("trtllm_bench_report.json", "trtllm_bench", {}, ["offline"]),
        ("guidellm_benchmarks.json", "guidellm", {},
         ["closed_loop", "closed_loop", "offline", "open_loop"]),
    ],
)  # fmt: skip
def test_each_harness_file_uploads_as_json(
    client: TestClient,
    auth_headers: dict[str, str],
    name: str,
    fmt: str,
    params: dict[str, str],
    patterns: list[str],
) -> None:
    response = post(client, auth_headers, (SAMPLES / name).read_bytes(), "application/json",
                    **params)  # fmt: skip
    assert response.status_code == 201, response.text
    profile = response.json()
    assert profile["format"] == fmt and profile["n_measurements"] == len(patterns)
    assert [m["load_pattern"] for m in stored(client, profile["id"])] == patterns


def test_harness_file_as_multipart_with_metadata(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = client.post(
        "/v1/calibrations",
        files={"file": ("report.json", (SAMPLES / "trtllm_bench_report.json").read_bytes())},
        data={"accelerator": "h100-sxm", "name": "trt", "backend": "trtllm"},
        params={"concurrency": "128"},
        headers=auth_headers,
    )
    assert response.status_code == 201, response.text
    (m,) = stored(client, response.json()["id"])
    assert (m["load_pattern"], m["concurrency"], m["tp"]) == ("closed_loop", 128, 2)
    assert response.json()["backend"] == "trtllm"


def test_sglang_without_model_is_a_422_naming_the_field(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = (SAMPLES / "sglang_bench_serving.jsonl").read_bytes()
    response = post(client, auth_headers, body, "application/json")
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["field"] == "model_id"
    assert "row 1" in problem["detail"] and "model parameter" in problem["detail"]
    assert stored_count(client) == 0


def test_explicit_format_and_broken_files(client: TestClient, auth_headers: dict[str, str]) -> None:
    doc = json.loads((SAMPLES / "genai_perf_concurrency.json").read_text())
    forced = post(client, auth_headers, json.dumps(doc).encode(), "application/json",
                  format="trtllm_bench")  # fmt: skip
    assert forced.status_code == 422
    assert forced.json()["errors"][0]["field"] == "engine"  # read as trtllm-bench, says why
    unknown = post(client, auth_headers, b"{}", "application/json", format="nvidia_magic")
    assert unknown.status_code == 422 and "format" in unknown.text
    doc["time_to_first_token"]["unit"] = "fortnights"
    broken = post(client, auth_headers, json.dumps(doc).encode(), "application/json")
    assert broken.status_code == 422
    assert broken.json()["errors"][0]["field"] == "time_to_first_token.unit"
    neither = post(client, auth_headers, b'{"hello": 1}', "application/json")
    assert neither.status_code == 422
    assert stored_count(client) == 0


def test_an_upload_mixing_backends_is_refused(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    response = post(client, auth_headers, SERVING.read_bytes(), "text/csv", backend="trtllm")
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["field"] == "backend"
    for backend in ("sglang", "trtllm", "vllm"):
        assert backend in problem["detail"]
    assert stored_count(client) == 0


def test_declared_backend_must_match_the_runs(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    header, *rows = SERVING.read_text().strip().splitlines()
    vllm_only = "\n".join([header, *(r for r in rows if ",vllm," in r)]) + "\n"
    wrong = post(client, auth_headers, vllm_only.encode(), "text/csv", backend="trtllm")
    assert wrong.status_code == 422 and "vllm" in wrong.json()["detail"]
    right = post(client, auth_headers, vllm_only.encode(), "text/csv", backend="vllm")
    assert right.status_code == 201, right.text
    assert right.json()["backend"] == "vllm" and stored_count(client) == 1


def test_openapi_documents_the_formats_and_parameters(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/calibrations"]["post"]
    description = operation["requestBody"]["description"]
    names = ("vllm_bench_json", "sglang_bench_serving", "genai_perf", "trtllm_bench", "guidellm")
    for name in (*names, "load_pattern", "open_loop", "docs/measurement-formats.md"):
        assert name in description
    params = {p["name"]: p for p in operation["parameters"]}
    assert {"format", "model", "concurrency", "tp", "weights_dtype"} <= set(params)
    assert "guidellm" in json.dumps(params["format"]["schema"])


def test_split_by_backend_stores_one_profile_per_backend(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    body = SERVING.read_bytes()
    headers = {**auth_headers, "Idempotency-Key": "split-1"}
    response = post(client, headers, body, "text/csv", split_by_backend="true", name="qwen")
    assert response.status_code == 201, response.text
    items = response.json()["items"]
    assert [p["backend"] for p in items] == ["sglang", "trtllm", "vllm"]  # first-seen order
    _, *rows = SERVING.read_text().strip().splitlines()
    for profile in items:
        runs = stored(client, profile["id"])
        assert len(runs) == sum(f",{profile['backend']}," in r for r in rows)
        assert {m["backend"] for m in runs} == {profile["backend"]}
        assert profile["name"] == "qwen" and profile["version"] == 1
    again = post(client, headers, body, "text/csv", split_by_backend="true", name="qwen")
    assert again.status_code == 201 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == response.json() and stored_count(client) == 3
    unsplit = post(client, headers, body, "text/csv", name="qwen")  # same key, other request
    assert unsplit.status_code == 422 and "Idempotency-Key" in unsplit.text


def test_split_by_backend_is_all_or_nothing(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    header, *rows = SERVING.read_text().strip().splitlines()
    last_vllm = max(i for i, r in enumerate(rows) if ",vllm," in r)
    rows[last_vllm] = rows[last_vllm].replace("Qwen/Qwen3-32B", "Acme/Unknown-9B")
    text = "\n".join([header, *rows]) + "\n"
    response = post(client, auth_headers, text.encode(), "text/csv", split_by_backend="true")
    assert response.status_code == 422
    assert f"row {last_vllm + 1}:" in response.json()["detail"]  # the row of the whole file
    declared = post(client, auth_headers, SERVING.read_bytes(), "text/csv",
                    split_by_backend="true", backend="vllm")  # fmt: skip
    assert declared.status_code == 422 and declared.json()["errors"][0]["field"] == "backend"
    assert stored_count(client) == 0
