"""Harness result files (tests/data/harness_samples, synthetic samples written from each format's
docs) → serving measurements: field mapping, units, load pattern, and field-naming errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from service.engine.calibration.harness_results import (
    HarnessOptions,
    detect_harness,
    parse_harness,
)
from service.engine.calibration.measurements import MeasurementError, ServingMeasurement

SAMPLES = Path(__file__).parents[1] / "data" / "harness_samples"


def load(name: str) -> Any:
    text = (SAMPLES / name).read_text()
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def serving(document: Any, fmt: str, **options: Any) -> list[ServingMeasurement]:
    parsed = parse_harness(document, fmt, HarnessOptions(**options))
    assert all(isinstance(m, ServingMeasurement) for m in parsed.measurements)
    return [m for m in parsed.measurements if isinstance(m, ServingMeasurement)]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("sglang_bench_serving.jsonl", "sglang_bench_serving"),
        ("genai_perf_concurrency.json", "genai_perf"),
        ("genai_perf_request_rate.json", "genai_perf"),
        ("trtllm_bench_report.json", "trtllm_bench"),
        ("guidellm_benchmarks.json", "guidellm"),
    ],
)
def test_formats_are_detected(name: str, fmt: str) -> None:
    assert detect_harness(load(name)) == fmt


def test_vllm_results_stay_vllm() -> None:
    vllm = {"model_id": "Qwen/Qwen3-32B", "mean_ttft_ms": 10.0, "mean_e2el_ms": 100.0}
    assert detect_harness(vllm) == "vllm_bench_json"
    assert detect_harness({"measurements": []}) is None


def test_sglang_lines_map_closed_and_open_loop() -> None:
    closed, opened = serving(load("sglang_bench_serving.jsonl"), "sglang_bench_serving",
                             model="Qwen/Qwen3-32B", tp=2, weights_dtype="fp8")  # fmt: skip
    assert (closed.model, closed.tp, closed.weights_dtype) == ("qwen3-32b", 2, "fp8")
    assert (closed.input_tokens, closed.output_tokens) == (1024, 128)  # totals / completed
    assert (closed.ttft_ms, closed.tpot_ms) == (880.0, 52.1)  # means, already in ms
    assert (closed.load_pattern, closed.concurrency, closed.backend) == (
        "closed_loop", 16, "sglang",
    )  # fmt: skip
    # open loop: rate 4 req/s, Poisson arrivals, SGLang's measured mean in flight 7.56 → 8
    assert (opened.load_pattern, opened.request_rate_per_s, opened.arrival_process) == (
        "open_loop", 4.0, "poisson",
    )  # fmt: skip
    assert opened.concurrency == 8 and opened.backend == "sglang"  # sglang-oai client


def test_sglang_needs_a_model() -> None:
    with pytest.raises(MeasurementError) as info:
        parse_harness(load("sglang_bench_serving.jsonl"), "sglang_bench_serving", HarnessOptions())
    assert (info.value.row, info.value.field) == (1, "model_id")
    assert "model parameter" in info.value.message


def test_genai_perf_concurrency_run() -> None:
    (m,) = serving(load("genai_perf_concurrency.json"), "genai_perf")
    assert m.model == "llama-3.1-8b"
    assert (m.input_tokens, m.output_tokens) == (2048, 256)
    # time_to_first_token.avg and inter_token_latency.avg (= TPOT: first token excluded)
    assert (m.ttft_ms, m.tpot_ms) == (310.0, 18.27)
    assert (m.load_pattern, m.concurrency, m.request_rate_per_s) == ("closed_loop", 8, None)
    assert m.backend == ""  # service_kind openai: input_config.backend is not the engine


def test_genai_perf_request_rate_run_converts_units() -> None:
    (m,) = serving(load("genai_perf_request_rate.json"), "genai_perf")
    assert m.model == "qwen3-8b" and m.backend == "vllm"  # triton service kind, vllm backend
    assert m.ttft_ms == pytest.approx(52.0)  # labelled "s": 0.052 s
    assert m.tpot_ms == pytest.approx(12.4)
    # Little's law: 1.99 req/s × 1.62 s ("s"-labelled request_latency) = 3.2 in flight
    assert (m.load_pattern, m.request_rate_per_s, m.concurrency) == ("open_loop", 2.0, 3)


def test_genai_perf_rejects_unknown_units_and_non_streaming_runs() -> None:
    doc = load("genai_perf_concurrency.json")
    bad = copy.deepcopy(doc)
    bad["time_to_first_token"]["unit"] = "minutes"
    with pytest.raises(MeasurementError) as info:
        parse_harness(bad, "genai_perf", HarnessOptions())
    assert info.value.field == "time_to_first_token.unit"
    del doc["inter_token_latency"]
    with pytest.raises(MeasurementError) as info:
        parse_harness(doc, "genai_perf", HarnessOptions())
    assert info.value.field == "inter_token_latency" and "--streaming" in info.value.message


def test_trtllm_bench_report() -> None:
    parsed = parse_harness(load("trtllm_bench_report.json"), "trtllm_bench", HarnessOptions())
    (m,) = parsed.measurements
    assert isinstance(m, ServingMeasurement)
    assert (m.model, m.tp, m.pp, m.backend, m.backend_version) == (
        "qwen3-32b", 2, 1, "trtllm", "1.0.0rc3",
    )  # fmt: skip
    assert (m.weights_dtype, m.activations_dtype, m.kv_cache_dtype) == ("fp8", "fp8", "fp8")
    assert (m.input_tokens, m.output_tokens) == (1024, 512)
    assert (m.ttft_ms, m.tpot_ms) == (21030.0, 47.4)  # streaming_metrics averages, ms
    assert (m.load_pattern, m.concurrency) == ("offline", 512)
    assert any("--concurrency" in w for w in parsed.warnings)
    (limited,) = serving(load("trtllm_bench_report.json"), "trtllm_bench", concurrency=64)
    assert (limited.load_pattern, limited.concurrency) == ("closed_loop", 64)


def test_trtllm_bench_needs_streaming_metrics() -> None:
    doc = load("trtllm_bench_report.json")
    del doc["streaming_metrics"]
    with pytest.raises(MeasurementError) as info:
        parse_harness(doc, "trtllm_bench", HarnessOptions())
    assert info.value.field == "streaming_metrics" and "--streaming" in info.value.message
    doc = load("trtllm_bench_report.json")
    doc["engine"]["quantization"] = "MAGIC"
    with pytest.raises(MeasurementError) as info:
        parse_harness(doc, "trtllm_bench", HarnessOptions())
    assert info.value.field == "engine.quantization"


def test_guidellm_sweep_maps_each_strategy() -> None:
    sync, conc, throughput, poisson = serving(load("guidellm_benchmarks.json"), "guidellm")
    assert sync.model == "llama-3.1-8b" and (sync.input_tokens, sync.output_tokens) == (512, 128)
    assert (sync.load_pattern, sync.concurrency) == ("closed_loop", 1)
    assert (conc.load_pattern, conc.concurrency) == ("closed_loop", 8)
    assert (throughput.load_pattern, throughput.concurrency) == ("offline", 2334)
    assert (poisson.load_pattern, poisson.request_rate_per_s, poisson.arrival_process) == (
        "open_loop", 3.0, "poisson",
    )  # fmt: skip
    assert poisson.concurrency == 3  # request_concurrency.successful.mean 2.97
    # TPOT is inter_token_latency_ms (excludes the first token), not time_per_output_token_ms
    assert (sync.ttft_ms, sync.tpot_ms) == (22.0, 7.1)


def test_guidellm_errors_name_the_benchmark_and_field() -> None:
    doc = load("guidellm_benchmarks.json")
    del doc["benchmarks"][2]["metrics"]["time_to_first_token_ms"]
    with pytest.raises(MeasurementError) as info:
        parse_harness(doc, "guidellm", HarnessOptions())
    assert info.value.row == 3
    assert info.value.field == "benchmarks.2.metrics.time_to_first_token_ms.successful.mean"
    doc = load("guidellm_benchmarks.json")
    doc["benchmarks"][0]["config"]["strategy"]["type_"] = "replay"
    with pytest.raises(MeasurementError) as info:
        parse_harness(doc, "guidellm", HarnessOptions())
    assert info.value.field == "benchmarks.0.config.strategy.type_"


def test_broken_numbers_name_the_field() -> None:
    lines = load("sglang_bench_serving.jsonl")
    lines[1]["mean_tpot_ms"] = 0.0
    with pytest.raises(MeasurementError) as info:
        parse_harness(lines, "sglang_bench_serving", HarnessOptions(model="qwen3-32b"))
    assert (info.value.row, info.value.field) == (2, "mean_tpot_ms")
    lines[1]["mean_tpot_ms"] = "fast"
    with pytest.raises(MeasurementError) as info:
        parse_harness(lines, "sglang_bench_serving", HarnessOptions(model="qwen3-32b"))
    assert (info.value.row, info.value.field) == (2, "mean_tpot_ms")
    with pytest.raises(MeasurementError) as info:
        parse_harness(lines, "nvidia_magic", HarnessOptions())
    assert info.value.field == "format"


@pytest.mark.parametrize(
    ("quantization", "dtype", "expected"),
    [
        (None, "float16", ("fp16", None)),
        ("FP8_BLOCK_SCALES", "bfloat16", ("fp8", "fp8")),
        ("NVFP4", "bfloat16", ("fp4", "fp4")),
        ("W4A16_AWQ", "float16", ("int4", None)),
        ("W8A8_SQ_PER_CHANNEL", "float16", ("int8", "int8")),
        ("W8A16", "float16", ("int8", None)),
    ],
)
def test_trtllm_quantization_names(
    quantization: str | None, dtype: str, expected: tuple[str, str | None]
) -> None:
    doc = load("trtllm_bench_report.json")
    doc["engine"].update(quantization=quantization, dtype=dtype, kv_cache_dtype=None)
    (m,) = serving(doc, "trtllm_bench")
    assert (m.weights_dtype, m.activations_dtype, m.kv_cache_dtype) == (*expected, None)
