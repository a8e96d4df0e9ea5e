"""Load and validate the seeded catalog YAML files (one file per accelerator and per model)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from service.engine.errors import InvalidShapeError
from service.engine.hardware import DTYPES, Accelerator, topology_from_mapping
from service.engine.shapes import ModelShape

CATALOG_DIR: Path = Path(__file__).resolve().parent.parent / "hardware_catalog"

CONFIDENCE_LEVELS = ("H", "M", "L")

# Numeric accelerator fields: name -> (required, may be zero, may be null).
_ACCELERATOR_NUMBERS: dict[str, tuple[bool, bool, bool]] = {
    "memory_gb": (True, False, False),
    "memory_bandwidth_gb_s": (True, False, False),
    "interconnect_gb_s": (True, True, False),
    "tdp_w": (False, False, True),
    "price_usd_per_hour": (True, False, True),
    "measured_memory_bandwidth_gb_s": (False, False, True),
}
_ACCELERATOR_STRINGS = ("id", "vendor", "name", "memory_type", "confidence")
_ACCELERATOR_VALUE_FIELDS = (
    "memory_gb",
    "memory_type",
    "memory_bandwidth_gb_s",
    "peak_tflops",
    "measured_matmul_tflops",
    "measured_memory_bandwidth_gb_s",
    "interconnect_gb_s",
    "topology",
    "tdp_w",
    "price_usd_per_hour",
)
_PRICE_KEYS = ("provider", "tier", "date", "source")

_SHAPE_FIELDS: dict[str, dataclasses.Field[Any]] = {
    f.name: f for f in dataclasses.fields(ModelShape)
}
_MODEL_METADATA = ("name", "family", "hf_repo", "vendor_stated_params")
_MODEL_REQUIRED = (
    "id",
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    *_MODEL_METADATA,
)


class CatalogFileError(ValueError):
    """A catalog YAML file is malformed or fails validation."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _read_yaml(path: Path) -> dict[str, object]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogFileError(path, f"invalid YAML: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise CatalogFileError(path, "top level must be a mapping with string keys")
    if data.get("id") != path.stem:
        raise CatalogFileError(
            path, f"id {data.get('id')!r} must equal the file stem {path.stem!r}"
        )
    return data


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _check_sources(path: Path, record: Mapping[str, object], value_fields: list[str]) -> None:
    sources = record.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise CatalogFileError(path, "sources must be a non-empty mapping of id -> URL")
    for sid, url in sources.items():
        if not isinstance(sid, str) or not isinstance(url, str) or not url.strip():
            raise CatalogFileError(path, f"source {sid!r} must map to a non-empty string")
    field_sources = record.get("field_sources")
    if not isinstance(field_sources, dict):
        raise CatalogFileError(path, "field_sources must be a mapping of field -> [source ids]")
    for name in value_fields:
        if name not in field_sources:
            raise CatalogFileError(path, f"field_sources has no entry for {name}")
    for name, ids in field_sources.items():
        if name not in record:
            raise CatalogFileError(path, f"field_sources names unknown field {name!r}")
        if not isinstance(ids, list) or not ids:
            raise CatalogFileError(path, f"field_sources.{name} must be a non-empty list")
        for sid in ids:
            if sid not in sources:
                raise CatalogFileError(path, f"field_sources.{name} cites unknown source {sid!r}")


