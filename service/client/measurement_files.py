"""Read benchmark files (CSV, or the JSON results of vllm, SGLang, genai-perf, trtllm-bench or
guidellm; see docs/measurement-formats.md) into API measurement objects."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.engine.calibration.harness_results import (
    HARNESS_FORMAT_NAMES,
    HarnessOptions,
    detect_harness,
    parse_harness,
)
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
    Measurement,
    MeasurementError,
    StaticMeasurement,
)
from service.engine.calibration.parsers import parse_csv

Progress = Callable[[int, int], None]
CHUNK_ROWS = 2000
NAME_MAX_CHARS = 200  # a profile name (docs/api.md)
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(slots=True)
class MeasurementFile:
    """Measurements read from one file, as API objects, with the file's format and warnings."""

    format: str
    measurements: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    backends: set[str] = field(default_factory=set)


def measurement_to_dict(m: Measurement) -> dict[str, Any]:
    """Express a measurement in the API's JSON shape (docs/api.md, Calibration)."""
    if isinstance(m, GemmMeasurement):
        return {"kind": "gemm", "dtype": m.dtype, "m": m.m, "n": m.n, "k": m.k,
                "latency_ms": m.latency_ms}  # fmt: skip
    if isinstance(m, AttentionMeasurement):
        return {
            "kind": "attention",
            "phase": m.phase,
            "batch_size": m.batch_size,
            "context_tokens": m.context_tokens,
            "num_heads": m.num_heads,
            "num_kv_heads": m.num_kv_heads,
            "head_dim": m.head_dim,
            "kv_dtype": m.kv_dtype,
            "latency_ms": m.latency_ms,
        }
    if isinstance(m, CollectiveMeasurement):
        return {"kind": "collective", "op": m.op, "num_gpus": m.num_gpus,
                "message_bytes": m.message_bytes, "latency_ms": m.latency_ms}  # fmt: skip
    precision = {"weights": m.weights_dtype}
    if m.activations_dtype:
        precision["activations"] = m.activations_dtype
    if m.kv_cache_dtype:
        precision["kv_cache"] = m.kv_cache_dtype
    out: dict[str, Any] = {
        "kind": m.kind,
        "model": m.model,
        "precision": precision,
        "parallelism": {"tp": m.tp, "pp": m.pp},
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
    }
    if isinstance(m, StaticMeasurement):
        out["batch_size"] = m.batch_size
        if m.identical_prompts:
            out["identical_prompts"] = True
        metrics: tuple[str, ...] = (
            "latency_ms",
            "ttft_ms",
            "tpot_ms",
            "output_tokens_per_s",
            "total_tokens_per_s",
        )
    else:
        out["concurrency"] = m.concurrency
        metrics = ("ttft_ms", "tpot_ms", "request_rate_per_s", "burstiness")
        out["load_pattern"] = m.load_pattern
        if m.arrival_process:
            out["arrival_process"] = m.arrival_process
        if m.backend_version:
            out["backend_version"] = m.backend_version
    out.update({name: getattr(m, name) for name in metrics if getattr(m, name) is not None})
    if m.backend:
        out["backend"] = m.backend
    return out


def _chunks(text: str, size: int) -> Iterator[tuple[int, int, str]]:
    """Yield (first row number - 1, row count, CSV text with the header) per chunk of rows."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        yield 0, 0, text
        return
    header, body = rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]
    for start in range(0, max(len(body), 1), size):
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(body[start : start + size])
        yield start, len(body), buffer.getvalue()


def _keep(m: Measurement, accelerator: str | None) -> bool:
    """Drop rows measured on another catalog accelerator (slug-named, e.g. Argonne files)."""
    named = getattr(m, "accelerator", "")
    return not (accelerator and named and _SLUG.match(named) and named != accelerator)


def _collect(out: MeasurementFile, items: tuple[Measurement, ...], accelerator: str | None) -> int:
    dropped = 0
    for m in items:
        if not _keep(m, accelerator):
            dropped += 1
            continue
        out.measurements.append(measurement_to_dict(m))
        backend = getattr(m, "backend", "")
        if backend:
            out.backends.add(backend)
    return dropped


def read_csv(
    text: str, accelerator: str | None = None, progress: Progress | None = None
) -> MeasurementFile:
    """Parse a benchmark CSV chunk by chunk (reporting rows done of total) into API objects."""
    result: MeasurementFile | None = None
    dropped = 0
    for offset, total, chunk in _chunks(text, CHUNK_ROWS):
        try:
            parsed = parse_csv(chunk)
        except MeasurementError as exc:
            row = exc.row + offset if exc.row else exc.row
            raise MeasurementError(row, exc.field, exc.message) from exc
        if result is None:
            result = MeasurementFile(parsed.format)
        dropped += _collect(result, parsed.measurements, accelerator)
        result.warnings.extend(w for w in parsed.warnings if w not in result.warnings)
        if progress is not None:
            progress(min(offset + CHUNK_ROWS, total), total)
    assert result is not None
    if dropped:
        result.warnings.append(f"{dropped} rows measured on other accelerators skipped")
    return result


def _json_document(text: str) -> Any:
    """A JSON document, or the records of a JSON-lines file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise MeasurementError(None, "file", f"not valid JSON: {whole.msg}") from whole


