"""Disaggregated prefill and decode pools (xPyD): X prefill replicas, Y decode replicas.

A group is X + Y replicas of one layout (the estimate's). Requests flow through it as
disaggregated serving runs them (vLLM disaggregated prefilling, docs/features/disagg_prefill.md;
SGLang PD disaggregation, docs/advanced_features/pd_disaggregation.md):

1. **Prefill pool.** Arrivals are dealt round-robin to the X prefill replicas (request i to
   replica i mod X, as a proxy cycling through its prefill instances), each with its own FCFS
   queue. A prefill replica runs prompts only: the same step loop (``scheduler.simulate``)
   with every request's output cut to the one token its last prefill step makes (vLLM runs the
   prefill instance with ``max_tokens=1``, examples/offline_inference/disaggregated_prefill.py),
   so its steps are prefill only and a request
   leaves, freeing its KV, when its prompt is done.
2. **KV transfer.** The prompt's KV cache moves to a decode replica: each GPU sends its shard,
   KV bytes per token per GPU (``memory.kv_cache_bytes_per_token``) × prompt tokens, as one
   point-to-point ``send`` (``kernels.collective_cost``: bytes ÷ (link rate × collective
   bandwidth efficiency) + the collective latency), over the link ``Accelerator.link_bytes_s``
   gives for where the pools are (``KV_LINKS``). Transfers from one prefill replica share its
   links: they run one after another in the order their prompts finish.
3. **Decode pool.** Requests are dealt round-robin, in the order their KV lands, to the Y
   decode replicas: the same step loop with ``prefilled=True`` (admission, with the KV-cache
   limit and the running cap, puts a request straight into decoding), decode-only steps.

The client's first token is the one the prefill step made; it is streamed by the decode side
once the KV (and that token, sent with it) has arrived (SGLang: the decode server holds the
client's request and streams tokens after the KV transfer completes, NVIDIA Dynamo's "SGLang
Disaggregated KV Transfer Flow"; vLLM's proxy streams the decode instance's answer after the
prefill request returns). So TTFT = prefill queue + prefill steps + link wait + transfer, and
the wait for a decode step (and slot) and the decode steps make up TPOT.

The group's goodput (``PoolGroup.goodput``, per group) is the replica's search,
``model.search_goodput``, bracketed and capped by the group's analytic capacity, which long
streams through full queues confirm (tests/engine/test_disaggregation_goodput.py).

Not modelled: the prefill replica holding the KV until it is read, decode-side
pre-allocation before the prefill starts (SGLang), layer-wise transfer overlapping the
prefill (Mooncake), a link shared between groups, and the MTP drafter's own KV in the transfer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from service.engine.errors import EngineError
from service.engine.kernels import FloatArray, collective_cost
from service.engine.memory import kv_cache_bytes_per_token
from service.engine.traffic.model import (
    GOODPUT_CEILING,
    GoodputResult,
    Percentiles,
    Replica,
    SloTarget,
    TrafficResult,
    TrafficSpec,
    busy_share,
    measurement_window,
    percentiles_of,
    search_goodput,
    steady_window_s,
    summarise,
)
from service.engine.traffic.scheduler import Timeline, simulate

MAX_POOL_REPLICAS = 16  # per pool: a group of at most 32 replicas
# Where the KV travels: "auto" puts the group's (X + Y) · g GPUs together (the scale-up link
# when they fit its domain, else the host link within a node, else the network per GPU);
# "scale_up" and "scale_out" force the scale-up link or the inter-node network.
KV_LINKS = ("auto", "scale_up", "scale_out")
POOLS = ("prefill", "decode", "kv_transfer")
# Ratios a plan's "search" tries: prompt-heavy to decode-heavy mixes, at most five replicas.
SEARCH_RATIOS = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 3), (3, 2), (1, 4), (4, 1))


@dataclass(frozen=True, slots=True)
class Pools:
    """How many prefill and decode replicas a group has, and where the KV travels."""

    prefill_replicas: int
    decode_replicas: int
    kv_link: str = "auto"

    def validate(self) -> None:
        """Raise EngineError naming the first field out of range."""
        for name in ("prefill_replicas", "decode_replicas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise EngineError(f"disaggregation.{name} must be an integer")
            if not 1 <= value <= MAX_POOL_REPLICAS:
                raise EngineError(
                    f"disaggregation.{name} must be between 1 and {MAX_POOL_REPLICAS}"
                )
        if self.kv_link not in KV_LINKS:
            raise EngineError(f"disaggregation.kv_link must be one of {', '.join(KV_LINKS)}")

    @property
    def replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas

    @property
    def name(self) -> str:
        return f"{self.prefill_replicas}P{self.decode_replicas}D"


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """One pool: its replicas, busy share, offered load over its capacity, and its queue."""

    replicas: int
    utilization: float  # share of the steady-state stretch each replica runs steps (mean)
    capacity_requests_per_s: float  # the pool's (all its replicas')
    load_factor: float  # request rate ÷ capacity
    queue_wait_ms: Percentiles  # arrival at the pool to its first step for the request


@dataclass(frozen=True, slots=True)
class DisaggregatedResult:
    """What the stream sees through the group, and how loaded each pool and the link are."""

    pools: Pools
    traffic: TrafficResult  # TTFT to the client, TPOT, e2e; utilization over all replicas
    prefill: PoolLoad
    decode: PoolLoad
    transfer_ms: Percentiles  # one request's KV transfer (its link's queue excluded)
    transfer_wait_ms: Percentiles  # waiting for the prefill replica's link to free
    kv_bytes_per_gpu: float  # mean over requests: each GPU's shard of the prompt's KV
    link_bytes_s: float
    link_peers: int  # GPUs the link is chosen for (Accelerator.link_bytes_s)
    link_utilization: float  # share of time a prefill replica's link is sending
    link_capacity_requests_per_s: float
    saturation_requests_per_s: float  # the least of the three capacities
    bottleneck: str  # the pool (or the link) that saturates first: POOLS


def link_peers(replica: Replica, pools: Pools) -> int:
    """Return the GPU count whose link the KV transfer uses (``Accelerator.link_bytes_s``)."""
    top = replica.accelerator.links
    if pools.kv_link == "scale_up":
        return 2
    if pools.kv_link == "scale_out":
        return max(top.gpus_per_node, top.scale_up_domain_gpus) + 1
    return pools.replicas * replica.parallelism.gpus_per_replica


def transfer_seconds(replica: Replica, pools: Pools, prompt_tokens: Sequence[int]) -> FloatArray:
    """Return each prompt's KV transfer time: one ``send`` of its per-GPU KV shard."""
    per_token = kv_cache_bytes_per_token(replica.model, replica.precision, replica.parallelism)
    shard = per_token.for_context(np.asarray(prompt_tokens, dtype=np.float64))
    cost = collective_cost(
        "send",
        float(link_peers(replica, pools)),
        shard,
        accelerator=replica.accelerator,
        params=replica.params,
    )
    return np.asarray(cost.time_s, dtype=np.float64) + np.zeros_like(shard)


