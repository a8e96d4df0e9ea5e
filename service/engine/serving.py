"""Continuous-batching steady state for a closed loop of C concurrent requests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.engine.efficiency import EfficiencyParams
from service.engine.kernels import FloatArray, Hardware
from service.engine.operators import AttentionGroup, StepCost, step_costs
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape


@dataclass(frozen=True, slots=True)
class ServingState:
    """Steady-state times of a closed loop, one entry per concurrency (seconds unless named)."""

    running: FloatArray  # requests in the step stream (concurrency capped by KV-cache room)
    step: StepCost  # the average mixed step: decode tokens + amortised prefill tokens
    first_token_step: StepCost  # a step carrying one chunk of a new request's prompt
    decode_only: StepCost  # the same running batch without prefill work
    prefill_chunks: FloatArray
    ttft_s: FloatArray
    tpot_s: FloatArray
    queue_wait_s: FloatArray
    e2e_s: FloatArray
    requests_per_s: FloatArray
    prefill_time_share: FloatArray  # fraction of step time spent on prefill tokens


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
) -> ServingState:
    """Model a closed loop of ``concurrency`` clients against continuous batching.

    - Running requests R = min(C, max_running); each step carries R decode tokens plus, on
      average, R·S_in/S_out prefill tokens (one prompt per S_out steps per slot), priced as one
      unified GEMM pass with attention per request (decode at mean context S_in + S_out/2).
    - TPOT = mean step time.
    - A new request waits ``admission_wait_steps`` steps, then behind the prompts queued ahead of
      it, then its prompt runs in n = ceil(S_in / prefill_chunk_tokens) chunks, each in a step
      beside the R decode tokens. Prompts ahead: ``prefill_queue_share`` · (R − 1) (0 when
      arrivals are spread over the decode cycle, ½ for lockstep waves of equal-length closed-loop
      clients: half the wave is ahead on average), each costing the time its n chunks add to
      their steps (mixed step minus the decode-only step).
    - Waiting for a slot when C > R (closed loop, Little's law): each request's service time
      T = admission + prompts ahead + prefill + (S_out − 1)·TPOT; throughput X = R / T, response
      time C / X, so the queue wait is (C / R − 1)·T. It is zero when every client has a slot.
    """
    c = np.asarray(concurrency, dtype=np.float64)
    limit = np.asarray(max_running, dtype=np.float64)
    running = np.where(limit > 0, np.minimum(c, limit), c)
    s_in = np.asarray(input_tokens, dtype=np.float64)
    s_out = np.asarray(output_tokens, dtype=np.float64)

    decode = AttentionGroup.of(running, 1.0, s_in + s_out / 2.0)
    prompts = AttentionGroup.of(running / s_out, s_in, 0.0)
    chunks = np.ceil(s_in / params.prefill_chunk_tokens)
    chunk = AttentionGroup.of(
        np.ones_like(running), s_in / chunks, s_in * (chunks - 1) / (2 * chunks)
    )
    step, decode_only, first = step_costs(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        steps=[("mixed", [decode, prompts]), ("decode", [decode]), ("mixed", [decode, chunk])],
        points=running.size,
        params=params,
    )
    tpot = step.time_s
    admission = params.admission_wait_steps * tpot
    # Prompts ahead of a new request: share · (R − 1), each adding the step time its chunks add.
    prompt_s = chunks * np.maximum(first.time_s - decode_only.time_s, 0.0)
    behind_prompts = params.prefill_queue_share * np.maximum(running - 1.0, 0.0) * prompt_s
    first_token = admission + behind_prompts + chunks * first.time_s
    service = first_token + (s_out - 1.0) * tpot
    queue_wait = (c / running - 1.0) * service
    ttft = queue_wait + first_token
    e2e = ttft + (s_out - 1.0) * tpot
    share = np.clip((tpot - decode_only.time_s) / tpot, 0.0, 1.0)
    return ServingState(
        running=running,
        step=step,
        first_token_step=first,
        decode_only=decode_only,
        prefill_chunks=np.broadcast_to(chunks, np.shape(running)).astype(np.float64),
        ttft_s=ttft,
        tpot_s=tpot,
        queue_wait_s=queue_wait,
        e2e_s=e2e,
        requests_per_s=running / service,
        prefill_time_share=share,
    )
