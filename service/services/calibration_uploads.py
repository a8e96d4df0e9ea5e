"""Decode calibration uploads (API JSON, benchmark CSV, vllm bench JSON) into checked measurements.

Every rejection is a FieldError naming the row and the field, so nothing of a bad upload is fitted
or stored. Rows are numbered from 1: the first measurement of a JSON body, or the first data line
after a CSV header. JSON-body errors name the field as ``measurements.<index>.<field>`` (0-based,
like the request validator); CSV errors name the column; ``vllm bench`` errors name the result
field with the result's position as row.

``vllm bench serve --save-result`` mapping (one result object, a list of them, or JSON lines;
see ``service.engine.calibration.parsers.parse_vllm_bench_json``): ``model_id`` → ``model``,
``max_concurrency`` (or ``num_prompts`` for an unbounded closed loop) → ``concurrency``,
``total_input_tokens``/``completed`` → ``input_tokens``, ``total_output_tokens``/``completed``
→ ``output_tokens``, ``mean_ttft_ms`` → ``ttft_ms``, ``mean_tpot_ms`` → ``tpot_ms``,
``backend`` (``openai``/``vllm`` → ``vllm``), ``tensor_parallel_size``/``tp`` → ``tp``
(else the ``tp`` parameter), ``precision`` → weights dtype (else ``weights_dtype``). A JSON
document is a vllm result when it is not an API body (no ``measurements``) and holds
``mean_ttft_ms`` or ``model_id``.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.engine.calibration.end_to_end import precision_of
from service.engine.calibration.measurements import (
    GemmMeasurement,
    Measurement,
    MeasurementError,
    ServingMeasurement,
    StaticMeasurement,
)
from service.engine.calibration.parsers import (
    ParseResult,
    parse_csv,
    parse_measurement_dicts,
    parse_vllm_bench_json,
)
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.shapes import ModelShape
from service.services.errors import FieldError

MAX_MISSING_COLUMNS = 32  # bound on the header probe loop
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True, slots=True)
class UploadMetadata:
    """What the profile is for: accelerator, name, optional backend and version ("" = none)."""

    accelerator: str
    name: str
    backend: str = ""
    backend_version: str = ""


@dataclass(frozen=True, slots=True)
class CalibrationUpload:
    """A decoded upload: metadata, measurements in upload order, source format, warnings."""

    metadata: UploadMetadata
    measurements: tuple[Measurement, ...]
    format: str
    warnings: tuple[str, ...] = ()
    csv_text: str | None = None  # the CSV source, to name the row of a measurement on error

    def fingerprint(self) -> str:
        """SHA-256 of the canonical metadata and measurements (same upload → same hash)."""
        canonical = {
            "metadata": dataclasses.asdict(self.metadata),
            "measurements": [measurement_to_json(m) for m in self.measurements],
        }
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def measurement_to_json(m: Measurement) -> dict[str, Any]:
    """The measurement dataclass as a JSON-ready dict (``kind`` included)."""
    return dataclasses.asdict(m)


def _field_error(exc: MeasurementError, field: str) -> FieldError:
    where = f"row {exc.row}: " if exc.row else ""
    return FieldError(field, f"{where}{exc.message}")


def from_dicts(items: Sequence[Any]) -> ParseResult:
    """Parse the ``measurements`` array of an API body."""
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise FieldError(f"measurements.{index}", f"row {index + 1}: must be an object")
    try:
        return parse_measurement_dicts(items)
    except MeasurementError as exc:
        index = (exc.row or 1) - 1
        raise _field_error(exc, f"measurements.{index}.{exc.field}") from exc


def _missing_columns(header: Sequence[str]) -> list[str]:
    """Every required column the header lacks (the parser names one at a time)."""
    columns = list(header)
    missing: list[str] = []
    for _ in range(MAX_MISSING_COLUMNS):
        buffer = io.StringIO()
        csv.writer(buffer).writerow(columns)
        try:
            parse_csv(buffer.getvalue())
        except MeasurementError as exc:
            if exc.row == 0 and exc.field not in ("header", *columns):
                missing.append(exc.field)
                columns.append(exc.field)
                continue
        break
    return missing


def from_csv(text: str) -> ParseResult:
    """Parse a benchmark CSV (any format the engine parsers detect)."""
    try:
        return parse_csv(text)
    except MeasurementError as exc:
        if exc.row == 0 and exc.field != "header":
            header = next(csv.reader(io.StringIO(text.lstrip("\ufeff"))), [])
            missing = _missing_columns([h.strip() for h in header]) or [exc.field]
            raise FieldError(
                ", ".join(missing), f"required column(s) missing: {', '.join(missing)}"
            ) from exc
        raise _field_error(exc, exc.field) from exc


def looks_like_vllm_result(document: Any) -> bool:
    """True for a ``vllm bench serve`` result object (or a list of them)."""
    first = document[0] if isinstance(document, list) and document else document
    return (
        isinstance(first, Mapping)
        and "measurements" not in first
        and ("mean_ttft_ms" in first or "model_id" in first)
    )


def from_vllm(document: Any, *, tp: int = 1, weights_dtype: str = "bf16") -> ParseResult:
    """Parse one vllm bench result, a list of them; rows number the results from 1."""
    results = document if isinstance(document, list) else [document]
    measurements: list[Measurement] = []
    warnings: list[str] = []
    for row, result in enumerate(results, start=1):
        if not isinstance(result, Mapping):
            raise FieldError("result", f"row {row}: not a JSON object")
        try:
            parsed = parse_vllm_bench_json(result, tp=tp, weights_dtype=weights_dtype)
        except MeasurementError as exc:
            raise FieldError(exc.field, f"row {row}: {exc.message}") from exc
        measurements.extend(parsed.measurements)
        warnings.extend(w for w in parsed.warnings if w not in warnings)
    return ParseResult("vllm_bench_json", tuple(measurements), tuple(warnings))


def decode_text(text: str, *, tp: int = 1, weights_dtype: str = "bf16") -> ParseResult:
    """Parse an uploaded file by its content: JSON (vllm bench result or lines) or CSV."""
    stripped = text.lstrip("\ufeff").lstrip()
    if stripped.startswith(("{", "[")):
        try:
            document: Any = json.loads(stripped)
        except json.JSONDecodeError:
            try:
                document = [json.loads(line) for line in stripped.splitlines() if line.strip()]
            except json.JSONDecodeError as exc:
                raise FieldError("file", f"not valid JSON: {exc.msg}") from exc
        if isinstance(document, Mapping) and "measurements" in document:
            items = document["measurements"]
            if not isinstance(items, list):
                raise FieldError("measurements", "must be an array")
            return from_dicts(items)
        if not looks_like_vllm_result(document):
            raise FieldError("file", "JSON is neither an API body nor a vllm bench result")
        return from_vllm(document, tp=tp, weights_dtype=weights_dtype)
    return from_csv(text)


def measured_elsewhere(m: Measurement, accelerator: str) -> str | None:
    """The catalog-style accelerator id a run names when it is not ``accelerator``, else None.

    Files such as Argonne's mix accelerators per row; free-text names ("H100 SXM 80GB") are not
    compared.
    """
    named = getattr(m, "accelerator", "")
    if named and _SLUG.match(named) and named != accelerator:
        return str(named)
    return None


def build_upload(
    metadata: UploadMetadata, parsed: ParseResult, csv_text: str | None = None
) -> CalibrationUpload:
    """Combine metadata and parsed measurements (``csv_text``: the CSV they came from).

    Runs measured on another accelerator are dropped with a warning.
    """
    kept: list[Measurement] = []
    skipped: dict[str, int] = {}
    for m in parsed.measurements:
        other = measured_elsewhere(m, metadata.accelerator)
        if other is None:
            kept.append(m)
        else:
            skipped[other] = skipped.get(other, 0) + 1
    warnings = list(parsed.warnings)
    if skipped:
        counts = ", ".join(f"{n} on {acc}" for acc, n in sorted(skipped.items()))
        warnings.append(f"rows measured on other accelerators skipped: {counts}")
    return CalibrationUpload(
        metadata=metadata,
        measurements=tuple(kept),
        format=parsed.format,
        warnings=tuple(warnings),
        csv_text=csv_text if parsed.format not in ("json", "vllm_bench_json") else None,
    )


def _csv_row_of(text: str, index: int, accelerator: str) -> int | None:
    """Data row (from 1) of a CSV that produced kept measurement ``index`` (rows may be
    skipped by the parser or for naming another accelerator)."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    header, body = rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]
    produced = 0
    for row, cells in enumerate(body, start=1):
        buffer = io.StringIO()
        csv.writer(buffer).writerows([header, cells])
        produced += sum(
            measured_elsewhere(m, accelerator) is None
            for m in parse_csv(buffer.getvalue()).measurements
        )
        if produced > index:
            return row
    return None


