"""Serving steady state: where the other requests' prompts land (TTFT or the decode window)."""

from __future__ import annotations

import numpy as np
import pytest

from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.operators import AttentionGroup, step_costs
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.serving import ServingState, serving_state
from service.engine.shapes import ModelShape

CONCURRENCY = np.array([1.0, 2.0, 8.0, 32.0, 128.0])


def _state(
    model: ModelShape,
    h100: Accelerator,
    s_in: float,
    s_out: float,
    params: EfficiencyParams = DEFAULT_EFFICIENCY,
) -> ServingState:
    """Every client holds a slot (no KV-cache cap)."""
    return serving_state(
        model,
        h100,
        concurrency=CONCURRENCY,
        max_running=0.0,
        input_tokens=s_in,
        output_tokens=s_out,
        precision=Precision(),
        parallelism=Parallelism(),
        params=params,
    )


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_a_lone_client_decodes_at_the_decode_step(
    llama8b: ModelShape, h100: Accelerator, share: float
) -> None:
    state = _state(llama8b, h100, 2048, 256, DEFAULT_EFFICIENCY.replace(prefill_queue_share=share))
    assert state.tpot_s[0] == pytest.approx(state.decode_only.time_s[0], rel=1e-12)
    # others' prompts slow the decode window unless all of them run ahead (share 1)
    if share < 1.0:
        assert np.all(state.tpot_s[1:] > state.decode_only.time_s[1:])
    else:
        np.testing.assert_allclose(state.tpot_s, state.decode_only.time_s, rtol=1e-12)


@pytest.mark.parametrize(("s_in", "s_out"), [(128, 2), (1024, 128), (2048, 1024), (20000, 64)])
def test_prompts_move_between_ttft_and_the_decode_window(
    llama8b: ModelShape, h100: Accelerator, s_in: int, s_out: int
) -> None:
    """Lockstep waves (share ½ and above: a prompt costs its share of a wave's step) with half
    of the other prompts ahead, and with all of them ahead."""
    half = _state(llama8b, h100, s_in, s_out, DEFAULT_EFFICIENCY.replace(prefill_queue_share=0.5))
    whole = _state(llama8b, h100, s_in, s_out, DEFAULT_EFFICIENCY.replace(prefill_queue_share=1.0))
    np.testing.assert_allclose(whole.prompt_s, half.prompt_s, rtol=1e-12)
    gained = whole.ttft_s - half.ttft_s
    lost = (s_out - 1) * (half.tpot_s - whole.tpot_s)
    np.testing.assert_allclose(gained, lost, rtol=1e-9, atol=1e-12)
    # the other half of the other R − 1 prompts change sides
    np.testing.assert_allclose(gained, 0.5 * (CONCURRENCY - 1) * half.prompt_s, rtol=1e-9)
    # every slot still prefills R prompts per cycle: the cycle and the throughput do not move
    np.testing.assert_allclose(whole.e2e_s, half.e2e_s, rtol=1e-12)
    np.testing.assert_allclose(whole.requests_per_s, half.requests_per_s, rtol=1e-12)


