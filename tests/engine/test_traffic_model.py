"""The traffic model on the engine's step costs: static, closed-loop and near-saturation cases."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from engine_refs import llama_31_8b, make_h100

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.estimate import estimate
from service.engine.memory import max_batch_size
from service.engine.operators import AttentionGroup, step_cost
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.traffic.lengths import LengthDistribution
from service.engine.traffic.model import Replica, SloTarget, TrafficSpec, scheduler_config
from service.engine.traffic.scheduler import simulate
from service.engine.traffic.speculative import tokens_per_step

# The closed-loop harness terms of serving.py set to zero: the traffic model never uses them.
PARAMS = DEFAULT_EFFICIENCY.replace(admission_wait_steps=0.0, prefill_queue_share=0.0)
PRECISION, LAYOUT = Precision(), Parallelism()


def _lm_head_s(rows: float) -> float:
    step = step_cost(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        groups=[AttentionGroup.of(rows, 1.0, 0.0)],
        params=PARAMS,
        phase="flat",
    )
    return float(sum(float(r.time_s) for r in step.rows if r.name == "lm_head"))


def _replica(s_in: int, s_out: int, params: EfficiencyParams = PARAMS, **knobs: object) -> Replica:
    settings: dict[str, object] = {
        "max_num_batched_tokens": 8192,
        "max_running_requests": None,
        "scheduling": "decode_first",
    }
    settings.update(knobs)
    return Replica.prepare(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        params=params,
        max_input_tokens=s_in,
        max_output_tokens=s_out,
        **settings,  # type: ignore[arg-type]
    )


def _fixed(s_in: int, s_out: int, rate: float, **extra: object) -> TrafficSpec:
    return TrafficSpec(
        rate,
        LengthDistribution.fixed(s_in),
        LengthDistribution.fixed(s_out),
        **extra,  # type: ignore[arg-type]
    )


def test_step_table_matches_the_engine_step_cost() -> None:
    """Tabulated parts add up to ``step_cost`` of mixed steps within 1% (interpolation)."""
    replica = _replica(4096, 1024)
    rng = np.random.default_rng(0)
    for _ in range(40):
        r = int(rng.integers(0, 200))
        context = float(rng.integers(1, 5000))
        new = float(rng.integers(1, 4096))
        past = float(rng.integers(0, 4096 - int(new) + 1))
        groups = [AttentionGroup.of(1.0, new, past)]
        if r:
            groups.insert(0, AttentionGroup.of(float(r), 1.0, context))
        engine = step_cost(
            llama_31_8b(),
            make_h100(),
            precision=PRECISION,
            parallelism=LAYOUT,
            groups=groups,
            params=PARAMS,
            phase="mixed",
        )
        table = replica.table.step_s(r, r * context, [(new, past)])
        assert table == pytest.approx(float(engine.time_s), rel=0.01)
        if r:
            decode = step_cost(
                llama_31_8b(),
                make_h100(),
                precision=PRECISION,
                parallelism=LAYOUT,
                groups=groups[:1],
                params=PARAMS,
                phase="decode",
            )
            assert replica.table.decode_s(r, r * context) == pytest.approx(
                float(decode.time_s), rel=0.01
            )
            # The leap's growth per step: one more token of context for each of the r.
            now, growth = replica.table.decode_leap(r, r * context)
            later = replica.table.decode_s(r, r * (context + 1.0))
            assert growth == pytest.approx(later - now, rel=0.05, abs=1e-9)


@pytest.mark.parametrize(("s_in", "s_out"), [(1024, 128), (128, 1024), (6000, 64)])
def test_one_request_at_a_time_reproduces_the_static_answer(s_in: int, s_out: int) -> None:
    static = estimate(
        llama_31_8b(),
        make_h100(),
        input_tokens=s_in,
        output_tokens=s_out,
        batch_sizes=[1],
        params=PARAMS,
    )
    replica = _replica(s_in, s_out)
    # Requests 1,000 s apart (nearly regular arrivals) never overlap.
    result = replica.run(
        _fixed(s_in, s_out, 0.001, num_requests=20, arrival_process="gamma", arrival_cv=0.01)
    )
    assert result.queue_wait_ms.p99 == pytest.approx(0.0, abs=1e-9)
    assert result.ttft_ms.p50 == pytest.approx(float(static.ttft_ms[0]), rel=0.01)
    assert result.tpot_ms.p50 == pytest.approx(float(static.tpot_ms[0]), rel=0.01)
    assert result.e2e_latency_ms.p50 == pytest.approx(float(static.e2e_latency_ms[0]), rel=0.01)


def _closed_loop(
    s_in: int, s_out: int, clients: int, params: EfficiencyParams = PARAMS
) -> tuple[float, float, float]:
    """Closed loop of ``clients`` clients, first requests one step slot apart (spread)."""
    replica = _replica(s_in, s_out, params)
    n = max(20 * clients, 200)
    cycle = math.ceil(s_in / 8192) + s_out - 1
    timeline = simulate(
        None,
        [s_in] * n,
        [s_out] * n,
        replica.config,
        replica.table,
        clients=clients,
        first_arrival_steps=[k * cycle // clients for k in range(clients)],
    )
    after = slice(2 * clients, n)
    ttft = float(np.mean((timeline.first_token_s - timeline.arrival_s)[after])) * 1e3
    tpot = float(np.mean((timeline.finish_s - timeline.first_token_s)[after])) / (s_out - 1) * 1e3
    finish = np.sort(timeline.finish_s)
    rate = (n - 1 - 2 * clients) / float(finish[-1] - finish[2 * clients])
    return ttft, tpot, rate


@pytest.mark.parametrize(
    ("s_in", "s_out", "clients", "eager_us"),
    [
        (1024, 128, 4, 0.0),
        (1024, 128, 16, 0.0),
        (128, 1024, 4, 0.0),
        (128, 1024, 64, 0.0),
        (4096, 256, 4, 0.0),
        # steps with a prompt at the eager launch floor (32 layers · 530 µs above their kernels)
        (128, 256, 4, 530.0),
        (128, 1024, 64, 530.0),
    ],
)
def test_closed_loop_reproduces_serving_mode_within_2_percent(
    s_in: int, s_out: int, clients: int, eager_us: float
) -> None:
    """Where serving.py's assumptions hold (below one prompt chunk per step, few prefilling
    requests), the simulated closed loop gives its TTFT, TPOT and throughput within 2%."""
    params = PARAMS.replace(eager_layer_launch_us=eager_us)
    serving = estimate(
        llama_31_8b(),
        make_h100(),
        input_tokens=s_in,
        output_tokens=s_out,
        batch_sizes=[clients],
        mode="serving",
        params=params,
    )
    ttft, tpot, rate = _closed_loop(s_in, s_out, clients, params)
    assert ttft == pytest.approx(float(serving.ttft_ms[0]), rel=0.02)
    assert tpot == pytest.approx(float(serving.tpot_ms[0]), rel=0.02)
    assert rate == pytest.approx(float(serving.requests_per_s[0]), rel=0.02)


def test_closed_loop_departs_from_serving_mode_where_it_counts_prefilling_requests() -> None:
    """serving.py decodes all R running requests every step, the prefilling ones too; the
    simulation does not, so at high concurrency of long prompts it serves faster (more than
    2% here) and never slower."""
    serving = estimate(
        llama_31_8b(),
        make_h100(),
        input_tokens=4096,
        output_tokens=256,
        batch_sizes=[64],
        mode="serving",
        params=PARAMS,
    )
    _, tpot, rate = _closed_loop(4096, 256, 64)
    assert rate > 1.02 * float(serving.requests_per_s[0])
    assert tpot < float(serving.tpot_ms[0])


def test_tail_grows_without_bound_towards_saturation() -> None:
    replica = _replica(1024, 256)
    spec = _fixed(1024, 256, 1.0)
    saturation = replica.saturation(spec)
    p99 = [
        replica.run(_fixed(1024, 256, share * saturation, num_requests=4000)).ttft_ms.p99
        for share in (0.3, 0.6, 0.85, 0.97)
    ]
    assert all(b > a for a, b in itertools.pairwise(p99))
    assert p99[-1] > 5 * p99[0]
    # Beyond saturation the queue grows with the stream: p99 scales with its length.
    over = [
        replica.run(_fixed(1024, 256, 1.2 * saturation, num_requests=n)).ttft_ms.p99
        for n in (400, 1600)
    ]
    assert over[1] > 3 * over[0]


def test_saturation_is_what_a_full_queue_completes() -> None:
    replica = _replica(2048, 512)
    inputs = LengthDistribution.from_percentiles({0.5: 800, 0.9: 1600}, maximum=2048)
    outputs = LengthDistribution.from_percentiles({0.5: 200, 0.9: 400}, maximum=512)
    saturation = replica.saturation(TrafficSpec(1.0, inputs, outputs))
    for share, expected in ((0.7, 0.7), (1.3, 1.0), (2.0, 1.0)):
        result = replica.run(TrafficSpec(share * saturation, inputs, outputs, num_requests=2000))
        assert result.achieved_requests_per_s == pytest.approx(expected * saturation, rel=0.07)


def test_goodput_is_the_largest_rate_meeting_the_targets() -> None:
    replica = _replica(1024, 256)
    spec = _fixed(1024, 256, 1.0)
    targets = [SloTarget("ttft_ms", 90.0, 200.0), SloTarget("tpot_ms", 99.0, 20.0)]
    found = replica.goodput(spec, targets)
    assert found.limited_by == "slo"
    assert 0 < found.requests_per_s < found.saturation_requests_per_s
    assert found.at_goodput is not None
    assert found.at_goodput.ttft_ms.p90 <= 200.0 and found.at_goodput.tpot_ms.p99 <= 20.0
    # 5% more load misses a target.
    over = replica.run(_fixed(1024, 256, found.requests_per_s * 1.05))
    assert over.ttft_ms.p90 > 200.0 or over.tpot_ms.p99 > 20.0
    # A TPOT target below the unloaded decode step is never met.
    never = replica.goodput(spec, [SloTarget("tpot_ms", 99.0, 1.0)])
    assert never.requests_per_s == 0.0 and never.limited_by == "unloaded_latency"


def test_prefill_first_trades_ttft_for_tpot() -> None:
    rate = 0.6 * _replica(2048, 256).saturation(_fixed(2048, 256, 1.0))
    mixed = _replica(2048, 256).run(_fixed(2048, 256, rate))
    first = _replica(2048, 256, scheduling="prefill_first").run(_fixed(2048, 256, rate))
    assert first.ttft_ms.p50 < mixed.ttft_ms.p50
    assert first.tpot_ms.p99 > mixed.tpot_ms.p99


def test_burstier_arrivals_lengthen_the_tail() -> None:
    replica = _replica(1024, 256)
    rate = 0.6 * replica.saturation(_fixed(1024, 256, 1.0))
    poisson = replica.run(_fixed(1024, 256, rate))
    bursty = replica.run(_fixed(1024, 256, rate, arrival_process="gamma", arrival_cv=3.0))
    regular = replica.run(_fixed(1024, 256, rate, arrival_process="gamma", arrival_cv=0.3))
    assert regular.ttft_ms.p99 < poisson.ttft_ms.p99 < bursty.ttft_ms.p99


@pytest.mark.parametrize(("s_in", "s_out"), [(1024, 256), (2048, 512), (128, 1024)])
@pytest.mark.parametrize("mixed", [False, True])
def test_closed_loop_capacity_is_within_15_percent_of_the_simulated_full_queue(
    s_in: int, s_out: int, mixed: bool
) -> None:
    """The fast capacity (serving.py at the running limit, mean lengths) against the simulated
    full queue: measured gaps are −13% … +12% (long outputs; mixes hold fewer requests in the
    KV cache than their mean suggests, fixed lengths prefill while others decode)."""
    replica = _replica(s_in, s_out)
    if mixed:
        inputs = LengthDistribution.from_percentiles(
            {0.5: s_in // 3, 0.9: s_in * 3 // 4}, maximum=s_in
        )
        outputs = LengthDistribution.from_percentiles(
            {0.5: s_out // 3, 0.9: s_out * 3 // 4}, maximum=s_out
        )
        spec = TrafficSpec(1.0, inputs, outputs)
    else:
        spec = _fixed(s_in, s_out, 1.0)
    assert replica.capacity(spec) == pytest.approx(replica.saturation(spec), rel=0.15)


def test_prefix_cache_hits_skip_their_prefill() -> None:
    """Hand calculation: alone on the replica, a 4,096-token prompt with half of it cached runs
    one step of 2,048 new tokens after 2,048 cached ones; its TTFT is that step's time."""
    replica = _replica(4096, 64)
    spec = _fixed(4096, 64, 0.001, num_requests=20, arrival_process="gamma", arrival_cv=0.01)
    cold = replica.run(spec)
    warm = replica.run(dataclasses.replace(spec, prefix_cache_hit_rate=0.5))
    half = step_cost(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        groups=[AttentionGroup.of(1.0, 2048.0, 2048.0)],
        params=PARAMS,
        phase="prefill",
    )
    assert warm.ttft_ms.p50 == pytest.approx(float(half.time_s) * 1e3, rel=0.01)
    assert warm.ttft_ms.p50 < 0.6 * cold.ttft_ms.p50
    assert warm.tpot_ms.p50 == pytest.approx(cold.tpot_ms.p50, rel=1e-6)  # decode unchanged


