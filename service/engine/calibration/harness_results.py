"""Result files of serving benchmark harnesses → ServingMeasurement, each with its load pattern.

Formats (field-by-field tables in docs/measurement-formats.md):

=====================  ==================================================================
format                 file
=====================  ==================================================================
vllm_bench_json        ``vllm bench serve --save-result`` (parsers.parse_vllm_bench_json)
sglang_bench_serving   ``python -m sglang.bench_serving --output-file`` (one JSON line per run)
genai_perf             genai-perf's ``profile_export_genai_perf.json``
trtllm_bench           ``trtllm-bench throughput --report_json`` report
guidellm               guidellm's ``benchmarks.json`` report (one measurement per benchmark)
=====================  ==================================================================

Every parser takes one decoded JSON record and its row number (1 = first record; for guidellm,
the first benchmark of the report) and raises MeasurementError naming the row and the dotted
path of the field (``streaming_metrics.avg_ttft_ms``). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.engine.calibration.load_patterns import (
    LoadPattern,
    from_rate_and_limit,
    mean_in_flight,
)
from service.engine.calibration.measurements import (
    Measurement,
    MeasurementError,
    ServingMeasurement,
    validate,
)
from service.engine.calibration.parsers import (
    ParseResult,
    model_id_from_name,
    normalize_dtype,
    parse_vllm_bench_json,
    vllm_load_pattern,
)

# Milliseconds per unit of a time statistic (genai-perf labels each statistic with its unit).
_MS_PER_UNIT: Mapping[str, float] = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True, slots=True)
class HarnessOptions:
    """What a result file may not record: TP degree, weights dtype, model id, concurrency."""

    tp: int = 1
    weights_dtype: str = "bf16"
    model: str = ""
    concurrency: int | None = None


class _Doc:
    """Typed reads of a nested JSON object; errors name the row and the dotted field path."""

    def __init__(self, data: Mapping[str, Any], row: int, prefix: str = "") -> None:
        self.data = data
        self.row = row
        self.prefix = prefix

    def path(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def error(self, key: str, message: str) -> MeasurementError:
        return MeasurementError(self.row, self.path(key), message)

    def get(self, key: str) -> Any:
        value: Any = self.data
        for part in key.split("."):
            if not isinstance(value, Mapping) or value.get(part) is None:
                return None
            value = value[part]
        return value

    def sub(self, key: str) -> _Doc:
        """The object at ``key`` (MeasurementError if missing or not an object)."""
        value = self.get(key)
        if not isinstance(value, Mapping):
            raise self.error(key, "is missing" if value is None else "must be an object")
        return _Doc(value, self.row, f"{self.path(key)}.")

    def optional_sub(self, key: str) -> _Doc | None:
        """The object at ``key``, or None when absent."""
        return None if self.get(key) is None else self.sub(key)

    def number(self, key: str) -> float:
        value = self.optional_number(key)
        if value is None:
            raise self.error(key, "is missing")
        return value

    def optional_number(self, key: str) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, str):  # some exporters write numbers as strings ("7")
            try:
                value = float(value)
            except ValueError:
                raise self.error(key, f"not a number: {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"not a number: {value!r}")
        if not math.isfinite(value):
            raise self.error(key, f"must be finite, got {value}")
        return float(value)

    def positive(self, key: str, hint: str = "") -> float:
        value = self.number(key)
        if value <= 0:
            raise self.error(key, f"must be positive, got {value}{hint}")
        return value

    def text(self, key: str) -> str:
        value = self.get(key)
        return "" if value is None else str(value).strip()


def _tokens(doc: _Doc, key: str) -> int:
    """Mean tokens per request, rounded, at least 1."""
    return max(round(doc.positive(key)), 1)


def _build(
    row: int,
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    ttft_ms: float,
    tpot_ms: float,
    load: LoadPattern,
    options: HarnessOptions,
    **extra: Any,
) -> ServingMeasurement:
    fields: dict[str, Any] = {
        "weights_dtype": normalize_dtype(options.weights_dtype, row=row, field="weights_dtype"),
        "tp": options.tp,
        **extra,
    }
    m = ServingMeasurement(
        model=model_id_from_name(model),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=load.concurrency,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        load_pattern=load.load_pattern,
        request_rate_per_s=load.request_rate_per_s,
        arrival_process=load.arrival_process,
        burstiness=load.burstiness,
        **fields,
    )
    validate(m, row)
    return m


def _model(doc: _Doc, candidates: Sequence[str], options: HarnessOptions, what: str) -> str:
    for key in candidates:
        value = doc.get(key)
        if isinstance(value, list):
            if len(value) != 1:
                raise doc.error(key, f"names {len(value)} models; upload one model per file")
            value = value[0]
        if value:
            return str(value)
    if options.model:
        return options.model
    raise doc.error(candidates[0], f"{what} does not name the model; pass the model parameter")


# --- SGLang bench_serving ------------------------------------------------------------------

# ``--backend`` of bench_serving names the client protocol; the engine behind it follows.
_SGLANG_BACKENDS: Mapping[str, str] = {
    "sglang": "sglang",
    "sglang-native": "sglang",
    "sglang-oai": "sglang",
    "sglang-oai-chat": "sglang",
    "vllm": "vllm",
    "vllm-chat": "vllm",
    "lmdeploy": "lmdeploy",
    "lmdeploy-chat": "lmdeploy",
    "trt": "trtllm",
}


def parse_sglang(
    record: Mapping[str, Any], row: int, options: HarnessOptions, warnings: list[str]
) -> list[Measurement]:
    """One ``sglang.bench_serving`` JSON line (the run's summary) → one measurement."""
    doc = _Doc(record, row)
    completed = doc.positive("completed", " (no request completed)")
    load = vllm_load_pattern(record, completed, row)
    backend = doc.text("backend")
    return [
        _build(
            row,
            model=_model(doc, ("model_id", "model"), options, "an SGLang bench_serving result"),
            input_tokens=max(round(doc.number("total_input_tokens") / completed), 1),
            output_tokens=max(round(doc.number("total_output_tokens") / completed), 1),
            ttft_ms=doc.positive("mean_ttft_ms", " (0 means the run did not stream)"),
            tpot_ms=doc.positive("mean_tpot_ms", " (0 means the run did not stream)"),
            load=load,
            options=options,
            backend=_SGLANG_BACKENDS.get(backend, backend),
        )
    ]


# --- genai-perf ------------------------------------------------------------------------------

_GENAI_BACKENDS: Mapping[str, str] = {"tensorrtllm": "trtllm", "vllm": "vllm"}


def _stat_ms(doc: _Doc, metric: str, stat: str = "avg") -> float:
    """A genai-perf time statistic in ms, converted from the unit it is labelled with."""
    block = doc.sub(metric)
    unit = block.text("unit") or "ms"
    if unit not in _MS_PER_UNIT:
        raise block.error("unit", f"unknown time unit {unit!r} (expected one of ns, us, ms, s)")
    return block.positive(stat) * _MS_PER_UNIT[unit]


def parse_genai_perf(
    record: Mapping[str, Any], row: int, options: HarnessOptions, warnings: list[str]
) -> list[Measurement]:
    """One ``profile_export_genai_perf.json`` (statistics + ``input_config``) → one measurement."""
    doc = _Doc(record, row)
    config = doc.sub("input_config")
    stimulus = config.optional_sub("perf_analyzer.stimulus")
    concurrency = config.optional_number("concurrency")
    rate = config.optional_number("request_rate")
    if stimulus is not None:  # newer genai-perf nests the load under perf_analyzer.stimulus
        concurrency = concurrency or stimulus.optional_number("concurrency")
        rate = rate or stimulus.optional_number("request_rate")
    if doc.get("inter_token_latency") is None:
        raise doc.error("inter_token_latency", "is missing (run genai-perf with --streaming)")
    if rate is None and concurrency is None:
        raise config.error("concurrency", "neither concurrency nor request_rate is recorded")
    in_flight = mean_in_flight(
        doc.optional_number("request_throughput.avg"),
        _stat_ms(doc, "request_latency") if doc.get("request_latency") else None,
    )
    load = from_rate_and_limit(
        row=row,
        rate=rate,
        rate_field="input_config.request_rate",
        limit=concurrency if rate is None else None,
        requests=0,
        in_flight=in_flight,
        in_flight_field="request_latency",
        arrival=(config.text("request_distribution").lower(), None),
    )
    service_kind = config.text("service_kind") or config.text("endpoint.service_kind")
    backend = config.text("backend") or config.text("endpoint.backend")
    return [
        _build(
            row,
            model=_model(config, ("model", "model_names"), options, "input_config"),
            input_tokens=_tokens(doc, "input_sequence_length.avg"),
            output_tokens=_tokens(doc, "output_sequence_length.avg"),
            ttft_ms=_stat_ms(doc, "time_to_first_token"),
            tpot_ms=_stat_ms(doc, "inter_token_latency"),
            load=load,
            options=options,
            # the backend field is meaningful only against a Triton server
            backend=_GENAI_BACKENDS.get(backend, backend) if service_kind == "triton" else "",
        )
    ]


# --- trtllm-bench ----------------------------------------------------------------------------


def _trtllm_precision(engine: _Doc) -> tuple[str, str | None, str | None]:
    """(weights, activations, kv cache) dtypes from the report's ``engine`` block."""
    quant = engine.text("quantization").upper()
    kv_text = engine.text("kv_cache_dtype").upper()
    kv: str | None = None
    if kv_text and kv_text not in ("NONE", "AUTO"):
        kv = "fp8" if "FP8" in kv_text else "int8" if "INT8" in kv_text else None
        if kv is None:
            raise engine.error("kv_cache_dtype", f"unknown KV cache quantization {kv_text!r}")
    if not quant or quant == "NONE":
        dtype = engine.text("dtype") or "bfloat16"
        return normalize_dtype(dtype, row=engine.row, field=engine.path("dtype")), None, kv
    # TensorRT-LLM QuantAlgo names: FP8* (W8A8 fp8), NVFP4 (W4A4 fp4), W4A16*/W4A8* (int4
    # weights), W8A16* (int8 weights), W8A8_SQ* (SmoothQuant, int8 weights and activations)
    if "FP8" in quant:
        return "fp8", "fp8", kv
    if "FP4" in quant:
        return "fp4", "fp4", kv
    if quant.startswith(("W4", "INT4")):
        return "int4", None, kv
    if quant.startswith("W8A8"):
        return "int8", "int8", kv
    if quant.startswith(("W8", "INT8")):
        return "int8", None, kv
    raise engine.error("quantization", f"unknown quantization {quant!r}")


def parse_trtllm_bench(
    record: Mapping[str, Any], row: int, options: HarnessOptions, warnings: list[str]
) -> list[Measurement]:
    """One ``trtllm-bench throughput --report_json`` report → one measurement.

    The report does not record ``--concurrency``: without the ``concurrency`` option the run is
    read as offline (trtllm-bench's default releases every request at once).
    """
    doc = _Doc(record, row)
    engine = doc.sub("engine")
    world = doc.sub("world_info")
    requests = doc.sub("request_info")
    streaming = doc.optional_sub("streaming_metrics")
    if streaming is None:
        raise doc.error("streaming_metrics", "is missing (run trtllm-bench with --streaming)")
    num_requests = requests.positive("num_requests")
    if options.concurrency is not None:
        load = LoadPattern("closed_loop", options.concurrency)
    else:
        load = LoadPattern("offline", max(round(num_requests), 1))
        warnings.append(
            "trtllm-bench reports do not record --concurrency: read as offline (every request "
            "released at once); pass concurrency for a run with a concurrency limit"
        )
    weights, activations, kv = _trtllm_precision(engine)
    tpot = streaming.optional_number("avg_tpot_ms")
    return [
        _build(
            row,
            model=_model(engine, ("model",), options, "engine"),
            input_tokens=_tokens(requests, "avg_input_length"),
            output_tokens=_tokens(requests, "avg_output_length"),
            ttft_ms=streaming.positive("avg_ttft_ms"),
            tpot_ms=tpot if tpot is not None else streaming.positive("tpot_percentiles.average"),
            load=load,
            options=HarnessOptions(
                tp=round(world.positive("tp_size")),
                weights_dtype=weights,
                model=options.model,
            ),
            activations_dtype=activations,
            kv_cache_dtype=kv,
            pp=round(world.optional_number("pp_size") or 1),
            backend="trtllm",
            backend_version=engine.text("version"),
            accelerator=doc.text("machine.name"),
        )
    ]


# --- guidellm --------------------------------------------------------------------------------


def _guidellm_load(bench: _Doc, metrics: _Doc) -> LoadPattern:
    strategy = bench.optional_sub("config.strategy") or bench.sub("args.strategy")
    kind = strategy.text("type_")
    limit = strategy.optional_number("max_concurrency")
    if kind == "synchronous":
        return LoadPattern("closed_loop", 1)
    if kind == "concurrent":
        return LoadPattern("closed_loop", round(strategy.positive("streams")))
    if kind == "throughput":
        sent = metrics.optional_number("request_totals.total") or metrics.positive(
            "request_totals.successful"
        )
        return from_rate_and_limit(
            row=bench.row,
            rate=None,
            rate_field=strategy.path("rate"),
            limit=limit,
            requests=sent,
            in_flight=None,
            in_flight_field="",
        )
    if kind in ("constant", "poisson"):
        in_flight = metrics.optional_number("request_concurrency.successful.mean")
        if in_flight is None:
            latency_s = metrics.optional_number("request_latency.successful.mean")
            in_flight = mean_in_flight(
                metrics.optional_number("requests_per_second.successful.mean"),
                None if latency_s is None else 1000.0 * latency_s,  # guidellm: seconds
            )
        return from_rate_and_limit(
            row=bench.row,
            rate=strategy.positive("rate"),
            rate_field=strategy.path("rate"),
            limit=limit,
            requests=0,
            in_flight=in_flight,
            in_flight_field=metrics.path("request_concurrency"),
            arrival=(kind, None),
        )
    raise strategy.error("type_", f"unknown guidellm strategy {kind!r}")


def parse_guidellm(
    record: Mapping[str, Any], row: int, options: HarnessOptions, warnings: list[str]
) -> list[Measurement]:
    """A guidellm ``benchmarks.json`` report → one measurement per benchmark (rows from
    ``row``, one per benchmark)."""
    report = _Doc(record, row)
    benchmarks = report.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise report.error("benchmarks", "must be a non-empty list")
    out: list[Measurement] = []
    for index, item in enumerate(benchmarks):
        if not isinstance(item, Mapping):
            raise report.error(f"benchmarks.{index}", "must be an object")
        bench = _Doc(item, row + index, f"benchmarks.{index}.")
        metrics = bench.sub("metrics")
        model = bench.text("config.backend.model") or _model(
            report, ("args.model",), options, "the report"
        )
        out.append(
            _build(
                row + index,
                model=model,
                input_tokens=_tokens(metrics, "prompt_token_count.successful.mean"),
                output_tokens=_tokens(metrics, "output_token_count.successful.mean"),
                ttft_ms=metrics.positive("time_to_first_token_ms.successful.mean"),
                # guidellm's time_per_output_token_ms includes the first token; its
                # inter_token_latency_ms excludes it, as TPOT does elsewhere
                tpot_ms=metrics.positive("inter_token_latency_ms.successful.mean"),
                load=_guidellm_load(bench, metrics),
                options=options,
            )
        )
    return out


# --- detection and dispatch --------------------------------------------------------------------

# (record, row, options, warnings to append to) → measurements
RecordParser = Callable[[Mapping[str, Any], int, HarnessOptions, list[str]], list[Measurement]]


def _vllm(
    record: Mapping[str, Any], row: int, options: HarnessOptions, warnings: list[str]
) -> list[Measurement]:
    try:
        parsed = parse_vllm_bench_json(record, tp=options.tp, weights_dtype=options.weights_dtype)
    except MeasurementError as exc:
        raise MeasurementError(row, exc.field, exc.message) from exc
    warnings.extend(parsed.warnings)
    return list(parsed.measurements)


def _is_sglang(r: Mapping[str, Any]) -> bool:
    return "mean_e2e_latency_ms" in r or "total_output_tokens_retokenized" in r


def _is_vllm(r: Mapping[str, Any]) -> bool:
    return "measurements" not in r and ("mean_ttft_ms" in r or "model_id" in r)


def _is_genai_perf(r: Mapping[str, Any]) -> bool:
    return "input_config" in r and isinstance(r.get("time_to_first_token"), Mapping)


def _is_trtllm(r: Mapping[str, Any]) -> bool:
    return "request_info" in r and "performance" in r and "world_info" in r


def _is_guidellm(r: Mapping[str, Any]) -> bool:
    benchmarks = r.get("benchmarks")
    return isinstance(benchmarks, list) and any(
        isinstance(b, Mapping) and "metrics" in b for b in benchmarks
    )


@dataclass(frozen=True, slots=True)
class HarnessFormat:
    """A harness result format: name, how to recognise one record, how to parse one."""

    name: str
    detect: Callable[[Mapping[str, Any]], bool]
    parse: RecordParser


# Order matters: an SGLang line also holds vllm's ``mean_ttft_ms``.
HARNESS_FORMATS: tuple[HarnessFormat, ...] = (
    HarnessFormat("sglang_bench_serving", _is_sglang, parse_sglang),
    HarnessFormat("genai_perf", _is_genai_perf, parse_genai_perf),
    HarnessFormat("trtllm_bench", _is_trtllm, parse_trtllm_bench),
    HarnessFormat("guidellm", _is_guidellm, parse_guidellm),
    HarnessFormat("vllm_bench_json", _is_vllm, _vllm),
)
HARNESS_FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in HARNESS_FORMATS)


