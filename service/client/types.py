"""Typed views (from api.md) of responses that have no pydantic schema in the API."""

from __future__ import annotations

from typing import Any, TypedDict


class PlanConfiguration(TypedDict, total=False):
    """One ranked deployment configuration of a plan."""

    model: str
    accelerator: str
    parallelism: dict[str, int]
    precision: dict[str, str]
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s_per_gpu: float
    replicas: int
    gpus: int
    usd_per_hour: float
    usd_per_million_output_tokens: float
    calibration: Any


class PlanResponse(TypedDict, total=False):
    """Response of POST /v1/plans."""

    configurations: list[PlanConfiguration]
    frontier: dict[str, list[dict[str, Any]]]
    rejected: list[dict[str, Any]]


class Workload(TypedDict, total=False):
    """A workload preset of GET /v1/workloads."""

    id: str
    input_tokens: int
    output_tokens: int
    ttft_ms_max: float | None
    tpot_ms_max: float | None
    description: str


class CalibrationProfile(TypedDict, total=False):
    """A stored calibration profile."""

    id: str
    accelerator: str
    backend: str
    backend_version: str
    name: str
    created_at: str
    parameters: dict[str, Any]
    fit: dict[str, Any]
