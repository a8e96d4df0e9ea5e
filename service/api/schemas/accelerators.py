"""Accelerator request and response bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from service.api.schemas.common import Dtype, Slug, SourceUrl


class PriceInfo(BaseModel):
    """Where and when the indicative hourly price was seen."""

    model_config = ConfigDict(extra="forbid")

    date: str | None = None
    provider: str | None = None
    tier: str | None = None
    source: str | None = None


class AcceleratorFields(BaseModel):
    """Editable accelerator facts (dense peaks per dtype, decimal GB and GB/s)."""

    model_config = ConfigDict(extra="forbid")

    vendor: str = Field(min_length=1, max_length=100)
    name: str = Field(min_length=1, max_length=200)
    memory_gb: float = Field(gt=0)
    memory_type: str = Field(default="", max_length=50)
    memory_bandwidth_gb_s: float = Field(gt=0)
    peak_tflops: dict[Dtype, float] = Field(min_length=1)
    interconnect_gb_s: float = Field(default=0.0, ge=0, description="Per device, per direction.")
    tdp_w: float | None = Field(default=None, ge=0)
    price_usd_per_hour: float | None = Field(default=None, ge=0)
    price: PriceInfo | None = None
    confidence: str | None = Field(default=None, max_length=20)
    notes: str = ""
    sources: list[SourceUrl] = Field(default_factory=list)
    field_sources: dict[str, list[str]] = Field(default_factory=dict)
    # Read-only fields, accepted (and ignored) so a GET body can be sent back on PUT.
    origin: str | None = Field(default=None, exclude=True)
    version: int | None = Field(default=None, exclude=True)
    created_at: str | None = Field(default=None, exclude=True)
    updated_at: str | None = Field(default=None, exclude=True)
    ridge_point_flop_per_byte: dict[str, float] | None = Field(default=None, exclude=True)


class AcceleratorCreate(AcceleratorFields):
    """Body of POST /v1/accelerators."""

    id: Slug


class AcceleratorReplace(AcceleratorFields):
    """Body of PUT /v1/accelerators/{id}; ``id`` may be omitted but must match if given."""

    id: Slug | None = None


class Accelerator(BaseModel):
    """An accelerator as the API returns it."""

    id: str
    vendor: str
    name: str
    memory_gb: float
    memory_type: str
    memory_bandwidth_gb_s: float
    peak_tflops: dict[str, float]
    interconnect_gb_s: float
    tdp_w: float | None
    price_usd_per_hour: float | None
    price: PriceInfo | None
    confidence: str | None
    notes: str
    sources: list[str]
    field_sources: dict[str, list[str]]
    ridge_point_flop_per_byte: dict[str, float]
    origin: str
    version: int
    created_at: str
    updated_at: str