def test_speculative_decoding_gains_tokens_per_verify_step() -> None:
    """Hand calculation: k = 3 drafts accepted with α = 0.5 give E = (1 − 0.5⁴)/(1 − 0.5) =
    1.875 tokens per step; 255 tokens after the first take ceil(255/1.875) = 136 verify steps,
    each a decode step of 4 tokens (4 logit rows) at the mean context 1024 + 1 + 1.875·67.5."""
    assert tokens_per_step(3, 0.5) == pytest.approx(1.875)
    assert tokens_per_step(3, 1.0) == 4.0 and tokens_per_step(0, 0.7) == 1.0
    replica = _replica(1024, 256, draft_tokens=3, acceptance_rate=0.5)
    spec = _fixed(1024, 256, 0.001, num_requests=20, arrival_process="gamma", arrival_cv=0.01)
    result = replica.run(spec)
    verify = step_cost(
        llama_31_8b(),
        make_h100(),
        precision=PRECISION,
        parallelism=LAYOUT,
        groups=[AttentionGroup.of(1.0, 4.0, 1025.0 + 1.875 * 67.5)],
        params=PARAMS,
        phase="verify",
    )
    verify_s = float(verify.time_s) + _lm_head_s(4.0) - _lm_head_s(1.0)
    assert result.tpot_ms.p50 == pytest.approx(136 * verify_s * 1e3 / 255, rel=0.01)
    plain = _replica(1024, 256).run(spec)
    assert result.tpot_ms.p50 < 0.7 * plain.tpot_ms.p50


