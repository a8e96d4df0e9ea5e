"""Request and response bodies of /v1/calibrations."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.api.schemas.common import Slug

Backend = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=50)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Version = Annotated[str, StringConstraints(max_length=100)]
Measurement = Annotated[
    dict[str, Any],
    Field(
        description="One measurement: `kind` is gemm, attention, collective, static or serving; "
        "the other fields are those of its kind (api.md, Calibration). Unknown fields are "
        "ignored with a warning."
    ),
]


class CalibrationMetadata(BaseModel):
    """What a profile is for (JSON body fields, form fields or query parameters)."""

    model_config = ConfigDict(extra="forbid")

    accelerator: Slug
    name: Name | None = Field(default=None, description="Default: named after the upload format.")
    backend: Backend | None = Field(default=None, description="e.g. vllm, sglang, trtllm.")
    backend_version: Version | None = None


class CalibrationCreate(CalibrationMetadata):
    """Body of POST /v1/calibrations as JSON."""

    measurements: list[Measurement] = Field(min_length=1)


class CalibrationUploadForm(BaseModel):
    """Body of POST /v1/calibrations as multipart/form-data."""

    file: bytes = Field(
        description="A benchmark CSV (columns of the H100 tables, Argonne or static runs) or a "
        "`vllm bench serve --save-result` JSON file; the format is detected from the content."
    )
    accelerator: Slug
    name: Name | None = None
    backend: Backend | None = None
    backend_version: Version | None = None


class ErrorStatsOut(BaseModel):
    """Absolute percentage error of predictions against measurements."""

    n: int
    mdape_pct: float | None = Field(description="Median absolute percentage error.")
    mape_pct: float | None = Field(description="Mean absolute percentage error.")


class MetricFitOut(BaseModel):
    """Error of one kind and metric: spec-sheet roofline, fitted, and held out of the fit."""

    before: ErrorStatsOut
    after: ErrorStatsOut
    held_out: ErrorStatsOut | None = Field(
        description="Cross-validated: each measurement predicted by a fit that did not see it."
    )


class ParameterShiftOut(BaseModel):
    """How far the end-to-end runs moved one engine parameter from its backend prior."""

    prior: float
    prior_sd: float
    fitted: float
    standard_error: float | None
    shift_prior_sd: float = Field(description="(fitted − prior) / prior_sd.")


class FitOut(BaseModel):
    """Fit quality of a profile."""

    n_measurements: int
    n_by_kind: dict[str, int]
    metrics: dict[str, MetricFitOut] = Field(
        description='Keyed "<kind>.<metric>", e.g. "serving.tpot_ms", "gemm_bf16.latency_ms".'
    )
    prior_backend: str | None = Field(
        default=None,
        description="Prior set the end-to-end fit shrank toward: vllm, sglang, trtllm or "
        "generic; null without end-to-end runs.",
    )
    parameter_shifts: dict[str, ParameterShiftOut] = Field(
        default_factory=dict, description="Per fitted end-to-end parameter (unit in its name)."
    )
    domain: dict[str, Any] | None = Field(
        default=None,
        description="What the end-to-end stage was fitted on: accelerator, backends, models "
        "with traits (kind dense/moe/mla, layers, hidden_size), precisions, modes, ranges.",
    )
    harness_terms: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Load-generator terms by load pattern (closed_loop); applied only to "
        "estimates of that pattern, never as engine behaviour.",
    )


class CalibrationProfileOut(BaseModel):
    """A stored, immutable calibration profile."""

    id: str
    accelerator: str
    backend: str | None
    backend_version: str | None
    name: str
    version: int = Field(description="1, 2, ... per (accelerator, backend, name).")
    created_at: str
    format: str = Field(description="Upload format: json, vllm_bench_json or a CSV format.")
    n_measurements: int
    parameters: dict[str, float] = Field(
        description="Fitted efficiencies (fractions) and overheads, each named with its unit."
    )
    standard_errors: dict[str, float | None] = Field(
        description="Standard error of each fitted parameter, same units."
    )
    fit: FitOut
    intervals: dict[str, Any] = Field(
        description="How estimates get their 80% TTFT/TPOT intervals from held-out residuals."
    )
    warnings: list[str]
