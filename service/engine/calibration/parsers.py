"""Turn benchmark files (CSV, vLLM bench JSON, API dicts) into validated measurements.

Pure functions on text or already-decoded JSON; nothing here touches the file system.

CSV formats, detected from the header:

=================  ===================================================================
format             columns used (others known to the format are ignored silently)
=================  ===================================================================
gemm               ``dtype, m, n, k, latency_ms``
decode_attention   ``batch_size, num_heads, num_key_value_heads, head_dim,
                   kv_cache_dtype, context_len, latency_ms``
prefill_attention  ``batch_size, seq_len, num_heads, num_key_value_heads, head_dim,
                   [kv_cache_dtype], latency_ms`` (``seq_len`` → ``context_tokens``)
nccl               ``op_name, nccl_dtype, num_gpus, message_elements, latency_ms``
                   (bytes = elements × dtype bytes)
serving            ``model, isl, osl, concurrency, tp, [pp], ttft_ms, tpot_ms,
                   [precision, gemm_quant_mode, backend, backend_version, load_pattern,
                   request_rate_per_s, arrival_process, burstiness]`` (load pattern
                   ``closed_loop`` at ``concurrency`` unless the row says otherwise)
argonne            ``Hardware, Num of Hardware, Framework, Model, Input Output Length,
                   Batch Size, Latency`` (s, whole static batch) ``[, Throughput]``;
                   llama.cpp rows are skipped (different semantics)
argonne_ttft       ``..., Input Length, Output Length, Batch Size, Latency`` with
                   output length 1: the latency is the TTFT
static             ``model, batch_size, input_tokens, output_tokens`` plus any of
                   ``latency_ms, ttft_ms, tpot_ms, output_tokens_per_s,
                   total_tokens_per_s, tp, pp, weights_dtype, backend``
=================  ===================================================================

Rows are numbered from 1 (the first line after the header).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.engine.calibration.load_patterns import (
    LoadPattern,
    from_rate_and_limit,
    gamma_arrival,
    mean_in_flight,
)
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
    Measurement,
    MeasurementError,
    ServingMeasurement,
    StaticMeasurement,
    validate,
)

DTYPE_ALIASES: Mapping[str, str] = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "fp8_e4m3": "fp8",
    "int8": "int8",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "int4": "int4",
    "fp4": "fp4",
    "nvfp4": "fp4",  # NVIDIA's 4-bit float with 16-element blocks
    "mxfp4": "fp4",  # OCP microscaling 4-bit float (gpt-oss checkpoints)
}
_ELEMENT_BYTES: Mapping[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
}
_OP_ALIASES: Mapping[str, str] = {
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "all_gather": "all_gather",
    "allgather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "all_to_all": "alltoall",
    "send": "send",
}
# Argonne LLM-Inference-Bench labels (benchmarks/data/README.md). H100 rows ran on an ALCF gpu_h100
# queue, assumed SXM; the A100 memory size is not stated in the files.
ARGONNE_HARDWARE: Mapping[str, str] = {
    "Nvidia H100 GPU": "h100-sxm",
    "Nvidia A100 GPU": "a100-sxm",
    "Nvidia GH200 GPU": "gh200",
    "AMD MI300X GPU": "mi300x",
    "AMD MI250 GPU": "mi250",
    "Habana Gaudi2": "gaudi2",
    "Intel PVC GPU": "max-1550",
    "Intel Max 1550": "max-1550",
    "SambaNova SN40L": "sn40l",
}
ARGONNE_BACKENDS: Mapping[str, str] = {
    "vLLM": "vllm",
    "TensorRT-LLM": "trtllm",
    "Deepspeed-MII": "deepspeed-mii",
    "DeepSpeed-MII": "deepspeed-mii",
    "llama.cpp": "llama.cpp",
}
# Backends whose Argonne scripts batch copies of one prompt and decode greedily, so a batch's
# sequences route alike through MoE layers: the TensorRT-LLM scripts build every batch from one
# text ("France" × input length, ``generate_input``) and sample with top_k = 1 (their
# ``add_common_args``), github.com/argonne-lcf/LLM-Inference-Bench, TensorRT-LLM/H100/. The vLLM
# latency script draws random token ids per sequence and samples at temperature 1.
ARGONNE_COPIED_PROMPTS = frozenset({"trtllm"})


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Parsed measurements, the detected format and non-fatal warnings."""

    format: str
    measurements: tuple[Measurement, ...]
    warnings: tuple[str, ...] = ()


