"""Decode calibration uploads (API JSON, benchmark CSV, vllm bench JSON) into checked measurements.

Every rejection is a FieldError naming the row and the field, so nothing of a bad upload is fitted
or stored. Rows are numbered from 1: the first measurement of a JSON body, or the first data line
after a CSV header. JSON-body errors name the field as ``measurements.<index>.<field>`` (0-based,
like the request validator); CSV errors name the column; ``vllm bench`` errors name the result
field with the result's position as row.

Harness result files (vllm bench serve, SGLang bench_serving, genai-perf, trtllm-bench,
guidellm; one object, a list, or JSON lines) are detected from the content, or named by the
caller, and parsed by ``service.engine.calibration.harness_results``; every mapping, with its
load pattern, is documented field by field in docs/measurement-formats.md. A JSON document with
``measurements`` is an API body. Runs that name several backends are one upload per backend
(``check_one_backend``, ``split_by_backend``). Several files (a multipart upload that repeats
``file``) are one upload (``merge_uploads``): kernel tables beside end-to-end runs, so the fit
prices kernels from the tables and fits only the engine terms on the runs; an error then names
the file as well as the row.
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

from service.engine.backend_names import canonical_backend
from service.engine.calibration.end_to_end import precision_of
from service.engine.calibration.fit import compute_dtypes_on
from service.engine.calibration.harness_results import (
    HARNESS_FORMAT_NAMES as HARNESS_FORMAT_NAMES,  # re-exported for the API layer
)
from service.engine.calibration.harness_results import (
    HarnessOptions as HarnessOptions,
)
from service.engine.calibration.harness_results import (
    detect_harness,
    parse_harness,
)
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
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
)
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.shapes import ModelShape
from service.services.errors import NESTING_MESSAGE, FieldError

MAX_MISSING_COLUMNS = 32  # bound on the header probe loop
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# A profile's backend (the API's `backend` field; calibration_profiles.backend holds 50 chars).
BACKEND_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
BACKEND_MAX_CHARS = 50


@dataclass(frozen=True, slots=True)
class UploadMetadata:
    """What the profile is for: accelerator, name, optional backend and version ("" = none)."""

    accelerator: str
    name: str
    backend: str = ""
    backend_version: str = ""

    def __post_init__(self) -> None:
        # one spelling of the engine, as requests are matched to profiles by it
        object.__setattr__(self, "backend", canonical_backend(self.backend))


@dataclass(frozen=True, slots=True)
class UploadPart:
    """One file of an upload: its name, the measurements it gave, its CSV text (None if JSON)."""

    name: str
    count: int
    csv_text: str | None = None


@dataclass(frozen=True, slots=True)
class CalibrationUpload:
    """A decoded upload: metadata, measurements in upload order, source format, warnings."""

    metadata: UploadMetadata
    measurements: tuple[Measurement, ...]
    format: str
    warnings: tuple[str, ...] = ()
    parts: tuple[UploadPart, ...] = ()  # the files, in order, to name a measurement's row

    def __post_init__(self) -> None:
        # runs name their engine in one spelling: "vLLM" and "vllm" are one backend
        canonical = tuple(
            dataclasses.replace(m, backend=canonical_backend(m.backend))
            if isinstance(m, StaticMeasurement | ServingMeasurement) and m.backend
            else m
            for m in self.measurements
        )
        object.__setattr__(self, "measurements", canonical)

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


_KIND_CLASSES: Mapping[str, type[Any]] = {
    "gemm": GemmMeasurement,
    "attention": AttentionMeasurement,
    "collective": CollectiveMeasurement,
    "static": StaticMeasurement,
    "serving": ServingMeasurement,
}


def measurement_from_json(data: Mapping[str, Any]) -> Measurement:
    """Rebuild a stored measurement; fields added since it was stored take their defaults
    (rows stored before ``load_pattern`` existed read as closed_loop / static)."""
    cls = _KIND_CLASSES[str(data.get("kind"))]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[no-any-return]


def stored_measurement_json(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored measurement row as the API returns it, defaults filled in for older rows."""
    if str(data.get("kind")) not in _KIND_CLASSES:
        return dict(data)
    return {**data, **measurement_to_json(measurement_from_json(data))}


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


def looks_like_harness_result(document: Any) -> bool:
    """True for the result file of a benchmark harness this service reads (vllm, SGLang,
    genai-perf, trtllm-bench, guidellm)."""
    return detect_harness(document) is not None


