"""Discrete-event simulation of a continuous-batching scheduler, step by step.

The replica runs one step after another. Each step (chunked prefill, as vLLM, SGLang and
TensorRT-LLM schedule it) has a token budget B = ``max_num_batched_tokens``:

- ``decode_first`` (vLLM's chunked-prefill order): every running request that has its first
  token decodes one token; the B − R tokens left go to prompt chunks, first the prompt already
  under way, then newly admitted requests in arrival order (a step may hold several prompts).
- ``prefill_first`` (SGLang's default order, no mixed chunk): while any admitted prompt still
  has tokens to prefill, the step is prefill only (up to B prompt tokens) and decoding pauses;
  otherwise the step decodes every running request.

A waiting request is admitted (first come, first served; a request that does not fit blocks
the ones behind it) while fewer than ``max_running`` requests run and the KV cache holds its
whole context, input + output tokens, reserved at admission (a conservative stand-in for
engines that allocate pages as tokens arrive and preempt when they run out; sliding-window
layers hold at most their window), plus the fixed recurrent state of a hybrid model's Mamba2
layers (``state_tokens_per_request``).

A request's first token comes at the end of the step that prefills its last prompt token; it
then decodes one token per decode step until it has ``output_tokens``. Step times come from a
``StepTimes`` model (the engine's cost tables, or a synthetic one in tests).

Runs of decode-only steps between events (an arrival, a completion) are advanced in one leap:
step time is linear in the decoding context over the leap (decode attention reads grow by R
tokens per step), so k steps take k·t₀ + s·k(k−1)/2 for first step t₀ and per-step growth s.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.engine.errors import EngineError
from service.engine.kernels import FloatArray

POLICIES = ("decode_first", "prefill_first")


class StepTimes(Protocol):
    """Seconds of one step given its decode sequences, their total context and prefill pieces."""

    def step_s(
        self, decode_sequences: float, context_sum: float, pieces: Sequence[tuple[float, float]]
    ) -> float:
        """Return the step's time; ``pieces`` are (new prompt tokens, prompt tokens before)."""
        ...

    def decode_s(self, sequences: int, context_sum: float) -> float:
        """Return the time of a decode-only step (``step_s`` without pieces, faster)."""
        ...

    def decode_leap(self, sequences: int, context_sum: float) -> tuple[float, float]:
        """Return a decode-only step's time and how much each further step adds to it."""
        ...


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Engine knobs that shape the queue."""

    max_num_batched_tokens: int
    max_running: int
    kv_capacity_tokens: float
    policy: str = "decode_first"
    # Speculative decoding: each decoding sequence runs q = k + 1 tokens per step (k drafted,
    # verified by the target) and gains E of them on average (``speculative.py``).
    decode_tokens_per_step: int = 1
    tokens_per_decode_step: float = 1.0
    # A request's fixed recurrent state (Mamba2 layers of hybrid models), in tokens of KV
    # cache: reserved at admission beside its tokens (memory.KvBudget.state_tokens_per_request).
    state_tokens_per_request: float = 0.0
    # Sliding-window layers (memory.KvBudget.windowed_share): that share of a token's KV is held
    # for at most ``window_tokens`` tokens of a request.
    window_tokens: float = 0.0
    windowed_share: float = 0.0

    def need(self, tokens: float) -> float:
        """Return the KV cache a request of ``tokens`` tokens reserves, in tokens below the
        window: its sliding-window layers hold the last ``window_tokens`` only; its state
        included."""
        beyond = max(tokens - self.window_tokens, 0.0)
        return tokens - self.windowed_share * beyond + self.state_tokens_per_request

    def requests_held(self, tokens_per_request: float) -> int:
        """Return how many requests of ``tokens_per_request`` tokens the KV cache holds (≥ 1)."""
        return max(int(self.kv_capacity_tokens // self.need(tokens_per_request)), 1)

    def validate(self) -> None:
        if self.policy not in POLICIES:
            raise EngineError(f"scheduling must be one of {', '.join(POLICIES)}")
        if self.max_num_batched_tokens < 1:
            raise EngineError("max_num_batched_tokens must be at least 1")
        if self.max_running < 1:
            raise EngineError("max_running_requests must be at least 1")
        if not 1.0 <= self.tokens_per_decode_step <= self.decode_tokens_per_step:
            raise EngineError("tokens gained per decode step must lie in [1, tokens run per step]")
        if self.max_running * self.decode_tokens_per_step > self.max_num_batched_tokens:
            raise EngineError(
                f"max_running_requests ({self.max_running}) × {self.decode_tokens_per_step} "
                f"tokens per step must not exceed max_num_batched_tokens "
                f"({self.max_num_batched_tokens}): every running request decodes each step"
            )


@dataclass(frozen=True, slots=True)
class Timeline:
    """Per-request times (seconds from the first arrival), in request order."""

    arrival_s: FloatArray
    admitted_s: FloatArray  # start of the step that runs the request's first prompt chunk
    first_token_s: FloatArray
    finish_s: FloatArray
    busy_s: float  # total time the replica spent running steps
    steps: int
    peak_running: int
    # (from, to) of each stretch with no step running before the last finish, in time order.
    idle_s: tuple[tuple[float, float], ...] = ()


def simulate(
    arrivals_s: Sequence[float] | None,
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
    config: SchedulerConfig,
    times: StepTimes,
    *,
    clients: int | None = None,
    first_arrivals_s: Sequence[float] | None = None,
    first_arrival_steps: Sequence[int] | None = None,
    cached_tokens: Sequence[int] | None = None,
    prefilled: bool = False,
) -> Timeline:
    """Serve the requests in order: open loop at ``arrivals_s``, or a closed loop of ``clients``.

    Closed loop (``arrivals_s`` None): client k sends request k at ``first_arrivals_s[k]``
    (default 0), or at the start of step ``first_arrival_steps[k]``, and each later request is
    sent by the client whose request finished first, the moment it finishes (no think time),
    as ``vllm bench serve --max-concurrency`` does.

    ``cached_tokens[r]`` prompt tokens of request r are found in the prefix cache: they are
    not prefilled again (its first piece starts after them), but its attention reads them and
    its KV reservation still counts them.

    ``prefilled`` (the decode pool of disaggregated serving, ``disaggregation.py``): every
    request arrives with its whole prompt in the KV cache and its first token made (both
    transferred from a prefill replica), so admission puts it straight into decoding; its
    ``admitted_s`` and ``first_token_s`` are the start of its first decode step, and it needs
    at least two output tokens.
    """
    config.validate()
    n = len(input_tokens)
    if len(output_tokens) != n:
        raise EngineError("input and output lengths must have one entry per request")
    need = [config.need(float(i + o)) for i, o in zip(input_tokens, output_tokens, strict=True)]
    if n and max(need) > config.kv_capacity_tokens:
        raise EngineError(
            f"a request of {max(need):.0f} tokens (its recurrent state included) does not fit "
            f"the KV cache ({config.kv_capacity_tokens:.0f} tokens)"
        )
    closed = arrivals_s is None
    arrival = [math.inf] * n
    pending: deque[int] = deque()  # requests whose arrival time is known, in arrival order
    stepped: deque[tuple[int, int]] = deque()  # (step index, request) arriving at a step start
    if closed:
        if clients is None or clients < 1:
            raise EngineError("a closed loop needs at least one client")
        starts = list(first_arrivals_s) if first_arrivals_s is not None else []
        next_new = min(clients, n)
        if first_arrival_steps is not None:
            by_step = sorted(range(next_new), key=lambda k: first_arrival_steps[k])
            stepped.extend((int(first_arrival_steps[k]), k) for k in by_step)
        else:
            for k in range(next_new):
                arrival[k] = float(starts[k]) if k < len(starts) else 0.0
            pending.extend(sorted(range(next_new), key=lambda k: arrival[k]))
    else:
        assert arrivals_s is not None
        if len(arrivals_s) != n:
            raise EngineError("one arrival time per request")
        arrival = [float(a) for a in arrivals_s]
        pending.extend(range(n))
        next_new = n
    cached = [0] * n if cached_tokens is None else [int(c) for c in cached_tokens]
    if prefilled and n and min(output_tokens) < 2:
        raise EngineError("a prefilled request needs at least two output tokens")
    if len(cached) != n or any(not 0 <= c < i for c, i in zip(cached, input_tokens, strict=True)):
        raise EngineError("cached tokens must lie in [0, input tokens) for every request")
    admitted = [math.nan] * n
    first = [math.nan] * n
    finish = [math.nan] * n
    first_counter = [0] * n

    budget = config.max_num_batched_tokens
    max_running = config.max_running
    kv_free = float(config.kv_capacity_tokens)
    mixed = config.policy == "decode_first"
    per_decode = config.decode_tokens_per_step
    gain = config.tokens_per_decode_step
    step_s = times.step_s
    decode_leap = times.decode_leap

    waiting: deque[int] = deque()
    prefilling: deque[list[int]] = deque()  # [request, prompt tokens done]
    decoding: list[tuple[int, int]] = []  # heap of (decode counter at its last token, request)
    running = 0  # admitted and not finished
    dec = 0  # requests with a first token and tokens left to decode
    base = 0.0  # Σ (input + 1 − gain · counter at first token) over decoding requests
    counter = 0  # decode steps so far; each advances every decoding request by one token
    now = busy = 0.0
    steps = done = peak = 0
    idle: list[tuple[float, float]] = []

    def finish_request(r: int, at: float) -> None:
        nonlocal running, kv_free, done, next_new
        finish[r] = at
        running -= 1
        kv_free += need[r]
        done += 1
        if closed and next_new < n:
            arrival[next_new] = at
            pending.append(next_new)
            next_new += 1

    def retire(at: float) -> None:
        nonlocal dec, base
        while decoding and decoding[0][0] <= counter:
            _, r = heapq.heappop(decoding)
            dec -= 1
            base -= input_tokens[r] + 1 - gain * first_counter[r]
            finish_request(r, at)

    def start_decoding(r: int) -> None:
        nonlocal dec, base
        first_counter[r] = counter
        steps_left = (
            output_tokens[r] - 1 if gain == 1.0 else math.ceil((output_tokens[r] - 1) / gain - 1e-9)
        )
        heapq.heappush(decoding, (counter + steps_left, r))
        dec += 1
        base += input_tokens[r] + 1 - gain * counter

    while done < n:
        while stepped and stepped[0][0] <= steps:
            r = stepped.popleft()[1]
            arrival[r] = now
            waiting.append(r)
        while pending and arrival[pending[0]] <= now:
            waiting.append(pending.popleft())
        while waiting and running < max_running and need[waiting[0]] <= kv_free:
            r = waiting.popleft()
            running += 1
            kv_free -= need[r]
            if prefilled:
                admitted[r] = first[r] = now
                start_decoding(r)
            else:
                prefilling.append([r, cached[r]])
        peak = max(peak, running)
        if prefilling:
            decoders = dec if mixed else 0
            room = budget - decoders * per_decode
            pieces: list[tuple[float, float]] = []
            completed: list[int] = []
            for item in prefilling:
                if room <= 0:
                    break
                r, done_tokens = item
                take = min(input_tokens[r] - done_tokens, room)
                if admitted[r] != admitted[r]:  # NaN: its first piece
                    admitted[r] = now
                pieces.append((float(take), float(done_tokens)))
                item[1] = done_tokens + take
                room -= take
                if item[1] >= input_tokens[r]:
                    completed.append(r)
            t = step_s(decoders, base + gain * dec * counter if decoders else 0.0, pieces)
            now += t
            busy += t
            steps += 1
            for _ in completed:
                prefilling.popleft()
            if decoders:
                counter += 1
                if decoding[0][0] <= counter:
                    retire(now)
            for r in completed:
                first[r] = now
                if output_tokens[r] <= 1:
                    finish_request(r, now)
                    continue
                start_decoding(r)
            continue
        if dec:
            # Decode-only steps up to the next completion, or to the step boundary after the
            # next arrival when that arrival could be admitted there.
            k = decoding[0][0] - counter
            context = base + gain * dec * counter
            t0, slope = decode_leap(dec, context)
            slope *= gain
            if (
                pending
                and not waiting
                and running < max_running
                and need[pending[0]] <= kv_free
                and arrival[pending[0]] < math.inf
            ):
                k = min(k, _steps_to_cover(arrival[pending[0]] - now, t0, slope))
            if stepped:
                k = min(k, max(stepped[0][0] - steps, 1))
            leap = k * t0 + slope * k * (k - 1) / 2.0
            now += leap
            busy += leap
            steps += k
            counter += k
            if decoding[0][0] <= counter:
                retire(now)
            continue
        if stepped:  # idle before a client's first step: it arrives now
            steps = max(steps, stepped[0][0])
            continue
        if not pending:  # pragma: no cover - requests that can never run are rejected above
            raise EngineError("scheduler stalled")
        if arrival[pending[0]] > now:
            idle.append((now, arrival[pending[0]]))
            now = arrival[pending[0]]
    return Timeline(
        arrival_s=np.asarray(arrival, dtype=np.float64),
        admitted_s=np.asarray(admitted, dtype=np.float64),
        first_token_s=np.asarray(first, dtype=np.float64),
        finish_s=np.asarray(finish, dtype=np.float64),
        busy_s=busy,
        steps=steps,
        peak_running=peak,
        idle_s=tuple(idle),
    )


def _steps_to_cover(gap_s: float, t0: float, slope: float) -> int:
    """Return the fewest steps (≥ 1) whose total k·t₀ + s·k(k−1)/2 reaches ``gap_s``."""
    if gap_s <= t0:
        return 1
    if slope <= 1e-15 * t0:
        return max(math.ceil(gap_s / t0), 1)
    a, b = slope / 2.0, t0 - slope / 2.0
    k = (-b + math.sqrt(b * b + 4.0 * a * gap_s)) / (2.0 * a)
    return max(math.ceil(k - 1e-9), 1)