def model_id_from_name(name: str) -> str:
    """Map a Hugging Face repo id (``meta-llama/Meta-Llama-3-8B``) to a catalog-style id."""
    base = name.strip().rsplit("/", 1)[-1].lower()
    base = re.sub(r"^meta-", "", base)
    base = re.sub(r"-hf$", "", base)
    base = re.sub(r"-instruct$", "", base)
    return base


def normalize_dtype(value: str, *, row: int | None, field: str) -> str:
    """Map a dtype spelling (``bfloat16``, ``half`` ...) to an API dtype name."""
    key = value.strip().lower()
    if key not in DTYPE_ALIASES:
        raise MeasurementError(row, field, f"unknown dtype {value!r}")
    return DTYPE_ALIASES[key]


_WHOLE_NUMBER = re.compile(r"[+-]?\d+")


class _Row:
    """Typed accessors over one CSV row that raise MeasurementError naming row and field."""

    def __init__(self, index: int, cells: Mapping[str, str]) -> None:
        self.index = index
        self.cells = cells

    def text(self, field: str, default: str | None = None) -> str:
        value = (self.cells.get(field) or "").strip()
        if not value:
            if default is not None:
                return default
            raise MeasurementError(self.index, field, "is missing")
        return value

    def number(self, field: str, default: float | None = None) -> float:
        raw = (self.cells.get(field) or "").strip()
        if not raw:
            if default is not None:
                return default
            raise MeasurementError(self.index, field, "is missing")
        try:
            value = float(raw)
        except ValueError:
            raise MeasurementError(self.index, field, f"not a number: {raw!r}") from None
        if math.isnan(value) or math.isinf(value):
            raise MeasurementError(self.index, field, f"must be finite, got {raw}")
        return value

    def integer(self, field: str, default: int | None = None) -> int:
        raw = (self.cells.get(field) or "").strip()
        if _WHOLE_NUMBER.fullmatch(raw):
            return int(raw)  # exactly, however large (a float rounds past 2**53)
        value = self.number(field, None if default is None else float(default))
        if value != int(value):
            raise MeasurementError(self.index, field, f"must be a whole number, got {value}")
        return int(value)

    def optional_number(self, field: str) -> float | None:
        if not (self.cells.get(field) or "").strip():
            return None
        return self.number(field)


_Builder = Callable[[_Row, list[str]], Measurement | None]


@dataclass(frozen=True, slots=True)
class _Format:
    name: str
    signature: frozenset[str]  # all present → this format
    required: tuple[str, ...]
    known: frozenset[str]
    build: _Builder


def _gemm(r: _Row, _w: list[str]) -> Measurement:
    return GemmMeasurement(
        dtype=normalize_dtype(r.text("dtype"), row=r.index, field="dtype"),
        m=r.integer("m"),
        n=r.integer("n"),
        k=r.integer("k"),
        latency_ms=r.number("latency_ms"),
    )


def _decode_attention(r: _Row, _w: list[str]) -> Measurement:
    return AttentionMeasurement(
        phase="decode",
        batch_size=r.integer("batch_size"),
        context_tokens=r.integer("context_len"),
        num_heads=r.integer("num_heads"),
        num_kv_heads=r.integer("num_key_value_heads"),
        head_dim=r.integer("head_dim"),
        kv_dtype=normalize_dtype(r.text("kv_cache_dtype"), row=r.index, field="kv_cache_dtype"),
        latency_ms=r.number("latency_ms"),
    )


def _prefill_attention(r: _Row, _w: list[str]) -> Measurement:
    kv = r.text("kv_cache_dtype", default="bf16")
    return AttentionMeasurement(
        phase="prefill",
        batch_size=r.integer("batch_size"),
        context_tokens=r.integer("seq_len"),
        num_heads=r.integer("num_heads"),
        num_kv_heads=r.integer("num_key_value_heads"),
        head_dim=r.integer("head_dim"),
        kv_dtype=normalize_dtype(kv, row=r.index, field="kv_cache_dtype"),
        latency_ms=r.number("latency_ms"),
    )