def from_harness(
    document: Any, options: HarnessOptions, format_name: str | None = None
) -> ParseResult:
    """Parse a harness result file (format auto-detected unless ``format_name`` is given);
    FieldError names the result field and the row (1 = first result or benchmark)."""
    name = format_name or detect_harness(document)
    if name is None:
        raise FieldError(
            "file",
            "JSON is neither an API body nor a result file of a known harness "
            f"({', '.join(HARNESS_FORMAT_NAMES)})",
        )
    try:
        return parse_harness(document, name, options)
    except MeasurementError as exc:
        raise _field_error(exc, exc.field) from exc


def decode_json_text(text: str, field: str = "file") -> Any:
    """A JSON document, or the records of a JSON-lines file (SGLang, vllm ``--append-result``)."""
    stripped = text.lstrip("\ufeff").strip()
    try:
        return json.loads(stripped)
    except RecursionError as exc:
        raise FieldError(field, NESTING_MESSAGE) from exc
    except json.JSONDecodeError as whole:
        try:
            return [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise FieldError(
                field, f"not valid JSON: {whole.msg} at line {whole.lineno}"
            ) from whole


def decode_text(
    text: str,
    *,
    tp: int = 1,
    weights_dtype: str = "bf16",
    options: HarnessOptions | None = None,
    format_name: str | None = None,
) -> ParseResult:
    """Parse an uploaded file by its content: JSON (API body, harness result or JSON lines)
    or CSV; ``format_name`` forces a harness format."""
    options = options or HarnessOptions(tp=tp, weights_dtype=weights_dtype)
    stripped = text.lstrip("\ufeff").lstrip()
    if format_name is None and not stripped.startswith(("{", "[")):
        return from_csv(text)
    document = decode_json_text(text)
    if format_name is None and isinstance(document, Mapping) and "measurements" in document:
        items = document["measurements"]
        if not isinstance(items, list):
            raise FieldError("measurements", "must be an array")
        return from_dicts(items)
    return from_harness(document, options, format_name)


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
    metadata: UploadMetadata, parsed: ParseResult, csv_text: str | None = None, name: str = ""
) -> CalibrationUpload:
    """Combine metadata and parsed measurements (``csv_text``: the CSV they came from;
    ``name``: the file's name).

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
    is_csv = parsed.format not in ("json", *HARNESS_FORMAT_NAMES)
    return CalibrationUpload(
        metadata=metadata,
        measurements=tuple(kept),
        format=parsed.format,
        warnings=tuple(warnings),
        parts=(UploadPart(name, len(kept), csv_text if is_csv else None),),
    )


def merge_uploads(
    metadata: UploadMetadata, uploads: Sequence[CalibrationUpload]
) -> CalibrationUpload:
    """One upload of several files' measurements, in file order (each file's warnings named)."""
    return CalibrationUpload(
        metadata=metadata,
        measurements=tuple(m for upload in uploads for m in upload.measurements),
        format="+".join(dict.fromkeys(upload.format for upload in uploads)),
        warnings=tuple(
            f"{', '.join(part.name for part in upload.parts)}: {warning}"
            for upload in uploads
            for warning in upload.warnings
        ),
        parts=tuple(part for upload in uploads for part in upload.parts),
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
    accelerator, local = upload.metadata.accelerator, index
    for part in upload.parts:
        if local < part.count:
            break
        local -= part.count
    else:
        return field, f"row {index + 1}"
    text = part.csv_text
    row = _csv_row_of(text, local, accelerator) if text is not None else local + 1
    named = f"{part.name}, " if len(upload.parts) > 1 else ""
    return field, f"{named}row {row}"


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
        # dtypes are read as the fit reads them on this accelerator (fit.compute_dtypes_on): an
        # fp4 label without fp4 tensor cores as bf16 GEMMs, unnamed activations of 8/4-bit floats
        (run,), _ = compute_dtypes_on([m], accelerator, models)
        precision = precision_of(run)
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


def backends_of(measurements: Sequence[Measurement]) -> dict[str, int]:
    """How many end-to-end runs name each backend (runs naming none are not counted)."""
    counts: dict[str, int] = {}
    for m in measurements:
        if isinstance(m, StaticMeasurement | ServingMeasurement) and m.backend:
            counts[m.backend] = counts.get(m.backend, 0) + 1
    return counts


def check_one_backend(upload: CalibrationUpload) -> None:
    """Refuse an upload whose runs name several backends, or another backend than declared:
    a profile describes one backend, and runs of different engines are never merged."""
    counts = backends_of(upload.measurements)
    listing = ", ".join(f"{name} ({n} runs)" for name, n in sorted(counts.items()))
    if len(counts) > 1:
        raise FieldError(
            "backend",
            f"the upload mixes {len(counts)} backends: {listing}; a profile is fitted for one "
            "backend, so nothing was stored. Upload each backend's runs separately (the rows "
            "of one backend), or add split_by_backend=true to store one profile per backend",
        )
    declared = upload.metadata.backend
    if declared and counts and declared not in counts:
        raise FieldError(
            "backend",
            f"is {declared!r} but the measurements were run on {listing}; give the backend "
            "the runs name, or leave it out",
        )


def can_be_profile_backend(name: str) -> bool:
    """Whether a run's backend can be a profile's (``BACKEND_PATTERN``, at most
    ``BACKEND_MAX_CHARS``)."""
    return len(name) <= BACKEND_MAX_CHARS and re.fullmatch(BACKEND_PATTERN, name) is not None


def with_runs_backend(upload: CalibrationUpload) -> CalibrationUpload:
    """An upload that declares no backend takes the one backend its runs name, so its profile
    is that engine's and ``auto`` chooses it only for that engine's requests (a generic
    profile would be chosen for every engine's). Unchanged when a backend is declared, when
    the runs name none or several, or when the name cannot be a profile's backend."""
    counts = backends_of(upload.measurements)
    if upload.metadata.backend or len(counts) != 1:
        return upload
    backend = next(iter(counts))
    if not can_be_profile_backend(backend):
        return upload
    note = (
        f"backend: none was given, so the profile takes the one its runs name ({backend}); "
        f"'auto' chooses it for {backend} requests"
    )
    return dataclasses.replace(
        upload,
        metadata=dataclasses.replace(upload.metadata, backend=backend),
        warnings=(*upload.warnings, note),
    )


def split_by_backend(upload: CalibrationUpload) -> list[CalibrationUpload]:
    """One upload per backend the runs name, in first-seen order; kernel measurements (which
    name no backend) go to every part. A run naming no backend, or a declared backend, cannot
    be assigned, nor one whose backend is no profile backend (BACKEND_PATTERN, at most
    BACKEND_MAX_CHARS): FieldError."""
    for index, m in enumerate(upload.measurements):
        backend = getattr(m, "backend", "")
        if backend and not can_be_profile_backend(backend):
            field, where = _where(upload, index, "backend")
            raise FieldError(
                field,
                f"{where}: {backend[:60]!r} cannot be a profile's backend with "
                f"split_by_backend=true (at most {BACKEND_MAX_CHARS} letters, digits, '.', "
                "'_' or '-', starting with a letter or digit)",
            )
    if upload.metadata.backend:
        raise FieldError(
            "backend",
            "leave backend out with split_by_backend=true: each profile takes the backend its "
            "runs name",
        )
    runs = [m for m in upload.measurements if isinstance(m, StaticMeasurement | ServingMeasurement)]
    unnamed = sum(1 for m in runs if not m.backend)
    if unnamed:
        raise FieldError(
            "backend",
            f"{unnamed} of {len(runs)} runs name no backend, so split_by_backend=true cannot "
            "assign them; give every run a backend or upload them separately",
        )
    counts = backends_of(upload.measurements)
    if len(counts) <= 1:
        only = dataclasses.replace(upload.metadata, backend=next(iter(counts), ""))
        return [dataclasses.replace(upload, metadata=only)]
    listing = ", ".join(f"{name} ({n} runs)" for name, n in counts.items())
    parts: list[CalibrationUpload] = []
    for backend in counts:
        kept = tuple(
            m
            for m in upload.measurements
            if not isinstance(m, StaticMeasurement | ServingMeasurement) or m.backend == backend
        )
        parts.append(
            CalibrationUpload(
                metadata=dataclasses.replace(upload.metadata, backend=backend),
                measurements=kept,
                format=upload.format,
                warnings=(*upload.warnings, f"split by backend from one upload: {listing}"),
            )
        )
    return parts