def _where(upload: CalibrationUpload, index: int, field: str) -> tuple[str, str]:
    """(field name, row prefix) for the measurement at ``index`` of an upload."""
    if upload.format == "json":
        return f"measurements.{index}.{field}", f"row {index + 1}"
    text, accelerator = upload.csv_text, upload.metadata.accelerator
    row = _csv_row_of(text, index, accelerator) if text is not None else index + 1
    return field, f"row {row}"


def check_against_catalog(
    upload: CalibrationUpload, accelerator: Accelerator, models: Mapping[str, ModelShape]
) -> None:
    """Reject unknown models, layouts that do not divide a model, and unsupported dtypes."""
    for index, m in enumerate(upload.measurements):
        if isinstance(m, GemmMeasurement):
            if m.dtype not in accelerator.peak_tflops:
                field, where = _where(upload, index, "dtype")
                raise FieldError(field, f"{where}: {accelerator.id} has no {m.dtype} peak")
            continue
        if not isinstance(m, StaticMeasurement | ServingMeasurement):
            continue
        model = models.get(m.model)
        if model is None:
            field, where = _where(upload, index, "model")
            raise FieldError(field, f"{where}: unknown model {m.model!r} (not in the catalog)")
        try:
            Parallelism(tp=m.tp, pp=m.pp).check_divides(model)
        except EngineError as exc:
            field, where = _where(upload, index, "parallelism")
            raise FieldError(field, f"{where}: {exc}") from exc
        precision = precision_of(m)
        try:
            precision.validate()
            accelerator.peak_flops_s(precision.compute_dtype)
        except EngineError as exc:
            field, where = _where(upload, index, "precision")
            raise FieldError(
                field, f"{where}: unsupported precision on {accelerator.id}: {exc}"
            ) from exc


def referenced_models(measurements: Sequence[Measurement]) -> list[str]:
    """Model ids the end-to-end measurements name, in first-seen order."""
    seen = dict.fromkeys(
        m.model for m in measurements if isinstance(m, StaticMeasurement | ServingMeasurement)
    )
    return list(seen)
