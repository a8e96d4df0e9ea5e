"""What every held-out section shares: the run type and the spec-sheet baseline."""

from __future__ import annotations

from collections.abc import Sequence

from service.engine.calibration.measurements import (
    ServingMeasurement,
    StaticMeasurement,
)
from service.engine.calibration.priors import prior_backend, with_engine_priors
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    EfficiencyParams,
    spec_sheet_efficiency,
)
from service.engine.hardware import Accelerator

PRIOR = DEFAULT_EFFICIENCY
Run = StaticMeasurement | ServingMeasurement


def spec_sheet(accelerator: Accelerator, runs: Sequence[Run]) -> EfficiencyParams:
    """What ``calibration: none`` gives a request naming the runs' backend (one backend)."""
    backend = prior_backend([r.backend for r in runs])
    return with_engine_priors(spec_sheet_efficiency(accelerator), backend)
