"""Planning: reproduction with estimate, brute-force optimality, fleet size, reasons, frontier."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from service.engine.errors import EngineError
from service.engine.estimate import EstimateResult, estimate
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.parallel import Parallelism
from service.engine.planning import (
    DOES_NOT_FIT,
    EXCEEDS_CONTEXT,
    INVALID_LAYOUT,
    MISSES_TPOT,
    MISSES_TTFT,
    NO_PRICE,
    UNSUPPORTED_DTYPE,
    Candidate,
    Configuration,
    PlanQuestion,
    Slo,
    concurrency_levels,
    layouts,
    pareto_mask,
    plan,
)
from service.engine.precision import Precision
from service.engine.shapes import ModelShape
from service.engine.workloads import OBJECTIVES, WORKLOADS, Workload, get_workload

FP8 = Precision(weights="fp8", activations="fp8")
LEVELS = 12  # a short level list keeps the point-by-point brute force fast


def small_candidates(model: ModelShape, *accs: Accelerator) -> list[Candidate]:
    return [
        Candidate(model, acc, precision, Parallelism(tp=tp))
        for acc in accs
        for precision in (Precision(), FP8)
        for tp in (1, 2)
    ]


def cheaper_h100(h100: Accelerator) -> Accelerator:
    """An H100 with a lower price and slower memory, so that cost and speed rank differently."""
    return dataclasses.replace(
        h100, id="h100-slow", memory_bandwidth_gb_s=2000.0, price_usd_per_hour=1.5
    )


def point(candidate: Candidate, question: PlanQuestion, concurrency: float) -> dict[str, float]:
    """Estimate one concurrency level on its own (batch_sizes of length one)."""
    r = estimate(
        candidate.model,
        candidate.accelerator,
        precision=candidate.precision,
        parallelism=candidate.parallelism,
        input_tokens=question.input_tokens,
        output_tokens=question.output_tokens,
        batch_sizes=[concurrency],
        mode=question.mode,
        load_pattern=question.estimate_load_pattern,
        params=candidate.params,
        price_usd_per_hour=candidate.price_usd_per_hour,
    )
    s_in, s_out = question.input_tokens, question.output_tokens
    blended = (
        r.usd_per_million_input_tokens[0] * s_in + r.usd_per_million_output_tokens[0] * s_out
    ) / (s_in + s_out)
    return {
        "fits": float(r.fits[0]),
        "max_batch": float(r.max_batch_size),
        "ttft_ms": float(r.ttft_ms[0]),
        "tpot_ms": float(r.tpot_ms[0]),
        "per_gpu": float(r.output_tokens_per_s_per_gpu[0]),
        "requests_per_s": float(r.requests_per_s[0]),
        "usd_out": float(r.usd_per_million_output_tokens[0]),
        "usd_in": float(r.usd_per_million_input_tokens[0]),
        "usd": float(blended),
        "gpus": float(r.gpus_per_replica),
    }


def brute_force(candidates: list[Candidate], question: PlanQuestion) -> list[dict[str, float]]:
    """Every feasible (candidate, level) by plain loops, one estimate call per point."""
    feasible = []
    slo = question.slo
    for cand in candidates:
        try:
            limit = int(point(cand, question, 1.0)["max_batch"])
        except EngineError:
            continue
        if limit < 1:
            continue
        for level in concurrency_levels(limit, question.concurrency_levels):
            p = point(cand, question, float(level))
            if not p["fits"]:
                continue
            if slo.ttft_ms_max is not None and p["ttft_ms"] > slo.ttft_ms_max:
                continue
            if slo.tpot_ms_max is not None and p["tpot_ms"] > slo.tpot_ms_max:
                continue
            feasible.append(p | {"concurrency": float(level)})
    return feasible


def assert_reproduces(cfg: Configuration, question: PlanQuestion) -> None:
    p = point(cfg.candidate, question, float(cfg.concurrency))
    assert p["fits"]
    assert cfg.ttft_ms == pytest.approx(p["ttft_ms"], rel=1e-9)
    assert cfg.tpot_ms == pytest.approx(p["tpot_ms"], rel=1e-9)
    assert cfg.output_tokens_per_s_per_gpu == pytest.approx(p["per_gpu"], rel=1e-9)
    assert cfg.requests_per_s == pytest.approx(p["requests_per_s"], rel=1e-9)
    if cfg.usd_per_million_output_tokens is not None:
        assert cfg.usd_per_million_output_tokens == pytest.approx(p["usd_out"], rel=1e-9)
        assert cfg.usd_per_million_input_tokens == pytest.approx(p["usd_in"], rel=1e-9)
    slo = question.slo
    assert slo.ttft_ms_max is None or cfg.ttft_ms <= slo.ttft_ms_max
    assert slo.tpot_ms_max is None or cfg.tpot_ms <= slo.tpot_ms_max


# --- presets -------------------------------------------------------------------------------


def test_presets_cover_the_use_cases_and_validate() -> None:
    expected = {
        "chat",
        "code-completion",
        "offline-batch",
        "evaluation",
        "test-time-compute",
        "rl-rollout",
    }
    assert expected <= set(WORKLOADS)
    for workload in WORKLOADS.values():
        workload.validate()
        assert workload.description and len(workload.rationale) > 80
    chat, code = get_workload("chat"), get_workload("code-completion")
    assert code.ttft_ms_max is not None and chat.ttft_ms_max is not None
    assert code.ttft_ms_max < chat.ttft_ms_max and code.output_tokens < chat.output_tokens
    assert get_workload("offline-batch").tpot_ms_max is None
    assert get_workload("evaluation").output_tokens < 64
    assert get_workload("test-time-compute").output_tokens >= 4 * chat.output_tokens
    assert get_workload("rl-rollout").mode == "static"


def test_invalid_presets_are_refused() -> None:
    chat = get_workload("chat")
    with pytest.raises(EngineError, match="tpot_ms_max"):
        dataclasses.replace(chat, tpot_ms_max=0.0).validate()
    with pytest.raises(EngineError, match="objective"):
        dataclasses.replace(chat, objective="fastest").validate()
    with pytest.raises(KeyError, match="chat"):
        get_workload("no-such-workload")
    assert isinstance(chat, Workload)


# --- search helpers ------------------------------------------------------------------------


def test_concurrency_levels_span_one_to_the_memory_limit() -> None:
    assert concurrency_levels(5).tolist() == [1, 2, 3, 4, 5]
    for top, count in ((211, 8), (1000, 11), (1000, 12), (70, 64)):
        few = concurrency_levels(top, count)
        assert few.size <= count and few[0] == 1 and few[-1] == top
    levels = concurrency_levels(3000, 64)
    assert levels.size <= 64 and levels[0] == 1 and levels[-1] == 3000
    assert np.all(np.diff(levels) > 0)
    assert set(2.0 ** np.arange(12)) <= set(levels.tolist())


def test_layouts_respect_the_gpu_limit(llama8b: ModelShape, dsv3: ModelShape) -> None:
    dense = layouts(llama8b, 8)
    assert [(p.tp, p.pp, p.ep) for p in dense] == [(1, 1, 1), (2, 1, 1), (4, 1, 1), (8, 1, 1)]
    moe = layouts(dsv3, 4, pp=[1, 2])
    assert all(p.gpus_per_replica <= 4 and p.ep <= p.moe_group_gpus for p in moe)
    assert Parallelism(tp=4, pp=1, ep=4) in moe and Parallelism(tp=2, pp=2, ep=2) in moe
    # Attention DP with wide EP over the whole MoE group (ep > tp).
    assert Parallelism(tp=1, ep=4, attention_dp=4) in moe
    assert Parallelism(tp=2, ep=4, attention_dp=2) in moe
    # An NVL72 limit adds the 72-GPU group: attention-DP 72 × EP 72.
    rack = layouts(dsv3, 72)
    assert Parallelism(tp=1, ep=72, attention_dp=72) in rack
    assert all(p.gpus_per_replica <= 72 for p in rack)


def test_pareto_mask_matches_pairwise_dominance() -> None:
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 20, 200).astype(float), rng.integers(0, 20, 200).astype(float)
    mask = pareto_mask(x, y)
    for i in range(x.size):
        dominated = np.any((x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i])))
        if mask[i]:
            assert not dominated
        elif not dominated:  # an exact duplicate of a kept point
            assert np.any(mask & (x == x[i]) & (y == y[i]))


# --- plan answers --------------------------------------------------------------------------


def test_min_cost_matches_brute_force(
    llama8b: ModelShape, h100: Accelerator, h200: Accelerator
) -> None:
    candidates = small_candidates(llama8b, h100, h200, cheaper_h100(h100))
    question = PlanQuestion(
        input_tokens=2048,
        output_tokens=256,
        slo=Slo(ttft_ms_max=1000.0, tpot_ms_max=30.0),
        objective="min_cost_per_million_tokens",
        concurrency_levels=LEVELS,
    )
    result = plan(candidates, question)
    assert result.configurations
    for cfg in result.configurations:
        assert_reproduces(cfg, question)
    costs = [cfg.usd_per_million_tokens for cfg in result.configurations]
    assert costs == sorted(costs)
    best = min(p["usd"] for p in brute_force(candidates, question))
    assert result.configurations[0].usd_per_million_tokens == pytest.approx(best, rel=1e-12)


def test_max_throughput_matches_brute_force(
    llama8b: ModelShape, h100: Accelerator, h200: Accelerator
) -> None:
    candidates = small_candidates(llama8b, h100, h200)
    question = PlanQuestion(
        input_tokens=1024,
        output_tokens=512,
        slo=Slo(tpot_ms_max=25.0),
        objective="max_throughput_per_gpu",
        concurrency_levels=LEVELS,
    )
    result = plan(candidates, question)
    for cfg in result.configurations:
        assert_reproduces(cfg, question)
    best = max(p["per_gpu"] for p in brute_force(candidates, question))
    top = result.configurations[0]
    assert top.output_tokens_per_s_per_gpu == pytest.approx(best, rel=1e-12)


def test_min_gpus_for_rate_sizes_the_fleet(
    llama70b: ModelShape, h100: Accelerator, h200: Accelerator
) -> None:
    candidates = [
        Candidate(llama70b, acc, FP8, Parallelism(tp=tp)) for acc in (h100, h200) for tp in (2, 4)
    ]
    question = PlanQuestion(
        input_tokens=2048,
        output_tokens=256,
        slo=Slo(ttft_ms_max=1500.0, tpot_ms_max=60.0),
        objective="min_gpus_for_rate",
        requests_per_s=40.0,
        concurrency_levels=LEVELS,
    )
    result = plan(candidates, question)
    assert result.configurations
    for cfg in result.configurations:
        assert_reproduces(cfg, question)
        assert cfg.replicas == math.ceil(40.0 / cfg.requests_per_s)
        assert cfg.gpus == cfg.replicas * cfg.candidate.parallelism.tp
        price = cfg.candidate.accelerator.price_usd_per_hour
        if price is None:
            assert cfg.usd_per_hour is None
        else:
            assert cfg.usd_per_hour == pytest.approx(cfg.gpus * price)
    fewest = min(
        math.ceil(40.0 / p["requests_per_s"]) * p["gpus"] for p in brute_force(candidates, question)
    )
    assert result.configurations[0].gpus == fewest
    assert [c.gpus for c in result.configurations] == sorted(c.gpus for c in result.configurations)


def test_max_concurrency_picks_the_largest_level_meeting_the_target(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    cand = Candidate(llama8b, h100, Precision(), Parallelism())
    question = PlanQuestion(
        input_tokens=1024,
        output_tokens=256,
        slo=Slo(tpot_ms_max=20.0),
        objective="max_concurrency_under_slo",
        concurrency_levels=LEVELS,
    )
    (cfg,) = plan([cand], question).configurations
    assert_reproduces(cfg, question)
    above = [
        level
        for level in concurrency_levels(cfg.max_concurrency, LEVELS)
        if level > cfg.concurrency
    ]
    assert above, "the target should bind below the memory limit"
    assert point(cand, question, float(above[0]))["tpot_ms"] > 20.0


def test_infeasible_question_answers_with_reasons(llama70b: ModelShape, h100: Accelerator) -> None:
    no_fp8 = dataclasses.replace(
        h100, id="no-fp8", peak_tflops={"bf16": 989.5}, price_usd_per_hour=None
    )
    candidates = [
        Candidate(llama70b, h100, Precision(), Parallelism(tp=1)),  # 141 GB of bf16 weights
        Candidate(llama70b, h100, Precision(), Parallelism(tp=3)),  # 64 heads
        Candidate(llama70b, no_fp8, FP8, Parallelism(tp=4)),
        Candidate(llama70b, h100, Precision(), Parallelism(tp=4)),
    ]
    question = PlanQuestion(
        input_tokens=2048, output_tokens=256, slo=Slo(tpot_ms_max=0.5), concurrency_levels=8
    )
    result = plan(candidates, question)
    assert result.configurations == ()
    codes = [r.code for r in result.rejected]
    assert codes == [DOES_NOT_FIT, INVALID_LAYOUT, UNSUPPORTED_DTYPE, MISSES_TPOT]
    reasons = [r.reason for r in result.rejected]
    assert reasons[0].startswith("does not fit")
    assert reasons[1].startswith("layout does not divide the model: ")
    assert reasons[2] == "no peak for dtype fp8 on no-fp8"
    assert reasons[3].startswith("misses TPOT")
    tight_ttft = dataclasses.replace(question, slo=Slo(ttft_ms_max=0.01))
    assert plan(candidates[3:], tight_ttft).rejected[0].code == MISSES_TTFT
    by_cost = dataclasses.replace(question, objective="min_cost_per_million_tokens")
    unpriced = Candidate(llama70b, no_fp8, Precision(), Parallelism(tp=4))
    assert plan([unpriced], by_cost).rejected[0].code == NO_PRICE


def test_a_part_without_the_16_bit_dtype_is_rejected_not_raised(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """fp8 GEMMs still run the embeddings, LM head and router in bf16: a part with an fp8 peak
    but no bf16 one (fp16 instead) cannot run them, and the plan says so instead of failing
    the whole question (found by the live contract fuzz on an edited catalog entry)."""
    fp16_only = dataclasses.replace(
        h100, id="fp16-only", peak_tflops={"fp16": 989.4, "fp8": 1978.9}
    )
    candidates = [
        Candidate(llama8b, fp16_only, FP8, Parallelism()),
        Candidate(llama8b, h100, FP8, Parallelism()),
    ]
    question = PlanQuestion(input_tokens=1024, output_tokens=256, concurrency_levels=8)
    result = plan(candidates, question)
    assert [c.candidate.accelerator.id for c in result.configurations] == ["h100-sxm"]
    (rejected,) = result.rejected
    assert rejected.code == UNSUPPORTED_DTYPE
    assert rejected.reason == "no peak for dtype bf16 on fp16-only"


def test_frontier_points_are_pareto_optimal(
    llama8b: ModelShape, h100: Accelerator, h200: Accelerator
) -> None:
    candidates = small_candidates(llama8b, h100, h200)
    question = PlanQuestion(
        input_tokens=1024, output_tokens=256, slo=Slo(tpot_ms_max=20.0), concurrency_levels=LEVELS
    )
    result = plan(candidates, question)
    assert set(result.frontier) == {"h100-sxm", "h200-sxm"}
    for acc_id, points in result.frontier.items():
        assert len(points) >= 2
        xs = [p.tokens_per_s_per_user for p in points]
        assert xs == sorted(xs)
        everything = [
            point(c, question, float(level))
            for c in candidates
            if c.accelerator.id == acc_id
            for level in concurrency_levels(int(point(c, question, 1.0)["max_batch"]), LEVELS)
        ]
        for p in points:
            again = point(p.candidate, question, float(p.concurrency))
            assert p.output_tokens_per_s_per_gpu == pytest.approx(again["per_gpu"], rel=1e-9)
            assert p.meets_slo == (again["tpot_ms"] <= 20.0)
            for q in everything:
                x, y = 1000.0 / q["tpot_ms"], q["per_gpu"]
                beats = x >= p.tokens_per_s_per_user and y >= p.output_tokens_per_s_per_gpu
                strictly = x > p.tokens_per_s_per_user or y > p.output_tokens_per_s_per_gpu
                assert not (beats and strictly and q["fits"])


def test_interval_upper_bound_tightens_the_targets(llama8b: ModelShape, h100: Accelerator) -> None:
    def band(result: EstimateResult) -> tuple[FloatArray, FloatArray]:
        """80% intervals whose TPOT p90 is half again the prediction."""
        return result.ttft_ms, result.tpot_ms * 1.5

    cand = Candidate(llama8b, h100, Precision(), Parallelism(), upper_bound=band)
    base = PlanQuestion(
        input_tokens=1024,
        output_tokens=256,
        slo=Slo(tpot_ms_max=20.0),
        objective="max_concurrency_under_slo",
    )
    upper = dataclasses.replace(base, slo=Slo(tpot_ms_max=20.0, use_interval_upper_bound=True))
    (point_cfg,) = plan([cand], base).configurations
    (upper_cfg,) = plan([cand], upper).configurations
    assert upper_cfg.tpot_ms_upper is not None
    assert upper_cfg.tpot_ms_upper == pytest.approx(upper_cfg.tpot_ms * 1.5, rel=1e-9)
    assert upper_cfg.tpot_ms_upper <= 20.0
    assert upper_cfg.concurrency < point_cfg.concurrency
    assert point_cfg.tpot_ms_upper is not None and point_cfg.tpot_ms_upper > 20.0


def test_questions_are_validated() -> None:
    with pytest.raises(EngineError, match="requests_per_s"):
        PlanQuestion(1024, 128, objective="min_gpus_for_rate").validate()
    with pytest.raises(EngineError, match="objective"):
        PlanQuestion(1024, 128, objective="cheapest").validate()
    with pytest.raises(EngineError, match="tpot_ms_max"):
        PlanQuestion(1024, 128, slo=Slo(tpot_ms_max=-1.0)).validate()
    assert "max_throughput_per_gpu" in OBJECTIVES


def test_request_past_the_context_window_is_rejected_with_its_limit(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    short = dataclasses.replace(llama8b, max_context_tokens=8192)
    result = plan([Candidate(short, h100)], PlanQuestion(input_tokens=8100, output_tokens=100))
    assert result.configurations == ()
    (rejection,) = result.rejected
    assert rejection.code == EXCEEDS_CONTEXT
    assert "8200 tokens" in rejection.reason and "max_context_tokens=8192" in rejection.reason