def _validate_accelerator(path: Path, record: dict[str, object]) -> None:
    for name in _ACCELERATOR_STRINGS:
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            raise CatalogFileError(path, f"{name} must be a non-empty string")
    if record["confidence"] not in CONFIDENCE_LEVELS:
        raise CatalogFileError(path, f"confidence must be one of {', '.join(CONFIDENCE_LEVELS)}")
    for name, (required, zero_ok, null_ok) in _ACCELERATOR_NUMBERS.items():
        if name not in record:
            if required:
                raise CatalogFileError(path, f"missing required field {name}")
            continue
        value = record[name]
        if value is None:
            if not null_ok:
                raise CatalogFileError(path, f"{name} must not be null")
            continue
        if not _is_number(value):
            raise CatalogFileError(path, f"{name} must be a number")
        number = float(value)  # type: ignore[arg-type]
        if number < 0 or (number == 0 and not zero_ok):
            raise CatalogFileError(path, f"{name} must be positive")
    peaks = record.get("peak_tflops")
    if not isinstance(peaks, dict) or not peaks:
        raise CatalogFileError(path, "peak_tflops must be a non-empty mapping of dtype -> TFLOP/s")
    for dtype, tflops in peaks.items():
        if dtype not in DTYPES:
            raise CatalogFileError(path, f"peak_tflops has unknown dtype {dtype!r}")
        if not _is_number(tflops) or float(tflops) <= 0:
            raise CatalogFileError(path, f"peak_tflops.{dtype} must be a positive number")
    _validate_measured(path, record.get("measured_matmul_tflops"), peaks)
    measured_bandwidth = record.get("measured_memory_bandwidth_gb_s")
    if measured_bandwidth is not None and float(measured_bandwidth) > float(  # type: ignore[arg-type]
        record["memory_bandwidth_gb_s"]  # type: ignore[arg-type]
    ):
        raise CatalogFileError(
            path, "measured_memory_bandwidth_gb_s must be at most memory_bandwidth_gb_s"
        )
    topology = record.get("topology")
    if topology is not None:
        if not isinstance(topology, dict):
            raise CatalogFileError(path, "topology must be a mapping")
        try:
            topology_from_mapping(topology)
        except ValueError as exc:
            raise CatalogFileError(path, str(exc)) from exc
    price = record.get("price")
    if record["price_usd_per_hour"] is not None:
        if not isinstance(price, dict) or any(k not in price for k in _PRICE_KEYS):
            raise CatalogFileError(path, f"a price needs price: {{{', '.join(_PRICE_KEYS)}}}")
        sources = record.get("sources")
        if isinstance(sources, dict) and price["source"] not in sources:
            raise CatalogFileError(path, f"price.source {price['source']!r} is not in sources")
    elif price is not None:
        raise CatalogFileError(path, "price must be null when price_usd_per_hour is null")
    notes = record.get("notes", "")
    if not isinstance(notes, str):
        raise CatalogFileError(path, "notes must be a string")
    value_fields = [
        name for name in _ACCELERATOR_VALUE_FIELDS if name in record and record[name] is not None
    ]
    _check_sources(path, record, value_fields)


def _validate_measured(path: Path, measured: object, peaks: Mapping[str, object]) -> None:
    """Check measured matmul TFLOP/s: known dtypes, each positive and at most that dtype's peak."""
    if measured is None:
        return
    if not isinstance(measured, dict) or not measured:
        raise CatalogFileError(path, "measured_matmul_tflops must be a mapping of dtype -> TFLOP/s")
    for dtype, tflops in measured.items():
        if dtype not in DTYPES:
            raise CatalogFileError(path, f"measured_matmul_tflops has unknown dtype {dtype!r}")
        peak = peaks.get(dtype)
        if peak is None:
            raise CatalogFileError(
                path, f"measured_matmul_tflops.{dtype} has no peak_tflops.{dtype}"
            )
        if not _is_number(tflops) or not 0 < float(tflops) <= float(peak):  # type: ignore[arg-type]
            raise CatalogFileError(
                path, f"measured_matmul_tflops.{dtype} must be > 0 and <= its peak ({peak})"
            )


