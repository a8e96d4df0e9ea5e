"""POST /v1/calibrations with several files in one multipart upload: one profile fitted on all
of them (kernel tables beside end-to-end runs), errors naming the file, and fp4-labelled runs on
an accelerator without fp4 tensor cores accepted as the fit reads them. Runs uploaded without
kernel tables build on the newest profile fitted on them (``fit.kernels_from``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support import serving_rows

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "benchmarks"
GEMM = DATA / "h100_gemm_subset.csv"
NCCL = DATA / "h100_nccl_subset.csv"
SERVING = DATA / "h100_serving_qwen3_32b_subset.csv"
GPT_OSS = ROOT / "benchmarks" / "data" / "h100" / "serving_gpt_oss_120b.csv"
GEMM_GROUPS = ("gemm_bf16", "gemm_fp8")  # the GEMM subset's dtype groups
KERNEL_TABLE_GROUPS = (*GEMM_GROUPS, "collective")  # what _kernel_files() fits


def _rows(path: Path) -> int:
    return len(path.read_text().strip().splitlines()) - 1


def _post(client: TestClient, headers: dict[str, str], files: list[Any], **params: str) -> Any:
    return client.post(
        "/v1/calibrations",
        files=[("file", f) for f in files],
        params={"accelerator": "h100-sxm", **params},
        headers=headers,
    )


def test_several_files_make_one_profile_fitted_on_all_of_them(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    serving = serving_rows("trtllm")
    header, *rows = NCCL.read_text().strip().splitlines()
    nccl = "\n".join([f"{header},colour", *(f"{r},red" for r in rows)]) + "\n"
    files = [
        (GEMM.name, GEMM.read_bytes(), "text/csv"),
        ("nccl.csv", nccl.encode(), "text/csv"),
        ("trtllm.csv", serving, "text/csv"),
    ]
    response = _post(client, auth_headers, files, backend="trtllm")
    assert response.status_code == 201, response.text
    profile = response.json()
    runs = serving.decode().count(",trtllm,")
    assert profile["n_measurements"] == _rows(GEMM) + _rows(NCCL) + runs
    assert profile["format"] == "gemm+nccl+serving"
    assert profile["name"] == "gemm+nccl+serving upload"
    assert set(profile["fit"]["n_by_kind"]) == {"gemm", "collective", "serving"}
    assert "nccl.csv: unknown column 'colour' ignored" in profile["warnings"]
    # the kernels were fitted from the tables, which a serving-only upload cannot do
    alone = _post(client, auth_headers, [("trtllm.csv", serving, "text/csv")], backend="trtllm")
    assert alone.status_code == 201, alone.text
    kernel = {"gemm_compute_efficiency_bf16", "collective_latency_us"}
    assert kernel <= set(profile["parameters"])
    assert not kernel & set(alone.json()["parameters"])
    assert "step_overhead_us" in profile["parameters"]
    stored = client.get(f"/v1/calibrations/{profile['id']}/measurements").json()
    assert [m["kind"] for m in stored["items"][:1]] == ["gemm"]


def test_a_bad_row_in_one_file_names_that_file_and_stores_nothing(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    header, first, *_ = SERVING.read_text().strip().splitlines()
    bad = "\n".join([header, first, first.replace("Qwen/Qwen3-32B", "no/such-model")]) + "\n"
    files = [(GEMM.name, GEMM.read_bytes(), "text/csv"), ("runs.csv", bad.encode(), "text/csv")]
    response = _post(client, auth_headers, files)
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == "model"
    assert error["message"].startswith("runs.csv, row 2: unknown model")
    unreadable = [files[0], ("runs.csv", b"dtype,m\n\xff\n", "text/csv")]
    response = _post(client, auth_headers, unreadable)
    assert response.status_code == 422
    assert response.json()["errors"][0]["message"].startswith("runs.csv: is not UTF-8")
    text_field = client.post(
        "/v1/calibrations",
        files=[("file", files[0])],
        data={"file": "not a file part"},
        params={"accelerator": "h100-sxm"},
        headers=auth_headers,
    )
    assert text_field.status_code == 422
    assert text_field.json()["errors"][0]["field"] == "file"
    assert client.get("/v1/calibrations").json()["items"] == []


def test_fp4_labelled_runs_fit_as_weight_only_where_the_chip_has_no_fp4_peak(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """The shipped gpt-oss-120b runs label their GEMMs nvfp4; H100 has no fp4 tensor cores, so
    the upload is read as the fit reads it (4-bit weights, bf16 GEMMs), not refused."""
    files = [(GPT_OSS.name, GPT_OSS.read_bytes(), "text/csv")]
    response = _post(client, auth_headers, files, backend="vllm")
    assert response.status_code == 201, response.text
    profile = response.json()
    assert profile["n_measurements"] == _rows(GPT_OSS)
    assert any("weight-only" in w for w in profile["warnings"])


def _kernel_files() -> list[Any]:
    return [(p.name, p.read_bytes(), "text/csv") for p in (GEMM, NCCL)]


def test_runs_without_kernel_tables_are_warned_about(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    serving = ("trtllm.csv", serving_rows("trtllm"), "text/csv")
    alone = _post(client, auth_headers, [serving], backend="trtllm")
    assert alone.status_code == 201, alone.text
    assert any(w.startswith("no kernel measurements") for w in alone.json()["warnings"])
    assert alone.json()["fit"]["kernels_from"] == {}
    both = _post(client, auth_headers, [*_kernel_files(), serving])
    assert both.status_code == 201, both.text
    assert not any(w.startswith("no kernel measurements") for w in both.json()["warnings"])
    assert both.json()["fit"]["kernels_from"] == {}  # it measured its own


def test_runs_build_on_the_newest_kernel_profile_as_if_uploaded_with_it(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """Kernel tables and runs uploaded apart give the profile one upload of both gives: the
    kernel stage comes first and does not see the runs."""
    kernels = _post(client, auth_headers, _kernel_files(), name="kernels")
    assert kernels.status_code == 201, kernels.text
    kernel_id = kernels.json()["id"]
    serving = ("trtllm.csv", serving_rows("trtllm"), "text/csv")
    apart = _post(client, auth_headers, [serving], backend="trtllm", name="apart")
    assert apart.status_code == 201, apart.text
    together = _post(client, auth_headers, [*_kernel_files(), serving], name="together")
    assert together.status_code == 201, together.text
    built = apart.json()
    assert built["fit"]["kernels_from"] == dict.fromkeys(KERNEL_TABLE_GROUPS, kernel_id)
    assert any(kernel_id in w for w in built["warnings"])
    assert not any(w.startswith("no kernel measurements") for w in built["warnings"])
    engine = {"step_overhead_us", "layer_overhead_us", "sequence_layer_overhead_us"}
    for name in engine:
        assert built["parameters"][name] == pytest.approx(
            together.json()["parameters"][name], rel=1e-6
        )
    tpot = "serving.tpot_ms"
    assert (
        built["fit"]["metrics"][tpot]["after"] == together.json()["fit"]["metrics"][tpot]["after"]
    )


def test_another_keys_private_kernel_profile_is_not_built_on(
    client: TestClient, auth_headers: dict[str, str], make_api_key: Callable[..., str]
) -> None:
    private = client.post(
        "/v1/calibrations",
        files=[("file", f) for f in _kernel_files()],
        params={"accelerator": "h100-sxm", "visibility": "private"},
        headers=auth_headers,
    )
    assert private.status_code == 201, private.text
    other = {"X-API-Key": make_api_key("write", name="other")}
    serving = ("trtllm.csv", serving_rows("trtllm"), "text/csv")
    theirs = _post(client, other, [serving], backend="trtllm")
    assert theirs.status_code == 201, theirs.text
    assert theirs.json()["fit"]["kernels_from"] == {}
    mine = _post(client, auth_headers, [serving], backend="trtllm", name="mine")
    assert mine.json()["fit"]["kernels_from"] == dict.fromkeys(
        KERNEL_TABLE_GROUPS, private.json()["id"]
    )


def test_the_shipped_h100_data_in_one_request_makes_one_profile_per_backend(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """Every shipped H100 file (four kernel tables, three serving sets) in one upload, split by
    backend: each engine's profile holds all the kernel tables and only its own runs."""
    shipped = ROOT / "benchmarks" / "data" / "h100"
    paths = sorted(shipped.glob("*.csv"))
    response = client.post(
        "/v1/calibrations",
        files=[("file", (p.name, p.read_bytes(), "text/csv")) for p in paths],
        params={"accelerator": "h100-sxm", "split_by_backend": "true"},
        headers=auth_headers,
    )
    assert response.status_code == 201, response.text
    runs: dict[str, int] = {}
    for p in paths:
        if p.name.startswith("serving_"):
            for row in p.read_text().strip().splitlines()[1:]:
                runs[row.split(",")[1]] = runs.get(row.split(",")[1], 0) + 1
    profiles = {p["backend"]: p for p in response.json()["items"]}
    assert set(profiles) == set(runs) == {"sglang", "trtllm", "vllm"}
    for backend, profile in profiles.items():
        by_kind = profile["fit"]["n_by_kind"]
        assert set(by_kind) == {"gemm", "attention", "collective", "serving"}
        assert by_kind["serving"] == runs[backend]
        assert profile["fit"]["kernels_from"] == {}
    assert any("weight-only" in w for w in profiles["vllm"]["warnings"])  # gpt-oss-120b