def test_goodput_never_exceeds_what_the_full_queue_sustains() -> None:
    """Targets so loose that a short stream beyond saturation meets them: the goodput is the
    simulated saturation rate, limited by it."""
    replica = _replica(1024, 256)
    spec = _fixed(1024, 256, 1.0)
    loose = [SloTarget("ttft_ms", 90.0, 1e9), SloTarget("tpot_ms", 99.0, 1e9)]
    found = replica.goodput(spec, loose)
    assert found.limited_by == "saturation"
    assert found.requests_per_s == pytest.approx(replica.saturation(spec))


def test_step_table_applies_the_eager_launch_floor_to_steps_with_prompt_pieces() -> None:
    """The simulator's steps price the floor as serving.py does: a step with prompt pieces lasts
    at least layers · eager_layer_launch_us plus its host overheads; decode-only steps do not."""
    plain = _replica(1024, 256)
    eager = _replica(1024, 256, PARAMS.replace(eager_layer_launch_us=500.0))
    floor_s = llama_31_8b().num_layers * 500e-6
    assert eager.table.decode_s(16, 16 * 600.0) == plain.table.decode_s(16, 16 * 600.0)
    short = plain.table.step_s(16, 16 * 600.0, [(128.0, 0.0)])
    overhead_s = plain.table.overhead_rows_s[17]
    assert short - overhead_s < floor_s
    assert eager.table.step_s(16, 16 * 600.0, [(128.0, 0.0)]) == pytest.approx(
        overhead_s + floor_s, rel=1e-12
    )
    long = plain.table.step_s(16, 16 * 600.0, [(1024.0, 0.0)] * 8)
    assert long - plain.table.overhead_rows_s[24] > floor_s
    assert eager.table.step_s(16, 16 * 600.0, [(1024.0, 0.0)] * 8) == long


