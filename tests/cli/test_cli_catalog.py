"""``ridgeline catalog`` and ``ridgeline calibrate`` on the local database."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import Result

Invoke = Callable[..., Result]
DATA = Path(__file__).resolve().parents[1] / "data"


def all_ids(client: TestClient, path: str) -> list[str]:
    return [item["id"] for item in client.get(path, params={"limit": 200}).json()["items"]]


def test_ls_json_lists_every_accelerator(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli("catalog", "ls", "--json")
    assert result.exit_code == 0, result.stderr
    assert [a["id"] for a in json.loads(result.stdout)] == all_ids(client, "/v1/accelerators")


def test_ls_models_filters_and_table(ridgeline_cli: Invoke, client: TestClient) -> None:
    moe = json.loads(ridgeline_cli("catalog", "ls", "models", "--moe", "--json").stdout)
    expected = [m["id"] for m in client.get("/v1/models", params={"moe": "true"}).json()["items"]]
    assert [m["id"] for m in moe] == expected and moe
    table = ridgeline_cli("catalog", "ls", "models")
    assert table.exit_code == 0 and "llama-3.1-70b" in table.stdout


def test_ls_csv_has_a_row_per_accelerator(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli("catalog", "ls", "--vendor", "NVIDIA", "--csv")
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("id,")
    expected = client.get("/v1/accelerators", params={"vendor": "NVIDIA", "limit": 200}).json()
    assert len(lines) - 1 == len(expected["items"]) > 0


def test_show_finds_accelerators_and_models(ridgeline_cli: Invoke, client: TestClient) -> None:
    h100 = json.loads(ridgeline_cli("catalog", "show", "h100-sxm", "--json").stdout)
    assert h100 == client.get("/v1/accelerators/h100-sxm").json()
    model = json.loads(ridgeline_cli("catalog", "show", "llama-3.1-8b", "--json").stdout)
    assert model["total_params"] == client.get("/v1/models/llama-3.1-8b").json()["total_params"]
    missing = ridgeline_cli("catalog", "show", "nothing-here")
    assert missing.exit_code == 1 and "nothing-here" in missing.stderr


def test_import_hf_writes_locally_without_a_key(ridgeline_cli: Invoke, client: TestClient) -> None:
    config = DATA / "hf_configs" / "Qwen--Qwen3-8B.json"
    result = ridgeline_cli(
        "catalog", "import-hf", str(config), "--id", "my-qwen3-8b", "--hf-repo", "Qwen/Qwen3-8B",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    created = json.loads(result.stdout)
    stored = client.get("/v1/models/my-qwen3-8b").json()
    assert created["total_params"] == stored["total_params"] > 0
    assert stored["hf_repo"] == "Qwen/Qwen3-8B"
    again = ridgeline_cli("catalog", "import-hf", str(config), "--id", "my-qwen3-8b")
    assert again.exit_code == 1 and "409" in again.stderr


def test_import_hf_reads_configs_holding_infinity_as_the_api_does(
    ridgeline_cli: Invoke, tmp_path: Path
) -> None:
    original = (DATA / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B.json").read_text()
    # Infinity in a key the importer does not use: imported, as POST /v1/models/import does.
    unused = tmp_path / "unused.json"
    unused.write_text(original.replace('"rope_theta": 500000.0', '"rope_theta": Infinity'))
    assert "Infinity" in unused.read_text()
    result = ridgeline_cli("catalog", "import-hf", str(unused), "--id", "llama-inf", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["max_context_tokens"] == 131072
    # Infinity where a shape field is read: the API's 422, naming the key.
    used = tmp_path / "used.json"
    used.write_text(
        original.replace('"max_position_embeddings": 131072', '"max_position_embeddings": Infinity')
    )
    assert "Infinity" in used.read_text()
    refused = ridgeline_cli("catalog", "import-hf", str(used), "--id", "llama-inf-2")
    assert refused.exit_code == 1
    assert "422" in refused.stderr and "max_position_embeddings" in refused.stderr
    assert "JSON compliant" not in refused.stderr


def test_calibrate_reports_a_bad_row(ridgeline_cli: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "gemm.csv"
    bad.write_text("dtype,m,n,k,latency_ms\nbf16,16,4096,4096,0.02\nbf16,16,4096,x,0.03\n")
    result = ridgeline_cli("calibrate", str(bad), "--accelerator", "h100-sxm")
    assert result.exit_code == 1
    assert "row 2" in result.stderr and "k" in result.stderr


def test_calibrate_stores_a_profile(ridgeline_cli: Invoke, client: TestClient) -> None:
    path = DATA / "benchmarks" / "h100_gemm_subset.csv"
    result = ridgeline_cli("calibrate", str(path), "-a", "h100-sxm", "--name", "gemm", "--json")
    assert result.exit_code == 0, result.stderr
    profile = json.loads(result.stdout)
    assert profile["accelerator"] == "h100-sxm" and profile["name"] == "gemm"
    stored = client.get(f"/v1/calibrations/{profile['id']}").json()
    assert stored["id"] == profile["id"]
    assert stored["fit"]["n_measurements"] == len(path.read_text().strip().splitlines()) - 1


def test_calibrate_reads_harness_result_files(ridgeline_cli: Invoke, client: TestClient) -> None:
    sglang = DATA / "harness_samples" / "sglang_bench_serving.jsonl"
    missing = ridgeline_cli("calibrate", str(sglang), "-a", "h100-sxm")
    assert missing.exit_code == 1 and "model" in missing.stderr
    result = ridgeline_cli(
        "calibrate", str(sglang), "-a", "h100-sxm", "--model", "Qwen/Qwen3-32B", "--tp", "2",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    profile = json.loads(result.stdout)
    assert profile["name"] == "sglang_bench_serving.jsonl (sglang_bench_serving)"
    assert profile["backend"] == "sglang"  # the one backend the runs name
    items = client.get(f"/v1/calibrations/{profile['id']}/measurements").json()["items"]
    assert [m["load_pattern"] for m in items] == ["closed_loop", "open_loop"]
    assert {m["tp"] for m in items} == {2}
    guidellm = DATA / "harness_samples" / "guidellm_benchmarks.json"
    forced = ridgeline_cli("calibrate", str(guidellm), "-a", "h100-sxm", "--format", "genai_perf")
    assert forced.exit_code == 1 and "input_config" in forced.stderr


def test_calibrate_refuses_a_file_mixing_backends(
    ridgeline_cli: Invoke, client: TestClient
) -> None:
    serving = DATA / "benchmarks" / "h100_serving_qwen3_32b_subset.csv"
    result = ridgeline_cli("calibrate", str(serving), "-a", "h100-sxm")
    assert result.exit_code == 1
    assert "backend" in result.stderr and "sglang" in result.stderr and "trtllm" in result.stderr
    assert client.get("/v1/calibrations").json()["items"] == []


def test_calibrate_splits_a_file_mixing_backends_when_asked(
    ridgeline_cli: Invoke, client: TestClient
) -> None:
    serving = DATA / "benchmarks" / "h100_serving_qwen3_32b_subset.csv"
    rows = serving.read_text().strip().splitlines()[1:]
    result = ridgeline_cli(
        "calibrate", str(serving), "-a", "h100-sxm", "--split-by-backend", "--json"
    )
    assert result.exit_code == 0, result.stderr
    profiles = json.loads(result.stdout)
    backends = sorted(p["backend"] for p in profiles)
    assert backends == ["sglang", "trtllm", "vllm"]
    for profile in profiles:
        mine = sum(f",{profile['backend']}," in row for row in rows)
        assert profile["fit"]["n_measurements"] == mine
    assert sorted(all_ids(client, "/v1/calibrations")) == sorted(p["id"] for p in profiles)
    table = ridgeline_cli("calibrate", str(serving), "-a", "h100-sxm", "--split-by-backend")
    assert table.exit_code == 0, table.stderr
    assert table.stdout.count("calibration cal_") == 3


def test_calibrate_table_names_the_backend_and_the_fits_warnings(
    ridgeline_cli: Invoke, tmp_path: Path
) -> None:
    """The table's title names the profile's backend, and what the fit warned about (runs
    fitted without kernel tables) is printed after it, for each profile of a split."""
    serving = DATA / "benchmarks" / "h100_serving_qwen3_32b_subset.csv"
    header, *rows = serving.read_text().strip().splitlines()
    trtllm = tmp_path / "trtllm.csv"
    trtllm.write_text("\n".join([header, *(r for r in rows if ",trtllm," in r)]) + "\n")
    one = ridgeline_cli("calibrate", str(trtllm), "-a", "h100-sxm")
    assert one.exit_code == 0, one.stderr
    assert "for h100-sxm, backend trtllm:" in " ".join(one.stdout.split())
    assert "warning: no kernel measurements" in one.stdout
    # what the runs moved, one row per parameter: prior ± sd, fitted, shift in prior sds
    stored = json.loads(ridgeline_cli("calibrate", str(trtllm), "-a", "h100-sxm", "--json").stdout)
    shifts = stored["fit"]["parameter_shifts"]
    moved = one.stdout.split("what the runs moved (priors: trtllm)")[1].split("\nfit")[0]
    assert len(shifts) >= 5
    for name, shift in shifts.items():
        row = next(line for line in moved.splitlines() if f" {name} " in line)
        assert f"{shift['prior']:,.3f} ± {shift['prior_sd']:,.3f}" in row
        assert f"{shift['shift_prior_sd']:,.2f}" in row
    split = ridgeline_cli("calibrate", str(serving), "-a", "h100-sxm", "--split-by-backend")
    assert split.exit_code == 0, split.stderr
    for backend in ("sglang", "trtllm", "vllm"):
        assert f"warning: {backend}: no kernel measurements" in split.stdout


def test_calibrate_fits_one_profile_on_several_files(
    ridgeline_cli: Invoke, client: TestClient, tmp_path: Path
) -> None:
    gemm = DATA / "benchmarks" / "h100_gemm_subset.csv"
    header, *rows = (
        (DATA / "benchmarks" / "h100_serving_qwen3_32b_subset.csv").read_text().split("\n")
    )
    runs = tmp_path / "trtllm.csv"
    runs.write_text("\n".join([header, *(r for r in rows if ",trtllm," in r)]) + "\n")
    result = ridgeline_cli("calibrate", str(gemm), str(runs), "-a", "h100-sxm", "--json")
    assert result.exit_code == 0, result.stderr
    profile = json.loads(result.stdout)
    assert profile["name"] == "h100_gemm_subset.csv, trtllm.csv (gemm+serving)"
    assert profile["backend"] == "trtllm"  # the one backend the runs name
    n_runs = sum(",trtllm," in r for r in rows)
    assert profile["fit"]["n_by_kind"] == {
        "gemm": len(gemm.read_text().strip().splitlines()) - 1,
        "serving": n_runs,
    }
    bad = tmp_path / "bad.csv"
    bad.write_text("dtype,m,n,k,latency_ms\nbf16,16,4096,x,0.03\n")
    refused = ridgeline_cli("calibrate", str(gemm), str(bad), "-a", "h100-sxm")
    assert refused.exit_code == 1 and "bad.csv: row 1" in refused.stderr
