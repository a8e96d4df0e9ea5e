"""Seed the catalog from the YAML records without overwriting rows users created or edited."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from service.catalog_files import load_accelerator_records, load_model_records
from service.db.catalog_repository import (
    AcceleratorRepository,
    CatalogDeletionRepository,
    ModelRepository,
)
from service.db.models import (
    KIND_ACCELERATOR,
    KIND_MODEL,
    ORIGIN_SEED,
    AcceleratorRow,
    ModelRow,
    utcnow,
)
from service.services.catalog import apply_accelerator, apply_model

Record = Mapping[str, Any]


@dataclass
class SeedReport:
    """Ids inserted, updated from changed YAML, and skipped because users own or deleted them."""

    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept_user_rows: list[str] = field(default_factory=list)
    kept_deleted: list[str] = field(default_factory=list)
    restored_deletions: int = 0
    unchanged: int = 0


def record_hash(record: Record) -> str:
    """Return a stable SHA-256 of a YAML record."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def _source_urls(record: Record) -> tuple[list[str], dict[str, str]]:
    sources = record.get("sources") or {}
    if isinstance(sources, Mapping):
        by_id = {str(k): str(v) for k, v in sources.items()}
        return list(dict.fromkeys(by_id.values())), by_id
    return [str(url) for url in sources], {}


def record_to_data(record: Record) -> dict[str, Any]:
    """Turn a YAML record into service data: source ids resolved to URLs."""
    urls, by_id = _source_urls(record)
    data = {k: v for k, v in record.items() if k not in ("sources", "field_sources")}
    data["sources"] = urls
    data["field_sources"] = {
        str(name): [by_id.get(str(ref), str(ref)) for ref in refs]
        for name, refs in (record.get("field_sources") or {}).items()
    }
    price = record.get("price")
    if isinstance(price, Mapping):
        data["price"] = {k: by_id.get(str(v), v) if k == "source" else v for k, v in price.items()}
    if data.get("notes") is None:
        data["notes"] = ""
    return data


def _seed_table(
    repo: AcceleratorRepository | ModelRepository,
    row_type: type[AcceleratorRow] | type[ModelRow],
    apply: Callable[[Any, Mapping[str, Any]], None],
    records: Iterable[Record],
    deleted: set[str],
    report: SeedReport,
) -> None:
    for record in records:
        digest = record_hash(record)
        data = record_to_data(record)
        row: Any = repo.get(str(record["id"]))
        if row is None and str(record["id"]) in deleted:
            report.kept_deleted.append(str(record["id"]))
        elif row is None:
            row = row_type(id=str(record["id"]), origin=ORIGIN_SEED, version=1, seed_hash=digest)
            apply(row, data)
            repo.add(row)
            report.inserted.append(row.id)
        elif row.origin != ORIGIN_SEED:
            report.kept_user_rows.append(row.id)
        elif row.seed_hash == digest:
            report.unchanged += 1
        else:
            apply(row, data)
            row.seed_hash = digest
            row.version += 1
            row.updated_at = utcnow()
            report.updated.append(row.id)
    repo.session.flush()


def seed_catalog(
    session: Session,
    accelerator_records: Iterable[Record] | None = None,
    model_records: Iterable[Record] | None = None,
    *,
    restore_deleted: bool = False,
) -> SeedReport:
    """Insert new YAML records, refresh unedited seed rows, never touch user rows.

    Rows users deleted stay deleted unless ``restore_deleted`` clears their tombstones first.
    """
    if accelerator_records is None or model_records is None:
        if accelerator_records is None:
            accelerator_records = load_accelerator_records()
        if model_records is None:
            model_records = load_model_records()
    report = SeedReport()
    deletions = CatalogDeletionRepository(session)
    if restore_deleted:
        report.restored_deletions = deletions.clear()
    _seed_table(
        AcceleratorRepository(session),
        AcceleratorRow,
        apply_accelerator,
        accelerator_records,
        deletions.ids(KIND_ACCELERATOR),
        report,
    )
    _seed_table(
        ModelRepository(session),
        ModelRow,
        apply_model,
        model_records,
        deletions.ids(KIND_MODEL),
        report,
    )
    return report