def read_harness_result(
    text: str,
    options: HarnessOptions | None = None,
    *,
    file_format: str | None = None,
    accelerator: str | None = None,
    progress: Progress | None = None,
) -> MeasurementFile:
    """Parse a harness result file (format detected from the content unless ``file_format``)."""
    document = _json_document(text)
    name = file_format or detect_harness(document)
    if name is None:
        raise MeasurementError(
            None, "file", f"not a result file of {', '.join(HARNESS_FORMAT_NAMES)}"
        )
    parsed = parse_harness(document, name, options or HarnessOptions())
    out = MeasurementFile(name)
    dropped = _collect(out, parsed.measurements, accelerator)
    out.warnings.extend(parsed.warnings)
    if dropped:
        out.warnings.append(f"{dropped} runs measured on other accelerators skipped")
    if progress is not None:
        progress(len(parsed.measurements), len(parsed.measurements))
    return out


def read_vllm_bench(
    text: str, *, tp: int = 1, weights_dtype: str = "bf16", progress: Progress | None = None
) -> MeasurementFile:
    """Parse ``vllm bench serve --save-result`` output: one result, a list, or JSON lines."""
    options = HarnessOptions(tp=tp, weights_dtype=weights_dtype)
    return read_harness_result(text, options, file_format="vllm_bench_json", progress=progress)


def read_measurement_file(
    path: Path,
    *,
    accelerator: str | None = None,
    tp: int = 1,
    weights_dtype: str = "bf16",
    progress: Progress | None = None,
    model: str = "",
    concurrency: int | None = None,
    file_format: str | None = None,
) -> MeasurementFile:
    """Read a CSV (any format the parsers detect) or a harness result JSON file (``model``,
    ``concurrency``: for files that do not record them; ``file_format``: skip detection)."""
    text = Path(path).read_text(encoding="utf-8")
    is_json = Path(path).suffix.lower() in (".json", ".jsonl")
    if file_format or is_json or text.lstrip().startswith(("{", "[")):
        options = HarnessOptions(
            tp=tp, weights_dtype=weights_dtype, model=model, concurrency=concurrency
        )
        return read_harness_result(
            text, options, file_format=file_format, accelerator=accelerator, progress=progress
        )
    return read_csv(text, accelerator, progress)


def combine_files(files: Sequence[tuple[str, MeasurementFile]]) -> MeasurementFile:
    """Several files' measurements as one (name, file) in order: formats joined by '+', each
    warning named after its file; one profile is then fitted on all of them."""
    if len(files) == 1:
        return files[0][1]
    out = MeasurementFile("+".join(dict.fromkeys(f.format for _, f in files)))
    for name, f in files:
        out.measurements.extend(f.measurements)
        out.warnings.extend(f"{name}: {w}" for w in f.warnings)
        out.backends.update(f.backends)
    return out


def calibration_body(
    measured: MeasurementFile, accelerator: str, name: str | None, source: str
) -> dict[str, Any]:
    """The POST /v1/calibrations body for measurements read from ``source``."""
    body: dict[str, Any] = {
        "accelerator": accelerator,
        "name": name or f"{source} ({measured.format})"[:NAME_MAX_CHARS],
        "measurements": measured.measurements,
    }
    if len(measured.backends) == 1:
        body["backend"] = next(iter(measured.backends))
    return body


def as_paths(path: str | Path | Sequence[str | Path]) -> Path | list[Path]:
    """One path, or a list of paths (a string is one path)."""
    if isinstance(path, str | Path):
        return Path(path)
    return [Path(p) for p in path]


def read_measurement_files(
    paths: Path | Sequence[Path],
    *,
    accelerator: str | None = None,
    progress: Callable[[Path], AbstractContextManager[Progress | None]] | None = None,
    **options: Any,
) -> tuple[MeasurementFile, str]:
    """One or several files read as one (``combine_files``), and their names joined; a bad row
    of one of several files raises ValueError naming the file. ``progress(path)`` gives each
    file's progress callback; ``options`` are ``read_measurement_file``'s."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    read: list[tuple[str, MeasurementFile]] = []
    for path in paths:
        with progress(path) if progress else nullcontext() as callback:
            try:
                measured = read_measurement_file(
                    path, accelerator=accelerator, progress=callback, **options
                )
            except MeasurementError as exc:
                if len(paths) == 1:
                    raise
                raise ValueError(f"{path.name}: {exc}") from exc
        read.append((path.name, measured))
    return combine_files(read), ", ".join(name for name, _ in read)


def calibration_from_file(
    path: Path | Sequence[Path],
    accelerator: str,
    name: str | None = None,
    progress: Progress | None = None,
    *,
    tp: int = 1,
    weights_dtype: str = "bf16",
    model: str = "",
    concurrency: int | None = None,
    file_format: str | None = None,
) -> dict[str, Any]:
    """Read one benchmark file, or several for one profile, and build the POST
    /v1/calibrations body."""
    measured, source = read_measurement_files(
        path,
        accelerator=accelerator,
        progress=(lambda _: nullcontext(progress)) if progress else None,
        tp=tp,
        weights_dtype=weights_dtype,
        model=model,
        concurrency=concurrency,
        file_format=file_format,
    )
    return calibration_body(measured, accelerator, name, source)