def _nccl(r: _Row, _w: list[str]) -> Measurement:
    op = r.text("op_name").lower()
    if op not in _OP_ALIASES:
        raise MeasurementError(r.index, "op_name", f"unknown collective {op!r}")
    dtype = normalize_dtype(r.text("nccl_dtype"), row=r.index, field="nccl_dtype")
    if dtype not in _ELEMENT_BYTES:
        raise MeasurementError(r.index, "nccl_dtype", f"unsupported element type {dtype!r}")
    elements = r.number("message_elements")
    return CollectiveMeasurement(
        op=_OP_ALIASES[op],
        num_gpus=r.integer("num_gpus"),
        message_bytes=elements * _ELEMENT_BYTES[dtype],
        latency_ms=r.number("latency_ms"),
    )


def _precision(r: _Row) -> tuple[str, str | None]:
    weights = r.text("precision", default="bf16")
    weights_dtype = normalize_dtype(weights, row=r.index, field="precision")
    quant = r.text("gemm_quant_mode", default="")
    activations = normalize_dtype(quant, row=r.index, field="gemm_quant_mode") if quant else None
    return weights_dtype, activations


def _serving(r: _Row, _w: list[str]) -> Measurement:
    weights, activations = _precision(r)
    return ServingMeasurement(
        model=model_id_from_name(r.text("model")),
        input_tokens=r.integer("isl"),
        output_tokens=r.integer("osl"),
        concurrency=r.integer("concurrency"),
        ttft_ms=r.optional_number("ttft_ms"),
        tpot_ms=r.optional_number("tpot_ms"),
        weights_dtype=weights,
        activations_dtype=activations,
        tp=r.integer("tp", default=1),
        pp=r.integer("pp", default=1),
        backend=r.text("backend", default=""),
        backend_version=r.text("backend_version", default=""),
        accelerator=r.text("gpu", default=""),
        **_load_fields(r),
    )


_LOAD_COLUMNS = frozenset({"load_pattern", "request_rate_per_s", "arrival_process", "burstiness"})


def _load_fields(r: _Row) -> dict[str, Any]:
    """Optional load columns of a serving row; closed_loop at ``concurrency`` by default."""
    return {
        "load_pattern": r.text("load_pattern", default="closed_loop").lower(),
        "request_rate_per_s": r.optional_number("request_rate_per_s"),
        "arrival_process": r.text("arrival_process", default="").lower(),
        "burstiness": r.optional_number("burstiness"),
    }


_LLAMA_CPP_SKIPPED = "llama.cpp rows skipped (their Throughput/Latency have other semantics)"


def _argonne_common(r: _Row, warnings: list[str]) -> tuple[str, str] | None:
    framework = r.text("Framework")
    backend = ARGONNE_BACKENDS.get(framework, framework.lower())
    if backend == "llama.cpp":
        warnings.append(_LLAMA_CPP_SKIPPED)
        return None
    hardware = r.text("Hardware")
    return backend, ARGONNE_HARDWARE.get(hardware, hardware)


def _argonne(r: _Row, warnings: list[str]) -> Measurement | None:
    common = _argonne_common(r, warnings)
    if common is None:
        return None
    backend, accelerator = common
    length = r.integer("Input Output Length")
    batch = r.integer("Batch Size")
    latency_s = r.number("Latency")
    throughput = r.optional_number("Throughput")
    if throughput is not None and latency_s > 0:
        # total (input+output) tokens/s, benchmarks/data/README.md
        implied = batch * 2 * length / latency_s
        if abs(throughput / implied - 1.0) > 0.05:
            warnings.append(
                f"row {r.index}: Throughput {throughput:.1f} ≠ B·2L/Latency {implied:.1f}"
            )
    return StaticMeasurement(
        model=model_id_from_name(r.text("Model")),
        batch_size=batch,
        input_tokens=length,
        output_tokens=length,
        # both vLLM and TensorRT-LLM runs used float16 (benchmarks/data/README.md)
        weights_dtype="fp16",
        tp=r.integer("Num of Hardware"),
        latency_ms=1000.0 * latency_s,
        backend=backend,
        accelerator=accelerator,
        identical_prompts=backend in ARGONNE_COPIED_PROMPTS,
    )


