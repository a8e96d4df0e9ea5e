"""End-to-end stage: recovers known overheads from engine-generated runs; intervals and profile."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from engine_refs import BENCHMARK_DATA, CALIBRATION_H100, CALIBRATION_MODELS

from service.catalog_files import load_model_records, model_from_record
from service.engine.calibration.end_to_end import precision_of, predict_runs
from service.engine.calibration.fit import CalibrationResult, fit
from service.engine.calibration.intervals import estimate_intervals, prediction_interval
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.parsers import parse_csv
from service.engine.calibration.priors import BACKEND_PRIORS
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    HARNESS_TERMS,
    SCHEDULER_TERMS,
    EfficiencyParams,
)
from service.engine.estimate import estimate
from service.engine.parallel import Parallelism
from service.engine.shapes import ModelShape

DATA, H100, MODELS = BENCHMARK_DATA, CALIBRATION_H100, CALIBRATION_MODELS
TRUE = {"layer_overhead_us": 30.0, "step_overhead_us": 500.0, "sequence_layer_overhead_us": 1.2}


def _static_runs(noise: float, seed: int) -> list[StaticMeasurement]:
    shells = [
        StaticMeasurement(model, b, length, length, weights_dtype="fp16", tp=tp, latency_ms=1.0)
        for model, tp in (("llama-3-8b", 1), ("llama-3-8b", 2), ("llama-2-70b", 4))
        for b in (1, 16, 64)
        for length in (128, 1024)
    ]
    clean = predict_runs(shells, H100, MODELS, DEFAULT_EFFICIENCY.replace(**TRUE)).predicted
    rng = np.random.default_rng(seed)
    noisy = clean * np.exp(rng.normal(0.0, noise, clean.size))
    return [replace(s, latency_ms=float(v)) for s, v in zip(shells, noisy, strict=True)]


def test_a_static_profile_asked_about_serving_keeps_its_engines_eager_floor() -> None:
    # TensorRT-LLM static batches never launch a serving step, so nothing fits the eager launch
    # floor; the profile keeps TensorRT-LLM's prior for it (and its per-sequence knee), as an
    # uncalibrated serving answer naming that engine does
    runs = [replace(r, backend="trtllm") for r in _static_runs(noise=0.0, seed=0)]
    result = fit(runs, H100, MODELS, cross_validate=False)
    trt = BACKEND_PRIORS["trtllm"]
    serving = result.params_for(gpus=2.0, backend="trtllm", mode="serving")
    assert serving.eager_layer_launch_us == trt["eager_layer_launch_us"].mean == 530.0
    assert serving.sequence_overhead_full_batch == trt["sequence_overhead_full_batch"].mean
    assert "eager_layer_launch_us" not in result.standard_errors
    # and a vLLM static profile asked about TensorRT-LLM serving takes TensorRT-LLM's terms
    vllm = fit([replace(r, backend="vllm") for r in runs], H100, MODELS, cross_validate=False)
    assert (
        vllm.efficiency.eager_layer_launch_us
        == BACKEND_PRIORS["vllm"]["eager_layer_launch_us"].mean
    )
    other = vllm.params_for(gpus=2.0, backend="trtllm", mode="serving")
    assert other.eager_layer_launch_us == 530.0
    assert other.sequence_overhead_full_batch == 32.0


def test_static_fit_recovers_known_overheads() -> None:
    runs = _static_runs(noise=0.01, seed=0)
    result = fit(runs, H100, MODELS, cross_validate=False)
    assert result.values["layer_overhead_us"] == pytest.approx(30.0, rel=0.2)
    assert result.values["step_overhead_us"] == pytest.approx(500.0, rel=0.35)
    assert result.values["sequence_layer_overhead_us"] == pytest.approx(1.2, rel=0.2)
    q = result.quality["static.latency_ms"]
    assert q.after.mdape_pct < 2.0 < q.before.mdape_pct
    # fitted too; the true value is 0, which the runs at tp 1, 2 and 4 hold it near
    assert set(result.parameters) == {*TRUE, "sequence_layer_sharded_us"}
    assert result.values["sequence_layer_sharded_us"] < 0.3


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
    # the profile is one EfficiencyParams: estimate() with it reproduces the fit's predictions
    first = runs[0]
    direct = estimate(
        MODELS["qwen3-32b"],
        H100,
        precision=precision_of(first),
        parallelism=Parallelism(tp=first.tp),
        input_tokens=first.input_tokens,
        output_tokens=first.output_tokens,
        batch_sizes=[first.concurrency],
        mode="serving",
        params=result.efficiency,
    )
    pred = result.predict([first], H100, MODELS)
    by_metric = dict(zip(pred.metric.tolist(), pred.predicted.tolist(), strict=True))
    assert float(direct.tpot_ms[0]) == pytest.approx(by_metric["serving.tpot_ms"])


def test_interval_widens_outside_the_calibration_range() -> None:
    runs = _static_runs(noise=0.05, seed=3)
    result = fit(runs, H100, MODELS, cross_validate=True)
    inside = result.interval("static.latency_ms", 100.0, {"batch_size": 16})
    outside = result.interval("static.latency_ms", 100.0, {"batch_size": 1024})
    assert result.ranges["batch_size"].high == 64
    assert float(outside.high) > float(inside.high)
    assert float(outside.low) < float(inside.low)


def test_profile_round_trips_through_json_and_gives_intervals() -> None:
    runs = _static_runs(noise=0.05, seed=4)
    result = fit(runs, H100, MODELS, cross_validate=True)
    stored = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    back = CalibrationResult.from_dict(stored)
    assert back.efficiency == result.efficiency
    assert back.parameters == result.parameters
    assert back.fit_summary() == result.fit_summary()
    assert back.ranges == result.ranges
    predicted = np.array([50.0, 100.0])
    band = result.interval("static.latency_ms", predicted, {"batch_size": [16, 1024]})
    again = back.interval("static.latency_ms", predicted, {"batch_size": [16, 1024]})
    np.testing.assert_allclose(again.low, band.low)
    np.testing.assert_allclose(again.high, band.high)
    # the pure function on the stored dict: a static profile's TTFT falls back to its latency
    pure = prediction_interval(
        stored, "ttft_ms", predicted, mode="static", features={"batch_size": [16, 1024]}
    )
    np.testing.assert_allclose(pure.low, band.low)
    moved = prediction_interval(stored, "ttft_ms", predicted, mode="static", transferred=True)
    assert np.all(moved.high - moved.low > pure.high[0] - pure.low[0] - 1e-9)
    # an estimate run with the stored parameters gets one interval per point and metric
    est = estimate(
        MODELS["llama-3-8b"],
        H100,
        input_tokens=512,
        output_tokens=128,
        batch_sizes=[1, 8, 64],
        params=EfficiencyParams.from_dict(stored["parameters"]),
    )
    bands = estimate_intervals(stored, est)
    for metric in ("ttft_ms", "tpot_ms"):
        value = getattr(est, metric)
        assert bands[metric].low.shape == value.shape
        assert np.all(bands[metric].low < value) and np.all(value < bands[metric].high)


def test_open_loop_runs_neither_use_nor_move_the_closed_loop_harness_terms() -> None:
    """Harness terms (admission wait, queue share) are fitted on closed-loop TTFT only; the same
    runs recorded as an open loop are predicted with those terms at their priors."""
    closed = [
        m
        for m in parse_csv((DATA / "h100_serving_qwen3_32b_subset.csv").read_text()).measurements
        if isinstance(m, ServingMeasurement) and m.backend == "trtllm"
    ]
    opened = [
        replace(m, load_pattern="open_loop", request_rate_per_s=4.0, arrival_process="poisson")
        for m in closed
    ]
    fitted = fit(closed, H100, MODELS, cross_validate=False)
    terms = [t for t in HARNESS_TERMS if t not in SCHEDULER_TERMS]  # the fitted ones
    moved = [t for t in terms if fitted.parameters[t] != getattr(DEFAULT_EFFICIENCY, t)]
    assert moved, "closed-loop TTFT moves the harness terms"
    engine = fitted.efficiency.replace(**{t: getattr(DEFAULT_EFFICIENCY, t) for t in terms})
    as_open = predict_runs(opened[:3], H100, MODELS, fitted.efficiency).predicted
    expected = predict_runs(closed[:3], H100, MODELS, engine).predicted
    assert as_open == pytest.approx(expected, rel=1e-12)
    only_open = fit(opened, H100, MODELS, cross_validate=False)
    for t in terms:
        assert only_open.parameters[t] == pytest.approx(getattr(DEFAULT_EFFICIENCY, t), abs=1e-5)


def test_offline_runs_are_predicted_as_an_offline_queue() -> None:
    """A run recorded as offline (all requests at once) is predicted as estimate() answers
    load_pattern="offline" (engine terms, half the closed loop's queue wait)."""
    run = ServingMeasurement(
        model="qwen3-32b", input_tokens=1024, output_tokens=128, concurrency=2000,
        ttft_ms=60000.0, tpot_ms=40.0, load_pattern="offline", tp=2,
    )  # fmt: skip
    params = DEFAULT_EFFICIENCY.replace(admission_wait_steps=12.0, prefill_queue_share=0.4)
    got = predict_runs([run], H100, MODELS, params)
    direct = estimate(
        MODELS["qwen3-32b"],
        H100,
        precision=precision_of(run),
        parallelism=Parallelism(tp=2),
        input_tokens=1024,
        output_tokens=128,
        batch_sizes=[2000],
        mode="serving",
        params=params,
        load_pattern="offline",
    )
    by_metric = dict(zip(got.metric.tolist(), got.predicted.tolist(), strict=True))
    assert by_metric["serving.ttft_ms"] == pytest.approx(float(direct.ttft_ms[0]))
    assert by_metric["serving.tpot_ms"] == pytest.approx(float(direct.tpot_ms[0]))
    closed = predict_runs([replace(run, load_pattern="closed_loop")], H100, MODELS, params)
    closed_ttft = dict(zip(closed.metric.tolist(), closed.predicted.tolist(), strict=True))
    assert closed_ttft["serving.ttft_ms"] > by_metric["serving.ttft_ms"]


def test_runs_far_off_the_engine_model_are_left_out_with_a_warning() -> None:
    """Two static runs 5x slower / faster than the engine makes them: not measuring the engine.

    The clean runs scatter by 1%, so a 5x miss is ~160 σ; without the screen soft-L1 would still
    let them pull the overheads.
    """
    clean = _static_runs(noise=0.01, seed=0)
    bad = [replace(clean[0], latency_ms=clean[0].latency_ms * 5.0)]
    bad.append(replace(clean[7], latency_ms=clean[7].latency_ms / 5.0))
    result = fit([*clean, *bad], H100, MODELS, cross_validate=False)
    assert any(w.startswith("2 runs left out of the fit") for w in result.warnings)
    assert result.quality["static.latency_ms"].after.n == len(clean)
    assert result.values["layer_overhead_us"] == pytest.approx(30.0, rel=0.2)
    assert result.values["step_overhead_us"] == pytest.approx(500.0, rel=0.35)


def test_closed_loop_ttft_beyond_what_the_engine_can_queue_is_left_out() -> None:
    """A closed-loop TTFT 20x what the engine makes a client wait with every other prompt ahead.

    At concurrency 16 the engine can queue a client behind at most the 15 other prompts
    (prefill_queue_share = 1); a TTFT 20x the engine-generated one (share 0.5, as fitted on the
    shipped runs) is beyond 3x that bound, so its time was spent in the load generator. A run
    with twice the TTFT stays in.
    """
    shells = [
        ServingMeasurement("llama-3-8b", s_in, 128, c, ttft_ms=1.0, tpot_ms=1.0, tp=1)
        for s_in in (512, 2048)
        for c in (4, 16, 64)
    ]
    truth = DEFAULT_EFFICIENCY.replace(**TRUE, prefill_queue_share=0.5, admission_wait_steps=4.0)
    pred = predict_runs(shells, H100, MODELS, truth)
    rows = zip(pred.run, pred.metric, pred.predicted, strict=True)
    value = {(int(r), str(m)): float(v) for r, m, v in rows}
    runs = [
        replace(s, ttft_ms=value[(i, "serving.ttft_ms")], tpot_ms=value[(i, "serving.tpot_ms")])
        for i, s in enumerate(shells)
    ]
    runs[1] = replace(runs[1], ttft_ms=runs[1].ttft_ms * 20.0)  # 512 in, concurrency 16
    runs[4] = replace(runs[4], ttft_ms=runs[4].ttft_ms * 2.0)  # 2048 in, concurrency 16
    result = fit(runs, H100, MODELS, cross_validate=False)
    left_out = [w for w in result.warnings if "left out of the fit" in w]
    assert len(left_out) == 1 and left_out[0].startswith("1 run left out")
    assert "llama-3-8b tp1 512/128 concurrency 16" in left_out[0]
    assert result.quality["serving.ttft_ms"].after.n == len(runs) - 1


def _gpt_oss() -> dict[str, ModelShape]:
    (record,) = [r for r in load_model_records() if r["id"] == "gpt-oss-120b"]
    return {"gpt-oss-120b": model_from_record(record)}


def test_shipped_gpt_oss_runs_whose_load_generator_stalled_are_left_out() -> None:
    """gpt-oss-120b at concurrency 512 (benchmarks/data/h100): TTFT of 20–460 s at TPOT no higher
    than at concurrency 4, which no engine state explains; the sound runs (concurrency <= 64)
    all stay in.
    """
    path = Path(__file__).parents[2] / "benchmarks" / "data" / "h100" / "serving_gpt_oss_120b.csv"
    parsed = parse_csv(path.read_text())
    runs = [
        replace(m, model="gpt-oss-120b", activations_dtype="bf16")
        for m in parsed.measurements
        if isinstance(m, ServingMeasurement)
    ]
    result = fit(runs, H100, {**MODELS, **_gpt_oss()}, cross_validate=False)
    (warning,) = [w for w in result.warnings if "left out of the fit" in w]
    left_out = int(warning.split()[0])
    sound = sum(r.concurrency <= 64 for r in runs)
    assert 5 <= left_out <= len(runs) - sound
    assert result.quality["serving.tpot_ms"].after.n >= sound
    assert "concurrency 512" in warning and "concurrency 64" not in warning


def test_a_queued_ttft_is_banded_mostly_by_the_tpot_it_waits_on() -> None:
    """An offline queue's TTFT is a wait for slots, a multiple of requests' decoding: its band
    takes the TPOT's relative width, not the closed-loop TTFT's (intervals.estimate_intervals)."""
    runs = [
        m
        for m in parse_csv((DATA / "h100_serving_qwen3_32b_subset.csv").read_text()).measurements
        if isinstance(m, ServingMeasurement) and m.backend == "trtllm"
    ]
    stored = fit(runs, H100, MODELS, cross_validate=True).to_dict()
    params = EfficiencyParams.from_dict(stored["parameters"])
    shared = {"input_tokens": 512, "output_tokens": 1024, "mode": "serving", "params": params}
    queued = estimate(
        MODELS["qwen3-32b"], H100, batch_sizes=[20000.0], load_pattern="offline", **shared
    )
    assert queued.queue_wait_ms[0] > 0.95 * queued.ttft_ms[0]
    # prompts three doublings shorter than any fitted run: the measured TTFT spread widens
    # the prompt work only, the queue of decoding keeps the TPOT's band
    outside = {"ttft_ms": {"length_below": 3.0}, "tpot_ms": {}}
    bands = estimate_intervals(stored, queued, extrapolating=outside)
    width = {m: bands[m].high[0] / getattr(queued, m)[0] for m in ("ttft_ms", "tpot_ms")}
    low = {m: bands[m].low[0] / getattr(queued, m)[0] for m in ("ttft_ms", "tpot_ms")}
    # what the TTFT's band adds to the TPOT's is its own part's (about 1% of a request's
    # service here), at that part's widened band
    assert width["ttft_ms"] == pytest.approx(width["tpot_ms"], rel=0.1)
    assert low["ttft_ms"] == pytest.approx(low["tpot_ms"], rel=0.1)
    # without a queue the TTFT keeps its own band, widened for the prompt length
    alone = estimate(MODELS["qwen3-32b"], H100, batch_sizes=[1.0], **shared)
    band = estimate_intervals(stored, alone, extrapolating=outside)["ttft_ms"]
    assert band.high[0] / alone.ttft_ms[0] > 2.0 * width["ttft_ms"]
