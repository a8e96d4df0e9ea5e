"""Estimate entry point: static and serving timelines, throughput, cost, energy, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from engine_refs import make_a100

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import EngineError, InvalidLayoutError, UnsupportedDtypeError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.operators import AttentionGroup, decode_step, prefill_step, step_cost
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

BATCHES = np.array([1.0, 8.0, 64.0, 256.0])


def test_static_timeline(llama8b: ModelShape, h100: Accelerator) -> None:
    r = estimate(llama8b, h100, input_tokens=1024, output_tokens=128, batch_sizes=BATCHES)
    np.testing.assert_allclose(r.e2e_latency_ms, r.ttft_ms + 127 * r.tpot_ms)
    np.testing.assert_allclose(r.requests_per_s, BATCHES / (r.e2e_latency_ms / 1e3))
    np.testing.assert_allclose(r.total_tokens_per_s, r.requests_per_s * (1024 + 128))
    np.testing.assert_allclose(r.output_tokens_per_s, r.requests_per_s * 128)
    assert list(r.decode_bound) == ["memory"] * 4
    assert list(r.prefill_bound) == ["compute"] * 4
    # Batch-1 decode of an 8B bf16 model streams ~16 GB per token: 5–8 ms on an H100.
    assert 5.0 < r.tpot_ms[0] < 8.0


def test_static_ttft_prices_whole_batch_prefill(llama8b: ModelShape, h100: Accelerator) -> None:
    r = estimate(llama8b, h100, input_tokens=1024, output_tokens=16, batch_sizes=[1, 16])
    # Prefill is compute-bound, so 16 prompts take close to 16× one prompt.
    assert r.ttft_ms[1] / r.ttft_ms[0] == pytest.approx(16, rel=0.2)


def test_cost_and_energy(llama8b: ModelShape, h100: Accelerator) -> None:
    r = estimate(
        llama8b,
        h100,
        input_tokens=1024,
        output_tokens=128,
        batch_sizes=BATCHES,
        price_usd_per_hour=2.0,
        parallelism=Parallelism(tp=2),
    )
    assert r.usd_per_hour == 4.0
    run_usd = 4.0 * r.e2e_latency_ms / 1e3 / 3600
    billed = (
        r.usd_per_million_input_tokens * BATCHES * 1024
        + r.usd_per_million_output_tokens * BATCHES * 128
    ) / 1e6
    np.testing.assert_allclose(billed, run_usd, rtol=1e-9)
    np.testing.assert_allclose(r.energy_per_output_token_j, 700 * 2 / r.output_tokens_per_s)
    assert np.all(np.diff(r.usd_per_million_output_tokens) < 0)


def test_missing_price_gives_nan(llama8b: ModelShape, h200: Accelerator) -> None:
    r = estimate(llama8b, h200, input_tokens=128, output_tokens=8, batch_sizes=[1])
    assert r.usd_per_hour is None
    assert np.isnan(r.usd_per_million_output_tokens).all()


def test_serving_unified_step_is_cheaper_than_separate_passes(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    kwargs = {"precision": Precision(), "parallelism": Parallelism(), "params": DEFAULT_EFFICIENCY}
    decode = AttentionGroup.of(64.0, 1.0, 1088.0)
    prompts = AttentionGroup.of(0.5, 1024.0, 0.0)
    mixed = step_cost(llama8b, h100, groups=[decode, prompts], phase="mixed", **kwargs)  # type: ignore[arg-type]
    separate = decode_step(llama8b, h100, batch_size=64.0, context_tokens=1088.0, **kwargs)  # type: ignore[arg-type]
    separate_pf = prefill_step(llama8b, h100, batch_size=0.5, input_tokens=1024.0, **kwargs)  # type: ignore[arg-type]
    assert float(mixed.time_s) < float(separate.time_s + separate_pf.time_s)


def test_serving(llama8b: ModelShape, h100: Accelerator) -> None:
    r = estimate(
        llama8b,
        h100,
        input_tokens=1024,
        output_tokens=128,
        batch_sizes=[1, 16, 64, 4096],
        mode="serving",
    )
    assert r.max_batch_size < 4096
    assert r.queue_wait_ms[:3].tolist() == [0.0, 0.0, 0.0]
    assert r.queue_wait_ms[3] > 0
    assert r.running_batch_size[3] == r.max_batch_size
    assert r.fits.all()
    np.testing.assert_allclose(r.e2e_latency_ms, r.ttft_ms + 127 * r.tpot_ms)
    # Closed loop (Little's law): concurrency = throughput × response time.
    np.testing.assert_allclose(r.requests_per_s * r.e2e_latency_ms / 1e3, r.batch_size)
    assert np.all(np.diff(r.tpot_ms) >= 0)
    static = estimate(llama8b, h100, input_tokens=1024, output_tokens=128, batch_sizes=[64])
    # Serving TPOT carries the other requests' prompts run in its decode window, so it exceeds
    # the pure decode step.
    assert r.tpot_ms[2] > static.tpot_ms[0]


def test_serving_long_prompt_is_chunked(llama8b: ModelShape, h100: Accelerator) -> None:
    short = estimate(
        llama8b, h100, input_tokens=8192, output_tokens=64, batch_sizes=[1], mode="serving"
    )
    long = estimate(
        llama8b, h100, input_tokens=32768, output_tokens=64, batch_sizes=[1], mode="serving"
    )
    assert long.ttft_ms[0] > 4 * short.ttft_ms[0]


def test_moe_and_mla_estimates_run(dsv3: ModelShape, h200: Accelerator) -> None:
    r = estimate(
        dsv3,
        h200,
        precision=Precision("fp8", "fp8"),
        parallelism=Parallelism(tp=8),
        input_tokens=1024,
        output_tokens=256,
        batch_sizes=BATCHES,
        mode="serving",
    )
    assert r.fits.all()
    assert r.weights_gb[0] == pytest.approx(671e9 / 8 / 1e9, rel=0.05)
    ep = estimate(
        dsv3,
        h200,
        precision=Precision("fp8", "fp8"),
        parallelism=Parallelism(tp=8, ep=8),
        input_tokens=1024,
        output_tokens=256,
        batch_sizes=BATCHES,
    )
    assert np.all(np.isfinite(ep.tpot_ms))


def test_errors(llama8b: ModelShape, h100: Accelerator) -> None:
    with pytest.raises(UnsupportedDtypeError):
        estimate(
            llama8b,
            make_a100(),
            precision=Precision("fp8", "fp8"),
            input_tokens=8,
            output_tokens=8,
            batch_sizes=[1],
        )
    with pytest.raises(UnsupportedDtypeError):
        estimate(
            llama8b,
            h100,
            precision=Precision(weights="fp6"),
            input_tokens=8,
            output_tokens=8,
            batch_sizes=[1],
        )
    with pytest.raises(InvalidLayoutError):
        estimate(
            llama8b,
            h100,
            parallelism=Parallelism(tp=5),
            input_tokens=8,
            output_tokens=8,
            batch_sizes=[1],
        )
    with pytest.raises(EngineError):
        estimate(llama8b, h100, input_tokens=8, output_tokens=8, batch_sizes=[0])
    with pytest.raises(EngineError):
        estimate(llama8b, h100, input_tokens=8, output_tokens=8, batch_sizes=[1], mode="burst")


def test_precision_compute_dtype() -> None:
    assert Precision("fp8", "fp8").compute_dtype == "fp8"
    assert Precision("int4", "bf16").compute_dtype == "bf16"
    assert Precision("fp8", "bf16").compute_dtype == "bf16"
    assert Precision("int4", "fp8").compute_dtype == "fp8"
    assert Precision("bf16", "fp8").compute_dtype == "bf16"


def test_sequence_overhead_scales_with_the_running_batch(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    # every sequence charged in full (the knee far beyond these batches; see the next tests)
    per_sequence = DEFAULT_EFFICIENCY.replace(
        sequence_overhead_us=100.0, sequence_overhead_full_batch=1e6
    )
    kwargs = {"input_tokens": 1024, "output_tokens": 128, "batch_sizes": BATCHES}
    plain = estimate(llama8b, h100, **kwargs)  # type: ignore[arg-type]
    slowed = estimate(llama8b, h100, params=per_sequence, **kwargs)  # type: ignore[arg-type]
    np.testing.assert_allclose(slowed.tpot_ms - plain.tpot_ms, BATCHES * 0.1)
    np.testing.assert_allclose(slowed.ttft_ms - plain.ttft_ms, BATCHES * 0.1)
    serving = {**kwargs, "mode": "serving"}
    plain_s = estimate(llama8b, h100, **serving)  # type: ignore[arg-type]
    slowed_s = estimate(llama8b, h100, params=per_sequence, **serving)  # type: ignore[arg-type]
    # each decode step carries R sequences; the other R − 1 prompts of the cycle (queue share 0)
    # each add one sequence to the one step their single chunk runs in, over S_out − 1 steps
    running = plain_s.running_batch_size
    np.testing.assert_allclose(
        slowed_s.tpot_ms - plain_s.tpot_ms, (running + (running - 1) / 127) * 0.1, rtol=1e-6
    )


def test_sequence_layer_overhead_scales_with_sequences_times_layers(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    per_layer = DEFAULT_EFFICIENCY.replace(sequence_layer_overhead_us=0.5)
    batches = np.array([1.0, 8.0, 64.0, 128.0])  # up to the default full batch (128)
    kwargs = {"input_tokens": 1024, "output_tokens": 128, "batch_sizes": batches}
    plain = estimate(llama8b, h100, **kwargs)  # type: ignore[arg-type]
    slowed = estimate(llama8b, h100, params=per_layer, **kwargs)  # type: ignore[arg-type]
    expected_ms = batches * llama8b.num_layers * 0.5e-3
    np.testing.assert_allclose(slowed.tpot_ms - plain.tpot_ms, expected_ms)
    half = dataclasses.replace(llama8b, num_layers=llama8b.num_layers // 2)
    plain_half = estimate(half, h100, **kwargs)  # type: ignore[arg-type]
    slowed_half = estimate(half, h100, params=per_layer, **kwargs)  # type: ignore[arg-type]
    np.testing.assert_allclose(slowed_half.tpot_ms - plain_half.tpot_ms, expected_ms / 2)


def test_sharded_sequence_cost_is_divided_over_the_tp_ranks(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """``sequence_layer_sharded_us`` at tp costs what ``sequence_layer_overhead_us`` / tp does."""
    kwargs = {"input_tokens": 1024, "output_tokens": 128, "batch_sizes": np.array([1.0, 64.0])}
    for tp in (1, 2, 8):
        layout = Parallelism(tp=tp)
        plain = estimate(llama8b, h100, parallelism=layout, **kwargs)  # type: ignore[arg-type]
        sharded = DEFAULT_EFFICIENCY.replace(sequence_layer_sharded_us=0.8)
        unsharded = DEFAULT_EFFICIENCY.replace(sequence_layer_overhead_us=0.8 / tp)
        got = estimate(llama8b, h100, parallelism=layout, params=sharded, **kwargs)  # type: ignore[arg-type]
        same = estimate(llama8b, h100, parallelism=layout, params=unsharded, **kwargs)  # type: ignore[arg-type]
        np.testing.assert_allclose(got.tpot_ms, same.tpot_ms, rtol=1e-12)
        added_ms = kwargs["batch_sizes"] * llama8b.num_layers * 0.8e-3 / tp
        np.testing.assert_allclose(got.tpot_ms - plain.tpot_ms, added_ms, rtol=1e-9)


def test_sequence_overhead_beyond_full_batch_grows_by_log(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    # static batches on both sides of a 64-sequence knee: 1.0 µs per sequence per layer
    batches = np.array([32.0, 64.0, 256.0, 1024.0])
    kwargs = {"input_tokens": 128, "output_tokens": 128, "batch_sizes": batches}
    knee = DEFAULT_EFFICIENCY.replace(sequence_overhead_full_batch=64.0)
    plain = estimate(llama8b, h100, params=knee, **kwargs)  # type: ignore[arg-type]
    slowed = estimate(  # type: ignore[arg-type]
        llama8b, h100, params=knee.replace(sequence_layer_overhead_us=1.0), **kwargs
    )
    charged = np.array([32.0, 64.0, 64.0 * (1 + np.log(4.0)), 64.0 * (1 + np.log(16.0))])
    np.testing.assert_allclose(
        slowed.tpot_ms - plain.tpot_ms, charged * llama8b.num_layers * 1e-3, rtol=1e-9
    )
    # one request costs the same as through the one-point path
    single = estimate(  # type: ignore[arg-type]
        llama8b,
        h100,
        params=knee.replace(sequence_layer_overhead_us=1.0),
        input_tokens=128,
        output_tokens=128,
        batch_sizes=[1024.0],
    )
    assert single.tpot_ms[0] == pytest.approx(slowed.tpot_ms[-1], rel=1e-12)


def test_prefill_queue_share_waits_behind_other_prompts(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    kwargs = {"input_tokens": 2048, "output_tokens": 256, "batch_sizes": [1.0, 16.0, 64.0]}
    plain = estimate(llama8b, h100, mode="serving", **kwargs)  # type: ignore[arg-type]
    lockstep = DEFAULT_EFFICIENCY.replace(prefill_queue_share=0.5)
    waves = estimate(llama8b, h100, mode="serving", params=lockstep, **kwargs)  # type: ignore[arg-type]
    # the prompts a request waits behind no longer run while it decodes
    moved = plain.tpot_ms - waves.tpot_ms
    assert moved[0] == pytest.approx(0.0, abs=1e-9)
    assert np.all(moved[1:] > 0)
    extra = waves.ttft_ms - plain.ttft_ms
    assert extra[0] == pytest.approx(0.0, abs=1e-9)  # alone: nobody ahead
    # half of the other R − 1 prompts ahead, each adding at least its own prefill compute
    flops_per_prompt = 2 * 8.0e9 * 2048
    min_prompt_ms = flops_per_prompt / h100.peak_flops_s("bf16") * 1e3
    assert extra[1] > 0.5 * 15 * min_prompt_ms
    assert extra[2] / extra[1] == pytest.approx(63 / 15, rel=0.25)
    # every slot still prefills R prompts per cycle: with every other prompt ahead (share 1),
    # what TTFT gains the decode window loses, and the throughput does not move
    whole = DEFAULT_EFFICIENCY.replace(prefill_queue_share=1.0)
    ahead = estimate(llama8b, h100, mode="serving", params=whole, **kwargs)  # type: ignore[arg-type]
    gained = ahead.ttft_ms - waves.ttft_ms
    np.testing.assert_allclose(gained, 255 * (waves.tpot_ms - ahead.tpot_ms), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ahead.requests_per_s, waves.requests_per_s, rtol=1e-12)


def test_offline_queue_uses_engine_terms_and_half_the_closed_loop_wait(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """C requests queued at once run in batches of R: mean wait (C/R − 1)·T/2 (closed loop:
    (C/R − 1)·T), with the closed-loop harness terms left at their priors; each batch starts
    together, one lockstep wave (queue share ½)."""
    harness = DEFAULT_EFFICIENCY.replace(admission_wait_steps=20.0, prefill_queue_ln_prompts=1.0)
    engine = DEFAULT_EFFICIENCY.replace(prefill_queue_share=0.5)
    args = {"input_tokens": 1024, "output_tokens": 256, "mode": "serving"}
    small = estimate(llama8b, h100, batch_sizes=[64], params=engine, **args)
    limit = small.max_batch_size
    queued = 4 * limit
    offline = estimate(
        llama8b, h100, batch_sizes=[queued], params=harness, load_pattern="offline", **args
    )
    closed = estimate(llama8b, h100, batch_sizes=[queued], params=engine, **args)
    # same engine terms, so the same steps and throughput; the harness terms did not apply
    assert float(offline.tpot_ms[0]) == pytest.approx(float(closed.tpot_ms[0]))
    assert float(offline.requests_per_s[0]) == pytest.approx(float(closed.requests_per_s[0]))
    own_ms = float(closed.ttft_ms[0]) - float(closed.queue_wait_ms[0])
    assert float(offline.ttft_ms[0]) - own_ms == pytest.approx(float(closed.queue_wait_ms[0]) / 2)
    assert float(closed.queue_wait_ms[0]) > 0
    with pytest.raises(EngineError, match="needs mode serving"):
        estimate(llama8b, h100, batch_sizes=[1], input_tokens=8, output_tokens=8,
                 load_pattern="offline")  # fmt: skip
    with pytest.raises(EngineError, match="load_pattern must be one of"):
        estimate(llama8b, h100, batch_sizes=[1], load_pattern="open", **args)


def test_ttft_parts_name_the_admission_wait_and_the_prompts_ahead(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """ttft_ms = queue wait + admission wait + prompts ahead + the request's own prompt: each
    part moves with its own term alone, and a static batch or a lone client has neither."""
    args = {"input_tokens": 1024, "output_tokens": 256, "mode": "serving"}
    plain = DEFAULT_EFFICIENCY.replace(
        admission_wait_steps=0.0, prefill_queue_share=0.0, prefill_queue_ln_prompts=0.0
    )
    runs = {
        "plain": plain,
        "waiting": plain.replace(admission_wait_steps=3.0),
        "ahead": plain.replace(prefill_queue_ln_prompts=1.0),
    }
    got = {
        k: estimate(llama8b, h100, batch_sizes=[1, 16], params=p, **args) for k, p in runs.items()
    }
    base = got["plain"]
    assert base.admission_wait_ms.tolist() == [0.0, 0.0]
    assert base.prompts_ahead_ms.tolist() == [0.0, 0.0]
    waiting, ahead = got["waiting"], got["ahead"]
    # three decode steps at concurrency 16, none for a lone client (the engine is idle)
    assert waiting.admission_wait_ms[0] == 0.0
    assert waiting.ttft_ms[1] - base.ttft_ms[1] == pytest.approx(waiting.admission_wait_ms[1])
    assert waiting.admission_wait_ms[1] == pytest.approx(3.0 * waiting.tpot_ms[1], rel=0.25)
    # ln 16 of the 15 other prompts run first: TTFT grows by exactly that part, the same steps
    assert ahead.prompts_ahead_ms[1] > 0.0
    assert ahead.ttft_ms[1] - base.ttft_ms[1] == pytest.approx(ahead.prompts_ahead_ms[1])
    assert ahead.queue_wait_ms[1] == 0.0 and ahead.admission_wait_ms[1] == 0.0
    static = estimate(llama8b, h100, batch_sizes=[8], input_tokens=1024, output_tokens=256)
    assert static.admission_wait_ms.tolist() == [0.0] and static.prompts_ahead_ms.tolist() == [0.0]


def test_open_loop_arrivals_take_the_engine_terms_spread_over_the_decode_cycle(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """Requests that arrive on their own (open loop), R in flight on average: the closed loop's
    harness terms stay at their priors, and the arrivals are spread over the decode cycle
    (queue share 0), not a lockstep wave (½) even where the scheduler's prior is ½."""
    fitted = DEFAULT_EFFICIENCY.replace(
        admission_wait_steps=20.0, prefill_queue_share=0.5, prefill_queue_ln_prompts=1.0
    )
    args = {"input_tokens": 1024, "output_tokens": 256, "mode": "serving"}
    levels = [1, 16, 64]
    opened = estimate(
        llama8b, h100, batch_sizes=levels, params=fitted, load_pattern="open_loop", **args
    )
    plain = estimate(llama8b, h100, batch_sizes=levels, params=DEFAULT_EFFICIENCY, **args)
    closed = estimate(llama8b, h100, batch_sizes=levels, params=fitted, **args)
    np.testing.assert_allclose(opened.ttft_ms, plain.ttft_ms, rtol=1e-12)
    np.testing.assert_allclose(opened.tpot_ms, plain.tpot_ms, rtol=1e-12)
    # a lone request finds the engine idle either way; with others in flight the closed loop's
    # fitted admission wait and prompts ahead come on top
    assert float(closed.ttft_ms[0]) == pytest.approx(float(opened.ttft_ms[0]), rel=1e-12)
    assert np.all(closed.ttft_ms[1:] > opened.ttft_ms[1:])
    with pytest.raises(EngineError, match="needs mode serving"):
        estimate(llama8b, h100, batch_sizes=[1], input_tokens=8, output_tokens=8,
                 load_pattern="open_loop")  # fmt: skip