def _argonne_ttft(r: _Row, warnings: list[str]) -> Measurement | None:
    common = _argonne_common(r, warnings)
    if common is None:
        return None
    backend, accelerator = common
    output = r.integer("Output Length")
    if output != 1:
        raise MeasurementError(r.index, "Output Length", f"expected 1 for a TTFT run, got {output}")
    return StaticMeasurement(
        model=model_id_from_name(r.text("Model")),
        batch_size=r.integer("Batch Size"),
        input_tokens=r.integer("Input Length"),
        output_tokens=1,
        weights_dtype="fp16",
        tp=r.integer("Num of Hardware"),
        ttft_ms=1000.0 * r.number("Latency"),
        backend=backend,
        accelerator=accelerator,
        identical_prompts=backend in ARGONNE_COPIED_PROMPTS,
    )


def _static(r: _Row, _w: list[str]) -> Measurement:
    weights = r.text("weights_dtype", default="bf16")
    return StaticMeasurement(
        model=model_id_from_name(r.text("model")),
        batch_size=r.integer("batch_size"),
        input_tokens=r.integer("input_tokens"),
        output_tokens=r.integer("output_tokens"),
        weights_dtype=normalize_dtype(weights, row=r.index, field="weights_dtype"),
        tp=r.integer("tp", default=1),
        pp=r.integer("pp", default=1),
        latency_ms=r.optional_number("latency_ms"),
        ttft_ms=r.optional_number("ttft_ms"),
        tpot_ms=r.optional_number("tpot_ms"),
        output_tokens_per_s=r.optional_number("output_tokens_per_s"),
        total_tokens_per_s=r.optional_number("total_tokens_per_s"),
        backend=r.text("backend", default=""),
        accelerator=r.text("accelerator", default=""),
    )


_KERNEL_META = frozenset({"device", "framework", "version", "kernel", "kernel_source"})
_FORMATS: tuple[_Format, ...] = (
    _Format(
        "argonne",
        frozenset({"Hardware", "Input Output Length"}),
        ("Hardware", "Num of Hardware", "Framework", "Model", "Input Output Length"),
        frozenset({"Batch Size", "Latency", "Throughput"}),
        _argonne,
    ),
    _Format(
        "argonne_ttft",
        frozenset({"Hardware", "Input Length", "Output Length"}),
        ("Hardware", "Num of Hardware", "Framework", "Model", "Input Length", "Output Length"),
        frozenset({"Batch Size", "Latency"}),
        _argonne_ttft,
    ),
    _Format(
        "gemm",
        frozenset({"m", "n", "k"}),
        ("dtype", "m", "n", "k", "latency_ms"),
        _KERNEL_META,
        _gemm,
    ),
    _Format(
        "decode_attention",
        frozenset({"context_len", "num_key_value_heads"}),
        (
            "batch_size",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "kv_cache_dtype",
            "context_len",
            "latency_ms",
        ),
        _KERNEL_META | {"attn_dtype"},
        _decode_attention,
    ),
    _Format(
        "prefill_attention",
        frozenset({"seq_len", "num_key_value_heads"}),
        ("batch_size", "seq_len", "num_heads", "num_key_value_heads", "head_dim", "latency_ms"),
        _KERNEL_META | {"attn_dtype", "kv_cache_dtype"},
        _prefill_attention,
    ),
    _Format(
        "nccl",
        frozenset({"op_name", "message_elements"}),
        ("op_name", "nccl_dtype", "num_gpus", "message_elements", "latency_ms"),
        _KERNEL_META,
        _nccl,
    ),
    _Format(
        "serving",
        frozenset({"concurrency", "isl", "osl"}),
        ("model", "isl", "osl", "concurrency"),
        frozenset(
            {
                "gpu",
                "backend",
                "backend_version",
                "precision",
                "gemm_quant_mode",
                "tp",
                "pp",
                "ttft_ms",
                "tpot_ms",
                "measured_at",
            }
            | _LOAD_COLUMNS
        ),
        _serving,
    ),
    _Format(
        "static",
        frozenset({"model", "batch_size", "input_tokens", "output_tokens"}),
        ("model", "batch_size", "input_tokens", "output_tokens"),
        frozenset(
            {
                "latency_ms",
                "ttft_ms",
                "tpot_ms",
                "output_tokens_per_s",
                "total_tokens_per_s",
                "tp",
                "pp",
                "weights_dtype",
                "backend",
                "accelerator",
            }
        ),
        _static,
    ),
)