def prefill_capacity(replica: Replica, spec: TrafficSpec) -> float:
    """Return prompts/s one prefill replica completes with a full queue, at the mean prompt.

    Prompts of S new tokens (the mean less the cached share C) fill steps of B tokens: below
    B, ⌊B/S⌋ prompts share a step (one piece each, after C cached tokens); from B up, a prompt
    takes ⌈S/B⌉ chunks, chunk j after C + j·B tokens. Either way: prompts per step-second.
    """
    budget = replica.config.max_num_batched_tokens
    mean = spec.input_tokens.mean
    cached = min(round(spec.prefix_cache_hit_rate * mean), math.ceil(mean) - 1)
    new = max(round(mean) - max(cached, 0), 1)
    table = replica.table
    before = float(max(cached, 0))
    if new < budget:
        per_step = budget // new
        return per_step / table.step_s(0, 0.0, [(float(new), before)] * per_step)
    seconds, done = 0.0, 0
    while done < new:
        take = min(budget, new - done)
        seconds += table.step_s(0, 0.0, [(float(take), done + before)])
        done += take
    return 1.0 / seconds


def decode_capacity(replica: Replica, spec: TrafficSpec) -> float:
    """Return requests/s one decode replica completes with every slot busy (Little's law).

    Throughput = slots ÷ (steps per request × step time). A request stays for ⌈(O − 1)/E⌉
    steps (E tokens gained per step, 1 without speculation), so the requests running at any
    moment are weighted by O − 1: long answers are over-represented. Over that weighting a
    request reserves Ī + E[O(O − 1)]/E[O − 1] tokens of KV (input and output lengths are
    drawn independently) and decodes at context Ī + E[O(O − 1)]/(2·E[O − 1]); slots = the
    running cap, or what the KV cache holds at that reservation. For fixed lengths these are
    I + O and I + O/2. Weighted by the mean instead, a skewed mix of answers (median 682,
    p90 1,536, max 2,048 tokens) was credited 1.19× what a long full queue completes
    (tests/engine/test_disaggregation_goodput.py).
    """
    config = replica.config
    s_in, s_out = spec.input_tokens.mean, spec.output_tokens.mean
    if s_out <= 1.0:
        return math.inf
    # E[O(O − 1)] / E[O − 1]: the mean answer length of the requests running at an instant.
    outputs = spec.output_tokens
    running_out = s_out if outputs.is_fixed else (outputs.mean_square - s_out) / (s_out - 1.0)
    need = s_in + running_out
    held = max(int(config.kv_capacity_tokens // config.need(need)), 1)
    slots = min(config.max_running, held)
    step = replica.table.decode_s(slots, slots * (s_in + running_out / 2.0))
    steps = math.ceil((s_out - 1.0) / config.tokens_per_decode_step - 1e-9)
    return slots / (steps * step)


class PoolGroup:
    """A replica layout served as X prefill + Y decode replicas (``run``, ``goodput`` as
    ``Replica``'s: a goodput is then per group)."""

    def __init__(self, replica: Replica, pools: Pools) -> None:
        pools.validate()
        self.replica = replica
        self.pools = pools

    def capacities(self, spec: TrafficSpec) -> tuple[float, float, float]:
        """Return the prefill pool's, the decode pool's and the links' requests/s."""
        x, y = self.pools.prefill_replicas, self.pools.decode_replicas
        mean_prompt = max(round(spec.input_tokens.mean), 1)
        transfer = float(transfer_seconds(self.replica, self.pools, [mean_prompt])[0])
        return (
            x * prefill_capacity(self.replica, spec),
            y * decode_capacity(self.replica, spec),
            x / transfer if transfer > 0 else math.inf,
        )

    def capacity(self, spec: TrafficSpec) -> float:
        """Return the group's capacity: the least of its pools' and links' (fast, analytic)."""
        return min(self.capacities(spec))

    def run(self, spec: TrafficSpec) -> TrafficResult:
        """Simulate the stream through the group; the per-request view only."""
        return self.run_pools(spec).traffic

    def saturation(self, spec: TrafficSpec) -> float:
        """Return what a full queue sustains: the analytic ``capacity``.

        Unlike the colocated closed-loop estimate, the pools' capacities are steady-state
        counts of one kind of step each; a long stream well above them completes them within
        a few percent (tests/engine/test_disaggregation_goodput.py), so no simulation is run.
        """
        return self.capacity(spec)

    def goodput_bracket(self, spec: TrafficSpec) -> tuple[float, float]:
        """Return the group's capacity and the highest rate the goodput search probes.

        The capacities count speculation's tokens per step already: 25% above, no E factor.
        """
        capacity = self.capacity(spec)
        return capacity, GOODPUT_CEILING * capacity

    def prober(self, spec: TrafficSpec) -> Callable[[float], TrafficResult]:
        """Return a simulation of the spec's seeded stream through the group at any rate."""
        spec.validate()
        drawn = self.replica.stream(spec)
        cached = self.replica.cached_tokens(spec, drawn[1])
        return lambda rate: self._run_at(spec, rate, drawn, cached).traffic

    def goodput(self, spec: TrafficSpec, targets: Sequence[SloTarget]) -> GoodputResult:
        """Return the largest rate per group meeting every target (``search_goodput``)."""
        return search_goodput(self, spec, targets)

    def run_pools(self, spec: TrafficSpec) -> DisaggregatedResult:
        """Simulate the stream through prefill pool, links and decode pool."""
        spec.validate()
        drawn = self.replica.stream(spec)
        cached = self.replica.cached_tokens(spec, drawn[1])
        return self._run_at(spec, spec.request_rate_per_s, drawn, cached)

    def _run_at(
        self,
        spec: TrafficSpec,
        rate: float,
        drawn: tuple[FloatArray, list[int], list[int]],
        cached: list[int] | None,
    ) -> DisaggregatedResult:
        replica, pools = self.replica, self.pools
        unit, inputs, outputs = drawn
        arrival = unit / rate
        n = len(inputs)
        config, table = replica.config, replica.table
        x, y = pools.prefill_replicas, pools.decode_replicas
        admitted = np.full(n, math.nan)
        prefilled_at = np.full(n, math.nan)
        ready = np.full(n, math.nan)
        waited = np.zeros(n)
        finish = np.full(n, math.nan)
        decode_wait = np.full(n, math.nan)
        transfer = transfer_seconds(replica, pools, inputs)
        sends = transfer.tolist()
        busy_prefill = busy_decode = link_busy = 0.0
        prefill_runs: list[Timeline] = []
        decode_runs: list[Timeline] = []
        steps = peak = 0
        for p in range(x):
            idx = list(range(p, n, x))
            if not idx:
                continue
            timeline = simulate(
                [float(arrival[i]) for i in idx],
                [inputs[i] for i in idx],
                [1] * len(idx),
                config,
                table,
                cached_tokens=None if cached is None else [cached[i] for i in idx],
            )
            admitted[idx] = timeline.admitted_s
            prefilled_at[idx] = timeline.first_token_s
            busy_prefill += timeline.busy_s
            prefill_runs.append(timeline)
            steps += timeline.steps
            peak = max(peak, timeline.peak_running)
            free = -math.inf  # the replica's links: one transfer at a time, in finishing order
            for i in sorted(idx, key=lambda i: (prefilled_at[i], i)):
                start = max(float(prefilled_at[i]), free)
                waited[i] = start - prefilled_at[i]
                free = ready[i] = start + sends[i]
                link_busy += sends[i]
        decoders = sorted((i for i in range(n) if outputs[i] >= 2), key=lambda i: (ready[i], i))
        for r in range(y):
            idx = decoders[r::y]
            if not idx:
                continue
            timeline = simulate(
                [float(ready[i]) for i in idx],
                [inputs[i] for i in idx],
                [outputs[i] for i in idx],
                config,
                table,
                prefilled=True,
            )
            finish[idx] = timeline.finish_s
            decode_wait[idx] = timeline.admitted_s - ready[idx]
            busy_decode += timeline.busy_s
            decode_runs.append(timeline)
            steps += timeline.steps
            peak = max(peak, timeline.peak_running)
        alone = np.isnan(finish)  # one output token: done when it reaches the client
        finish[alone] = ready[alone]
        merged = Timeline(
            arrival_s=arrival,
            admitted_s=admitted,
            first_token_s=ready,
            finish_s=finish,
            busy_s=busy_prefill + busy_decode,
            steps=steps,
            peak_running=peak,
        )
        summary = summarise(rate, merged, outputs)
        # Busy shares over the steady-state stretch (a replica dealt no request is idle).
        start_s, stop_s = steady_window_s(merged)
        busy_p = sum(busy_share(t, start_s, stop_s) for t in prefill_runs) / x
        busy_d = sum(busy_share(t, start_s, stop_s) for t in decode_runs) / y
        summary = dataclasses.replace(
            summary, utilization=(x * busy_p + y * busy_d) / pools.replicas
        )
        total = float(np.nanmax(finish) - arrival[0])  # the whole stream: a fallback span
        cap_p, cap_d, cap_link = self.capacities(spec)
        saturation = min(cap_p, cap_d, cap_link)
        bottleneck = POOLS[int(np.argmin([cap_p, cap_d, cap_link]))]
        window = measurement_window(merged)
        shard = kv_cache_bytes_per_token(replica.model, replica.precision, replica.parallelism)
        return DisaggregatedResult(
            pools=pools,
            traffic=summary,
            prefill=PoolLoad(
                x,
                busy_p,
                cap_p,
                rate / cap_p,
                percentiles_of(((admitted - arrival) * 1e3)[window]),
            ),
            decode=PoolLoad(
                y,
                busy_d,
                cap_d,
                rate / cap_d,
                percentiles_of((decode_wait * 1e3)[window]),
            ),
            transfer_ms=percentiles_of((transfer * 1e3)[window]),
            transfer_wait_ms=percentiles_of((waited * 1e3)[window]),
            kv_bytes_per_gpu=float(np.mean(shard.for_context(np.asarray(inputs, dtype=float)))),
            link_bytes_s=replica.accelerator.link_bytes_s(link_peers(replica, pools)),
            link_peers=link_peers(replica, pools),
            link_utilization=_link_share(ready, transfer, x, start_s, stop_s, link_busy, total),
            link_capacity_requests_per_s=cap_link,
            saturation_requests_per_s=saturation,
            bottleneck=bottleneck,
        )


def _link_share(
    ready: FloatArray,
    sends: FloatArray,
    links: int,
    start_s: float,
    stop_s: float,
    busy_s: float,
    total_s: float,
) -> float:
    """Return the share of [start, stop] a prefill replica's link spends sending (mean).

    Each send occupies [ready − t, ready]; a degenerate stretch falls back to the whole stream.
    """
    if not stop_s > start_s:
        return min(busy_s / (links * total_s), 1.0) if total_s > 0 else 0.0
    overlap = np.clip(np.minimum(ready, stop_s) - np.maximum(ready - sends, start_s), 0.0, None)
    return min(float(overlap.sum()) / (links * (stop_s - start_s)), 1.0)
