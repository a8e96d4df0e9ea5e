"""Catalog rows to JSON-ready dicts and engine objects, plus ETags and cursors."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row

from service.db.models import AcceleratorRow, ModelRow
from service.engine.hardware import Accelerator, topology_from_mapping
from service.engine.shapes import ModelShape
from service.services.errors import FieldError

# ModelShape fields stored in the models.shape JSON column (identity fields are columns).
IDENTITY_FIELDS = ("id", "name", "family")
SHAPE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(ModelShape) if f.name not in IDENTITY_FIELDS
)


def _iso(moment: datetime) -> str:
    """Format a timestamp as ISO 8601 in UTC (SQLite returns naive UTC datetimes)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def _float_or_none(value: float | None) -> float | None:
    """Return ``value`` as a float, or None when absent or not finite (JSON has no NaN/inf)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _ridge_points(row: AcceleratorRow | Row[Any]) -> dict[str, float]:
    """Return the finite ridge points per listed dtype (the engine Accelerator's)."""
    if not row.memory_bandwidth_gb_s > 0:
        return {}
    accelerator = Accelerator(
        id=row.id,
        vendor=row.vendor,
        name=row.name,
        memory_gb=float(row.memory_gb),
        memory_bandwidth_gb_s=float(row.memory_bandwidth_gb_s),
        peak_tflops=dict(row.peak_tflops),
    )
    ridges = {
        dtype: accelerator.ridge_point_flop_per_byte(dtype)
        for dtype, tflops in row.peak_tflops.items()
        if tflops
    }
    return {dtype: ridge for dtype, ridge in ridges.items() if math.isfinite(ridge)}


def _measured(row: AcceleratorRow | Row[Any]) -> dict[str, float] | None:
    """Return the finite measured matmul TFLOP/s per dtype, or None when none are stored."""
    measured = {
        dtype: float(v)
        for dtype, v in (row.measured_matmul_tflops or {}).items()
        if math.isfinite(v)
    }
    return measured or None


def accelerator_to_dict(row: AcceleratorRow | Row[Any]) -> dict[str, Any]:
    """Return the API representation of an accelerator (ORM or Core row; finite numbers only)."""
    return {
        "id": row.id,
        "vendor": row.vendor,
        "name": row.name,
        "memory_gb": float(row.memory_gb),
        "memory_type": row.memory_type,
        "memory_bandwidth_gb_s": float(row.memory_bandwidth_gb_s),
        "peak_tflops": {
            dtype: float(v) for dtype, v in row.peak_tflops.items() if math.isfinite(v)
        },
        "measured_matmul_tflops": _measured(row),
        "measured_memory_bandwidth_gb_s": _float_or_none(row.measured_memory_bandwidth_gb_s),
        "interconnect_gb_s": float(row.interconnect_gb_s),
        "topology": row.topology,
        "tdp_w": _float_or_none(row.tdp_w),
        "price_usd_per_hour": _float_or_none(row.price_usd_per_hour),
        "price": row.price,
        "confidence": row.confidence,
        "notes": row.notes,
        "sources": list(row.sources),
        "field_sources": dict(row.field_sources),
        "ridge_point_flop_per_byte": _ridge_points(row),
        "origin": row.origin,
        "version": row.version,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
    }


def model_to_dict(row: ModelRow) -> dict[str, Any]:
    """Return the API representation of a model row (shape fields flattened)."""
    shape = {name: row.shape[name] for name in SHAPE_FIELDS if name in row.shape}
    return {
        "id": row.id,
        "name": row.name,
        "family": row.family,
        "hf_repo": row.hf_repo,
        "total_params": row.total_params,
        "active_params": row.active_params,
        **shape,
        "vendor_stated_params": row.vendor_stated_params,
        "notes": row.notes,
        "sources": list(row.sources),
        "field_sources": dict(row.field_sources),
        "origin": row.origin,
        "version": row.version,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
    }


def accelerator_from_row(row: AcceleratorRow) -> Accelerator:
    """Build the engine's Accelerator from a stored row."""
    return Accelerator(
        id=row.id,
        vendor=row.vendor,
        name=row.name,
        memory_gb=row.memory_gb,
        memory_bandwidth_gb_s=row.memory_bandwidth_gb_s,
        peak_tflops=dict(row.peak_tflops),
        interconnect_gb_s=row.interconnect_gb_s,
        tdp_w=row.tdp_w or 0.0,
        price_usd_per_hour=row.price_usd_per_hour,
        memory_type=row.memory_type,
        extra={
            "price": row.price,
            "confidence": row.confidence,
            "notes": row.notes,
            "sources": list(row.sources),
            "field_sources": dict(row.field_sources),
        },
        measured_matmul_tflops=_measured(row) or {},
        measured_memory_bandwidth_gb_s=_float_or_none(row.measured_memory_bandwidth_gb_s),
        topology=topology_from_mapping(row.topology),
    )


def shape_from_row(row: ModelRow) -> ModelShape:
    """Build the engine's ModelShape from a stored row."""
    shape = {name: row.shape[name] for name in SHAPE_FIELDS if name in row.shape}
    return ModelShape(id=row.id, name=row.name, family=row.family, **shape)


def etag_of(representation: dict[str, Any]) -> str:
    """Return a strong ETag: a quoted SHA-256 prefix of the canonical JSON representation."""
    canonical = json.dumps(representation, sort_keys=True, separators=(",", ":"), default=str)
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'


def encode_cursor(last_id: str) -> str:
    """Encode the last id of a page as an opaque cursor: unpadded URL-safe base64 of its UTF-8.

    Every string of the API's cursor pattern (``CURSOR_PATTERN`` in api/schemas/common.py)
    decodes to a position in the id order, so a cursor is either refused by the pattern or read.
    """
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """Decode a cursor into the id after which the next page starts; FieldError if malformed."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise FieldError("cursor", "is not a cursor returned by this API") from exc
    # Bytes that are not UTF-8 (or a NUL, which PostgreSQL text cannot hold) still name a
    # position in the id order; U+FFFD keeps the comparison well defined.
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