def detect_format(header: Sequence[str]) -> str:
    """Name the CSV format whose signature columns the header holds; MeasurementError if none."""
    columns = {c.strip() for c in header}
    for fmt in _FORMATS:
        if fmt.signature <= columns:
            return fmt.name
    raise MeasurementError(0, "header", f"unrecognised columns: {', '.join(sorted(columns))}")


def parse_csv(text: str) -> ParseResult:
    """Parse one benchmark CSV (format auto-detected from its header) into measurements."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = next(reader, None)
    if not header:
        raise MeasurementError(0, "header", "the CSV is empty")
    header = [h.strip() for h in header]
    name = detect_format(header)
    fmt = next(f for f in _FORMATS if f.name == name)
    for column in fmt.required:
        if column not in header:
            raise MeasurementError(0, column, f"required column missing for {name} format")
    warnings = [
        f"unknown column {c!r} ignored"
        for c in header
        if c and c not in fmt.required and c not in fmt.known and c not in fmt.signature
    ]
    out: list[Measurement] = []
    index = 0
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        index += 1
        if len(cells) != len(header):
            raise MeasurementError(
                index, "row", f"has {len(cells)} cells, the header has {len(header)}"
            )
        row = _Row(index, dict(zip(header, cells, strict=True)))
        m = fmt.build(row, warnings)
        if m is not None:
            validate(m, index)
            out.append(m)
    skipped = warnings.count(_LLAMA_CPP_SKIPPED)
    if skipped:
        warnings = [w for w in warnings if w != _LLAMA_CPP_SKIPPED]
        warnings.append(f"{skipped} {_LLAMA_CPP_SKIPPED}")
    return ParseResult(name, tuple(out), tuple(warnings))


# vLLM ``vllm bench serve --save-result`` JSON → ServingMeasurement:
#
# ==============================  =====================================================
# result field                    measurement field
# ==============================  =====================================================
# ``model_id``                    ``model`` (via model_id_from_name)
# ``request_rate``,               ``load_pattern`` (load_patterns.py): rate inf with a
# ``max_concurrency``             limit → closed_loop, ``concurrency`` = the limit; a finite
#                                 rate → open_loop, ``request_rate_per_s`` = the rate,
#                                 ``concurrency`` = request_throughput × mean_e2el_ms / 1000
#                                 (Little's law, capped by the limit); inf and no limit →
#                                 offline, ``concurrency`` = ``num_prompts``
# ``burstiness``                  ``arrival_process`` of an open loop: 1 → poisson, else
#                                 gamma with ``burstiness``
# ``total_input_tokens`` /        ``input_tokens`` (mean per request, rounded; divided by
# ``completed``                   ``completed``, else ``num_prompts``)
# ``total_output_tokens`` / idem  ``output_tokens``
# ``mean_ttft_ms``                ``ttft_ms``
# ``mean_tpot_ms``                ``tpot_ms``
# ``backend``                     ``backend`` (``openai``/``vllm`` → ``vllm``)
# ``tensor_parallel_size``/``tp`` ``tp`` (only present via ``--metadata``; else argument)
# ==============================  =====================================================
_VLLM_JSON_KNOWN = frozenset(
    {
        "date",
        "backend",
        "endpoint_type",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "generated_texts",
        "errors",
        "tensor_parallel_size",
        "tp",
        "pp",
        "precision",
    }
)
_VLLM_METRIC = re.compile(r"^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


def parse_vllm_bench_json(
    result: Mapping[str, Any], *, tp: int = 1, weights_dtype: str = "bf16"
) -> ParseResult:
    """Convert one ``vllm bench serve --save-result`` result (decoded JSON) to a measurement."""

    def need(field: str) -> Any:
        if result.get(field) is None:
            raise MeasurementError(1, field, "is missing")
        return result[field]

    def num(field: str) -> float:
        value = need(field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MeasurementError(1, field, f"not a number: {value!r}")
        if not math.isfinite(value):
            raise MeasurementError(1, field, f"must be finite, got {value}")
        return float(value)

    warnings = [
        f"unknown field {k!r} ignored"
        for k in result
        if k not in _VLLM_JSON_KNOWN and not _VLLM_METRIC.match(k)
    ]
    requests = num("completed") if result.get("completed") is not None else num("num_prompts")
    if requests <= 0:
        raise MeasurementError(1, "completed", "no request completed")
    sent = num("num_prompts") if result.get("num_prompts") is not None else requests
    load = vllm_load_pattern(result, sent)
    backend = str(result.get("backend") or "vllm")
    m = ServingMeasurement(
        model=model_id_from_name(str(need("model_id"))),
        input_tokens=max(round(num("total_input_tokens") / requests), 1),
        output_tokens=max(round(num("total_output_tokens") / requests), 1),
        concurrency=load.concurrency,
        ttft_ms=num("mean_ttft_ms"),
        tpot_ms=num("mean_tpot_ms"),
        weights_dtype=normalize_dtype(
            str(result.get("precision") or weights_dtype), row=1, field="precision"
        ),
        tp=int(result.get("tensor_parallel_size") or result.get("tp") or tp),
        pp=int(result.get("pp") or 1),
        backend="vllm" if backend in ("openai", "openai-chat", "vllm") else backend,
        load_pattern=load.load_pattern,
        request_rate_per_s=load.request_rate_per_s,
        arrival_process=load.arrival_process,
        burstiness=load.burstiness,
    )
    validate(m, 1)
    return ParseResult("vllm_bench_json", (m,), tuple(warnings))


def _optional_number(result: Mapping[str, Any], field: str, row: int) -> float | None:
    value = result.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MeasurementError(row, field, f"not a finite number: {value!r}")
    return float(value)


def vllm_load_pattern(result: Mapping[str, Any], requests: float, row: int = 1) -> LoadPattern:
    """Load pattern of a vllm (or SGLang) bench result: ``request_rate``, ``max_concurrency``,
    ``burstiness``; an open loop's mean in flight from ``request_throughput`` × ``mean_e2el_ms``
    (vllm) or ``mean_e2e_latency_ms`` (SGLang), or SGLang's own ``concurrency``."""
    limit = _optional_number(result, "max_concurrency", row)
    sglang = "mean_e2e_latency_ms" in result
    e2e_field = "mean_e2e_latency_ms" if sglang else "mean_e2el_ms"
    in_flight = _optional_number(result, "concurrency", row) if sglang else None
    if in_flight is None:
        in_flight = mean_in_flight(
            _optional_number(result, "request_throughput", row),
            _optional_number(result, e2e_field, row),
        )
    return from_rate_and_limit(
        row=row,
        rate=result.get("request_rate", "inf"),
        rate_field="request_rate",
        limit=limit,
        requests=requests,
        in_flight=in_flight,
        in_flight_field=e2e_field,
        arrival=gamma_arrival(_optional_number(result, "burstiness", row)),
    )


