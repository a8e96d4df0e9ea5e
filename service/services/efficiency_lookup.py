"""Resolve a request's ``calibration`` value into the efficiency parameters the engine uses.

The single extension point for calibration profiles: ``"none"`` is the spec-sheet roofline with
the default efficiency priors; ``"auto"`` will pick the newest profile for the accelerator and
backend (none exist yet, so it falls back to the priors); any other value is a profile id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.services.errors import NotFoundError

AUTO = "auto"
NONE = "none"


@dataclass(frozen=True, slots=True)
class ResolvedEfficiency:
    """Engine parameters and the profile they came from (``{"id", "name", "transferred_from"}``).

    ``calibration`` is None when the answer uses the uncalibrated priors.
    """

    params: EfficiencyParams
    calibration: dict[str, Any] | None


UNCALIBRATED = ResolvedEfficiency(params=DEFAULT_EFFICIENCY, calibration=None)


def resolve_efficiency(
    session: Session, accelerator_id: str, backend: str | None, calibration: str
) -> ResolvedEfficiency:
    """Return the efficiency parameters for ``calibration``; NotFoundError for an unknown id.

    No calibration profiles are stored yet: "auto" and "none" give the priors and every profile
    id is unknown. ``session``, ``accelerator_id`` and ``backend`` select the profile once they are.
    """
    if calibration in (AUTO, NONE):
        return UNCALIBRATED
    raise NotFoundError("calibration profile", calibration)
