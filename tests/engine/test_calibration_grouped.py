"""Grouped run predictions equal per-run estimate() calls; the bilinear response and CV folds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from engine_refs import CALIBRATION_H100, CALIBRATION_MODELS

from service.engine.calibration import response
from service.engine.calibration.end_to_end import (
    QUEUE_NAMES,
    STATIC_NAMES,
    fit_end_to_end,
    group_of,
    precision_of,
    predict_runs,
)
from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.calibration.quality import group_splits, merged_group_splits
from service.engine.calibration.run_predictor import RunPredictor
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.estimate import estimate
from service.engine.parallel import Parallelism

H100 = CALIBRATION_H100
MODELS = {name: CALIBRATION_MODELS[name] for name in ("llama-3-8b", "qwen3-32b")}
TRUE = {
    "layer_overhead_us": 20.0,
    "step_overhead_us": 400.0,
    "sequence_layer_overhead_us": 0.8,
    "sequence_layer_sharded_us": 1.6,  # the runs span tp 1-4, which tells it from the above
    "admission_wait_steps": 3.0,
    "prefill_queue_ln_prompts": 0.5,
}
TRUE_PARAMS = DEFAULT_EFFICIENCY.replace(**TRUE)
Run = StaticMeasurement | ServingMeasurement


def _shells() -> list[Run]:
    """Runs over two models, both modes, layouts, dtypes, lengths and batch sizes (values 1)."""
    runs: list[Run] = [
        StaticMeasurement("llama-3-8b", b, n_in, n_out, weights_dtype="fp16", tp=tp, latency_ms=1.0)
        for tp in (1, 2)
        for n_in, n_out in ((128, 128), (1024, 256))
        for b in (1, 8, 64)
    ]
    runs.append(StaticMeasurement("llama-3-8b", 4, 512, 64, ttft_ms=1.0, tpot_ms=1.0))
    runs += [
        ServingMeasurement("qwen3-32b", n_in, n_out, c, 1.0, 1.0, weights_dtype=dtype, tp=tp)
        for dtype, tp in (("bf16", 2), ("bf16", 4), ("fp8", 2))
        for n_in, n_out in ((1000, 1000), (8000, 1000))
        for c in (1, 16, 256)
    ]
    return runs


def _measured(noise: float, seed: int) -> list[Run]:
    """The shells with values the engine gives at TRUE, times log-normal noise."""
    shells = _shells()
    clean = predict_runs(shells, H100, MODELS, DEFAULT_EFFICIENCY.replace(**TRUE))
    rng = np.random.default_rng(seed)
    noisy = clean.predicted * np.exp(rng.normal(0.0, noise, clean.predicted.size))
    values: dict[int, dict[str, float]] = {}
    for run, metric, value in zip(clean.run, clean.metric, noisy, strict=True):
        values.setdefault(int(run), {})[str(metric).split(".")[1]] = float(value)
    out: list[Run] = []
    for i, r in enumerate(shells):
        v = values[i]
        if isinstance(r, StaticMeasurement):
            out.append(
                replace(
                    r,
                    latency_ms=v.get("latency_ms"),
                    ttft_ms=v.get("ttft_ms"),
                    tpot_ms=v.get("tpot_ms"),
                )
            )
        else:
            out.append(replace(r, ttft_ms=v["ttft_ms"], tpot_ms=v["tpot_ms"]))
    return out


def _one_by_one(run: Run, params: EfficiencyParams) -> dict[str, float]:
    """Every output of one run from its own estimate() call."""
    static = isinstance(run, StaticMeasurement)
    result = estimate(
        MODELS[run.model],
        H100,
        precision=precision_of(run),
        parallelism=Parallelism(tp=run.tp, pp=run.pp),
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        batch_sizes=[run.batch_size if isinstance(run, StaticMeasurement) else run.concurrency],
        mode="static" if static else "serving",
        params=params,
    )
    return {
        "ttft_ms": float(result.ttft_ms[0]),
        "tpot_ms": float(result.tpot_ms[0]),
        "e2e_latency_ms": float(result.e2e_latency_ms[0]),
        "running_batch_size": float(result.running_batch_size[0]),
    }


def test_running_batches_are_what_each_run_estimate_holds_at_once() -> None:
    """The load an estimate checks against a profile's domain: a static run's batch; a serving
    run's clients, capped by KV room (256 Qwen3-32B clients of 9,000 tokens on two H100s)."""
    runs = _shells()
    running = RunPredictor(runs, H100, MODELS).running_batches()
    single = [_one_by_one(r, TRUE_PARAMS)["running_batch_size"] for r in runs]
    np.testing.assert_array_equal(running, single)
    for r, held in zip(runs, running, strict=True):
        if isinstance(r, StaticMeasurement):
            assert held == r.batch_size
    capped = [held < r.concurrency for r, held in zip(runs, running, strict=True)
              if isinstance(r, ServingMeasurement)]  # fmt: skip
    assert any(capped) and not all(capped)


