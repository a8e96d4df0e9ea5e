"""Tail latency of a replica under open-loop traffic, its saturation rate, and goodput.

``Replica.prepare`` tabulates the engine's step costs once (``step_table``) and sizes the KV
cache; ``Replica.run`` draws a seeded request stream (arrivals and lengths) and simulates the
scheduler over it (``scheduler``); ``Replica.saturation`` measures the most requests per second
the replica completes with a full queue; ``Replica.goodput`` bisects the request rate for the
largest one whose percentiles meet the targets (``search_goodput``, shared with
``disaggregation.PoolGroup``). Only the engine's cost terms (kernel
efficiencies, layer, step and sequence overheads) enter; the closed-loop harness terms of
``serving.py`` (admission wait, prefill queue share) have no part here, because the queue is
simulated instead.

Statistics are over the middle of the stream: the warm-up (the first ``WARMUP_SHARE`` of the
requests, or all that arrive within one median end-to-end latency, while the batch fills) and
the last ``DRAIN_SHARE`` (no traffic after them) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.engine.efficiency import HARNESS_TERMS, EfficiencyParams, engine_only
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.memory import (
    DEFAULT_MEMORY_UTILIZATION,
    kv_budget,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.serving import serving_state
from service.engine.shapes import ModelShape
from service.engine.traffic.arrivals import PROCESSES, unit_gaps
from service.engine.traffic.lengths import LengthDistribution
from service.engine.traffic.scheduler import POLICIES, SchedulerConfig, Timeline, simulate
from service.engine.traffic.speculative import (
    DRAFTERS,
    GENERIC,
    MTP,
    check_drafter,
    tokens_per_step,
)
from service.engine.traffic.step_table import StepTable, build_step_table

DEFAULT_REQUESTS = 600
MAX_REQUESTS = 4000
WARMUP_SHARE = 0.1
DRAIN_SHARE = 0.1
GOODPUT_STEPS = 7  # bisection halvings: the rate is found to 1/128 of the saturation rate
GOODPUT_FLOOR_SHARE = 1.0 / 64.0  # lowest rate probed, as a share of the capacity
GOODPUT_CEILING = 1.25  # highest rate probed, as a multiple of the capacity
SATURATION_SHARE = 0.9  # a goodput this close to the capacity is limited by it
METRICS = ("ttft_ms", "tpot_ms", "e2e_latency_ms", "queue_wait_ms")
LEVELS = (50.0, 90.0, 99.0)


@dataclass(frozen=True, slots=True)
class TrafficSpec:
    """An open-loop request stream and the scheduler knobs that serve it."""

    request_rate_per_s: float
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    arrival_process: str = "poisson"
    arrival_cv: float = 1.0
    max_num_batched_tokens: int = 8192
    max_running_requests: int | None = None  # None: as many as the KV cache holds
    scheduling: str = "decode_first"
    num_requests: int = DEFAULT_REQUESTS
    seed: int = 0
    # Share of each prompt found in the prefix cache (vLLM automatic prefix caching, SGLang
    # RadixAttention): those tokens are not prefilled again. Cached = min(round(h · S_in),
    # S_in − 1): the last prompt token always runs, to produce the first output token.
    prefix_cache_hit_rate: float = 0.0
    # Speculative decoding (``speculative.py``): k drafted tokens per step, each accepted with
    # probability α. The replica is prepared with them (they shape its step table).
    draft_tokens: int = 0
    acceptance_rate: float = 0.0
    drafter: str = GENERIC  # ``speculative.DRAFTERS``: mtp prices the model's MTP module

    def validate(self) -> None:
        """Raise EngineError naming the first field out of range."""
        if not (self.request_rate_per_s > 0 and math.isfinite(self.request_rate_per_s)):
            raise EngineError("request_rate_per_s must be a positive number")
        if self.arrival_process not in PROCESSES:
            raise EngineError(f"arrival.process must be one of {', '.join(PROCESSES)}")
        if not (self.arrival_cv > 0 and math.isfinite(self.arrival_cv)):
            raise EngineError("arrival.cv must be positive")
        if self.scheduling not in POLICIES:
            raise EngineError(f"scheduling must be one of {', '.join(POLICIES)}")
        if not 0.0 <= self.prefix_cache_hit_rate < 1.0:
            raise EngineError("prefix_cache_hit_rate must be in [0, 1)")
        if not 10 <= self.num_requests <= MAX_REQUESTS:
            raise EngineError(f"num_requests must be between 10 and {MAX_REQUESTS}")
        if self.drafter not in DRAFTERS:  # the model's MTP layers are checked on prepare
            raise EngineError(f"speculative.drafter must be one of {', '.join(DRAFTERS)}")


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Mean and p50/p90/p99 of one per-request metric (milliseconds)."""

    mean: float
    p50: float
    p90: float
    p99: float

    def at(self, level: float) -> float:
        return {50.0: self.p50, 90.0: self.p90, 99.0: self.p99}[level]


