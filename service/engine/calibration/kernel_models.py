"""Predicted latency of kernel measurements (GEMM, attention, collectives) from the engine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
)
from service.engine.efficiency import EfficiencyParams
from service.engine.hardware import DTYPE_BYTES, Accelerator
from service.engine.kernels import (
    attention_decode_time_s,
    attention_prefill_time_s,
    collective_time_s,
    gemm_time_s,
)

KernelMeasurement = GemmMeasurement | AttentionMeasurement | CollectiveMeasurement


class KernelBatch:
    """Kernel measurements grouped into numpy columns so one prediction is a few array calls."""

    def __init__(self, items: Sequence[KernelMeasurement]) -> None:
        self.items = tuple(items)
        self.measured_ms = np.array([m.latency_ms for m in self.items], dtype=float)
        self._groups: list[tuple[tuple[str, str], NDArray[np.intp], dict[str, NDArray[np.float64]]]]
        self._groups = []
        keys: dict[tuple[str, str], list[int]] = {}
        for i, m in enumerate(self.items):
            keys.setdefault(_group_key(m), []).append(i)
        for key, idx in keys.items():
            rows = [self.items[i] for i in idx]
            cols = {
                name: np.array([float(getattr(r, name)) for r in rows])
                for name in _numeric_fields(key[0])
            }
            self._groups.append((key, np.array(idx, dtype=np.intp), cols))

    def __len__(self) -> int:
        return len(self.items)

    def kinds(self) -> NDArray[np.str_]:
        """Kind label of every measurement (gemm, attention_decode, ...), in input order."""
        out = np.empty(len(self.items), dtype=object)
        for key, idx, _ in self._groups:
            out[idx] = key[0]
        return out.astype(str)

    def predict_ms(self, accelerator: Accelerator, params: EfficiencyParams) -> NDArray[np.float64]:
        """Predicted latency in ms of every measurement with ``params``, in input order."""
        out = np.empty(len(self.items), dtype=float)
        for key, idx, cols in self._groups:
            out[idx] = 1e3 * _predict_group(key, cols, accelerator, params)
        return out


def _group_key(m: KernelMeasurement) -> tuple[str, str]:
    if isinstance(m, GemmMeasurement):
        return ("gemm", m.dtype)
    if isinstance(m, AttentionMeasurement):
        return (f"attention_{m.phase}", m.kv_dtype)
    return ("collective", m.op)


def _numeric_fields(kind: str) -> tuple[str, ...]:
    if kind == "gemm":
        return ("m", "n", "k")
    if kind.startswith("attention"):
        return ("batch_size", "context_tokens", "num_heads", "num_kv_heads", "head_dim")
    return ("num_gpus", "message_bytes")


def _predict_group(
    key: tuple[str, str],
    c: dict[str, NDArray[np.float64]],
    accelerator: Accelerator,
    params: EfficiencyParams,
) -> NDArray[np.float64]:
    kind, variant = key[0], key[1]
    if kind == "gemm":
        b = DTYPE_BYTES[variant]
        return gemm_time_s(
            c["m"],
            c["n"],
            c["k"],
            compute_dtype=variant,
            weight_bytes_per_element=b,
            activation_bytes_per_element=b,
            accelerator=accelerator,
            params=params,
        )
    if kind == "attention_decode":
        return attention_decode_time_s(
            c["batch_size"],
            c["context_tokens"],
            c["num_heads"],
            c["num_kv_heads"],
            c["head_dim"],
            kv_dtype=variant,
            accelerator=accelerator,
            params=params,
        )
    if kind == "attention_prefill":
        return attention_prefill_time_s(
            c["batch_size"],
            c["context_tokens"],
            c["num_heads"],
            c["num_kv_heads"],
            c["head_dim"],
            accelerator=accelerator,
            params=params,
        )
    # Kernel benchmarks time NCCL itself, never a serving engine's custom one-shot all-reduce.
    return collective_time_s(
        variant,
        c["num_gpus"],
        c["message_bytes"],
        accelerator=accelerator,
        params=params,
        one_shot=False,
    )
