"""Request and response bodies of /v1/calibrations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic.config import JsonDict

from service.api.schemas.common import Slug
from service.engine.calibration.measurements import (
    ARRIVAL_PROCESSES,
    COLLECTIVE_OPS,
    SERVING_LOAD_PATTERNS,
)
from service.engine.calibration.parsers import DTYPE_ALIASES
from service.engine.precision import ACTIVATION_DTYPES
from service.services.calibration_uploads import BACKEND_MAX_CHARS, BACKEND_PATTERN

Backend = Annotated[str, StringConstraints(pattern=BACKEND_PATTERN, max_length=BACKEND_MAX_CHARS)]
NAME_MAX_CHARS = 200  # calibration_profiles.name
Name = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX_CHARS)]
Version = Annotated[str, StringConstraints(max_length=100)]
_POSITIVE_INT: JsonDict = {"type": "integer", "minimum": 1}
_POSITIVE_NUMBER: JsonDict = {"type": "number", "exclusiveMinimum": 0}
# The dtype names a measurement may give (parsers.DTYPE_ALIASES maps spellings to them; tf32,
# an API dtype elsewhere, is not one a measurement names); activations: those a GEMM takes.
MEASUREMENT_DTYPES = sorted(set(DTYPE_ALIASES.values()))
_DTYPE: JsonDict = {"type": "string", "enum": [*MEASUREMENT_DTYPES]}
_ACTIVATION_DTYPE: JsonDict = {
    "type": "string",
    "enum": [d for d in MEASUREMENT_DTYPES if d in ACTIVATION_DTYPES],
}
_END_TO_END: JsonDict = {
    "model": {"type": "string", "minLength": 1, "description": "A catalog model id."},
    "precision": {
        "type": "object",
        "properties": {"weights": _DTYPE, "activations": _ACTIVATION_DTYPE, "kv_cache": _DTYPE},
    },
    "parallelism": {"type": "object", "properties": {"tp": _POSITIVE_INT, "pp": _POSITIVE_INT}},
    "input_tokens": _POSITIVE_INT,
    "output_tokens": _POSITIVE_INT,
    "backend": {"type": "string"},
}


def _kind(name: str, required: list[str], properties: JsonDict, **extra: Any) -> JsonDict:
    return {
        "type": "object",
        "title": f"{name.capitalize()}Measurement",
        "required": ["kind", *required],
        "properties": {"kind": {"const": name}, **properties},
        **extra,
    }


# One schema per kind, as parse_measurement_dicts reads them. Fields of other kinds are ignored
# with a warning (so additional properties are allowed); rules across fields (num_kv_heads
# divides num_heads, a model the catalog has) are checked by the service and answered with 422.
MEASUREMENT_SCHEMA: JsonDict = {
    "description": "One measurement: `kind` is gemm, attention, collective, static or serving; "
    "the other fields are those of its kind (docs/api.md, Calibration). A serving measurement "
    "may give `load_pattern` (closed_loop, the default; open_loop with `request_rate_per_s` and "
    "optional `arrival_process`/`burstiness`; offline). Unknown fields are ignored with a "
    "warning.",
    "oneOf": [
        _kind(
            "gemm",
            ["dtype", "m", "n", "k", "latency_ms"],
            {
                "dtype": _DTYPE,
                "m": _POSITIVE_INT,
                "n": _POSITIVE_INT,
                "k": _POSITIVE_INT,
                "latency_ms": _POSITIVE_NUMBER,
            },
        ),
        _kind(
            "attention",
            [
                "phase",
                "batch_size",
                "context_tokens",
                "num_heads",
                "num_kv_heads",
                "head_dim",
                "latency_ms",
            ],
            {
                "phase": {"type": "string", "enum": ["prefill", "decode"]},
                "batch_size": _POSITIVE_INT,
                "context_tokens": _POSITIVE_INT,
                "num_heads": _POSITIVE_INT,
                "num_kv_heads": _POSITIVE_INT,
                "head_dim": _POSITIVE_INT,
                "kv_dtype": _DTYPE,
                "latency_ms": _POSITIVE_NUMBER,
            },
        ),
        _kind(
            "collective",
            ["op", "num_gpus", "message_bytes", "latency_ms"],
            {
                "op": {"type": "string", "enum": list(COLLECTIVE_OPS)},
                "num_gpus": {"type": "integer", "minimum": 2},
                "message_bytes": _POSITIVE_NUMBER,
                "latency_ms": _POSITIVE_NUMBER,
            },
        ),
        _kind(
            "static",
            ["model", "batch_size", "input_tokens", "output_tokens"],
            {
                **_END_TO_END,
                "batch_size": _POSITIVE_INT,
                "latency_ms": _POSITIVE_NUMBER,
                "ttft_ms": _POSITIVE_NUMBER,
                "tpot_ms": _POSITIVE_NUMBER,
                "output_tokens_per_s": _POSITIVE_NUMBER,
                "total_tokens_per_s": _POSITIVE_NUMBER,
                # the batch is copies of one prompt decoded greedily (they route alike)
                "identical_prompts": {"type": "boolean"},
            },
            anyOf=[
                {"required": [name]}
                for name in (
                    "latency_ms",
                    "ttft_ms",
                    "tpot_ms",
                    "output_tokens_per_s",
                    "total_tokens_per_s",
                )
            ],
        ),
        _kind(
            "serving",
            ["model", "input_tokens", "output_tokens", "concurrency"],
            {
                **_END_TO_END,
                "concurrency": _POSITIVE_INT,
                "ttft_ms": _POSITIVE_NUMBER,
                "tpot_ms": _POSITIVE_NUMBER,
                "backend_version": {"type": "string"},
                "load_pattern": {"type": "string", "enum": list(SERVING_LOAD_PATTERNS)},
                "request_rate_per_s": _POSITIVE_NUMBER,
                "arrival_process": {"type": "string", "enum": ["", *ARRIVAL_PROCESSES]},
                "burstiness": _POSITIVE_NUMBER,
            },
            anyOf=[{"required": ["ttft_ms"]}, {"required": ["tpot_ms"]}],
        ),
    ],
}
Measurement = Annotated[dict[str, Any], WithJsonSchema(MEASUREMENT_SCHEMA)]


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
    """Body of POST /v1/calibrations as multipart/form-data (no other form fields)."""

    model_config = ConfigDict(extra="forbid")

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
    kernels_from: dict[str, str] = Field(
        default_factory=dict,
        description="Kernel group (gemm_bf16, gemm_fp8, attention_prefill, "
        "attention_decode, collective; profiles stored before groups: gemm, attention, "
        "collective) → id of the profile whose kernel efficiencies this one starts from: an "
        "upload without kernel measurements of that group builds on the newest profile of the "
        "accelerator fitted on them; empty when the upload measures every group or none was "
        "found.",
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
    visibility: Literal["published", "private"] = Field(
        default="published",
        description="published: every reader's; private: only the uploading API key's.",
    )
    format: str = Field(
        description="Upload format: json, vllm_bench_json or a CSV format; an upload of several "
        "files joins their formats with '+'."
    )
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


class CalibrationProfilesOut(BaseModel):
    """The 201 body of POST /v1/calibrations with split_by_backend=true: one profile per backend."""

    items: list[CalibrationProfileOut]
