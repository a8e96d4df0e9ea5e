"""Parsers: every supported format, and every bad input names its row and field."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from engine_refs import BENCHMARK_DATA

from service.catalog_files import load_model_records, model_from_record
from service.engine.calibration.end_to_end import precision_of
from service.engine.calibration.fit import compute_dtypes_on
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
    MeasurementError,
    ServingMeasurement,
    StaticMeasurement,
    validate,
)
from service.engine.calibration.parsers import (
    model_id_from_name,
    parse_csv,
    parse_measurement_dicts,
    parse_vllm_bench_json,
)
from service.engine.hardware import Accelerator
from service.engine.precision import Precision

DATA = BENCHMARK_DATA
# Catalog shapes under the ids the parser gives the rows below (model_id_from_name).
CATALOG_MODELS = {
    model_id_from_name(str(r["hf_repo"])): model_from_record(r)
    for r in load_model_records()
    if r.get("hf_repo")
}


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_gemm_csv() -> None:
    result = parse_csv(_read("h100_gemm_subset.csv"))
    assert result.format == "gemm"
    assert result.warnings == ()
    assert len(result.measurements) == 480
    first = result.measurements[0]
    assert isinstance(first, GemmMeasurement)
    assert (first.dtype, first.m, first.n, first.k) == ("bf16", 1, 1024, 1024)
    assert {m.dtype for m in result.measurements if isinstance(m, GemmMeasurement)} == {
        "bf16",
        "fp8",
    }


def test_attention_csvs() -> None:
    decode = parse_csv(_read("h100_decode_attention_subset.csv"))
    prefill = parse_csv(_read("h100_prefill_attention_subset.csv"))
    assert decode.format == "decode_attention"
    assert prefill.format == "prefill_attention"
    d = decode.measurements[0]
    p = prefill.measurements[0]
    assert isinstance(d, AttentionMeasurement) and isinstance(p, AttentionMeasurement)
    assert d.phase == "decode" and p.phase == "prefill"
    assert (d.batch_size, d.num_heads, d.num_kv_heads, d.head_dim) == (32, 64, 1, 128)
    assert d.context_tokens == 1 and d.kv_dtype == "bf16"
    assert p.context_tokens == 16384  # seq_len
    kv = {m.kv_dtype for m in decode.measurements if isinstance(m, AttentionMeasurement)}
    assert kv == {"bf16", "fp8"}


def test_nccl_csv_converts_elements_to_bytes() -> None:
    text = (
        "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_elements,"
        "latency_ms\n"
        "TRTLLM,2.29.2,H100,alltoall,NCCL,half,4,1024,0.01\n"
        "TRTLLM,2.29.2,H100,all_reduce,NCCL,int8,8,1024,0.02\n"
    )
    result = parse_csv(text)
    a, b = result.measurements
    assert isinstance(a, CollectiveMeasurement) and isinstance(b, CollectiveMeasurement)
    assert (a.op, a.num_gpus, a.message_bytes) == ("alltoall", 4, 2048.0)
    assert (b.op, b.message_bytes) == ("all_reduce", 1024.0)
    assert len(parse_csv(_read("h100_nccl_subset.csv")).measurements) == 60


def test_serving_csv_precision_and_parallelism() -> None:
    result = parse_csv(_read("h100_serving_qwen3_32b_subset.csv"))
    assert result.format == "serving"
    items = [m for m in result.measurements if isinstance(m, ServingMeasurement)]
    assert len(items) == 40
    assert {m.model for m in items} == {"qwen3-32b"}
    fp8 = [m for m in items if m.backend == "trtllm"]
    assert fp8 and all(m.weights_dtype == "fp8" and m.activations_dtype == "fp8" for m in fp8)
    bf16 = [m for m in items if m.backend == "sglang"]
    assert bf16 and all(m.weights_dtype == "bf16" and m.activations_dtype is None for m in bf16)
    assert {m.tp for m in items} <= {1, 2, 4, 8}


def test_argonne_csv_static_batch_semantics() -> None:
    result = parse_csv(_read("argonne_all_results_subset.csv"))
    assert result.format == "argonne"
    assert any("3 llama.cpp rows skipped" in w for w in result.warnings)
    first = result.measurements[0]
    assert isinstance(first, StaticMeasurement)
    assert first.model == "llama-2-7b" and first.backend == "trtllm"
    assert first.accelerator == "h100-sxm" and first.weights_dtype == "fp16"
    assert first.input_tokens == first.output_tokens == 128
    assert first.latency_ms == pytest.approx(844.4228172302246)
    assert {m.model for m in result.measurements if isinstance(m, StaticMeasurement)} == {
        "llama-2-7b",
        "llama-3-8b",
    }
    # Argonne's TensorRT-LLM scripts batch copies of one prompt, greedily (parsers.py)
    static = [m for m in result.measurements if isinstance(m, StaticMeasurement)]
    assert {(m.backend, m.identical_prompts) for m in static} == {
        ("trtllm", True),
        ("vllm", False),
    }


def test_argonne_throughput_mismatch_warns() -> None:
    text = (
        "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,"
        "Throughput\n"
        "Nvidia H100 GPU,1,vLLM,meta-llama/Meta-Llama-3-8B,128,16,2.0,1000.0\n"
    )
    result = parse_csv(text)
    assert len(result.measurements) == 1
    assert any("row 1" in w and "Throughput" in w for w in result.warnings)


def test_argonne_ttft_csv() -> None:
    result = parse_csv(_read("argonne_ttft.csv"))
    assert result.format == "argonne_ttft"
    m = result.measurements[0]
    assert isinstance(m, StaticMeasurement)
    assert m.output_tokens == 1 and m.ttft_ms is not None and m.latency_ms is None


def test_generic_static_csv_and_unknown_columns_warn() -> None:
    text = (
        "model,batch_size,input_tokens,output_tokens,tp,output_tokens_per_s,colour\n"
        "llama-3-8b,8,512,256,2,1000,blue\n"
    )
    result = parse_csv(text)
    m = result.measurements[0]
    assert isinstance(m, StaticMeasurement)
    assert m.tp == 2
    assert m.whole_batch_latency_ms() == pytest.approx(1000.0 * 8 * 256 / 1000)
    assert result.warnings == ("unknown column 'colour' ignored",)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("bf16,16,4096,4096,nan", "latency_ms"),
        ("bf16,16,4096,4096,inf", "latency_ms"),
        ("bf16,16,4096,4096,0", "latency_ms"),
        ("bf16,16,4096,4096,-0.1", "latency_ms"),
        ("bf16,0,4096,4096,0.1", "m"),
        ("bf16,16,-4,4096,0.1", "n"),
        ("bf16,16,4096,2.5,0.1", "k"),
        ("bf16,16,4096,,0.1", "k"),
        ("bf16,sixteen,4096,4096,0.1", "m"),
        ("bf17,16,4096,4096,0.1", "dtype"),
    ],
)
def test_bad_gemm_rows_name_row_and_field(row: str, field: str) -> None:
    text = "dtype,m,n,k,latency_ms\nbf16,1,1024,1024,0.004\n" + row + "\n"
    with pytest.raises(MeasurementError) as info:
        parse_csv(text)
    assert info.value.row == 2
    assert info.value.field == field


def test_missing_required_column() -> None:
    with pytest.raises(MeasurementError) as info:
        parse_csv("dtype,m,n,k\nbf16,1,2,3\n")
    assert info.value.field == "latency_ms"
    assert info.value.row == 0


def test_unrecognised_header_and_impossible_attention() -> None:
    with pytest.raises(MeasurementError) as info:
        parse_csv("a,b\n1,2\n")
    assert info.value.field == "header"
    text = (
        "batch_size,num_heads,num_key_value_heads,head_dim,kv_cache_dtype,context_len,latency_ms\n"
        "8,32,3,128,bf16,100,0.1\n"
    )
    with pytest.raises(MeasurementError) as info:
        parse_csv(text)
    assert (info.value.row, info.value.field) == (1, "num_kv_heads")


def test_bad_serving_row() -> None:
    text = "model,isl,osl,concurrency,tp,ttft_ms,tpot_ms\nqwen3-32b,1024,128,16,1,100,-5\n"
    with pytest.raises(MeasurementError) as info:
        parse_csv(text)
    assert (info.value.row, info.value.field) == (1, "tpot_ms")


def _vllm_result() -> dict[str, object]:
    # Shape of a `vllm bench serve --save-result` file; values made up for the test.
    return {
        "date": "20250101-000000",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 200,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 32,
        "duration": 60.0,
        "completed": 200,
        "total_input_tokens": 204800,
        "total_output_tokens": 25600,
        "request_throughput": 3.3,
        "output_throughput": 426.0,
        "total_token_throughput": 3840.0,
        "mean_ttft_ms": 120.5,
        "median_ttft_ms": 110.0,
        "p99_ttft_ms": 300.0,
        "mean_tpot_ms": 14.2,
        "median_tpot_ms": 14.0,
        "mean_itl_ms": 14.1,
        "mean_e2el_ms": 1900.0,
        "custom_field": 1,
    }


def test_vllm_bench_json_mapping() -> None:
    result = parse_vllm_bench_json(_vllm_result(), tp=2)
    (m,) = result.measurements
    assert isinstance(m, ServingMeasurement)
    assert m.model == "llama-3.1-8b"
    assert (m.concurrency, m.input_tokens, m.output_tokens, m.tp) == (32, 1024, 128, 2)
    assert (m.ttft_ms, m.tpot_ms) == (120.5, 14.2)
    assert result.warnings == ("unknown field 'custom_field' ignored",)


def test_vllm_bench_json_errors() -> None:
    data = _vllm_result()
    del data["mean_tpot_ms"]
    with pytest.raises(MeasurementError) as info:
        parse_vllm_bench_json(data)
    assert info.value.field == "mean_tpot_ms"
    data = _vllm_result()
    data["mean_ttft_ms"] = math.nan
    with pytest.raises(MeasurementError) as info:
        parse_vllm_bench_json(data)
    assert info.value.field == "mean_ttft_ms"
    data = _vllm_result()
    data["max_concurrency"] = None
    data["request_rate"] = 4.0
    del data["mean_e2el_ms"]  # an open loop without a limit needs its in-flight count
    with pytest.raises(MeasurementError) as info:
        parse_vllm_bench_json(data)
    assert info.value.field == "mean_e2el_ms"
    data["request_rate"] = "fast"
    with pytest.raises(MeasurementError) as info:
        parse_vllm_bench_json(data)
    assert info.value.field == "request_rate"


def test_vllm_bench_json_load_patterns() -> None:
    closed = parse_vllm_bench_json(_vllm_result()).measurements[0]
    assert isinstance(closed, ServingMeasurement)
    assert (closed.load_pattern, closed.concurrency, closed.request_rate_per_s) == (
        "closed_loop", 32, None,
    )  # fmt: skip
    data = _vllm_result()
    data["max_concurrency"] = None
    offline = parse_vllm_bench_json(data).measurements[0]
    assert isinstance(offline, ServingMeasurement)
    assert (offline.load_pattern, offline.concurrency) == ("offline", 200)
    data["request_rate"] = 2.0
    opened = parse_vllm_bench_json(data).measurements[0]
    assert isinstance(opened, ServingMeasurement)
    # Little's law: 3.3 req/s × 1.9 s mean end-to-end latency = 6.27 requests in flight
    assert (opened.load_pattern, opened.request_rate_per_s, opened.concurrency) == (
        "open_loop", 2.0, 6,
    )  # fmt: skip
    assert (opened.arrival_process, opened.burstiness) == ("poisson", None)
    data["burstiness"] = 0.5
    data["max_concurrency"] = 4  # the cap bounds the in-flight count
    bursty = parse_vllm_bench_json(data).measurements[0]
    assert isinstance(bursty, ServingMeasurement)
    assert (bursty.arrival_process, bursty.burstiness, bursty.concurrency) == ("gamma", 0.5, 4)


def test_api_dicts_roundtrip() -> None:
    items = [
        {
            "kind": "serving",
            "model": "qwen3-32b",
            "precision": {"weights": "fp8"},
            "parallelism": {"tp": 2},
            "input_tokens": 1024,
            "output_tokens": 128,
            "concurrency": 16,
            "ttft_ms": 143.9,
            "tpot_ms": 9.77,
        },
        {
            "kind": "static",
            "model": "llama-3-8b",
            "parallelism": {"tp": 1},
            "batch_size": 16,
            "input_tokens": 512,
            "output_tokens": 512,
            "latency_ms": 7012.0,
        },
        {"kind": "gemm", "dtype": "bf16", "m": 16, "n": 4096, "k": 4096, "latency_ms": 0.021},
        {
            "kind": "attention",
            "phase": "decode",
            "batch_size": 32,
            "context_tokens": 2047,
            "num_heads": 32,
            "num_kv_heads": 8,
            "head_dim": 128,
            "kv_dtype": "bf16",
            "latency_ms": 0.03,
        },
        {
            "kind": "collective",
            "op": "all_reduce",
            "num_gpus": 8,
            "message_bytes": 1048576,
            "latency_ms": 0.05,
            "extra": 1,
        },
    ]
    result = parse_measurement_dicts(items)
    serving, static, gemm, attention, collective = result.measurements
    assert isinstance(serving, ServingMeasurement) and serving.weights_dtype == "fp8"
    assert serving.tp == 2
    assert isinstance(static, StaticMeasurement) and static.latency_ms == 7012.0
    assert isinstance(gemm, GemmMeasurement) and gemm.m == 16
    assert isinstance(attention, AttentionMeasurement) and attention.num_kv_heads == 8
    assert isinstance(collective, CollectiveMeasurement) and collective.num_gpus == 8
    assert result.warnings == ("row 5: unknown field 'extra' ignored",)
    with pytest.raises(MeasurementError) as info:
        parse_measurement_dicts([{"kind": "gemm", "dtype": "bf16", "m": 1, "n": 1, "k": 1}])
    assert (info.value.row, info.value.field) == (1, "latency_ms")
    with pytest.raises(MeasurementError) as info:
        parse_measurement_dicts([{"kind": "roofline"}])
    assert info.value.field == "kind"


def test_model_id_from_name() -> None:
    assert model_id_from_name("meta-llama/Meta-Llama-3-70B") == "llama-3-70b"
    assert model_id_from_name("meta-llama/Llama-2-7b-hf") == "llama-2-7b"
    assert model_id_from_name("Qwen/Qwen3-32B") == "qwen3-32b"


def test_fp4_gemm_labels_run_weight_only_without_fp4_tensor_cores(h100: Accelerator) -> None:
    """nvfp4/mxfp4 labels parse as fp4; on H100 (no fp4 peak) the fit reads them weight-only."""
    header = (
        "gpu,backend,backend_version,model,precision,gemm_quant_mode,isl,osl,concurrency,tp,pp,"
        "ttft_ms,tpot_ms\n"
    )
    rows = [
        "H100 SXM 80GB,vllm,0.11,openai/gpt-oss-120b,fp4,nvfp4,1024,128,4,2,1,100.0,5.0",
        "H100 SXM 80GB,vllm,0.11,openai/gpt-oss-120b,fp4,mxfp4,1024,128,8,2,1,120.0,6.0",
        "H100 SXM 80GB,vllm,0.11,Qwen/Qwen3-32B,fp8,fp8,1024,128,8,2,1,120.0,6.0",
    ]
    runs = [m for m in parse_csv(header + "\n".join(rows)).measurements]
    assert [(m.weights_dtype, m.activations_dtype) for m in runs] == [
        ("fp4", "fp4"),
        ("fp4", "fp4"),
        ("fp8", "fp8"),
    ]
    served = [m for m in runs if isinstance(m, ServingMeasurement)]
    moved, count = compute_dtypes_on(served, h100, CATALOG_MODELS)
    assert count == 2
    assert [m.activations_dtype for m in moved] == ["bf16", "bf16", "fp8"]
    with_fp4 = replace(h100, peak_tflops={**h100.peak_tflops, "fp4": 3958.0})
    assert compute_dtypes_on(served, with_fp4, CATALOG_MODELS) == (served, 0)


def test_fp8_runs_without_activations_are_read_as_engines_run_them(h100: Accelerator) -> None:
    """fp8 weights that do not name their activations are W8A8 on a part with an fp8 peak
    (and then keep an fp8 KV cache unless they say otherwise) and weight-only on one without,
    as an estimate asking for fp8 weights with ``activations="auto"`` is."""
    header = (
        "gpu,backend,model,precision,gemm_quant_mode,isl,osl,concurrency,tp,pp,ttft_ms,tpot_ms\n"
    )
    rows = [
        "H100 SXM 80GB,vllm,Qwen/Qwen3-32B,fp8,,1024,128,8,2,1,120.0,6.0",
        "H100 SXM 80GB,vllm,Qwen/Qwen3-32B,fp8,bf16,1024,128,8,2,1,120.0,6.0",
        "H100 SXM 80GB,vllm,Qwen/Qwen3-32B,bf16,,1024,128,8,2,1,120.0,6.0",
    ]
    served = [
        m
        for m in parse_csv(header + "\n".join(rows)).measurements
        if isinstance(m, ServingMeasurement)
    ]
    on_h100, _ = compute_dtypes_on(served, h100, CATALOG_MODELS)
    assert [precision_of(r) for r in on_h100] == [
        Precision(weights="fp8", activations="fp8", kv_cache="fp8"),
        Precision(weights="fp8", activations="bf16", kv_cache="bf16"),
        Precision(weights="bf16", activations="bf16", kv_cache="bf16"),
    ]
    without_fp8 = {k: v for k, v in h100.peak_tflops.items() if k != "fp8"}
    on_ampere, _ = compute_dtypes_on(served, replace(h100, peak_tflops=without_fp8), CATALOG_MODELS)
    assert [precision_of(r).compute_dtype for r in on_ampere] == ["bf16", "bf16", "bf16"]
    # fp4 without a GEMM mode on a part with fp4 tensor cores: W4A4 (NVFP4), except gpt-oss,
    # whose fp4 is its MXFP4 experts-only checkpoint, run weight-only.
    fp4_rows = [
        "B200,vllm,Qwen/Qwen3-32B,fp4,,1024,128,8,2,1,120.0,6.0",
        "B200,vllm,openai/gpt-oss-120b,fp4,,1024,128,8,2,1,120.0,6.0",
    ]
    fp4_runs = [
        m
        for m in parse_csv(header + "\n".join(fp4_rows)).measurements
        if isinstance(m, ServingMeasurement)
    ]
    with_fp4 = replace(h100, peak_tflops={**h100.peak_tflops, "fp4": 3958.0})
    on_fp4_part, _ = compute_dtypes_on(fp4_runs, with_fp4, CATALOG_MODELS)
    assert [precision_of(r).compute_dtype for r in on_fp4_part] == ["fp4", "bf16"]


def test_whole_numbers_are_read_exactly_however_large() -> None:
    """An attention row's head counts past 2**53 (schema-valid JSON integers): read as floats
    they rounded, and 17 no longer divided 9,999,999,999,999,999 = 17 · 588,235,294,117,647."""
    row = {
        "kind": "attention", "phase": "decode", "batch_size": 1, "context_tokens": 128,
        "num_heads": 9_999_999_999_999_999, "num_kv_heads": 17, "head_dim": 128,
        "latency_ms": 1.0,
    }  # fmt: skip
    (attention,) = parse_measurement_dicts([row]).measurements
    assert isinstance(attention, AttentionMeasurement)
    assert (attention.num_heads, attention.num_kv_heads) == (9_999_999_999_999_999, 17)
    validate(attention, row=1)
    # Decimal spellings of whole numbers still read (a CSV may write 64.0).
    (again,) = parse_measurement_dicts(
        [{**row, "num_heads": 64.0, "num_kv_heads": "8"}]
    ).measurements
    assert isinstance(again, AttentionMeasurement) and again.num_heads == 64
