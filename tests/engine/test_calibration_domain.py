"""Profile domain, extrapolation report, backend priors and measured extrapolation spreads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from engine_refs import CALIBRATION_H100, CALIBRATION_MODELS

from service.engine.calibration.domain import (
    Domain,
    extrapolation,
    extrapolation_amounts,
)
from service.engine.calibration.end_to_end import fit_end_to_end, predict_runs
from service.engine.calibration.fit import CalibrationResult, fit
from service.engine.calibration.intervals import (
    DEFAULT_SPREADS,
    Z_90,
    ExtrapolationSpread,
    prediction_interval,
    spread_sigma,
)
from service.engine.calibration.measurements import ServingMeasurement
from service.engine.calibration.priors import BACKEND_PRIORS, GENERIC, prior_backend
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    HARNESS_TERMS,
    SCHEDULER_TERMS,
    EfficiencyParams,
    engine_only,
)

H100, MODELS = CALIBRATION_H100, CALIBRATION_MODELS
TRUE = {
    "layer_overhead_us": 10.0,
    "step_overhead_us": 400.0,
    "sequence_layer_overhead_us": 0.6,
    "admission_wait_steps": 4.0,
    "prefill_queue_ln_prompts": 0.4,
}


def _serving(noise: float, seed: int) -> list[ServingMeasurement]:
    shells = [
        ServingMeasurement(model, s_in, 128, c, ttft_ms=1.0, tpot_ms=1.0, tp=tp, backend="trtllm")
        for model, tp in (("llama-3-8b", 1), ("llama-3-8b", 2), ("qwen3-32b", 2), ("qwen3-32b", 4))
        for c in (4, 16, 64)
        for s_in in (512, 2048)
    ]
    # the per-sequence knee is TensorRT-LLM's own (set per engine, never fitted)
    knee = BACKEND_PRIORS["trtllm"]["sequence_overhead_full_batch"].mean
    truth = DEFAULT_EFFICIENCY.replace(**TRUE, sequence_overhead_full_batch=knee)
    pred = predict_runs(shells, H100, MODELS, truth)
    rng = np.random.default_rng(seed)
    noisy = pred.predicted * np.exp(rng.normal(0.0, noise, pred.predicted.size))
    out = []
    for i, shell in enumerate(shells):
        ttft, tpot = noisy[pred.run == i]
        out.append(replace(shell, ttft_ms=float(ttft), tpot_ms=float(tpot)))
    return out


def test_domain_records_models_traits_and_ranges() -> None:
    runs = _serving(0.0, 0)
    domain = Domain.of_runs(runs, MODELS, "h100-sxm")
    assert domain.backends == ("trtllm",)
    assert {(m.id, m.kind, m.layers) for m in domain.models} == {
        ("llama-3-8b", "dense", 32),
        ("qwen3-32b", "dense", 64),
    }
    assert domain.modes == ("serving",)
    assert domain.ranges["concurrency"] == (4.0, 64.0)
    assert domain.ranges["gpus"] == (1.0, 4.0)
    assert Domain.from_dict(domain.to_dict()) == domain


def test_extrapolation_lists_what_lies_outside() -> None:
    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")
    inside = dict(
        model=MODELS["qwen3-32b"],
        accelerator="h100-sxm",
        mode="serving",
        batch_sizes=np.array([4.0, 64.0]),
        input_tokens=1024.0,
        output_tokens=128.0,
        gpus=2.0,
        weights_dtype="bf16",
        backend="trtllm",
    )
    assert extrapolation(domain, **inside) == []  # type: ignore[arg-type]
    moe = replace(MODELS["llama-2-70b"], id="moe-x", num_experts=8, experts_per_token=2,
                  moe_intermediate_size=4096)  # fmt: skip
    far = {**inside, "model": moe, "batch_sizes": np.array([8.0, 256.0]), "gpus": 8.0,
           "accelerator": "h200-sxm", "weights_dtype": "fp8", "mode": "static"}  # fmt: skip
    found = {e.dimension: e for e in extrapolation(domain, **far)}  # type: ignore[arg-type]
    assert set(found) == {
        "accelerator", "mode", "model", "model_kind", "hidden_size", "precision",
        "gpus", "layers",
    }  # fmt: skip
    # a serving-only domain has no static batch range to check: the mode item says it
    assert found["mode"].fitted_values == ("serving",)
    assert found["model_kind"].requested == "moe"
    assert found["layers"].requested == 80 and found["layers"].fitted_high == 64
    assert found["gpus"].requested == 8.0 and found["gpus"].fitted_high == 4.0
    serving_far = {**far, "mode": "serving"}
    amounts = extrapolation_amounts(
        domain,
        extrapolation(domain, **serving_far),  # type: ignore[arg-type]
        mode="serving",
        batch_sizes=np.array([1.0, 8.0, 256.0]),
        input_tokens=1024.0,
        output_tokens=128.0,
        gpus=8.0,
    )
    # each direction is its own kind: 1 is two doublings below 4, 256 two above 64
    np.testing.assert_allclose(amounts["concurrency_below"], [2.0, 0.0, 0.0])
    np.testing.assert_allclose(amounts["concurrency_above"], [0.0, 0.0, 2.0])
    assert amounts["gpus_above"] == pytest.approx(1.0)
    assert "gpus_below" not in amounts and "concurrency" not in amounts
    # an MoE model beside dense fitted ones widens by the other-kind spread alone
    assert amounts["model_kind"] == 1.0 and "model" not in amounts
    dense = replace(MODELS["llama-2-70b"], id="dense-x")
    same_kind = extrapolation_amounts(
        domain,
        extrapolation(domain, **{**serving_far, "model": dense}),  # type: ignore[arg-type]
        mode="serving",
        batch_sizes=np.array([8.0]),
        input_tokens=1024.0,
        output_tokens=128.0,
        gpus=8.0,
    )
    assert same_kind["model"] == 1.0 and "model_kind" not in same_kind


def test_spread_sigma_adds_kinds_in_quadrature_per_doubling() -> None:
    spreads = {
        "model": ExtrapolationSpread(0.3, per_doubling=False, n=20),
        "concurrency": ExtrapolationSpread(0.1, per_doubling=True, n=20),
    }
    s = spread_sigma(spreads, {"model": 1.0, "concurrency": np.array([0.0, 2.0])})
    np.testing.assert_allclose(s, [0.3, np.hypot(0.3, 0.2)])
    assert float(spread_sigma(spreads, {})) == 0.0


def test_a_static_batchs_ttft_ignores_the_output_length_it_did_not_fit() -> None:
    """A static batch's TTFT is its prefill: an output length below the fitted range widens
    its TPOT (the decode steps), not its TTFT; an input length below it widens both."""
    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")  # output 128 only
    request = dict(
        model=MODELS["qwen3-32b"], accelerator="h100-sxm", mode="static",
        batch_sizes=np.array([16.0]), input_tokens=1024.0, output_tokens=1.0, gpus=2.0,
        weights_dtype="bf16", backend="trtllm",
    )  # fmt: skip
    found = extrapolation(domain, **request)  # type: ignore[arg-type]
    args = {k: request[k] for k in ("mode", "batch_sizes", "input_tokens", "output_tokens", "gpus")}
    tpot = extrapolation_amounts(domain, found, **args)  # type: ignore[arg-type]
    ttft = extrapolation_amounts(domain, found, prefill_only=True, **args)  # type: ignore[arg-type]
    assert tpot["length_below"] == pytest.approx(7.0)  # 1 is 7 doublings below 128
    assert "length_below" not in ttft and ttft["mode"] == 1.0
    short_prompt = {**args, "input_tokens": 128.0}
    found = extrapolation(domain, **{**request, **short_prompt})  # type: ignore[arg-type]
    ttft = extrapolation_amounts(domain, found, prefill_only=True, **short_prompt)  # type: ignore[arg-type]
    assert ttft["length_below"] == pytest.approx(2.0)  # 128 is 2 doublings below 512


def test_a_mode_extrapolation_widens_by_the_spread_of_the_mode_predicted() -> None:
    """Static batches predicted from serving runs widen by the serving → static spread (static
    latency's), not by static → serving TTFT's, which holds closed-loop queueing no static
    fit can learn; serving TTFT from a static profile keeps its own."""
    profile = fit(_serving(0.03, 2), H100, MODELS, cross_validate=True).to_dict()
    band = prediction_interval(profile, "ttft_ms", np.array([100.0]), mode="serving",
                               extrapolating={})  # fmt: skip
    static = prediction_interval(profile, "ttft_ms", np.array([100.0]), mode="static",
                                 extrapolating={"mode": 1.0})  # fmt: skip
    half = np.log(band.high / band.low)[0] / 2.0
    widened = np.log(static.high / static.low)[0] / 2.0
    s = DEFAULT_SPREADS["static.latency_ms"]["mode"].log_sigma
    assert s < DEFAULT_SPREADS["serving.ttft_ms"]["mode"].log_sigma
    assert widened == pytest.approx(np.hypot(half, Z_90 * s), rel=1e-9)
    serving = prediction_interval(profile, "ttft_ms", np.array([100.0]), mode="serving",
                                  extrapolating={"mode": 1.0})  # fmt: skip
    s_serving = DEFAULT_SPREADS["serving.ttft_ms"]["mode"].log_sigma
    assert np.log(serving.high / serving.low)[0] / 2.0 == pytest.approx(
        np.hypot(half, Z_90 * s_serving), rel=1e-9
    )


def test_spread_sigma_reads_directed_kinds_and_older_undirected_spreads() -> None:
    directed_spreads = {
        "concurrency_above": ExtrapolationSpread(0.2, per_doubling=True, n=20),
        "concurrency_below": ExtrapolationSpread(0.05, per_doubling=True, n=20),
    }
    above = spread_sigma(directed_spreads, {"concurrency_above": np.array([1.0, 2.0])})
    np.testing.assert_allclose(above, [0.2, 0.4])
    below = spread_sigma(directed_spreads, {"concurrency_below": np.array([2.0])})
    np.testing.assert_allclose(below, [0.1])
    # a profile stored before directions: its one concurrency spread serves both
    older = {"concurrency": ExtrapolationSpread(0.1, per_doubling=True, n=20)}
    np.testing.assert_allclose(spread_sigma(older, {"concurrency_below": np.array([3.0])}), [0.3])


def test_priors_by_backend_and_harness_terms_kept_apart() -> None:
    assert prior_backend(["trtllm", "trtllm"]) == "trtllm"
    assert prior_backend(["vllm", "sglang"]) == GENERIC
    assert prior_backend(["mystery"]) == GENERIC
    changed = DEFAULT_EFFICIENCY.replace(admission_wait_steps=20.0, step_overhead_us=900.0)
    cleaned = engine_only(changed)
    assert cleaned.step_overhead_us == 900.0
    assert all(getattr(cleaned, n) == getattr(DEFAULT_EFFICIENCY, n) for n in HARNESS_TERMS)


def test_regularised_fit_recovers_well_determined_terms_and_holds_unseen_ones() -> None:
    runs = _serving(0.01, 1)
    fitted, _, _, _ = fit_end_to_end(runs, H100, MODELS, DEFAULT_EFFICIENCY.to_dict(),
                                     cross_validate=False)  # fmt: skip
    assert fitted["sequence_layer_overhead_us"] == pytest.approx(0.6, rel=0.15)
    assert fitted["step_overhead_us"] == pytest.approx(400.0, rel=0.35)
    # static runs only: the queue terms have no data and the fit never frees them; a prior far
    # from the truth with a tiny sd holds the step overhead where the data would move it
    tight = {**BACKEND_PRIORS["trtllm"]}
    tight["step_overhead_us"] = replace(tight["step_overhead_us"], mean=0.0, sd=1e-3)
    held, _, _, _ = fit_end_to_end(runs, H100, MODELS, DEFAULT_EFFICIENCY.to_dict(),
                                   cross_validate=False, priors=tight)  # fmt: skip
    assert held["step_overhead_us"] == pytest.approx(0.0, abs=1.0)


def test_fit_stores_domain_priors_and_measured_spreads() -> None:
    result = fit(_serving(0.03, 2), H100, MODELS)
    assert result.prior_backend == "trtllm"
    shifts = result.parameter_report()
    assert set(shifts) == {*TRUE, "eager_layer_launch_us", "sequence_layer_sharded_us"}
    for name, row in shifts.items():
        prior = BACKEND_PRIORS["trtllm"][name]
        assert row["prior"] == prior.mean
        assert row["shift_prior_sd"] == pytest.approx((row["fitted"] - prior.mean) / prior.sd)
    # two models, two halves of every numeric feature: each kind measured held out, numeric
    # kinds in both directions, except GPUs above (tp4 alone: 6 runs, fewer than MIN_HELD)
    numeric = {f"{k}_{d}" for k in ("concurrency", "length", "gpus") for d in ("below", "above")}
    measured = {"model"} | numeric - {"gpus_above"}
    assert set(result.spreads["serving.tpot_ms"]) == measured
    assert all(s.log_sigma >= 0.0 for k in result.spreads.values() for s in k.values())
    back = CalibrationResult.from_dict(result.to_dict())
    assert back.domain == result.domain
    assert back.spreads == result.spreads
    assert back.priors == result.priors
    # the scheduler's queue share is held at the backend's prior, not fitted
    fitted_terms = set(HARNESS_TERMS) - set(SCHEDULER_TERMS)
    assert result.fit_summary()["harness_terms"]["closed_loop"].keys() == fitted_terms
    # an extrapolating request gets a wider interval than one inside the domain
    inside = result.interval("serving.tpot_ms", np.array([10.0]), extrapolating={})
    outside = result.interval("serving.tpot_ms", np.array([10.0]), extrapolating={"model": 1.0})
    width = outside.high - outside.low
    if result.spreads["serving.tpot_ms"]["model"].log_sigma > 0:
        assert width[0] > (inside.high - inside.low)[0]


def test_step_overhead_falls_back_toward_its_prior_outside_the_fitted_gpu_counts() -> None:
    from service.engine.calibration.reach import within_reach

    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")  # gpus 1..4
    priors = BACKEND_PRIORS["trtllm"]
    fitted = DEFAULT_EFFICIENCY.replace(step_overhead_us=1000.0, layer_overhead_us=30.0)
    same = within_reach(fitted, priors, domain, gpus=4.0)
    assert same == fitted
    one_doubling = within_reach(fitted, priors, domain, gpus=8.0)
    prior = priors["step_overhead_us"].mean
    assert one_doubling.step_overhead_us == pytest.approx(prior + 0.5 * (1000.0 - prior))
    assert one_doubling.layer_overhead_us == 30.0  # scaled by its count, not range-bound
    far = within_reach(fitted, priors, domain, gpus=64.0)
    assert abs(far.step_overhead_us - prior) < abs(one_doubling.step_overhead_us - prior)


def test_decode_attention_kernel_is_the_estimates_formula() -> None:
    """The calibration kernel model charges what an estimate's decode step charges."""
    from service.engine.kernels import attention_decode_time_s
    from service.engine.parallel import Parallelism
    from service.engine.precision import Precision
    from service.engine.roofline import analyze_intensity

    model = MODELS["llama-3-8b"]
    batch, past = 16, 2047
    step = analyze_intensity(
        model, H100, phase="decode", batch_size=batch, context_tokens=past,
        precision=Precision(), parallelism=Parallelism(tp=2), params=DEFAULT_EFFICIENCY,
    )  # fmt: skip
    attention = next(op for op in step.operators if op.name == "attention")
    kernel_s = attention_decode_time_s(
        batch, past + 1, model.num_heads / 2, model.num_kv_heads / 2, model.head_dim,
        kv_dtype="bf16", accelerator=H100, params=DEFAULT_EFFICIENCY,
    )  # fmt: skip
    assert attention.time_ms == pytest.approx(model.num_layers * float(kernel_s) * 1e3, rel=1e-9)


def test_another_backend_takes_its_own_priors_not_other_engines_fits() -> None:
    from service.engine.calibration.reach import within_reach

    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")  # trtllm only
    fitted = DEFAULT_EFFICIENCY.replace(step_overhead_us=123.0, admission_wait_steps=30.0)
    priors = {n: BACKEND_PRIORS["trtllm"][n] for n in TRUE}
    same = within_reach(fitted, priors, domain, gpus=2.0, backend="trtllm")
    assert same == fitted
    other = within_reach(fitted, priors, domain, gpus=2.0, backend="vllm")
    for name in TRUE:
        if name in HARNESS_TERMS:  # the load generator's terms stay with the load pattern
            assert getattr(other, name) == getattr(fitted, name)
        else:
            assert getattr(other, name) == BACKEND_PRIORS["vllm"][name].mean


def test_the_per_sequence_knee_is_the_engines_own_and_no_fit_moves_it() -> None:
    from service.engine.calibration.priors import with_engine_priors
    from service.engine.calibration.reach import within_reach

    # uncalibrated: TensorRT-LLM's per-sequence cost stops growing in full at 32 sequences
    assert with_engine_priors(DEFAULT_EFFICIENCY, "trtllm").sequence_overhead_full_batch == 32.0
    for backend in ("vllm", "sglang", None):
        assert with_engine_priors(DEFAULT_EFFICIENCY, backend).sequence_overhead_full_batch == 128
    # a fit on TensorRT-LLM runs (generated with its knee) keeps the knee, starting elsewhere
    runs = _serving(0.0, 0)
    start = DEFAULT_EFFICIENCY.replace(sequence_overhead_full_batch=500.0).to_dict()
    fitted, errors, _, _ = fit_end_to_end(runs, H100, MODELS, start, cross_validate=False)
    assert fitted["sequence_overhead_full_batch"] == 32.0
    assert "sequence_overhead_full_batch" not in errors
    # the same profile asked about vLLM takes vLLM's knee with vLLM's overheads
    domain = Domain.of_runs(runs, MODELS, "h100-sxm")
    profile = EfficiencyParams.from_dict(fitted)
    priors = {n: BACKEND_PRIORS["trtllm"][n] for n in TRUE}
    other = within_reach(profile, priors, domain, gpus=2.0, backend="vllm")
    assert other.sequence_overhead_full_batch == 128.0
    assert within_reach(profile, priors, domain, gpus=2.0, backend="trtllm") == profile


def test_a_mode_the_profile_has_no_runs_of_takes_the_engine_priors() -> None:
    from service.engine.calibration.reach import within_reach

    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")  # serving runs only
    assert domain.modes == ("serving",)
    fitted = DEFAULT_EFFICIENCY.replace(
        step_overhead_us=123.0, layer_overhead_us=30.0, admission_wait_steps=30.0
    )
    priors = {n: BACKEND_PRIORS["trtllm"][n] for n in TRUE}
    assert within_reach(fitted, priors, domain, gpus=2.0, mode="serving") == fitted
    static = within_reach(fitted, priors, domain, gpus=2.0, mode="static")
    for name in TRUE:
        expected = getattr(fitted, name) if name in HARNESS_TERMS else priors[name].mean
        assert getattr(static, name) == expected
    # kernel efficiencies (fitted on kernel tables) apply in every mode
    assert static.gemm_compute_efficiency_bf16 == fitted.gemm_compute_efficiency_bf16


def test_a_model_of_a_kind_the_profile_never_saw_takes_the_per_sequence_prior() -> None:
    from service.engine.calibration.reach import within_reach

    domain = Domain.of_runs(_serving(0.0, 0), MODELS, "h100-sxm")
    assert {m.kind for m in domain.models} == {"dense"}
    fitted = DEFAULT_EFFICIENCY.replace(sequence_layer_overhead_us=0.3, step_overhead_us=123.0)
    priors = BACKEND_PRIORS["trtllm"]
    dense = within_reach(fitted, priors, domain, gpus=2.0, model_kind="dense")
    assert dense == fitted
    moe = within_reach(fitted, priors, domain, gpus=2.0, model_kind="moe")
    assert moe.sequence_layer_overhead_us == priors["sequence_layer_overhead_us"].mean == 0.8
    assert moe.step_overhead_us == 123.0  # host work per step does not depend on the model
    # a profile's own predictions follow the same rule: an MoE run is priced with the prior
    result = CalibrationResult(
        accelerator="h100-sxm", efficiency=fitted, standard_errors={}, n_measurements={},
        quality={}, residual_quantiles={}, domain=domain, prior_backend="trtllm",
        priors=priors,
    )  # fmt: skip
    assert result.params_for(gpus=2.0, model_kind="mla").sequence_layer_overhead_us == 0.8


def test_domain_records_backend_versions_and_load_patterns() -> None:
    runs = _serving(0.0, 0)
    runs[0] = replace(runs[0], backend_version="1.0.0rc3")
    runs[1] = replace(runs[1], backend_version="1.2.0", load_pattern="open_loop")
    domain = Domain.of_runs(runs, MODELS, "h100-sxm")
    assert domain.backend_versions == ("trtllm 1.0.0rc3", "trtllm 1.2.0")
    assert domain.load_patterns == ("closed_loop", "open_loop")
    assert Domain.from_dict(domain.to_dict()) == domain
    # a profile stored before versions were recorded still loads, with none
    old = {
        k: v for k, v in domain.to_dict().items() if k not in ("backend_versions", "load_patterns")
    }
    assert Domain.from_dict(old).backend_versions == ()


def test_leaving_out_the_only_model_of_its_kind_measures_the_model_kind_spread() -> None:
    from service.engine.calibration.extrapolation_cv import _folds

    runs = _serving(0.0, 0)
    running = np.array([float(r.concurrency) for r in runs])
    same = _folds(runs, {"llama-3-8b": "dense", "qwen3-32b": "dense"}, running)
    assert len(same["model"]) == 2 and "model_kind" not in same
    # each model is the only one of its kind: both held-out folds cross kinds
    mixed = _folds(runs, {"llama-3-8b": "dense", "qwen3-32b": "moe"}, running)
    assert len(mixed["model_kind"]) == 2 and "model" not in mixed
    held = {runs[int(i)].model for _, test, _ in mixed["model_kind"] for i in test}
    assert held == {"llama-3-8b", "qwen3-32b"}


def test_the_domain_records_what_the_engine_ran_at_once() -> None:
    """256 clients of Qwen3-32B in bf16 on one H100 run as far fewer at once (KV room): the
    fitted concurrency range holds that running batch, the load estimates are checked by,
    not the 256 clients."""
    runs = _serving(0.0, 0)
    crowded = ServingMeasurement("qwen3-32b", 2048, 128, 256, 1.0, 1.0, tp=1, backend="trtllm")
    pred = predict_runs([crowded], H100, MODELS, DEFAULT_EFFICIENCY.replace(**TRUE))
    ttft, tpot = pred.predicted
    runs.append(replace(crowded, ttft_ms=float(ttft), tpot_ms=float(tpot)))
    domain = fit(runs, H100, MODELS, cross_validate=False).domain
    assert domain is not None
    assert domain.ranges["concurrency"] == (4.0, 64.0)  # the crowded run ran fewer than 64
    assert Domain.of_runs(runs, MODELS, "h100-sxm").ranges["concurrency"] == (4.0, 256.0)
