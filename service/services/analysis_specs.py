"""What an analysis request asks for: its target and the intensity and estimate specs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.engine.backend_names import canonical_backend
from service.engine.hardware import Accelerator
from service.engine.parallel import SINGLE_GPU, Parallelism
from service.engine.precision import BF16, Precision
from service.engine.shapes import ModelShape
from service.services.traffic import TrafficRequest


@dataclass(frozen=True, slots=True)
class AnalysisTarget:
    """What is analysed: model, accelerator, numeric format, layout and calibration choice."""

    model: str
    accelerator: str
    precision: Precision = BF16
    parallelism: Parallelism = SINGLE_GPU
    backend: str | None = None
    calibration: str = "auto"
    dp: int = 1  # data-parallel replicas of the whole layout (service.engine.replicas)

    def __post_init__(self) -> None:
        # one spelling of the engine, so that profiles, priors and defaults match it
        if self.backend is not None:
            object.__setattr__(self, "backend", canonical_backend(self.backend))

    def precision_on(self, model: ModelShape, accelerator: Accelerator) -> Precision:
        """The precision asked for, its ``native`` and ``auto`` dtypes resolved as the target's
        backend runs them (the KV cache beside fp8 weights depends on the engine)."""
        return self.precision.resolved(model, accelerator, self.backend)


@dataclass(frozen=True, slots=True)
class IntensitySpec:
    """One step to tabulate operator by operator."""

    target: AnalysisTarget
    phase: str
    batch_size: int
    context_tokens: int


@dataclass(frozen=True, slots=True)
class EstimateSpec:
    """One sweep over batch sizes (static) or concurrencies (serving)."""

    target: AnalysisTarget
    input_tokens: int
    output_tokens: int
    batch_sizes: tuple[int, ...]
    mode: str = "static"
    price_usd_per_hour: float | None = None
    traffic: TrafficRequest | None = None
    load_pattern: str = "closed_loop"  # serving only (engine.estimate.LOAD_PATTERNS)

    @property
    def group_key(self) -> tuple[Any, ...]:
        """Return everything but the batch sizes: specs sharing it can run as one engine call."""
        return (
            self.target,
            self.input_tokens,
            self.output_tokens,
            self.mode,
            self.price_usd_per_hour,
            self.traffic,
            self.load_pattern,
        )
