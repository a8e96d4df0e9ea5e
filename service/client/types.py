"""Typed answers of the calibration endpoints (the API's own response schema)."""

from __future__ import annotations

from service.api.schemas.calibrations import CalibrationProfileOut

# A stored calibration profile, as POST /v1/calibrations and GET /v1/calibrations/{id} return it.
CalibrationProfile = CalibrationProfileOut