def test_kernel_tables_uploaded_one_at_a_time_make_one_profile_of_all(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """The NCCL table uploaded after the GEMM table builds on it, so the profile "auto" takes
    for a request naming no backend (the newest without one) prices GEMMs from the table too,
    as one upload of both does."""
    gemm = _post(client, auth_headers, [(GEMM.name, GEMM.read_bytes(), "text/csv")])
    assert gemm.status_code == 201, gemm.text
    nccl = _post(client, auth_headers, [(NCCL.name, NCCL.read_bytes(), "text/csv")])
    assert nccl.status_code == 201, nccl.text
    built = nccl.json()
    assert built["fit"]["kernels_from"] == dict.fromkeys(GEMM_GROUPS, gemm.json()["id"])
    assert any(gemm.json()["id"] in w and "the runs" not in w for w in built["warnings"])
    together = _post(client, auth_headers, _kernel_files(), name="together")
    assert together.status_code == 201, together.text
    request = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "input_tokens": 1024,
               "output_tokens": 128, "batch_sizes": [1, 64], "parallelism": {"tp": 2}}  # fmt: skip

    def tpot_ms(calibration: str) -> list[float]:
        answer = client.post("/v1/estimates", json={**request, "calibration": calibration})
        assert answer.status_code == 200, answer.text
        return [p["tpot_ms"] for p in answer.json()["points"]]

    assert tpot_ms(built["id"]) == pytest.approx(tpot_ms(together.json()["id"]), rel=1e-9)
    assert tpot_ms(built["id"]) != pytest.approx(tpot_ms("none"), rel=1e-3)