def test_prompts_ahead_per_ln_running_move_from_the_decode_window(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    spread = _state(llama8b, h100, 1024, 256)
    partly = _state(
        llama8b, h100, 1024, 256, DEFAULT_EFFICIENCY.replace(prefill_queue_ln_prompts=0.8)
    )
    gained = partly.ttft_s - spread.ttft_s
    np.testing.assert_allclose(gained, 0.8 * np.log(CONCURRENCY) * spread.prompt_s, rtol=1e-9)
    np.testing.assert_allclose(gained, 255 * (spread.tpot_s - partly.tpot_s), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(partly.e2e_s, spread.e2e_s, rtol=1e-12)
    # never more prompts ahead than there are others: with a share of 1 every other prompt is
    # already ahead, and the decode window holds none
    every = DEFAULT_EFFICIENCY.replace(prefill_queue_share=1.0, prefill_queue_ln_prompts=1.0)
    capped = _state(llama8b, h100, 1024, 256, every)
    np.testing.assert_allclose(capped.tpot_s, capped.decode_only.time_s, rtol=1e-12)
    all_ahead = _state(llama8b, h100, 1024, 256, every.replace(prefill_queue_ln_prompts=0.0))
    np.testing.assert_allclose(capped.e2e_s, all_ahead.e2e_s, rtol=1e-12)


def test_the_prefill_in_a_decode_window_does_not_depend_on_the_answer_length(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    # Fewer than one prompt per step: each of the other R − 1 prompts runs as one 2048-token
    # chunk beside the decode tokens, wherever it lands, so the time the prompts add to a
    # request's decode window is R − 1 prompts, however many steps the window has. (Spreading
    # R/S_out prompts as slivers over every step instead charges per-step prefill kernel launches
    # S_out − 1 times and lets slivers hide under memory-bound steps: 88 ms at S_out = 128 and
    # 825 ms at 2048 for R = 8 here.)
    added = []
    for s_out in (128, 512, 2048):
        state = _state(llama8b, h100, 2048, s_out)
        added.append((s_out - 1) * (state.tpot_s - state.decode_only.time_s))
    np.testing.assert_allclose(added[1], added[0], rtol=0.02)
    np.testing.assert_allclose(added[2], added[0], rtol=0.02)
    # each prompt adds at least its GEMM work at peak minus the decode step it rides with
    prompt_compute_s = 2 * 8.0e9 * 2048 / h100.peak_flops_s("bf16")  # ≈ 33 ms
    state = _state(llama8b, h100, 2048, 128)
    floor = (CONCURRENCY - 1) * (prompt_compute_s - state.decode_only.time_s)
    assert np.all(added[0] >= floor)


@pytest.mark.parametrize("s_out", [1, 2, 8])
def test_short_answers_pack_prompts_into_shared_steps(
    llama8b: ModelShape, h100: Accelerator, s_out: int
) -> None:
    # more than one prompt arrives per step: they share steps and throughput keeps rising
    r = estimate(
        llama8b,
        h100,
        input_tokens=512,
        output_tokens=s_out,
        batch_sizes=[16, 64, 169, 257, 512],
        mode="serving",
    )
    fitting = r.requests_per_s[r.fits]
    assert fitting.size >= 3
    assert np.all(np.diff(fitting) >= 0)


def test_a_step_carrying_a_prompt_lasts_at_least_the_eager_launch_time(
    llama8b: ModelShape, h100: Accelerator
) -> None:
    """Launched outside a CUDA graph, a mixed step takes layers · eager_layer_launch_us plus its
    host overheads when its kernels take less; decode-only steps and long prompts keep theirs."""
    eager = DEFAULT_EFFICIENCY.replace(eager_layer_launch_us=500.0)
    floor_s = llama8b.num_layers * 500e-6
    short, short_eager = _state(llama8b, h100, 128, 256), _state(llama8b, h100, 128, 256, eager)
    np.testing.assert_allclose(short_eager.decode_only.time_s, short.decode_only.time_s)
    mixed = short.mixed_step
    kernels_s = mixed.time_s - mixed.overhead_s
    assert np.all(kernels_s < floor_s)  # 128 new tokens run in far less than 16 ms
    per_step = np.maximum(CONCURRENCY / 256.0, 1.0)  # one chunk each, over 256 steps
    expected = (mixed.overhead_s + floor_s - short.decode_only.time_s) / per_step
    np.testing.assert_allclose(short_eager.prompt_s, expected, rtol=1e-12)
    assert np.all(short_eager.tpot_s[1:] > short.tpot_s[1:])
    long, long_eager = _state(llama8b, h100, 8192, 256), _state(llama8b, h100, 8192, 256, eager)
    assert np.all(long.mixed_step.time_s - long.mixed_step.overhead_s > floor_s)
    np.testing.assert_allclose(long_eager.prompt_s, long.prompt_s, rtol=1e-12)


def test_a_lone_client_waits_for_no_step(llama8b: ModelShape, h100: Accelerator) -> None:
    """The admission wait counts decode steps of other requests; one client has none."""
    none = _state(llama8b, h100, 1024, 128, DEFAULT_EFFICIENCY.replace(admission_wait_steps=0.0))
    waits = _state(llama8b, h100, 1024, 128, DEFAULT_EFFICIENCY.replace(admission_wait_steps=6.0))
    # alone: the first token is its own prefill, whatever wait a fit learned from many clients
    assert waits.ttft_s[0] == pytest.approx(none.ttft_s[0], rel=1e-12)
    # from two clients on, the wait adds that many decode-only steps
    np.testing.assert_allclose(
        waits.ttft_s[1:] - none.ttft_s[1:], 6.0 * none.decode_only.time_s[1:], rtol=1e-9
    )


def test_an_offline_batch_is_one_lockstep_wave(llama8b: ModelShape, h100: Accelerator) -> None:
    """Queued at once, a batch starts together: half the others' prompts run ahead of each
    request's first token, whatever share the scheduler keeps in a closed loop."""

    def offline(share: float) -> ServingState:
        return serving_state(
            llama8b,
            h100,
            concurrency=CONCURRENCY,
            max_running=0.0,
            input_tokens=1024,
            output_tokens=256,
            precision=Precision(),
            parallelism=Parallelism(),
            params=DEFAULT_EFFICIENCY.replace(prefill_queue_share=share),
            offline=True,
        )

    waves = _state(llama8b, h100, 1024, 256, DEFAULT_EFFICIENCY.replace(prefill_queue_share=0.5))
    for share in (0.0, 1.0):
        state = offline(share)
        np.testing.assert_allclose(state.ttft_s, waves.ttft_s, rtol=1e-12)
        np.testing.assert_allclose(state.tpot_s, waves.tpot_s, rtol=1e-12)


@pytest.mark.parametrize(("share", "wave"), [(0.0, False), (0.5, True)])
def test_attention_dp_runs_a_lone_prompt_on_one_rank_and_a_wave_side_by_side(
    dsv3: ModelShape, h200: Accelerator, share: float, wave: bool
) -> None:
    """DeepSeek-V3 fp8 on 8 H200s, attention_dp 8 × ep 8, 16 clients of 1,024-token prompts
    (one chunk each). Spread arrivals (share 0): another client's prompt shares a step with no
    other prompt and runs whole on one rank, so it costs the step it adds to the decode step
    (decode + 1 chunk). A lockstep wave (share ½): the 16 prompts run at once, 2 per rank
    (each rank's 8,192-token step budget holds 8), each costing a 16th of the step they add."""
    fp8 = Precision(weights="fp8", activations="fp8")
    layout = Parallelism(tp=1, attention_dp=8, ep=8)
    params = DEFAULT_EFFICIENCY.replace(prefill_queue_share=share)
    state = serving_state(
        dsv3, h200, concurrency=np.array([16.0]), max_running=0.0, input_tokens=1024.0,
        output_tokens=512.0, precision=fp8, parallelism=layout, params=params,
    )  # fmt: skip
    side_by_side = 16.0 if wave else 1.0
    decode = AttentionGroup.of(16.0, 1.0, 1024.0 + 256.0)
    prompts = AttentionGroup.of(side_by_side, 1024.0, 0.0)
    decode_only, with_prompts = step_costs(
        dsv3, h200, precision=fp8, parallelism=layout, params=params, points=1,
        steps=[("decode", [decode]), ("mixed", [decode, prompts])],
    )  # fmt: skip
    by_hand = (with_prompts.time_s - decode_only.time_s) / side_by_side
    assert state.prompt_s == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize(("clients", "together"), [(4.0, 4.0), (32.0, 8.0)])
def test_a_lockstep_wave_fills_the_step_budget(
    llama8b: ModelShape, h100: Accelerator, clients: float, together: float
) -> None:
    """Llama-3.1-8B, 1,024-token prompts, share ½ (lockstep waves): a wave's prompts run as
    many to a step as the 8,192-token step budget holds (8), at most the wave's R, and each
    costs its share of what they add to the decode step."""
    params = DEFAULT_EFFICIENCY.replace(prefill_queue_share=0.5)
    state = serving_state(
        llama8b, h100, concurrency=np.array([clients]), max_running=0.0, input_tokens=1024.0,
        output_tokens=256.0, precision=Precision(), parallelism=Parallelism(), params=params,
    )  # fmt: skip
    decode = AttentionGroup.of(clients, 1.0, 1024.0 + 128.0)
    prompts = AttentionGroup.of(together, 1024.0, 0.0)
    decode_only, with_prompts = step_costs(
        llama8b, h100, precision=Precision(), parallelism=Parallelism(), params=params,
        points=1, steps=[("decode", [decode]), ("wave", [decode, prompts])],
    )  # fmt: skip
    by_hand = (with_prompts.time_s - decode_only.time_s) / together
    assert state.prompt_s == pytest.approx(by_hand, rel=1e-9)
