"""Accelerator request and response bodies."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.api.schemas.common import JSON_INTEGER, READ_ONLY, Dtype, Slug, SourceUrl


def bounded(low: float, high: float) -> Any:
    """Return a strict (no booleans, no strings), finite ``low <= x <= high`` constraint."""
    return Field(strict=True, allow_inf_nan=False, ge=low, le=high)


# Physical bounds: the low ends keep every ratio (ridge point, times, fractions) finite; the high
# ends are far above any device in the reference catalog (largest: 256 GB, 8 TB/s, 1,200 W).
MemoryGb = Annotated[float, bounded(1e-3, 1e5)]
BandwidthGbS = Annotated[float, bounded(1e-3, 1e6)]
PeakTflops = Annotated[float, bounded(1e-3, 1e7)]
InterconnectGbS = Annotated[float, bounded(0.0, 1e6)]
PowerW = Annotated[float, bounded(0.0, 1e6)]
PriceUsdPerHour = Annotated[float, bounded(0.0, 1e6)]
MIN_LINK_GB_S = 1e-3
AnyFiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
StrictInt = Annotated[int, Field(strict=True), JSON_INTEGER]
GpuCount = Annotated[int, Field(strict=True, ge=1, le=100_000), JSON_INTEGER]


class PriceInfo(BaseModel):
    """Where and when the indicative hourly price was seen."""

    model_config = ConfigDict(extra="forbid")

    date: str | None = None
    provider: str | None = None
    tier: str | None = None
    source: str | None = None


class TopologyIn(BaseModel):
    """Where an accelerator's peers are and each link's rate per direction (GB/s, decimal)."""

    model_config = ConfigDict(extra="forbid")

    scale_up_domain_gpus: GpuCount = Field(
        description="GPUs on the scale-up link (2 for a bridge pair, 8 HGX, 72 NVL72)."
    )
    scale_up_per_peer_gb_s: InterconnectGbS = Field(
        default=0.0,
        description="Switchless mesh (xGMI): one link's rate per peer; 0 for a switch.",
    )
    host_link_gb_s: InterconnectGbS = Field(
        default=0.0, description="PCIe per direction, for peers outside the domain (0: 32)."
    )
    gpus_per_node: GpuCount = 8
    scale_out_gb_s: InterconnectGbS = Field(
        default=0.0, description="Inter-node network per GPU per direction (0: unknown)."
    )


class AcceleratorFields(BaseModel):
    """Editable accelerator facts (dense peaks per dtype, decimal GB and GB/s)."""

    model_config = ConfigDict(extra="forbid")

    vendor: str = Field(min_length=1, max_length=100)
    name: str = Field(min_length=1, max_length=200)
    memory_gb: MemoryGb
    memory_type: str = Field(default="", max_length=50)
    memory_bandwidth_gb_s: BandwidthGbS
    peak_tflops: dict[Dtype, PeakTflops] = Field(min_length=1)
    measured_matmul_tflops: dict[Dtype, PeakTflops] | None = Field(
        default=None,
        description="Measured maximum achievable matmul TFLOP/s per dtype (MAMF), at most peak.",
    )
    measured_memory_bandwidth_gb_s: BandwidthGbS | None = Field(
        default=None,
        description="Best measured DRAM read bandwidth (a streaming benchmark), at most "
        "memory_bandwidth_gb_s; the engine's memory-bound kernels never run faster.",
    )
    interconnect_gb_s: InterconnectGbS = Field(
        default=0.0,
        description=f"Per device, per direction: 0 (no scale-up link) or at least {MIN_LINK_GB_S}.",
    )
    topology: TopologyIn | None = Field(
        default=None,
        description="Links by where the peers are; null: an 8-GPU domain when "
        "interconnect_gb_s > 0, else PCIe only.",
    )
    tdp_w: PowerW | None = None
    price_usd_per_hour: PriceUsdPerHour | None = None
    price: PriceInfo | None = None
    confidence: str | None = Field(default=None, max_length=20)
    notes: str = ""
    sources: list[SourceUrl] = Field(default_factory=list)
    field_sources: dict[str, list[str]] = Field(default_factory=dict)
    # Read-only fields (readOnly in the document), accepted and ignored so that a GET body
    # can be sent back on PUT.
    origin: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    version: StrictInt | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    created_at: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    updated_at: str | None = Field(default=None, exclude=True, json_schema_extra=READ_ONLY)
    ridge_point_flop_per_byte: dict[str, AnyFiniteFloat] | None = Field(
        default=None, exclude=True, json_schema_extra=READ_ONLY
    )

    @field_validator("interconnect_gb_s")
    @classmethod
    def _no_vanishing_link(cls, value: float) -> float:
        """Refuse a link so slow that transfer times overflow (0 means none: PCIe fallback)."""
        if 0 < value < MIN_LINK_GB_S:
            raise ValueError(f"must be 0 (no scale-up link) or at least {MIN_LINK_GB_S} GB/s")
        return value

    @model_validator(mode="after")
    def _measured_within_peak(self) -> AcceleratorFields:
        """Refuse a measured matmul rate for a dtype without a peak, or above that peak."""
        for dtype, tflops in (self.measured_matmul_tflops or {}).items():
            peak = self.peak_tflops.get(dtype)
            if peak is None:
                raise ValueError(f"measured_matmul_tflops.{dtype} needs peak_tflops.{dtype}")
            if tflops > peak:
                raise ValueError(f"measured_matmul_tflops.{dtype} exceeds peak_tflops.{dtype}")
        measured = self.measured_memory_bandwidth_gb_s
        if measured is not None and measured > self.memory_bandwidth_gb_s:
            raise ValueError("measured_memory_bandwidth_gb_s exceeds memory_bandwidth_gb_s")
        return self


class AcceleratorCreate(AcceleratorFields):
    """Body of POST /v1/accelerators."""

    id: Slug


class AcceleratorReplace(AcceleratorFields):
    """Body of PUT /v1/accelerators/{id}; ``id`` may be omitted but must match if given."""

    id: Slug | None = Field(
        default=None, json_schema_extra=READ_ONLY, description="The id in the path, if given."
    )


class Accelerator(BaseModel):
    """An accelerator as the API returns it."""

    id: str
    vendor: str
    name: str
    memory_gb: float
    memory_type: str
    memory_bandwidth_gb_s: float
    peak_tflops: dict[str, float]
    measured_matmul_tflops: dict[str, float] | None = None
    measured_memory_bandwidth_gb_s: float | None = None
    interconnect_gb_s: float
    topology: dict[str, float] | None = None
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
