"""Typed views (from docs/api.md) of responses that have no pydantic schema in the API."""

from __future__ import annotations

from typing import Any, TypedDict


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