def _dict_row(index: int, item: Mapping[str, Any]) -> _Row:
    cells: dict[str, str] = {}
    for key, value in item.items():
        if isinstance(value, Mapping):
            for sub, subvalue in value.items():
                cells[f"{key}.{sub}"] = "" if subvalue is None else str(subvalue)
        else:
            cells[key] = "" if value is None else str(value)
    return _Row(index, cells)


_DICT_FIELDS: Mapping[str, frozenset[str]] = {
    "gemm": frozenset({"kind", "dtype", "m", "n", "k", "latency_ms"}),
    "attention": frozenset(
        {
            "kind",
            "phase",
            "batch_size",
            "context_tokens",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "kv_dtype",
            "latency_ms",
        }
    ),
    "collective": frozenset({"kind", "op", "num_gpus", "message_bytes", "latency_ms"}),
    "static": frozenset(
        {
            "kind",
            "model",
            "precision",
            "parallelism",
            "batch_size",
            "input_tokens",
            "output_tokens",
            "latency_ms",
            "ttft_ms",
            "tpot_ms",
            "output_tokens_per_s",
            "total_tokens_per_s",
            "backend",
            "load_pattern",
            "identical_prompts",
        }
    ),
    "serving": frozenset(
        {
            "kind",
            "model",
            "precision",
            "parallelism",
            "input_tokens",
            "output_tokens",
            "concurrency",
            "ttft_ms",
            "tpot_ms",
            "backend",
            "backend_version",
        }
        | _LOAD_COLUMNS
    ),
}