@pytest.mark.parametrize(
    ("model_id", "weights"),
    [("gemma-3-27b", "bf16"), ("gpt-oss-120b", "fp4"), ("llama-3.1-8b", "bf16")],
)
@pytest.mark.parametrize("context", [2048, 9216, 32768])
def test_kv_admission_holds_what_memory_says_with_sliding_windows(
    model_id: str, weights: str, context: int
) -> None:
    # Sliding-window layers hold a request's last window only (gemma-3: 5 of 6 layers at 1024
    # tokens; gpt-oss: 18 of 36 at 128): the simulator admits as many requests of a length as
    # the memory answer says fit (within one: memory also holds each sequence's logit row).
    model = {str(r["id"]): model_from_record(r) for r in load_model_records()}[model_id]
    h100 = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}[
        "h100-sxm"
    ]
    precision = Precision(weights=weights)
    config = scheduler_config(
        model, h100, precision=precision, parallelism=LAYOUT, max_num_batched_tokens=8192,
        max_running_requests=None, scheduling="decode_first",
    )  # fmt: skip
    fits = max_batch_size(
        model, h100, precision=precision, parallelism=LAYOUT, context_tokens=context,
        step_tokens=8192,
    )  # fmt: skip
    assert fits >= 3
    assert 0 <= config.requests_held(context) - fits <= 1


