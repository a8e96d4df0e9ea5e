"""Open-loop traffic use case: turn a traffic request into engine terms, simulate, shape.

Replicas (tabulated step costs and KV sizing) and saturation rates are memoised per process:
a dashboard moving a rate slider, or a goodput search after an estimate, reuses them.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from service.engine.efficiency import EfficiencyParams
from service.engine.errors import EngineError
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape
from service.engine.traffic.backends import scheduler_defaults
from service.engine.traffic.disaggregation import DisaggregatedResult, PoolGroup, Pools
from service.engine.traffic.lengths import LengthDistribution, LengthError
from service.engine.traffic.model import (
    GoodputResult,
    GoodputServer,
    Percentiles,
    Replica,
    SloTarget,
    TrafficResult,
    TrafficSpec,
    closed_loop_capacity,
    scheduler_config,
    search_goodput,
)
from service.engine.traffic.speculative import MTP
from service.engine.workloads import preset_lengths
from service.services.errors import FieldError

CACHE_ENTRIES = 64
_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d{1,2})?)$")
_SLO = re.compile(r"^(ttft_ms|tpot_ms|e2e_latency_ms)_p(50|90|99)_max$")


@dataclass(frozen=True, slots=True)
class LengthRequest:
    """A length mix as sent: percentiles (name → tokens) with top, or a histogram."""

    percentiles: tuple[tuple[str, float], ...] = ()
    mean: float | None = None
    minimum: int = 1
    maximum: int | None = None
    bin_edges_tokens: tuple[int, ...] = ()
    shares: tuple[float, ...] = ()
    workload: str | None = None  # a preset of engine.workloads.LENGTH_PRESETS


@dataclass(frozen=True, slots=True)
class TrafficRequest:
    """The traffic part of an estimate or plan in service terms (hashable)."""

    request_rate_per_s: float
    process: str = "poisson"
    cv: float | None = None
    input_tokens: int | LengthRequest | None = None
    output_tokens: int | LengthRequest | None = None
    max_num_batched_tokens: int | None = None
    max_running_requests: int | None = None
    scheduling: str | None = None
    num_requests: int = 600
    seed: int = 0
    prefix_cache_hit_rate: float = 0.0
    draft_tokens: int = 0
    acceptance_rate: float = 0.0
    drafter: str = "generic"  # speculative.DRAFTERS
    slo: tuple[tuple[str, float], ...] = field(default=())
    # Disaggregated pools: (prefill replicas, decode replicas, kv_link) — one for an estimate,
    # the ratios to try for a plan (``disaggregation.SEARCH_RATIOS`` for "search").
    disaggregation: tuple[tuple[int, int, str], ...] = ()


def length_distribution(
    value: int | LengthRequest, name: str, part: str = "input"
) -> LengthDistribution:
    """Build a distribution; FieldError names the offending part under ``name``.

    ``part`` (``input`` or ``output``) chooses which of a preset's distributions
    ``value.workload`` names.
    """
    try:
        if isinstance(value, int):
            return LengthDistribution.fixed(value)
        if value.workload is not None:
            if (
                value.percentiles
                or value.bin_edges_tokens
                or value.shares
                or (value.mean is not None or value.maximum is not None or value.minimum != 1)
            ):
                raise FieldError(name, "give either a workload preset or a distribution, not both")
            try:
                return preset_lengths(value.workload, part)
            except KeyError as exc:
                raise FieldError(f"{name}.workload", str(exc.args[0])) from exc
        if value.bin_edges_tokens or value.shares:
            if value.percentiles or value.mean is not None or value.maximum is not None:
                raise FieldError(name, "give either a histogram or percentiles, not both")
            return LengthDistribution.from_histogram(
                tuple(float(e) for e in value.bin_edges_tokens), value.shares
            )
        if not value.percentiles:
            raise FieldError(name, "give percentiles (with max or mean), or a histogram")
        levels: dict[float, float] = {}
        for key, tokens in value.percentiles:
            match = _PERCENTILE.match(key)
            if match is None or not 0 < float(match.group(1)) < 100:
                raise FieldError(f"{name}.percentiles.{key}", "levels are p1 … p99.99")
            levels[float(match.group(1)) / 100.0] = float(tokens)
        return LengthDistribution.from_percentiles(
            levels, minimum=float(value.minimum), maximum=value.maximum, mean=value.mean
        )
    except LengthError as exc:
        part = {"tokens": "", "min": ".min", "max": ".max", "mean": ".mean"}.get(
            exc.field, f".{exc.field}"
        )
        raise FieldError(f"{name}{part}", exc.message) from exc


def slo_targets(slo: tuple[tuple[str, float], ...]) -> tuple[SloTarget, ...]:
    """Turn ``ttft_ms_p90_max``-style names into engine targets."""
    targets = []
    for name, value in slo:
        match = _SLO.match(name)
        if match is None:
            raise FieldError(f"traffic.slo.{name}", "unknown target")
        targets.append(SloTarget(match.group(1), float(match.group(2)), float(value)))
    return tuple(targets)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Memo:
    """A small thread-safe LRU of computed values."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Hashable, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]  # type: ignore[no-any-return]
        value = make()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