def _flag(r: _Row, field: str) -> bool:
    """A true/false cell (JSON booleans arrive as ``True`` / ``False``); absent is false."""
    raw = r.text(field, default="false").lower()
    if raw not in ("true", "false"):
        raise MeasurementError(r.index, field, f"must be true or false, got {raw!r}")
    return raw == "true"


def _dtype_or_none(r: _Row, field: str) -> str | None:
    raw = r.text(field, default="")
    return normalize_dtype(raw, row=r.index, field=field) if raw else None


def _from_dict(r: _Row, kind: str) -> Measurement:
    if kind == "gemm":
        return _gemm(r, [])
    if kind == "attention":
        return AttentionMeasurement(
            phase=r.text("phase"),
            batch_size=r.integer("batch_size"),
            context_tokens=r.integer("context_tokens"),
            num_heads=r.integer("num_heads"),
            num_kv_heads=r.integer("num_kv_heads"),
            head_dim=r.integer("head_dim"),
            kv_dtype=normalize_dtype(r.text("kv_dtype", "bf16"), row=r.index, field="kv_dtype"),
            latency_ms=r.number("latency_ms"),
        )
    if kind == "collective":
        op = r.text("op").lower()
        return CollectiveMeasurement(
            op=_OP_ALIASES.get(op, op),
            num_gpus=r.integer("num_gpus"),
            message_bytes=r.number("message_bytes"),
            latency_ms=r.number("latency_ms"),
        )
    weights = normalize_dtype(
        r.text("precision.weights", "bf16"), row=r.index, field="precision.weights"
    )
    common: dict[str, Any] = {
        "model": r.text("model"),
        "input_tokens": r.integer("input_tokens"),
        "output_tokens": r.integer("output_tokens"),
        "weights_dtype": weights,
        "activations_dtype": _dtype_or_none(r, "precision.activations"),
        "kv_cache_dtype": _dtype_or_none(r, "precision.kv_cache"),
        "tp": r.integer("parallelism.tp", default=1),
        "pp": r.integer("parallelism.pp", default=1),
        "backend": r.text("backend", default=""),
    }
    if kind == "static":
        pattern = r.text("load_pattern", default="static")
        if pattern != "static":
            raise MeasurementError(r.index, "load_pattern", "a static run's load pattern is static")
        return StaticMeasurement(
            batch_size=r.integer("batch_size"),
            latency_ms=r.optional_number("latency_ms"),
            ttft_ms=r.optional_number("ttft_ms"),
            tpot_ms=r.optional_number("tpot_ms"),
            output_tokens_per_s=r.optional_number("output_tokens_per_s"),
            total_tokens_per_s=r.optional_number("total_tokens_per_s"),
            identical_prompts=_flag(r, "identical_prompts"),
            **common,
        )
    return ServingMeasurement(
        concurrency=r.integer("concurrency"),
        ttft_ms=r.optional_number("ttft_ms"),
        tpot_ms=r.optional_number("tpot_ms"),
        backend_version=r.text("backend_version", default=""),
        **_load_fields(r),
        **common,
    )


def parse_measurement_dicts(items: Iterable[Mapping[str, Any]]) -> ParseResult:
    """Parse API-shaped measurement objects (``{"kind": "gemm", ...}``, see docs/api.md)."""
    out: list[Measurement] = []
    warnings: list[str] = []
    for index, item in enumerate(items, start=1):
        kind = str(item.get("kind", ""))
        if kind not in _DICT_FIELDS:
            raise MeasurementError(index, "kind", f"must be one of {', '.join(_DICT_FIELDS)}")
        unknown = sorted(set(item) - _DICT_FIELDS[kind])
        warnings.extend(f"row {index}: unknown field {k!r} ignored" for k in unknown)
        m = _from_dict(_dict_row(index, item), kind)
        validate(m, index)
        out.append(m)
    return ParseResult("json", tuple(out), tuple(warnings))