@pytest.mark.parametrize("params", [DEFAULT_EFFICIENCY, DEFAULT_EFFICIENCY.replace(**TRUE)])
def test_grouped_prediction_equals_per_run_estimate(params: EfficiencyParams) -> None:
    runs = _shells()
    predictor = RunPredictor(runs, H100, MODELS)
    # one engine pass per (model, precision, layout, mode): fp16 tp1/tp2, bf16, 3 serving
    assert len(predictor.stacks) == 6
    grouped = predictor.predict(params)
    single = np.array(
        [_one_by_one(runs[t.run], params)[t.output] for t in predictor.targets], dtype=float
    )
    assert grouped.shape == single.shape == (len(predictor.targets),)
    np.testing.assert_allclose(grouped, single, rtol=1e-12)
    # predict_runs goes through the same grouping, one entry per measured metric
    via_api = predict_runs(runs, H100, MODELS, params)
    np.testing.assert_allclose(via_api.predicted, single, rtol=1e-12)
    assert set(via_api.metric.tolist()) == {
        "static.latency_ms",
        "static.ttft_ms",
        "static.tpot_ms",
        "serving.ttft_ms",
        "serving.tpot_ms",
    }


def test_bilinear_response_matches_the_engine_everywhere() -> None:
    predictor = RunPredictor(_shells(), H100, MODELS)
    centre = DEFAULT_EFFICIENCY.to_dict()
    resp = response.build(predictor, centre, STATIC_NAMES, QUEUE_NAMES)
    rng = np.random.default_rng(7)
    for _ in range(3):
        point = dict(
            centre,
            layer_overhead_us=rng.uniform(0.0, 100.0),
            step_overhead_us=rng.uniform(0.0, 3000.0),
            sequence_layer_overhead_us=rng.uniform(0.0, 5.0),
            sequence_layer_sharded_us=rng.uniform(0.0, 5.0),
            admission_wait_steps=rng.uniform(0.0, 20.0),
            # at most 1: no more prompts ahead than there are (serving.py's cap, where the
            # response bends, is not reached); the queue share, which no fit moves, stays
            prefill_queue_ln_prompts=rng.uniform(0.0, 1.0),
        )
        engine = predictor.predict(EfficiencyParams.from_dict(point))
        x, q = resp.split(point)
        np.testing.assert_allclose(resp.predict(x, q), engine, rtol=1e-9)
        assert resp.max_log_error(engine, point) < 1e-9
    # a point the response does not describe is detected
    moved = dict(centre, attention_kernel_latency_us=centre["attention_kernel_latency_us"] + 50)
    engine = predictor.predict(EfficiencyParams.from_dict(moved))
    assert resp.max_log_error(engine, moved) > 1e-6


def test_fit_recovers_serving_terms_from_engine_generated_runs() -> None:
    runs = _measured(noise=0.0, seed=0)
    fitted, se, quality, _ = fit_end_to_end(
        runs, H100, MODELS, DEFAULT_EFFICIENCY.to_dict(), cross_validate=False
    )
    for name, value in TRUE.items():
        assert fitted[name] == pytest.approx(value, rel=1e-3, abs=1e-3)
    assert set(se) == {*TRUE, "eager_layer_launch_us"}
    assert quality["serving.ttft_ms"].after.mdape_pct < 0.1