_REPLICAS = _Memo(CACHE_ENTRIES)
_SATURATION = _Memo(4 * CACHE_ENTRIES)


@dataclass(frozen=True, slots=True)
class Deployment:
    """What a replica is: model, accelerator, numerics, layout, parameters, backend."""

    model: ModelShape
    accelerator: Accelerator
    precision: Precision
    parallelism: Parallelism
    params: EfficiencyParams
    backend: str | None

    def __post_init__(self) -> None:
        # native and auto dtypes as this backend runs them (its KV cache beside fp8 weights)
        resolved = self.precision.resolved(self.model, self.accelerator, self.backend)
        object.__setattr__(self, "precision", resolved)

    def key(self) -> tuple[Any, ...]:
        return (
            self.model,
            repr(self.accelerator),
            self.precision,
            self.parallelism,
            self.params,
            self.backend,
        )


@dataclass(frozen=True, slots=True)
class Prepared:
    """A traffic request resolved against a deployment: spec, targets, replica and sources."""

    spec: TrafficSpec
    targets: tuple[SloTarget, ...]
    replica: Replica
    defaults_from: str
    replica_key: tuple[Any, ...]
    pools: Pools | None = None


def traffic_spec(
    deployment: Deployment,
    request: TrafficRequest,
    *,
    input_tokens: int,
    output_tokens: int,
) -> tuple[TrafficSpec, tuple[SloTarget, ...], str]:
    """Fill defaults from the backend and build the stream: spec, targets, defaults source."""
    inputs = length_distribution(
        request.input_tokens if request.input_tokens is not None else input_tokens,
        "traffic.input_tokens",
        "input",
    )
    outputs = length_distribution(
        request.output_tokens if request.output_tokens is not None else output_tokens,
        "traffic.output_tokens",
        "output",
    )
    if request.process == "poisson" and request.cv not in (None, 1.0):
        raise FieldError("traffic.arrival.cv", "cv applies to gamma arrivals (Poisson has cv 1)")
    defaults = scheduler_defaults(deployment.backend, deployment.accelerator)
    chunk = request.max_num_batched_tokens or defaults.max_num_batched_tokens
    running = request.max_running_requests or defaults.max_running_requests
    scheduling = request.scheduling or defaults.scheduling
    if running is not None and running > chunk:
        raise FieldError(
            "traffic.max_running_requests",
            f"must not exceed max_num_batched_tokens ({chunk}): every running request decodes "
            "one token per step",
        )
    if request.drafter == MTP and deployment.model.mtp_layers <= 0:
        raise FieldError(
            "traffic.speculative.drafter",
            f"mtp needs a model with MTP layers; {deployment.model.id} has mtp_layers 0 "
            "(its config has no num_nextn_predict_layers)",
        )
    given = (request.max_num_batched_tokens, request.max_running_requests, request.scheduling)
    source = "request" if all(v is not None for v in given) else defaults.source
    spec = TrafficSpec(
        request_rate_per_s=request.request_rate_per_s,
        input_tokens=inputs,
        output_tokens=outputs,
        arrival_process=request.process,
        arrival_cv=request.cv if request.cv is not None else 1.0,
        max_num_batched_tokens=chunk,
        max_running_requests=running,
        scheduling=scheduling,
        num_requests=request.num_requests,
        seed=request.seed,
        prefix_cache_hit_rate=request.prefix_cache_hit_rate,
        draft_tokens=request.draft_tokens,
        acceptance_rate=request.acceptance_rate,
        drafter=request.drafter,
    )
    try:
        spec.validate()
    except EngineError as exc:
        raise FieldError("traffic", str(exc)) from exc
    return spec, slo_targets(request.slo), source