def _validate_model(path: Path, record: dict[str, object]) -> None:
    for name in _MODEL_REQUIRED:
        if name not in record:
            raise CatalogFileError(path, f"missing required field {name}")
    for name in _MODEL_METADATA:
        if not isinstance(record[name], str) or not str(record[name]).strip():
            raise CatalogFileError(path, f"{name} must be a non-empty string")
    allowed = set(_SHAPE_FIELDS) | {*_MODEL_METADATA, "notes", "sources", "field_sources"}
    for name, value in record.items():
        if name not in allowed:
            raise CatalogFileError(path, f"unknown field {name!r}")
        field = _SHAPE_FIELDS.get(name)
        if field is None or name in ("id", "name", "family"):
            continue
        if field.type in ("int", int):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise CatalogFileError(path, f"{name} must be a non-negative integer")
        elif field.type in ("bool", bool):
            if not isinstance(value, bool):
                raise CatalogFileError(path, f"{name} must be true or false")
        elif not isinstance(value, str):
            raise CatalogFileError(path, f"{name} must be a string")
    try:
        model_from_record(record).validate()
    except InvalidShapeError as exc:
        raise CatalogFileError(path, f"invalid shape: {exc}") from exc
    value_fields = [
        name for name in record if name in _SHAPE_FIELDS and name not in ("id", "name", "family")
    ]
    _check_sources(path, record, value_fields)


def _load(directory: Path, kind: str) -> list[dict[str, object]]:
    folder = directory / kind
    if not folder.is_dir():
        raise CatalogFileError(folder, "catalog folder not found")
    records: list[dict[str, object]] = []
    for path in sorted(folder.glob("*.yaml")):
        record = _read_yaml(path)
        if kind == "accelerators":
            _validate_accelerator(path, record)
        else:
            _validate_model(path, record)
        records.append(record)
    return records


def load_accelerator_records(directory: Path | None = None) -> list[dict[str, object]]:
    """Parse and validate every accelerator YAML file, sorted by id."""
    return _load(directory or CATALOG_DIR, "accelerators")


def load_model_records(directory: Path | None = None) -> list[dict[str, object]]:
    """Parse and validate every model YAML file, sorted by id."""
    return _load(directory or CATALOG_DIR, "models")


def accelerator_from_record(record: Mapping[str, object]) -> Accelerator:
    """Build an engine Accelerator from a validated record; provenance goes into ``extra``."""
    peaks = record["peak_tflops"]
    assert isinstance(peaks, Mapping)
    tdp = record.get("tdp_w")
    price = record.get("price_usd_per_hour")
    extra_keys = ("price", "confidence", "notes", "sources", "field_sources")
    measured = record.get("measured_matmul_tflops") or {}
    assert isinstance(measured, Mapping)
    topology = record.get("topology")
    measured_bandwidth = record.get("measured_memory_bandwidth_gb_s")
    return Accelerator(
        id=str(record["id"]),
        vendor=str(record["vendor"]),
        name=str(record["name"]),
        memory_gb=_as_float(record["memory_gb"]),
        memory_bandwidth_gb_s=_as_float(record["memory_bandwidth_gb_s"]),
        peak_tflops={str(k): _as_float(v) for k, v in peaks.items()},
        interconnect_gb_s=_as_float(record.get("interconnect_gb_s", 0.0)),
        tdp_w=0.0 if tdp is None else _as_float(tdp),
        price_usd_per_hour=None if price is None else _as_float(price),
        memory_type=str(record.get("memory_type", "")),
        extra={k: record[k] for k in extra_keys if k in record},
        measured_matmul_tflops={str(k): _as_float(v) for k, v in measured.items()},
        measured_memory_bandwidth_gb_s=(
            None if measured_bandwidth is None else _as_float(measured_bandwidth)
        ),
        topology=topology_from_mapping(topology) if isinstance(topology, Mapping) else None,
    )


def model_from_record(record: Mapping[str, object]) -> ModelShape:
    """Build a ModelShape from a record's shape fields (metadata keys are ignored)."""
    kwargs = {name: record[name] for name in _SHAPE_FIELDS if name in record}
    return ModelShape(**kwargs)  # type: ignore[arg-type]


def _as_float(value: object) -> float:
    if not _is_number(value):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)  # type: ignore[arg-type]