@dataclass(frozen=True, slots=True)
class TrafficResult:
    """What the stream sees, and how loaded the replica is."""

    request_rate_per_s: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles  # per request: (e2e − TTFT) / (output tokens − 1), as benchmark clients
    e2e_latency_ms: Percentiles
    queue_wait_ms: Percentiles  # arrival to the start of the step that runs its first chunk
    achieved_requests_per_s: float
    arrived_requests_per_s: float  # the stream's own rate over the same window (sampled)
    output_tokens_per_s: float
    utilization: float  # share of the steady-state window the replica spends running steps
    simulated_requests: int
    measured_requests: int
    peak_running_requests: int


@dataclass(frozen=True, slots=True)
class SloTarget:
    """One percentile target: ``metric`` (one of METRICS) at ``percentile`` ≤ ``max_ms``."""

    metric: str
    percentile: float
    max_ms: float

    @property
    def name(self) -> str:
        return f"{self.metric}_p{self.percentile:g}_max"


@dataclass(frozen=True, slots=True)
class GoodputResult:
    """The largest rate meeting every target (0 if even a light load misses one)."""

    requests_per_s: float
    saturation_requests_per_s: float  # the capacity the search was bracketed with
    limited_by: str  # "saturation", "slo" or "unloaded_latency"
    at_goodput: TrafficResult | None  # the stream at the goodput rate (None when it is 0)
    simulations: int
    # The lowest probed rate that missed a target: the largest rate meeting them lies between
    # requests_per_s and this (None when every probe met them).
    missed_requests_per_s: float | None = None