def test_the_step_table_prices_the_busiest_attention_dp_rank() -> None:
    """DeepSeek-V3 fp8 on 8 H200s at attention_dp 8 × ep 8: a decode step of r sequences, and
    one with a prompt piece, is ``step_cost``'s (within 1%): attention and the rank's GEMMs run
    on the busiest rank's ceil(r / 8) sequences, a piece whole on one rank, and 9 pieces put 2
    on the busiest."""
    records = {str(r["id"]): r for r in load_model_records()}
    dsv3 = model_from_record(records["deepseek-v3"])
    h200 = next(
        accelerator_from_record(r) for r in load_accelerator_records() if r["id"] == "h200-sxm"
    )
    fp8 = Precision(weights="fp8", activations="fp8")
    layout = Parallelism(tp=1, attention_dp=8, ep=8)
    replica = Replica.prepare(
        dsv3, h200, precision=fp8, parallelism=layout, params=PARAMS,
        max_num_batched_tokens=8192, max_running_requests=None, scheduling="decode_first",
        max_input_tokens=4096, max_output_tokens=1024,
    )  # fmt: skip
    table = replica.table
    for r in (1, 5, 8, 9, 64, 100):
        decode = step_cost(
            dsv3, h200, precision=fp8, parallelism=layout, params=PARAMS, phase="decode",
            groups=[AttentionGroup.of(float(r), 1.0, 3000.0)],
        )  # fmt: skip
        assert table.decode_s(r, r * 3000.0) == pytest.approx(float(decode.time_s), rel=0.01), r
        # With a prompt piece (whole on one rank; the routed experts take every token).
        piece = AttentionGroup.of(1.0, 2000.0, 1000.0)
        mixed = step_cost(
            dsv3, h200, precision=fp8, parallelism=layout, params=PARAMS, phase="mixed",
            groups=[AttentionGroup.of(float(r), 1.0, 3000.0), piece],
        )  # fmt: skip
        table_s = table.step_s(r, r * 3000.0, [(2000.0, 1000.0)])
        assert table_s == pytest.approx(float(mixed.time_s), rel=0.01), r
    # Nine prompt pieces: the busiest rank prefills two of them.
    nine = step_cost(
        dsv3, h200, precision=fp8, parallelism=layout, params=PARAMS, phase="prefill",
        groups=[AttentionGroup.of(9.0, 800.0, 0.0)],
    )  # fmt: skip
    table_s = table.step_s(0, 0.0, [(800.0, 0.0)] * 9)
    assert table_s == pytest.approx(float(nine.time_s), rel=0.01)