def test_an_fp8_gemm_table_built_on_sets_the_streaming_fraction_as_one_upload_does(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """With fp8 GEMMs only, the fp8 fit sets the HBM streaming fraction of everything else
    (``fit.streaming_source``); a profile built on such a table takes it too."""
    header, *rows = GEMM.read_text().strip().splitlines()
    fp8 = ("\n".join([header, *(r for r in rows if ",fp8," in r)]) + "\n").encode()
    gemm = _post(client, auth_headers, [("fp8_gemm.csv", fp8, "text/csv")])
    assert gemm.status_code == 201, gemm.text
    nccl = _post(client, auth_headers, [(NCCL.name, NCCL.read_bytes(), "text/csv")])
    assert nccl.status_code == 201, nccl.text
    assert nccl.json()["fit"]["kernels_from"] == {"gemm_fp8": gemm.json()["id"]}
    files = [("fp8_gemm.csv", fp8, "text/csv"), (NCCL.name, NCCL.read_bytes(), "text/csv")]
    together = _post(client, auth_headers, files, name="together")
    assert together.status_code == 201, together.text
    request = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "input_tokens": 4096,
               "output_tokens": 128, "batch_sizes": [64], "parallelism": {"tp": 2}}  # fmt: skip

    def tpot_ms(calibration: str) -> float:
        answer = client.post("/v1/estimates", json={**request, "calibration": calibration})
        assert answer.status_code == 200, answer.text
        return float(answer.json()["points"][0]["tpot_ms"])

    assert tpot_ms(nccl.json()["id"]) == pytest.approx(tpot_ms(together.json()["id"]), rel=1e-9)
    assert tpot_ms(nccl.json()["id"]) != pytest.approx(tpot_ms("none"), rel=1e-3)


def test_attention_tables_of_each_phase_uploaded_apart_both_count(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    """The prefill table uploaded after the decode table keeps the decode fit (its own covers
    only prefill), so decode steps are priced as by the decode table's profile."""
    decode_csv = DATA / "h100_decode_attention_subset.csv"
    prefill_csv = DATA / "h100_prefill_attention_subset.csv"
    decode = _post(client, auth_headers, [(decode_csv.name, decode_csv.read_bytes(), "text/csv")])
    assert decode.status_code == 201, decode.text
    prefill = _post(
        client, auth_headers, [(prefill_csv.name, prefill_csv.read_bytes(), "text/csv")]
    )
    assert prefill.status_code == 201, prefill.text
    built = prefill.json()
    assert built["fit"]["kernels_from"] == {"attention_decode": decode.json()["id"]}
    request = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "input_tokens": 16000,
               "output_tokens": 64, "batch_sizes": [1, 32], "mode": "static"}  # fmt: skip

    def tpot_ms(calibration: str) -> list[float]:
        answer = client.post("/v1/estimates", json={**request, "calibration": calibration})
        assert answer.status_code == 200, answer.text
        return [p["tpot_ms"] for p in answer.json()["points"]]

    # the two tables each fit the attention kernel latency (12.5 µs), hence not to the last bit
    assert tpot_ms(built["id"]) == pytest.approx(tpot_ms(decode.json()["id"]), rel=2e-3)