def test_fit_recovers_the_eager_launch_floor_where_prompt_steps_reach_it() -> None:
    """Short prompts at tp 4 and 8 run below 64 layers · 700 µs of GPU work: the floor binds
    in their mixed steps (not at tp 1 or for long prompts), and the fit finds it from a start
    far from it (the TensorRT-LLM prior, 530 µs)."""
    true = {**TRUE, "eager_layer_launch_us": 700.0}
    shells = [
        ServingMeasurement("qwen3-32b", n_in, 128, c, 1.0, 1.0, tp=tp, backend="trtllm")
        for tp in (1, 4, 8)
        for n_in in (256, 1024, 4096)
        for c in (8, 32, 64)
    ]
    clean = predict_runs(shells, H100, MODELS, DEFAULT_EFFICIENCY.replace(**true))
    runs = []
    for i, shell in enumerate(shells):
        ttft, tpot = clean.predicted[clean.run == i]
        runs.append(replace(shell, ttft_ms=float(ttft), tpot_ms=float(tpot)))
    without = predict_runs(shells, H100, MODELS, DEFAULT_EFFICIENCY.replace(**TRUE))
    assert np.max(clean.predicted / without.predicted) > 1.2  # the floor matters in these runs
    fitted, _, quality, _ = fit_end_to_end(
        runs, H100, MODELS, DEFAULT_EFFICIENCY.to_dict(), cross_validate=False
    )
    assert fitted["eager_layer_launch_us"] == pytest.approx(700.0, rel=0.02)
    # one model: per-step and per-layer overheads trade off, but the runs are reproduced
    assert quality["serving.tpot_ms"].after.mdape_pct < 0.5


def test_held_out_predictions_ignore_their_own_measurements() -> None:
    runs = _measured(noise=0.05, seed=1)
    start = DEFAULT_EFFICIENCY.to_dict()
    _, _, _, base = fit_end_to_end(runs, H100, MODELS, start, cross_validate=True)
    held_group = group_of(runs[-1])  # serving, fp8, tp2
    scaled = [
        replace(r, ttft_ms=2.0 * r.ttft_ms, tpot_ms=2.0 * r.tpot_ms)
        if isinstance(r, ServingMeasurement)
        and group_of(r) == held_group
        and r.ttft_ms is not None
        and r.tpot_ms is not None
        else r
        for r in runs
    ]
    _, _, _, moved = fit_end_to_end(scaled, H100, MODELS, start, cross_validate=True)
    serving = [r for r in runs if isinstance(r, ServingMeasurement)]
    mine = np.array([group_of(r) == held_group for r in serving])
    for metric in ("serving.ttft_ms", "serving.tpot_ms"):
        shift = moved[metric] - base[metric]
        # residual log(meas/pred): the held-out group's prediction did not move, only its data
        np.testing.assert_allclose(shift[mine], np.log(2.0), atol=1e-6)
        # the other groups' folds trained on the changed data, so theirs did move
        assert np.max(np.abs(shift[~mine])) > 1e-3


def test_merged_group_splits_partition_whole_groups() -> None:
    labels = ["a"] * 5 + ["b"] * 3 + ["c"] * 4 + ["d"] + ["e"] * 2 + ["a"]
    few = merged_group_splits(labels, max_folds=10)
    assert [t.tolist() for _, t in few] == [t.tolist() for _, (_, t) in group_splits(labels)]
    folds = merged_group_splits(labels, max_folds=3)
    assert len(folds) == 3
    tests = np.concatenate([t for _, t in folds])
    assert sorted(tests.tolist()) == list(range(len(labels)))
    for train, test in folds:
        assert set(train.tolist()).isdisjoint(test.tolist())
        assert len(train) + len(test) == len(labels)
        in_test = {labels[i] for i in test}
        assert all(labels[i] not in in_test for i in train)  # groups are never split
    # largest groups first, each into the emptiest fold: a(6) | c(4) | b(3), then e, d
    assert [sorted({labels[i] for i in t}) for _, t in folds] == [["a"], ["c", "d"], ["b", "e"]]
    assert [t.tolist() for _, t in merged_group_splits(labels, 3)] == [t.tolist() for _, t in folds]
    assert merged_group_splits(["a", "a"], 5) == []


def test_an_unset_kv_cache_is_fp8_beside_fp8_activations() -> None:
    """W8A8 runs that do not state their cache dtype read it as fp8; weight-only and 16-bit
    runs keep bf16 (or their weights' 16-bit dtype); a stated dtype always wins."""
    base = ServingMeasurement("qwen3-32b", 1024, 128, 8, ttft_ms=1.0, tpot_ms=1.0)
    w8a8 = replace(base, weights_dtype="fp8", activations_dtype="fp8")
    assert precision_of(w8a8).kv_cache == "fp8"
    assert precision_of(replace(w8a8, kv_cache_dtype="bf16")).kv_cache == "bf16"
    assert precision_of(replace(base, weights_dtype="fp8")).kv_cache == "bf16"
    assert precision_of(replace(base, weights_dtype="fp16")).kv_cache == "fp16"
