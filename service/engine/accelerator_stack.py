"""Accelerator figures laid out per evaluated point, so many accelerators are scored in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from service.engine.hardware import Accelerator

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class AcceleratorStack:
    """Point ``j`` runs on ``accelerators[index[j]]``; every figure is an array over points.

    Stands in for one ``Accelerator`` wherever the kernel and memory formulas take one; the
    results broadcast against batch-size arrays of the same length.
    """

    accelerators: tuple[Accelerator, ...]
    index: IntArray
    memory_bandwidth_bytes_s: FloatArray
    capacity_bytes: FloatArray
    tdp_w: FloatArray
    # Per dtype group ("bf16", "fp8"): each point's GEMM compute efficiency relative to the
    # shared EfficiencyParams (members whose priors differ only there can share one pass).
    gemm_efficiency_scales: dict[str, FloatArray] = field(default_factory=dict, compare=False)
    _peaks: dict[str, FloatArray] = field(default_factory=dict, compare=False, repr=False)
    _links: dict[int, FloatArray] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        accelerators: Sequence[Accelerator],
        index: npt.ArrayLike,
        gemm_efficiency_scales: dict[str, FloatArray] | None = None,
    ) -> AcceleratorStack:
        """Lay out ``accelerators`` per point (``index`` names each point's accelerator)."""
        accs = tuple(accelerators)
        idx = np.asarray(index, dtype=np.intp)

        def per_point(values: list[float]) -> FloatArray:
            return np.asarray(values, dtype=np.float64)[idx]

        return cls(
            accelerators=accs,
            index=idx,
            memory_bandwidth_bytes_s=per_point([a.memory_bandwidth_bytes_s for a in accs]),
            capacity_bytes=per_point([a.memory_bytes for a in accs]),
            tdp_w=per_point([a.tdp_w for a in accs]),
            gemm_efficiency_scales=dict(gemm_efficiency_scales or {}),
        )

    def tiled(self, copies: int) -> AcceleratorStack:
        """Return the stack repeated ``copies`` times along the points (steps laid end to end)."""
        return AcceleratorStack.of(
            self.accelerators,
            np.tile(self.index, copies),
            {group: np.tile(scale, copies) for group, scale in self.gemm_efficiency_scales.items()},
        )

    @property
    def id(self) -> str:
        return ",".join(a.id for a in self.accelerators)

    def gemm_efficiency_scale(self, dtype_group: str) -> FloatArray | float:
        """Return each point's GEMM efficiency relative to the shared parameters (1 if equal)."""
        return self.gemm_efficiency_scales.get(dtype_group, 1.0)

    def peak_flops_s(self, dtype: str) -> FloatArray:
        """Return dense peak FLOP/s per point; UnsupportedDtypeError if any accelerator lacks it."""
        peak = self._peaks.get(dtype)
        if peak is None:
            values = [a.peak_flops_s(dtype) for a in self.accelerators]
            peak = np.asarray(values, dtype=np.float64)[self.index]
            self._peaks[dtype] = peak
        return peak

    def attention_peak_flops_s(self) -> FloatArray:
        """Return each point's 16-bit peak (bf16, or fp16 where bf16 is absent)."""
        peak = self._peaks.get("attention")
        if peak is None:
            values = [a.peak_flops_s(a.sixteen_bit_dtype()) for a in self.accelerators]
            peak = np.asarray(values, dtype=np.float64)[self.index]
            self._peaks["attention"] = peak
        return peak

    def send_bytes_s(self, first: int, second: int) -> FloatArray:
        """Return each point's rate of a send between two GPUs (``Accelerator.send_bytes_s``)."""
        values = [a.send_bytes_s(first, second) for a in self.accelerators]
        return np.asarray(values, dtype=np.float64)[self.index]

    def link_bytes_s(self, peers: int) -> FloatArray:
        """Return each point's per-direction link bandwidth for a collective over ``peers``."""
        rate = self._links.get(peers)
        if rate is None:
            values = [a.link_bytes_s(peers) for a in self.accelerators]
            rate = self._links[peers] = np.asarray(values, dtype=np.float64)[self.index]
        return rate
