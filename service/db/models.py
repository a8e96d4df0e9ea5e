"""ORM tables: catalog rows (accelerators, models), API keys and calibration profiles."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from service.db.base import Base

ORIGIN_SEED = "seed"
ORIGIN_USER = "user"


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class CatalogRowMixin:
    """Columns shared by catalog rows: provenance, optimistic version and timestamps."""

    sources: Mapped[list[str]] = mapped_column(JSON, default=list)
    field_sources: Mapped[dict[str, list[str]]] = mapped_column(JSON, default=dict)
    notes: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(16), default=ORIGIN_USER)
    # Hash of the YAML record last seeded into this row; None for rows users created.
    seed_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    @declared_attr.directive
    def __mapper_args__(cls) -> dict[str, Any]:
        # Every UPDATE/DELETE of a loaded row says ``WHERE version = <the version read>`` (0 rows:
        # StaleDataError); writers still set the new version themselves (no generator).
        table = cls.__table__  # type: ignore[attr-defined]
        return {"version_id_col": table.c.version, "version_id_generator": False}


class AcceleratorRow(CatalogRowMixin, Base):
    """One accelerator's spec sheet: filterable facts as columns, maps as JSON."""

    __tablename__ = "accelerators"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    vendor: Mapped[str] = mapped_column(String(100), index=True)
    name: Mapped[str] = mapped_column(String(200))
    memory_gb: Mapped[float] = mapped_column(Float, index=True)
    memory_type: Mapped[str] = mapped_column(String(50), default="")
    memory_bandwidth_gb_s: Mapped[float] = mapped_column(Float)
    peak_tflops: Mapped[dict[str, float]] = mapped_column(JSON)
    interconnect_gb_s: Mapped[float] = mapped_column(Float, default=0.0)
    tdp_w: Mapped[float | None] = mapped_column(Float, default=None)
    price_usd_per_hour: Mapped[float | None] = mapped_column(Float, default=None)
    price: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    confidence: Mapped[str | None] = mapped_column(String(20), default=None)
    # Measured maximum achievable matmul TFLOP/s per dtype (MAMF); None when not measured.
    measured_matmul_tflops: Mapped[dict[str, float] | None] = mapped_column(JSON, default=None)
    # Best measured DRAM read bandwidth, GB/s; None when not measured.
    measured_memory_bandwidth_gb_s: Mapped[float | None] = mapped_column(Float, default=None)
    topology: Mapped[dict[str, float] | None] = mapped_column(JSON, default=None)


class ModelRow(CatalogRowMixin, Base):
    """One model's shape: identity and parameter counts as columns, the shape as JSON."""

    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    family: Mapped[str] = mapped_column(String(100), default="", index=True)
    hf_repo: Mapped[str | None] = mapped_column(String(200), default=None)
    total_params: Mapped[int] = mapped_column(BigInteger)
    active_params: Mapped[int] = mapped_column(BigInteger)
    num_layers: Mapped[int] = mapped_column(Integer)
    hidden_size: Mapped[int] = mapped_column(Integer)
    num_experts: Mapped[int] = mapped_column(Integer, default=0)
    # dense / moe / mla (engine.calibration.domain.model_kind): what ``auto`` matches a
    # profile's fitted models on (calibration_repository.profile_choice).
    kind: Mapped[str] = mapped_column(String(16), default="dense", server_default="dense")
    vendor_stated_params: Mapped[Any] = mapped_column(JSON, nullable=True, default=None)
    # Every ModelShape field except id/name/family.
    shape: Mapped[dict[str, Any]] = mapped_column(JSON)


class ApiKeyRow(Base):
    """An API key, stored only as an HMAC-SHA256 of the full key under the server pepper."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)


class CalibrationProfileRow(Base):
    """An immutable calibration profile: its metadata, stored fit result and representation."""

    __tablename__ = "calibration_profiles"
    __table_args__ = (
        UniqueConstraint("accelerator", "backend", "name", "version"),
        Index("ix_calibration_profiles_lookup", "accelerator", "backend", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    accelerator: Mapped[str] = mapped_column(String(100))
    backend: Mapped[str] = mapped_column(String(50), default="")  # "" = any backend
    backend_version: Mapped[str] = mapped_column(String(100), default="")
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    n_measurements: Mapped[int] = mapped_column(Integer)
    # CalibrationResult.to_dict(): rebuilt with from_dict to serve estimates.
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Parameters, fit quality, intervals and warnings as the API returns them.
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Lookup prefix of the API key that uploaded it ("" for profiles older than revision 0005).
    owner: Mapped[str] = mapped_column(String(64), default="", server_default="")
    # VISIBILITY_PUBLISHED (every reader's) or VISIBILITY_PRIVATE (listed, read and chosen
    # only for the key whose prefix is ``owner``): calibration_repository.visible_to.
    visibility: Mapped[str] = mapped_column(
        String(16), default="published", server_default="published"
    )


class CalibrationProfileModelRow(Base):
    """A model a profile's end-to-end runs were fitted on (its domain's models, as rows so that
    ``auto`` can prefer a profile fitted on the request's model, or on one of its kind)."""

    __tablename__ = "calibration_profile_models"

    profile_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("calibration_profiles.id", ondelete="CASCADE"), primary_key=True
    )
    model_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    model_kind: Mapped[str] = mapped_column(String(16))  # dense / moe / mla


VISIBILITY_PRIVATE = "private"
VISIBILITY_PUBLISHED = "published"


class RateLimitBucketRow(Base):
    """A token bucket shared by every process: tokens left at ``updated_s`` (epoch seconds)."""

    __tablename__ = "rate_limit_buckets"

    bucket: Mapped[str] = mapped_column(String(200), primary_key=True)  # "rule|client"
    tokens: Mapped[float] = mapped_column(Float)
    updated_s: Mapped[float] = mapped_column(Float, index=True)


class CalibrationMeasurementRow(Base):
    """One measurement a profile was fitted on (the measurement dataclass as JSON)."""

    __tablename__ = "calibration_measurements"
    __table_args__ = (UniqueConstraint("profile_id", "position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    profile_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("calibration_profiles.id", ondelete="CASCADE")
    )
    position: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class IdempotencyKeyRow(Base):
    """The first answer to a POST sent with an Idempotency-Key, replayed on retries."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("owner", "endpoint", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(64))  # API key lookup prefix
    endpoint: Mapped[str] = mapped_column(String(100))
    key: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


KIND_ACCELERATOR = "accelerator"
KIND_MODEL = "model"


class CatalogDeletionRow(Base):
    """A tombstone: a seeded catalog row a user deleted, which seeding must not restore."""

    __tablename__ = "catalog_deletions"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # KIND_ACCELERATOR/KIND_MODEL
    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    deleted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