def replica_for(deployment: Deployment, spec: TrafficSpec) -> tuple[Replica, tuple[Any, ...]]:
    """Return the deployment's replica for the stream's knobs and longest request (memoised)."""
    d = deployment
    longest_in, longest_out = spec.input_tokens.max_tokens, spec.output_tokens.max_tokens
    chunk, running = spec.max_num_batched_tokens, spec.max_running_requests
    speculation = (spec.draft_tokens, spec.acceptance_rate, spec.drafter)
    key = (d.key(), chunk, running, spec.scheduling, longest_in, longest_out, speculation)

    def make() -> Replica:
        return Replica.prepare(
            d.model,
            d.accelerator,
            precision=d.precision,
            parallelism=d.parallelism,
            params=d.params,
            max_num_batched_tokens=chunk,
            max_running_requests=running,
            scheduling=spec.scheduling,
            max_input_tokens=longest_in,
            max_output_tokens=longest_out,
            draft_tokens=spec.draft_tokens,
            acceptance_rate=spec.acceptance_rate,
            drafter=spec.drafter,
        )

    try:
        return _REPLICAS.get(key, make), key
    except EngineError as exc:
        raise FieldError("traffic", str(exc)) from exc


def capacity(deployment: Deployment, spec: TrafficSpec) -> float:
    """Return the closed-loop capacity without tabulating step costs (for plan bounds)."""
    d = deployment
    config = scheduler_config(
        d.model,
        d.accelerator,
        precision=d.precision,
        parallelism=d.parallelism,
        max_num_batched_tokens=spec.max_num_batched_tokens,
        max_running_requests=spec.max_running_requests,
        scheduling=spec.scheduling,
        draft_tokens=spec.draft_tokens,
        acceptance_rate=spec.acceptance_rate,
        drafter=spec.drafter,
    )
    return closed_loop_capacity(
        d.model,
        d.accelerator,
        precision=d.precision,
        parallelism=d.parallelism,
        params=d.params,
        config=config,
        mean_input_tokens=spec.input_tokens.mean,
        mean_output_tokens=spec.output_tokens.mean,
    )


def prepare(
    deployment: Deployment,
    request: TrafficRequest,
    *,
    input_tokens: int,
    output_tokens: int,
) -> Prepared:
    """Fill defaults from the backend, build the distributions, prepare (or reuse) a replica."""
    spec, targets, source = traffic_spec(
        deployment, request, input_tokens=input_tokens, output_tokens=output_tokens
    )
    pools = None
    if request.disaggregation:
        if len(request.disaggregation) != 1:
            raise FieldError("traffic.disaggregation", "an estimate takes one pool ratio")
        pools = pools_of(request.disaggregation[0])
    replica, key = replica_for(deployment, spec)
    return Prepared(spec, targets, replica, source, key, pools)


def pools_of(ratio: tuple[int, int, str]) -> Pools:
    """Return validated pools (FieldError naming traffic.disaggregation)."""
    pools = Pools(*ratio)
    try:
        pools.validate()
    except EngineError as exc:
        raise FieldError("traffic.disaggregation", str(exc)) from exc
    return pools


def saturation(prepared: Prepared) -> float:
    """Return the replica's capacity for the stream (``Replica.capacity``; memoised)."""
    spec = prepared.spec
    key = (
        prepared.replica_key,
        spec.input_tokens,
        spec.output_tokens,
        spec.arrival_process,
        spec.arrival_cv,
        spec.num_requests,
        spec.seed,
        spec.max_num_batched_tokens,
    )
    return _SATURATION.get(key, lambda: prepared.replica.capacity(spec))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def percentiles_dict(p: Percentiles) -> dict[str, float | None]:
    return {
        "mean": _finite(p.mean),
        "p50": _finite(p.p50),
        "p90": _finite(p.p90),
        "p99": _finite(p.p99),
    }


def goodput_dict(found: GoodputResult, targets: tuple[SloTarget, ...]) -> dict[str, Any]:
    at = found.at_goodput
    return {
        "requests_per_s": found.requests_per_s,
        "limited_by": found.limited_by,
        "slo": {t.name: t.max_ms for t in targets},
        "ttft_ms": percentiles_dict(at.ttft_ms) if at else None,
        "tpot_ms": percentiles_dict(at.tpot_ms) if at else None,
        "e2e_latency_ms": percentiles_dict(at.e2e_latency_ms) if at else None,
        "simulations": found.simulations,
    }


def scheduler_dict(replica: Replica, defaults_from: str) -> dict[str, Any]:
    config = replica.config
    return {
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "max_running_requests": config.max_running,
        "scheduling": config.policy,
        "kv_cache_tokens": int(config.kv_capacity_tokens),
        "decode_tokens_per_step": config.decode_tokens_per_step,
        "tokens_per_decode_step": config.tokens_per_decode_step,
        "defaults_from": defaults_from,
    }


