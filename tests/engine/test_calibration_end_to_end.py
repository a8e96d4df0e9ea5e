"""End-to-end stage: recovers known overheads from engine-generated runs; intervals and profile."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from service.engine.calibration.end_to_end import predict_runs
from service.engine.calibration.fit import fit
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.parsers import parse_csv
from service.engine.calibration.profile import initial_values
from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape

DATA = Path(__file__).parents[1] / "data" / "benchmarks"

H100 = Accelerator(
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM5 80GB",
    memory_gb=80.0,
    memory_bandwidth_gb_s=3350.0,
    peak_tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    interconnect_gb_s=450.0,
)
# Shapes from reference/models.md §1.
MODELS = {
    "llama-3-8b": ModelShape("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256),
    "llama-2-70b": ModelShape("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000),
    "qwen3-32b": ModelShape("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, qk_norm=True),
}
TRUE = {"layer_overhead_us": 30.0, "step_overhead_us": 500.0, "sequence_overhead_us": 40.0}


def _static_runs(noise: float, seed: int) -> list[StaticMeasurement]:
    shells = [
        StaticMeasurement(model, b, length, length, weights_dtype="fp16", tp=tp, latency_ms=1.0)
        for model, tp in (("llama-3-8b", 1), ("llama-3-8b", 2), ("llama-2-70b", 4))
        for b in (1, 16, 64)
        for length in (128, 1024)
    ]
    values = {**initial_values(DEFAULT_EFFICIENCY), **TRUE}
    clean = predict_runs(shells, H100, MODELS, values, DEFAULT_EFFICIENCY).predicted
    rng = np.random.default_rng(seed)
    noisy = clean * np.exp(rng.normal(0.0, noise, clean.size))
    return [replace(s, latency_ms=float(v)) for s, v in zip(shells, noisy, strict=True)]


def test_static_fit_recovers_known_overheads() -> None:
    runs = _static_runs(noise=0.01, seed=0)
    result = fit(runs, H100, MODELS, cross_validate=False)
    assert result.values["layer_overhead_us"] == pytest.approx(30.0, rel=0.2)
    assert result.values["step_overhead_us"] == pytest.approx(500.0, rel=0.35)
    assert result.values["sequence_overhead_us"] == pytest.approx(40.0, rel=0.2)
    q = result.quality["static.latency_ms"]
    assert q.after.mdape_pct < 2.0 < q.before.mdape_pct
    assert set(result.parameters) == set(TRUE)


def test_static_cross_validation_and_intervals() -> None:
    runs = _static_runs(noise=0.05, seed=1)
    result = fit(runs, H100, MODELS, cross_validate=True)
    q = result.quality["static.latency_ms"]
    assert q.held_out is not None and q.held_out.n == len(runs)
    assert q.held_out.mdape_pct < 15.0
    residuals = result.residuals["static.latency_ms"]
    assert residuals.size == len(runs)
    band = result.interval("static.latency_ms", np.array([100.0]))
    assert band.low[0] < 100.0 < band.high[0]
    moved = result.transfer_to(replace(H100, id="h200-sxm", memory_bandwidth_gb_s=4800.0))
    wider = moved.interval("static.latency_ms", np.array([100.0]))
    assert moved.transferred_from == "h100-sxm"
    assert wider.high[0] - wider.low[0] > band.high[0] - band.low[0]
    summary = result.fit_summary()
    assert summary["n_measurements"] == len(runs)


def test_unknown_models_are_skipped_with_a_warning() -> None:
    runs = [*_static_runs(0.0, 2)[:4], StaticMeasurement("qwen2-7b", 1, 128, 128, latency_ms=5.0)]
    result = fit(runs, H100, MODELS, cross_validate=False)
    assert any("qwen2-7b" in w for w in result.warnings)
    assert result.quality["static.latency_ms"].after.n == 4


def test_serving_fit_on_real_subset_improves_tpot() -> None:
    runs = [
        m
        for m in parse_csv((DATA / "h100_serving_qwen3_32b_subset.csv").read_text()).measurements
        if isinstance(m, ServingMeasurement) and m.backend == "trtllm"
    ]
    result = fit(runs, H100, MODELS, cross_validate=False)
    q = result.quality["serving.tpot_ms"]
    assert q.after.mdape_pct < q.before.mdape_pct
    assert "admission_wait_steps" in result.parameters
    fp8 = result.params_for("fp8", MODELS["qwen3-32b"], tp=2, batch_size=16)
    assert fp8.step_overhead_us == pytest.approx(
        result.values["step_overhead_us"] + 16 * result.values["sequence_overhead_us"]
    )


def test_interval_widens_outside_the_calibration_range() -> None:
    runs = _static_runs(noise=0.05, seed=3)
    result = fit(runs, H100, MODELS, cross_validate=True)
    inside = result.interval("static.latency_ms", 100.0, {"batch_size": 16})
    outside = result.interval("static.latency_ms", 100.0, {"batch_size": 1024})
    assert result.ranges["batch_size"].high == 64
    assert float(outside.high) > float(inside.high)
    assert float(outside.low) < float(inside.low)