def records_of(document: Any) -> list[Any]:
    """The records of a decoded document: a list's items, else the document itself."""
    return list(document) if isinstance(document, list) else [document]


def detect_harness(document: Any) -> str | None:
    """Name of the harness format whose first record ``document`` holds, else None."""
    records = records_of(document)
    first = records[0] if records else None
    if not isinstance(first, Mapping):
        return None
    return next((f.name for f in HARNESS_FORMATS if f.detect(first)), None)


def parse_harness(document: Any, format_name: str, options: HarnessOptions) -> ParseResult:
    """Parse every record of ``document`` as ``format_name``; rows number the measurements."""
    fmt = next((f for f in HARNESS_FORMATS if f.name == format_name), None)
    if fmt is None:
        raise MeasurementError(None, "format", f"must be one of {', '.join(HARNESS_FORMAT_NAMES)}")
    out: list[Measurement] = []
    warnings: list[str] = []
    for record in records_of(document):
        row = len(out) + 1
        if not isinstance(record, Mapping):
            raise MeasurementError(row, "result", "not a JSON object")
        found: list[str] = []
        out.extend(fmt.parse(record, row, options, found))
        warnings.extend(w for w in found if w not in warnings)
    if not out:
        raise MeasurementError(None, "result", "the file holds no result")
    return ParseResult(format_name, tuple(out), tuple(warnings))