def disaggregation_dict(found: DisaggregatedResult, gpus_per_replica: int) -> dict[str, Any]:
    """Return the pools' part of a disaggregated traffic answer."""

    def pool(p: Any) -> dict[str, Any]:
        return {
            "replicas": p.replicas,
            "utilization": p.utilization,
            "capacity_requests_per_s": p.capacity_requests_per_s,
            "load_factor": p.load_factor,
            "queue_wait_ms": percentiles_dict(p.queue_wait_ms),
        }

    pools = found.pools
    return {
        "prefill_replicas": pools.prefill_replicas,
        "decode_replicas": pools.decode_replicas,
        "gpus": pools.replicas * gpus_per_replica,
        "prefill": pool(found.prefill),
        "decode": pool(found.decode),
        "kv_transfer": {
            "link": pools.kv_link,
            "link_gb_s": found.link_bytes_s / 1e9,
            "bytes_per_gpu": found.kv_bytes_per_gpu,
            "transfer_ms": percentiles_dict(found.transfer_ms),
            "link_wait_ms": percentiles_dict(found.transfer_wait_ms),
            "utilization": found.link_utilization,
            "capacity_requests_per_s": found.link_capacity_requests_per_s,
        },
        "bottleneck": found.bottleneck,
    }


def run_traffic(prepared: Prepared) -> dict[str, Any]:
    """Simulate the stream (and the goodput search when targets are given): the JSON answer."""
    spec, replica = prepared.spec, prepared.replica
    pools: DisaggregatedResult | None = None
    try:
        if prepared.pools is not None:
            group = PoolGroup(replica, prepared.pools)
            pools = group.run_pools(spec)
            result: TrafficResult = pools.traffic
            rate_max = pools.saturation_requests_per_s
            server: GoodputServer = group  # the goodput is then per group
        else:
            result = replica.run(spec)
            rate_max = saturation(prepared)
            server = replica
        found = search_goodput(server, spec, prepared.targets) if prepared.targets else None
    except EngineError as exc:
        raise FieldError("traffic", str(exc)) from exc
    load = spec.request_rate_per_s / rate_max
    saturated = load > 1.0
    message = None
    if saturated and pools is not None:
        message = (
            f"the {pools.pools.name} group cannot keep up: {spec.request_rate_per_s:g} "
            f"requests/s offered, about {rate_max:.3g} sustainable ({load:.2f}× its capacity, "
            f"{pools.bottleneck} saturates first); queues and latencies grow without bound, and "
            "the percentiles shown depend on the simulated stream's length"
        )
    elif saturated:
        message = (
            f"the replica cannot keep up: {spec.request_rate_per_s:g} requests/s offered, "
            f"about {rate_max:.3g} sustainable ({load:.2f}× its capacity); queues and latencies "
            "grow without bound, and the percentiles shown depend on the simulated stream's "
            "length"
        )
    return {
        "request_rate_per_s": spec.request_rate_per_s,
        "arrival": {
            "process": spec.arrival_process,
            "cv": spec.arrival_cv,
        },
        "mean_input_tokens": spec.input_tokens.mean,
        "mean_output_tokens": spec.output_tokens.mean,
        "prefix_cache_hit_rate": spec.prefix_cache_hit_rate,
        "scheduler": scheduler_dict(replica, prepared.defaults_from),
        "ttft_ms": percentiles_dict(result.ttft_ms),
        "tpot_ms": percentiles_dict(result.tpot_ms),
        "e2e_latency_ms": percentiles_dict(result.e2e_latency_ms),
        "queue_wait_ms": percentiles_dict(result.queue_wait_ms),
        "achieved_requests_per_s": result.achieved_requests_per_s,
        "output_tokens_per_s": result.output_tokens_per_s,
        "utilization": result.utilization,
        "saturation_requests_per_s": rate_max,
        "load_factor": load,
        "saturated": saturated,
        "overload_factor": load if saturated else None,
        "message": message,
        "simulated_requests": result.simulated_requests,
        "measured_requests": result.measured_requests,
        "peak_running_requests": result.peak_running_requests,
        "goodput": goodput_dict(found, prepared.targets) if found else None,
        "disaggregation": (
            disaggregation_dict(pools, replica.parallelism.gpus_per_replica) if pools else None
        ),
    }


def slo_pairs(values: Mapping[str, float | None]) -> tuple[tuple[str, float], ...]:
    """Return the targets that are set, as sorted (name, value) pairs."""
    return tuple(sorted((k, float(v)) for k, v in values.items() if v is not None))