def percentiles_of(values: FloatArray) -> Percentiles:
    """Return the mean and percentiles of the finite values (NaN when there are none)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return Percentiles(math.nan, math.nan, math.nan, math.nan)
    p50, p90, p99 = np.percentile(finite, LEVELS).tolist()
    return Percentiles(float(finite.mean()), p50, p90, p99)


def kv_capacity_tokens(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    step_tokens: float,
    memory_utilization: float,
    mtp: bool = False,
) -> float:
    """Return tokens of KV cache that fit beside weights, step activations and runtime memory.

    ``memory.kv_budget``: (usable − weights − activations of a ``step_tokens`` step − runtime)
    / KV bytes per token of the attention layers, in tokens below any sliding window (a
    request's tokens past the window cost less: ``SchedulerConfig.need``). A hybrid model's
    requests also hold a fixed Mamba2 state each
    (``memory.KvBudget.state_tokens_per_request``). With ``mtp`` the MTP modules draft: their
    weights are held too and each token also caches their attention layers.
    """
    return kv_budget(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        step_tokens=step_tokens,
        memory_utilization=memory_utilization,
        mtp=mtp,
    ).tokens


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica's step-cost table and scheduler limits, ready to serve streams."""

    table: StepTable
    config: SchedulerConfig
    running_cap: int | None  # the cap asked for (None: the KV cache decides)
    model: ModelShape
    accelerator: Accelerator
    precision: Precision
    parallelism: Parallelism
    params: EfficiencyParams

    @classmethod
    def prepare(
        cls,
        model: ModelShape,
        accelerator: Accelerator,
        *,
        precision: Precision,
        parallelism: Parallelism,
        params: EfficiencyParams,
        max_num_batched_tokens: int,
        max_running_requests: int | None,
        scheduling: str,
        max_input_tokens: int,
        max_output_tokens: int,
        memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
        draft_tokens: int = 0,
        acceptance_rate: float = 0.0,
        drafter: str = GENERIC,
    ) -> Replica:
        """Size the KV cache, check the knobs and tabulate step costs up to the largest step."""
        if max_running_requests is not None and max_running_requests < 1:
            raise EngineError("max_running_requests must be at least 1")
        if max_num_batched_tokens < 1:
            raise EngineError("max_num_batched_tokens must be at least 1")
        if scheduling not in POLICIES:
            raise EngineError(f"scheduling must be one of {', '.join(POLICIES)}")
        check_drafter(drafter, model.mtp_layers)
        # Open-loop traffic: the model's shipped weights format when asked for, and only engine
        # terms of a profile (the closed-loop harness terms describe another load pattern).
        precision = precision.resolved(model, accelerator)
        params = engine_only(params)
        config = scheduler_config(
            model,
            accelerator,
            precision=precision,
            parallelism=parallelism,
            max_num_batched_tokens=max_num_batched_tokens,
            max_running_requests=max_running_requests,
            scheduling=scheduling,
            memory_utilization=memory_utilization,
            draft_tokens=draft_tokens,
            acceptance_rate=acceptance_rate,
            drafter=drafter,
        )
        kv = config.kv_capacity_tokens
        longest = max_input_tokens + max_output_tokens
        if kv < config.need(longest):
            state = config.state_tokens_per_request
            held = f" and its recurrent state ({state:.0f} tokens' worth)" if state else ""
            raise EngineError(
                f"the KV cache holds {kv:.0f} tokens, less than the longest request "
                f"({longest} tokens{held}): the model does not serve this traffic here"
            )
        running = config.max_running
        table = build_step_table(
            model,
            accelerator,
            precision=precision,
            parallelism=parallelism,
            params=params,
            max_step_tokens=float(max_num_batched_tokens + running),
            max_context_tokens=float(longest),
            max_prompt_tokens=float(max_input_tokens),
            decode_tokens=config.decode_tokens_per_step,
            mtp_draft_passes=draft_tokens if drafter == MTP else 0,
        )
        return cls(
            table, config, max_running_requests, model, accelerator, precision, parallelism, params
        )

    @staticmethod
    def cached_tokens(spec: TrafficSpec, inputs: Sequence[int]) -> list[int] | None:
        """Return each prompt's tokens found in the prefix cache (None without caching)."""
        h = spec.prefix_cache_hit_rate
        if h <= 0.0:
            return None
        return [min(round(h * i), i - 1) for i in inputs]

    def stream(self, spec: TrafficSpec) -> tuple[FloatArray, list[int], list[int]]:
        """Return unit-rate arrival times and the sampled lengths (seeded, rate-independent)."""
        rng = np.random.default_rng(spec.seed)
        n = spec.num_requests
        gaps = unit_gaps(spec.arrival_process, spec.arrival_cv, n, rng)
        times = np.concatenate([[0.0], np.cumsum(gaps[1:])])
        inputs = spec.input_tokens.quantile(rng.random(n)).astype(int).tolist()
        outputs = spec.output_tokens.quantile(rng.random(n)).astype(int).tolist()
        return times, inputs, outputs

    def run(self, spec: TrafficSpec) -> TrafficResult:
        """Simulate the stream at ``spec.request_rate_per_s``."""
        spec.validate()
        unit, inputs, outputs = self.stream(spec)
        cached = self.cached_tokens(spec, inputs)
        return self._run_at(spec.request_rate_per_s, unit, inputs, outputs, cached)

    def _run_at(
        self,
        rate: float,
        unit: FloatArray,
        inputs: list[int],
        outputs: list[int],
        cached: list[int] | None = None,
    ) -> TrafficResult:
        arrivals = unit / rate
        timeline = simulate(
            arrivals.tolist(), inputs, outputs, self.config, self.table, cached_tokens=cached
        )
        return summarise(rate, timeline, outputs)

    def saturation(self, spec: TrafficSpec) -> float:
        """Return requests/s completed with a full queue (closed loop, more clients than slots).

        Clients = the running limit (or what the KV cache holds at mean lengths) plus a margin,
        their first requests spread over one full-batch service time so that they do not move
        in lockstep; the rate is taken over the completions after the first cycle and before
        the last (when the loop runs out of requests and drains).
        """
        spec.validate()
        _, inputs, outputs = self.stream(spec)
        config = self.config
        mean_need = float(np.mean(inputs) + np.mean(outputs))
        slots = min(config.max_running, config.requests_held(mean_need))
        clients = slots + max(slots // 8, 2)
        n = max(len(inputs), 4 * clients)
        reps = -(-n // len(inputs))
        inputs_n = (inputs * reps)[:n]
        outputs_n = (outputs * reps)[:n]
        context = slots * (float(np.mean(inputs)) + float(np.mean(outputs)) / 2.0)
        cycle = float(np.mean(outputs)) * self.table.decode_s(slots, context)
        starts = [cycle * k / clients for k in range(clients)]
        timeline = simulate(
            None,
            inputs_n,
            outputs_n,
            config,
            self.table,
            clients=clients,
            first_arrivals_s=starts,
            cached_tokens=self.cached_tokens(spec, inputs_n),
        )
        finish = np.sort(timeline.finish_s)
        # After the first cycle, before the last one (the loop drains as clients run out).
        first, last = clients, n - 1 - clients
        if last <= first or not finish[last] > finish[first]:
            raise EngineError("saturation run too short")  # pragma: no cover
        return float((last - first) / (finish[last] - finish[first]))

    def capacity(self, spec: TrafficSpec) -> float:
        """Return ``closed_loop_capacity`` of this replica for the stream's mean lengths."""
        return closed_loop_capacity(
            self.model,
            self.accelerator,
            precision=self.precision,
            parallelism=self.parallelism,
            params=self.params,
            config=self.config,
            mean_input_tokens=spec.input_tokens.mean,
            mean_output_tokens=spec.output_tokens.mean,
        )

    def goodput_bracket(self, spec: TrafficSpec) -> tuple[float, float]:
        """Return the closed-loop capacity and the highest rate the goodput search probes.

        The closed-loop capacity is within about 15% of what the simulated queue sustains:
        bracket 25% above it. Speculation can raise throughput up to E-fold, which the
        closed-loop model ignores.
        """
        capacity = self.capacity(spec)
        return capacity, GOODPUT_CEILING * capacity * self.config.tokens_per_decode_step

    def prober(self, spec: TrafficSpec) -> Callable[[float], TrafficResult]:
        """Return a simulation of the spec's seeded stream scaled to any rate."""
        spec.validate()
        unit, inputs, outputs = self.stream(spec)
        cached = self.cached_tokens(spec, inputs)
        return lambda rate: self._run_at(rate, unit, inputs, outputs, cached)

    def goodput(self, spec: TrafficSpec, targets: Sequence[SloTarget]) -> GoodputResult:
        """Return the largest rate meeting every target (``search_goodput``)."""
        return search_goodput(self, spec, targets)


class GoodputServer(Protocol):
    """What the goodput search needs: a replica, or a group of disaggregated pools."""

    def goodput_bracket(self, spec: TrafficSpec) -> tuple[float, float]:
        """Return the fast capacity estimate and the highest rate worth probing."""
        ...

    def prober(self, spec: TrafficSpec) -> Callable[[float], TrafficResult]:
        """Return a simulation of one seeded stream at any rate (common random numbers)."""
        ...

    def saturation(self, spec: TrafficSpec) -> float:
        """Return the requests/s a full queue sustains (caps a goodput above the capacity)."""
        ...


def search_goodput(
    server: GoodputServer, spec: TrafficSpec, targets: Sequence[SloTarget]
) -> GoodputResult:
    """Bisect the rate in (0, ceiling] for the largest one meeting every target.

    Every probe reuses the same seeded stream scaled to its rate (common random numbers), so
    the percentiles move smoothly with the rate. A rate the server cannot keep up with misses
    the targets once its queue has grown (finite streams let loose targets pass a little
    beyond); a goodput above the capacity is capped at what a full queue sustains.
    """
    spec.validate()
    if not targets:
        raise EngineError("slo needs at least one target")
    capacity, high = server.goodput_bracket(spec)
    run = server.prober(spec)
    runs = 0

    def probe(rate: float) -> TrafficResult | None:
        nonlocal runs
        runs += 1
        result = run(rate)
        return result if meets(result, targets) else None

    def within_saturation(
        rate: float, result: TrafficResult, limited: str, missed: float | None
    ) -> GoodputResult:
        # A finite stream beyond saturation can still meet loose targets (its queue has not
        # grown enough yet); no rate above the saturation rate is sustainable: capped there.
        if rate <= capacity:
            return GoodputResult(rate, capacity, limited, result, runs, missed)
        ceiling = server.saturation(spec)
        if rate <= ceiling:
            return GoodputResult(rate, capacity, limited, result, runs, missed)
        return GoodputResult(ceiling, capacity, "saturation", run(ceiling), runs + 1, missed)

    top = probe(high)
    if top is not None:
        return within_saturation(high, top, "saturation", None)
    low = capacity * GOODPUT_FLOOR_SHARE
    best = probe(low)
    if best is None:
        return GoodputResult(0.0, capacity, "unloaded_latency", None, runs, low)
    for _ in range(GOODPUT_STEPS):
        middle = math.sqrt(low * high) if high / low > 4.0 else (low + high) / 2.0
        found = probe(middle)
        if found is None:
            high = middle
        else:
            low, best = middle, found
    return within_saturation(
        low, best, "saturation" if low >= SATURATION_SHARE * capacity else "slo", high
    )


def closed_loop_capacity(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
    config: SchedulerConfig,
    mean_input_tokens: float,
    mean_output_tokens: float,
) -> float:
    """Return requests/s at the running limit from the engine's closed-loop model (fast).

    ``serving.serving_state`` at concurrency = the running limit (or what the KV cache holds at
    the mean lengths), mean lengths, the step budget as the prefill chunk and the closed-loop
    harness terms set to zero. It decodes every running request each step, prompts still
    prefilling too, and ignores how length mixes pack the KV cache, so it is within about 15%
    of ``Replica.saturation`` (the simulated full queue; tests/engine/test_traffic_model.py).
    """
    held = config.requests_held(mean_input_tokens + mean_output_tokens)
    slots = min(config.max_running, held)
    # serving.py's closed-loop harness terms: never used by the traffic model (set to zero)
    harness = dict.fromkeys(HARNESS_TERMS, 0.0)
    chunk = min(max(float(config.max_num_batched_tokens), 64.0), 1_048_576.0)
    state = serving_state(
        model,
        accelerator,
        concurrency=np.asarray([float(slots)]),
        max_running=float(slots),
        input_tokens=mean_input_tokens,
        output_tokens=mean_output_tokens,
        precision=precision,
        parallelism=parallelism,
        params=params.replace(prefill_chunk_tokens=chunk, **harness),
    )
    return float(state.requests_per_s[0])


def scheduler_config(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    max_num_batched_tokens: int,
    max_running_requests: int | None,
    scheduling: str,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
    draft_tokens: int = 0,
    acceptance_rate: float = 0.0,
    drafter: str = GENERIC,
) -> SchedulerConfig:
    """Return the scheduler limits of a replica: KV-cache tokens, each request's fixed state
    (hybrid models) and the running cap (no more requests than hold one token and a state)."""
    budget = kv_budget(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        step_tokens=float(max_num_batched_tokens),
        memory_utilization=memory_utilization,
        mtp=drafter == MTP and draft_tokens > 0,
    )
    kv, state = budget.tokens, budget.state_tokens_per_request
    per_step = draft_tokens + 1
    gain = tokens_per_step(draft_tokens, acceptance_rate)
    cap = max_num_batched_tokens if max_running_requests is None else max_running_requests
    running = min(cap, max_num_batched_tokens // per_step, max(int(kv // (1.0 + state)), 1))
    config = SchedulerConfig(
        max_num_batched_tokens,
        running,
        kv,
        scheduling,
        per_step,
        gain,
        state,
        window_tokens=float(budget.window_tokens),
        windowed_share=budget.windowed_share,
    )
    config.validate()
    return config


def meets(result: TrafficResult, targets: Sequence[SloTarget]) -> bool:
    """Return whether every target holds (a metric with no samples meets its target)."""
    for target in targets:
        value = getattr(result, target.metric).at(target.percentile)
        if math.isfinite(value) and value > target.max_ms:
            return False
    return True


def measurement_window(timeline: Timeline) -> slice:
    """Return the requests the statistics are over: the warm-up and the drain left out.

    Warm-up: at least WARMUP_SHARE of the stream and every request that arrives within one
    median end-to-end latency of the start (the batch is still filling), at most half of it;
    drain: the last DRAIN_SHARE (no traffic after them).
    """
    n = timeline.arrival_s.size
    arrival = timeline.arrival_s
    settle = float(arrival[0] + np.median(timeline.finish_s - arrival))
    start = max(int(n * WARMUP_SHARE), int(np.searchsorted(arrival, settle)))
    return slice(min(start, n // 2), n - int(n * DRAIN_SHARE))


def steady_window_s(timeline: Timeline) -> tuple[float, float]:
    """Return the steady-state stretch: from the first to the last measured arrival."""
    window = measurement_window(timeline)
    return (
        float(timeline.arrival_s[window.start]),
        float(timeline.arrival_s[max(window.stop - 1, window.start)]),
    )


def busy_share(timeline: Timeline, start_s: float, stop_s: float) -> float:
    """Return the share of [start, stop] in which the replica runs steps.

    1 − (idle stretches within it) ÷ its length, idle including any time after the last
    finish. A continuous-batching replica runs steps whenever any request is in flight, so
    this is P(at least one request present): ρ for one request at a time (M/D/1), close to 1
    once the mean concurrency is several requests, whatever the load factor.
    """
    if not stop_s > start_s:
        total = float(np.nanmax(timeline.finish_s) - timeline.arrival_s[0])
        return min(timeline.busy_s / total, 1.0) if total > 0 else 0.0
    idle = 0.0
    for begin, end in timeline.idle_s:
        if end <= start_s:
            continue
        if begin >= stop_s:
            break
        idle += min(end, stop_s) - max(begin, start_s)
    last = float(np.nanmax(timeline.finish_s))
    idle += max(stop_s - max(last, start_s), 0.0)
    return min(max(1.0 - idle / (stop_s - start_s), 0.0), 1.0)


def summarise(rate: float, timeline: Timeline, outputs: Sequence[int]) -> TrafficResult:
    """Return the stream's percentiles, throughput and load from its simulated timeline."""
    n = timeline.arrival_s.size
    arrival_all, finish_all = timeline.arrival_s, timeline.finish_s
    window = measurement_window(timeline)
    start, stop = window.start, window.stop
    arrival = arrival_all[window]
    first = timeline.first_token_s[window]
    finish = finish_all[window]
    out = np.asarray(outputs, dtype=np.float64)[window]
    ttft = (first - arrival) * 1e3
    e2e = (finish - arrival) * 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(out > 1, (finish - first) * 1e3 / (out - 1.0), np.nan)
    queue = (timeline.admitted_s[window] - arrival) * 1e3
    # Completions per second from the moment the warm-up requests have finished to the last
    # admission (until then work is waiting or arriving); a replica that keeps up completes
    # the offered rate, one that cannot completes what it can.
    t0 = float(np.sort(finish_all)[start])
    t1 = float(np.nanmax(timeline.admitted_s))
    if t1 - t0 > 0.1 * float(arrival_all[-1] - arrival_all[0]):
        done = np.count_nonzero((finish_all > t0) & (finish_all <= t1))
        came = np.count_nonzero((arrival_all > t0) & (arrival_all <= t1))
        achieved = float(done) / (t1 - t0)
        arrived = float(came) / (t1 - t0)
    else:  # latencies as long as the stream: the measured requests over their finish span
        low, high = np.percentile(finish, [5.0, 95.0]).tolist()
        achieved = 0.9 * (stop - start) / (high - low) if high > low else rate
        arrived = rate
    return TrafficResult(
        request_rate_per_s=rate,
        ttft_ms=percentiles_of(ttft),
        tpot_ms=percentiles_of(tpot),
        e2e_latency_ms=percentiles_of(e2e),
        queue_wait_ms=percentiles_of(queue),
        achieved_requests_per_s=achieved,
        arrived_requests_per_s=arrived,
        output_tokens_per_s=achieved * float(np.mean(outputs)),
        utilization=busy_share(timeline, *steady_window_s(timeline)),
        simulated_requests=n,
        measured_requests=stop - start,
        peak_running_requests=timeline.peak_running,
    )
