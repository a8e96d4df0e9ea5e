"""Continuous-batching steady state for a closed loop of C concurrent requests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.engine.efficiency import LOCKSTEP_QUEUE_SHARE, EfficiencyParams
from service.engine.kernels import (
    FloatArray,
    Hardware,
    ceil,
    floor,
    is_scalar,
    log,
    maximum,
    minimum,
    values,
    where,
)
from service.engine.operators import AttentionGroup, StepCost, step_costs
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape


@dataclass(frozen=True, slots=True)
class ServingState:
    """Steady-state times of a closed loop, one entry per concurrency (seconds unless named)."""

    running: FloatArray  # requests in the step stream (concurrency capped by KV-cache room)
    mixed_step: StepCost  # the R decode tokens plus the prompt chunks that share a step
    decode_only: StepCost  # the running batch's decode step without prefill work
    prefill_chunks: FloatArray
    prompt_s: FloatArray  # step time one prompt adds to the steps its chunks run in
    ttft_s: FloatArray  # queue_wait_s + admission_wait_s + prompts_ahead_s + its own prompt
    tpot_s: FloatArray
    queue_wait_s: FloatArray
    admission_wait_s: FloatArray  # decode steps before its prompt is taken (admission_wait_steps)
    prompts_ahead_s: FloatArray  # other requests' prompts that run before its first token
    e2e_s: FloatArray
    requests_per_s: FloatArray
    prefill_time_share: FloatArray  # fraction of the GPU's step time spent on prefill tokens


def serving_state(
    model: ModelShape,
    accelerator: Hardware,
    *,
    concurrency: FloatArray,
    max_running: npt.ArrayLike,
    input_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
    offline: bool = False,
) -> ServingState:
    """Model a closed loop of ``concurrency`` clients against continuous batching.

    - Running requests R = min(C, max_running). The running batch decodes in steps of R tokens
      (attention per request at the mean context S_in + S_out/2): the decode-only step.
    - A prompt runs in n = ceil(S_in / prefill_chunk_tokens) chunks. Engines schedule a chunk
      whole (vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size, TensorRT-LLM's
      max_num_tokens bound it), not spread thinly over many steps, so a chunk shares its step
      with the R decode tokens and with the other chunks that arrive in that step: one while
      fewer than one chunk arrives per step of a slot's cycle (R prompts of n chunks over
      n + S_out − 1 steps), else that rate. Each prompt adds ``prompt_s`` = n · (that step −
      the decode-only step) / (chunks in the step) to the steps it runs in. In the lockstep
      part of the load (q / ½ of it, all of it offline) a wave's prompts arrive together and a
      step packs as many chunks as ``prefill_chunk_tokens`` holds on each attention-DP rank
      (at most R), so a prompt adds that step's increment / its chunks instead. Engines that run
      prompts in prefill-only batches and pause decoding meanwhile (SGLang's default) add about
      the same time. An engine that launches steps carrying prompt tokens outside CUDA graphs
      (TensorRT-LLM by default) makes such a step last at least the host's launch time,
      layers · ``eager_layer_launch_us``, plus its host overheads.
    - Per cycle of one slot (arrival to last token) each of the other R − 1 slots prefills one
      prompt. A = min(q·(R − 1) + a·ln R, R − 1) of them run before the new request's first
      token (in its TTFT), q = ``prefill_queue_share`` and a = ``prefill_queue_ln_prompts``;
      the rest, R − 1 − A, run while it decodes, in its S_out − 1 decode steps (TPOT, as
      benchmark clients measure it, excludes the first token):
      TPOT = decode-only step + (R − 1 − A)·prompt_s / (S_out − 1). q = 0 when arrivals
      spread over the decode cycle (each finds the prefill queue empty), ½ for lockstep waves of
      equal-length closed-loop clients (half the wave is ahead on average), which prefill-first
      schedulers keep in step; a·ln R for clients partly in step (efficiency.py).
    - TTFT = admission wait (``admission_wait_steps`` decode-only steps; none for a lone
      client, C = 1, whose request finds the engine idle) + A·prompt_s + its own n chunk steps
      (n decode-only steps + prompt_s).
    - Waiting for a slot when C > R (closed loop, Little's law): each request's service time
      T = TTFT without the slot wait + (S_out − 1)·TPOT = admission + (n + S_out − 1) decode-only
      steps + all R prompts of the cycle, whatever q; throughput X = R / T, response time C / X,
      so the queue wait is (C / R − 1)·T. It is zero when every client has a slot.
    - ``offline``: C requests queued at once instead of C clients. Equal-length requests run in
      batches of R that finish together, so the k-th batch waits k·T: the mean wait over the
      queue is (C / R − 1)·T / 2; throughput is the same R / T. A batch that starts together is
      one lockstep wave whatever the scheduler: half of the others' prompts run before a
      request's first token (q = ½), the rest in its decode window.
    """
    # One point may come as plain floats (``operators.step_cost``: the same formulas, cheaper).
    c = values(concurrency)
    limit = values(max_running)
    running = where(limit > 0, minimum(c, limit), c)
    s_in = values(input_tokens)
    s_out = values(output_tokens)

    decode = AttentionGroup.of(running, 1.0, s_in + s_out / 2.0)
    chunks = ceil(s_in / params.prefill_chunk_tokens)
    chunk_tokens = s_in / chunks
    decode_steps = maximum(s_out - 1.0, 0.0)
    # Chunks that share a step: one while fewer than one chunk arrives per step of the cycle
    # (R prompts of n chunks over n + S_out − 1 steps), else that rate.
    per_step = maximum(running * chunks / (chunks + decode_steps), 1.0)
    shared = AttentionGroup.of(per_step, chunk_tokens, s_in * (chunks - 1) / (2 * chunks))
    steps = [("decode", [decode]), ("mixed", [decode, shared])]
    share = LOCKSTEP_QUEUE_SHARE if offline else params.prefill_queue_share
    # The lockstep part of the load (share ½ is all of it): a wave of prompts arrives at once,
    # and the engine puts as many chunks in a step as its step budget holds (whole chunks of
    # ``prefill_chunk_tokens``, on each attention-DP rank), at most the R prompts of the wave;
    # with attention DP a lone chunk instead runs whole on one rank while the others wait.
    in_waves = min(share / LOCKSTEP_QUEUE_SHARE, 1.0)
    if in_waves > 0.0:
        per_rank = maximum(floor(params.prefill_chunk_tokens / chunk_tokens), 1.0)
        dp_ranks = float(parallelism.attention_dp)
        wave_chunks = maximum(minimum(running, per_rank * dp_ranks), per_step)
        wave = AttentionGroup.of(wave_chunks, chunk_tokens, s_in * (chunks - 1) / (2 * chunks))
        steps.append(("wave", [decode, wave]))
    costs = step_costs(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        steps=steps,
        points=np.size(running),
        params=params,
    )
    decode_only, mixed = costs[0], costs[1]
    decode_s = decode_only.point_time_s
    launch_s = eager_launch_s(model, parallelism, params)
    prompt_s = chunks * maximum(_launched_eagerly(mixed, launch_s) - decode_s, 0.0) / per_step
    if in_waves > 0.0:
        # What a prompt adds to the steps it runs in: its share of a wave's step in the
        # lockstep part of the load, a chunk's spread over arriving chunks otherwise.
        wave_s = _launched_eagerly(costs[2], launch_s)
        wave_prompt_s = chunks * maximum(wave_s - decode_s, 0.0) / wave_chunks
        prompt_s = in_waves * wave_prompt_s + (1.0 - in_waves) * prompt_s
    others = maximum(running - 1.0, 0.0)
    # the other prompts of the cycle that run before this request's first token (a share of
    # them, plus about ln R more: efficiency.py), at most all of them; the rest run while it
    # decodes
    ln_running = log(maximum(running, 1.0))
    ahead = minimum(share * others + params.prefill_queue_ln_prompts * ln_running, others)
    behind_s = (others - ahead) * prompt_s
    tpot = decode_s + where(decode_steps > 0, behind_s / maximum(decode_steps, 1.0), 0.0)
    own_s = chunks * decode_s + prompt_s
    # A lone client's request (C = 1) finds the engine idle: no step to wait for, whatever
    # wait the harness terms learned from runs with other clients.
    wait_steps = where(c > 1.0, params.admission_wait_steps, 0.0)
    admission_s = wait_steps * decode_s
    ahead_s = ahead * prompt_s
    first_token = admission_s + ahead_s + own_s
    service = first_token + decode_steps * decode_s + behind_s
    queue_wait = (c / running - 1.0) * service * (0.5 if offline else 1.0)
    ttft = queue_wait + first_token
    e2e = ttft + decode_steps * tpot
    busy_s = (chunks + decode_steps) * decode_s + running * prompt_s
    return ServingState(
        running=running,
        mixed_step=mixed,
        decode_only=decode_only,
        prefill_chunks=(
            chunks
            if is_scalar(running)
            else np.broadcast_to(chunks, np.shape(running)).astype(np.float64)
        ),
        prompt_s=prompt_s,
        ttft_s=ttft,
        tpot_s=tpot,
        queue_wait_s=queue_wait,
        admission_wait_s=admission_s,
        prompts_ahead_s=ahead_s,
        e2e_s=e2e,
        requests_per_s=running / service,
        prefill_time_share=_share(running * prompt_s / busy_s),
    )


def eager_launch_s(model: ModelShape, parallelism: Parallelism, params: EfficiencyParams) -> float:
    """The host's time to launch one step's kernels outside a CUDA graph: the layers of one
    pipeline stage · ``eager_layer_launch_us`` (each stage's host launches its own layers)."""
    return model.num_layers / parallelism.pp * params.eager_layer_launch_us * 1e-6


def _launched_eagerly(step: StepCost, launch_s: float) -> FloatArray:
    """A step's time when its kernels are launched one by one, outside a CUDA graph: the GPU
    runs them no faster than the host issues them, so they take at least ``launch_s``; the host
    overheads come on top as in any step (efficiency.py, ``eager_layer_launch_us``)."""
    point = step.floats if step.floats is not None else step
    kernels_s = point.time_s - point.overhead_s
    return point.time_s + maximum(launch_s - kernels_s, 0.0)


def _share(value: FloatArray) -> FloatArray:
    """Clip to [0, 1] (``np.clip``; NaN stays NaN on floats as on arrays)."""
    if is_scalar(value):
        return minimum(maximum(value, 0.0), 1.0)
    return np.clip(value, 0.0, 1.0)
