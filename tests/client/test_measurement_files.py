"""Benchmark files become API measurement objects that the server's parser reads back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.api.schemas.calibrations import CalibrationProfileOut
from service.client import Ridgeline, measurement_files
from service.client.measurement_files import (
    calibration_from_file,
    read_measurement_file,
)
from service.engine.calibration.harness_results import HarnessOptions, parse_harness
from service.engine.calibration.measurements import MeasurementError
from service.engine.calibration.parsers import parse_csv, parse_measurement_dicts

BENCHMARKS = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
CSV_FILES = sorted(BENCHMARKS.glob("*.csv"))
VLLM_RESULT = {
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 200,
    "max_concurrency": 32,
    "completed": 200,
    "total_input_tokens": 204800,
    "total_output_tokens": 25600,
    "mean_ttft_ms": 180.5,
    "mean_tpot_ms": 12.25,
}


def strip_accelerator(items: tuple[object, ...]) -> list[object]:
    """Measurements without their accelerator name (the API carries it once per profile)."""
    out = []
    for m in items:
        fields = {k: getattr(m, k) for k in m.__slots__}  # type: ignore[attr-defined]
        fields.pop("accelerator", None)
        out.append(fields)
    return out


@pytest.mark.parametrize("path", CSV_FILES, ids=lambda p: p.name)
def test_csv_round_trips_through_the_api_shape(path: Path) -> None:
    read = read_measurement_file(path)
    direct = parse_csv(path.read_text())
    assert read.format == direct.format
    back = parse_measurement_dicts(read.measurements)
    assert strip_accelerator(back.measurements) == strip_accelerator(direct.measurements)
    assert not back.warnings  # only fields the API knows were written


def test_chunked_parsing_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    path = BENCHMARKS / "h100_gemm_subset.csv"
    whole = read_measurement_file(path)
    monkeypatch.setattr(measurement_files, "CHUNK_ROWS", 7)
    seen: list[tuple[int, int]] = []
    chunked = read_measurement_file(path, progress=lambda done, total: seen.append((done, total)))
    assert chunked.measurements == whole.measurements
    total = len(whole.measurements)
    assert seen[-1] == (total, total) and len(seen) == -(-total // 7)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_errors_name_the_row_of_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (BENCHMARKS / "h100_gemm_subset.csv").read_text().splitlines()
    cells = lines[12].split(",")
    cells[-1] = "fast"
    lines[12] = ",".join(cells)
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(measurement_files, "CHUNK_ROWS", 5)
    with pytest.raises(MeasurementError) as info:
        read_measurement_file(bad)
    assert info.value.row == 12 and info.value.field == "latency_ms"


def test_rows_of_other_accelerators_are_skipped() -> None:
    path = BENCHMARKS / "argonne_ttft.csv"
    everything = read_measurement_file(path)
    h100 = read_measurement_file(path, accelerator="h100-sxm")
    assert 0 < len(h100.measurements) < len(everything.measurements)
    skipped = len(everything.measurements) - len(h100.measurements)
    assert f"{skipped} rows measured on other accelerators skipped" in h100.warnings


@pytest.mark.parametrize("layout", ["object", "list", "lines"])
def test_vllm_bench_json_layouts(tmp_path: Path, layout: str) -> None:
    second = {**VLLM_RESULT, "max_concurrency": 64, "mean_tpot_ms": 20.0}
    text = {
        "object": json.dumps(VLLM_RESULT),
        "list": json.dumps([VLLM_RESULT, second]),
        "lines": json.dumps(VLLM_RESULT) + "\n" + json.dumps(second) + "\n",
    }[layout]
    path = tmp_path / "bench.json"
    path.write_text(text)
    body = calibration_from_file(path, "h100-sxm", tp=2)
    first = body["measurements"][0]
    assert body["accelerator"] == "h100-sxm" and body["backend"] == "vllm"
    assert first["kind"] == "serving" and first["concurrency"] == 32
    assert first["input_tokens"] == 1024 and first["output_tokens"] == 128
    assert first["parallelism"] == {"tp": 2, "pp": 1}
    assert first["model"] == "llama-3.1-8b"
    assert len(body["measurements"]) == (1 if layout == "object" else 2)


HARNESS = Path(__file__).resolve().parents[1] / "data" / "harness_samples"
HARNESS_FILES = sorted(p for p in HARNESS.iterdir() if p.suffix in (".json", ".jsonl"))


@pytest.mark.parametrize("path", HARNESS_FILES, ids=lambda p: p.name)
def test_harness_files_round_trip_through_the_api_shape(path: Path) -> None:
    read = read_measurement_file(path, model="Qwen/Qwen3-32B")
    text = path.read_text()
    if path.suffix == ".jsonl":
        document = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        document = json.loads(text)
    direct = parse_harness(document, read.format, HarnessOptions(model="Qwen/Qwen3-32B"))
    back = parse_measurement_dicts(read.measurements)
    assert strip_accelerator(back.measurements) == strip_accelerator(direct.measurements)
    assert not back.warnings
    assert {m["load_pattern"] for m in read.measurements} <= {"closed_loop", "open_loop", "offline"}


def test_harness_options_reach_the_parser(tmp_path: Path) -> None:
    path = HARNESS / "trtllm_bench_report.json"
    offline = read_measurement_file(path)
    assert offline.measurements[0]["load_pattern"] == "offline"
    assert any("--concurrency" in w for w in offline.warnings)
    limited = calibration_from_file(path, "h100-sxm", concurrency=32)
    assert limited["measurements"][0]["concurrency"] == 32 and limited["backend"] == "trtllm"
    copy = tmp_path / "export.txt"  # no telling suffix: detected from the content
    copy.write_text((HARNESS / "genai_perf_concurrency.json").read_text())
    assert read_measurement_file(copy).format == "genai_perf"
    with pytest.raises(MeasurementError) as info:
        read_measurement_file(copy, file_format="guidellm")
    assert info.value.field == "benchmarks"


def test_calibrate_file_returns_the_typed_profile(ridgeline: Ridgeline) -> None:
    path = BENCHMARKS / "h100_gemm_subset.csv"
    profile = ridgeline.calibrate_file(path, accelerator="h100-sxm", name="gemm subset")
    assert isinstance(profile, CalibrationProfileOut)
    assert profile.accelerator == "h100-sxm" and profile.name == "gemm subset"
    assert profile.fit.n_measurements == len(path.read_text().strip().splitlines()) - 1
    assert profile.parameters["gemm_compute_efficiency_bf16"] > 0
    again = ridgeline.get_calibration(profile.id)
    assert isinstance(again, CalibrationProfileOut) and again.id == profile.id
    listed = [p.id for p in ridgeline.list_calibrations(accelerator="h100-sxm")]
    assert profile.id in listed


def test_several_files_build_one_body_and_a_bad_row_names_its_file(tmp_path: Path) -> None:
    gemm = BENCHMARKS / "h100_gemm_subset.csv"
    nccl = BENCHMARKS / "h100_nccl_subset.csv"
    body = calibration_from_file([gemm, nccl], "h100-sxm")
    kinds = [m["kind"] for m in body["measurements"]]
    n_gemm = len(gemm.read_text().strip().splitlines()) - 1
    n_nccl = len(nccl.read_text().strip().splitlines()) - 1
    assert kinds == ["gemm"] * n_gemm + ["collective"] * n_nccl
    assert body["name"] == f"{gemm.name}, {nccl.name} (gemm+nccl)"
    bad = tmp_path / "bad.csv"
    bad.write_text("dtype,m,n,k,latency_ms\nbf16,16,4096,x,0.03\n")
    with pytest.raises(ValueError, match=r"^bad\.csv: row 1: k"):
        calibration_from_file([gemm, bad], "h100-sxm")
