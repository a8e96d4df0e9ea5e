"""Plan search: score every candidate deployment at all concurrency levels at once, then rank.

One candidate is (model, accelerator, precision, layout, efficiency parameters, price). Each is
scored at an array of concurrency levels up to its memory limit; candidates that share model,
precision, layout and parameters go through one ``estimate_stacked`` pass (every accelerator's
levels at once). Service targets mask the levels, the objective picks the best level, and
candidates are ranked. Nothing here loops over concurrency levels in Python.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.errors import (
    ContextWindowError,
    EngineError,
    InvalidLayoutError,
    UnsupportedDtypeError,
    check_context,
)
from service.engine.estimate import LOAD_PATTERNS, EstimateResult, estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.memory import (
    DEFAULT_MEMORY_UTILIZATION,
    RUNTIME_OVERHEAD_BYTES,
    max_batch_size,
    weight_bytes_per_gpu,
)
from service.engine.parallel import SINGLE_GPU, Parallelism
from service.engine.precision import BF16, Precision
from service.engine.replicas import check_replicas
from service.engine.shapes import ModelShape
from service.engine.workloads import OBJECTIVES, PLAN_MODES

DEFAULT_CONCURRENCY_LEVELS = 64
MAX_CONCURRENCY_LEVELS = 1024

# Rejection codes (``reason`` carries the human-readable detail).
INVALID_LAYOUT = "invalid_layout"
UNSUPPORTED_DTYPE = "unsupported_dtype"
NO_PRICE = "no_price"
DOES_NOT_FIT = "does_not_fit"
MISSES_TTFT = "misses_ttft"
MISSES_TPOT = "misses_tpot"
MISSES_SLO = "misses_slo"
EXCEEDS_CONTEXT = "exceeds_context"


class UpperBound(Protocol):
    """Hook: the upper ends of the TTFT and TPOT prediction intervals at each concurrency."""

    def __call__(self, result: EstimateResult) -> tuple[FloatArray, FloatArray]:
        """Return the upper bounds of TTFT and TPOT for each point of ``result``."""
        ...


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency targets (None: no target); optionally judged at the interval's upper bound."""

    ttft_ms_max: float | None = None
    tpot_ms_max: float | None = None
    use_interval_upper_bound: bool = False


@dataclass(frozen=True, slots=True)
class Candidate:
    """One deployment option. ``price_usd_per_hour`` is per GPU (None: the catalog price)."""

    model: ModelShape
    accelerator: Accelerator
    precision: Precision = BF16
    parallelism: Parallelism = SINGLE_GPU
    params: EfficiencyParams = DEFAULT_EFFICIENCY
    price_usd_per_hour: float | None = None
    calibration: Mapping[str, Any] | None = None  # passed through to the answer
    upper_bound: UpperBound | None = None
    # the serving engine's cap on running requests (estimate's max_running_requests)
    max_running_requests: int | None = None

    @property
    def usd_per_gpu_hour(self) -> float | None:
        """Return the override price, else the accelerator's catalog price."""
        if self.price_usd_per_hour is not None:
            return self.price_usd_per_hour
        return self.accelerator.price_usd_per_hour


# A deployment's users send requests on their own (open loop), so by default a calibration
# harness's closed-loop terms stay out of a plan; a plan may ask for a closed loop.
DEFAULT_LOAD_PATTERN = "open_loop"


@dataclass(frozen=True, slots=True)
class PlanQuestion:
    """What to optimise, for which request shape and targets."""

    input_tokens: int
    output_tokens: int
    slo: Slo = Slo()
    objective: str = "max_throughput_per_gpu"
    requests_per_s: float | None = None
    mode: str = "serving"
    # How a serving plan's requests arrive (engine.estimate.LOAD_PATTERNS); static plans ignore
    # it (``estimate_load_pattern``).
    load_pattern: str = DEFAULT_LOAD_PATTERN
    concurrency_levels: int = DEFAULT_CONCURRENCY_LEVELS
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    dp: int = 1  # data-parallel replicas of each layout at least (service.engine.replicas)

    @property
    def estimate_load_pattern(self) -> str:
        """The load pattern the estimates take: a static batch has none (the engine's default)."""
        return self.load_pattern if self.mode == "serving" else "closed_loop"

    def validate(self) -> None:
        """Raise EngineError naming the first invalid field."""
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise EngineError("input_tokens and output_tokens must be at least 1")
        if self.objective not in OBJECTIVES:
            raise EngineError(f"objective must be one of {', '.join(OBJECTIVES)}")
        if self.mode not in PLAN_MODES:
            raise EngineError(f"mode must be one of {', '.join(PLAN_MODES)}")
        if self.load_pattern not in LOAD_PATTERNS:
            raise EngineError(f"load_pattern must be one of {', '.join(LOAD_PATTERNS)}")
        if self.requests_per_s is not None and not self.requests_per_s > 0:
            raise EngineError("requests_per_s must be positive")
        if self.objective == "min_gpus_for_rate" and self.requests_per_s is None:
            raise EngineError("objective min_gpus_for_rate needs requests_per_s")
        check_replicas(self.dp)
        if not 1 <= self.concurrency_levels <= MAX_CONCURRENCY_LEVELS:
            raise EngineError(f"concurrency_levels must be between 1 and {MAX_CONCURRENCY_LEVELS}")
        for name, value in (
            ("ttft_ms_max", self.slo.ttft_ms_max),
            ("tpot_ms_max", self.slo.tpot_ms_max),
        ):
            if value is not None and not value > 0:
                raise EngineError(f"{name} must be positive")


@dataclass(frozen=True, slots=True)
class Configuration:
    """A feasible candidate at its best concurrency, with fleet size and cost for the rate.

    Throughputs are per replica unless named per GPU; ``usd_per_hour`` is the whole fleet
    (``replicas`` replicas); per-token costs assume a fully loaded replica. Costs are None
    without a price.
    """

    candidate: Candidate
    mode: str
    concurrency: int
    max_concurrency: int  # memory limit on running requests per replica
    ttft_ms: float
    tpot_ms: float
    ttft_ms_upper: float | None
    tpot_ms_upper: float | None
    e2e_latency_ms: float
    tokens_per_s_per_user: float
    requests_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    gpus_per_replica: int
    replicas: int
    gpus: int
    usd_per_hour: float | None
    usd_per_hour_per_replica: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_million_tokens: float | None  # all replica time over input + output tokens
    energy_per_output_token_j: float | None
    energy_per_token_j: float | None
    memory_gb_per_gpu: float


@dataclass(frozen=True, slots=True)
class Rejection:
    """A candidate with no configuration, and why."""

    candidate: Candidate
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    """One Pareto-optimal (tokens/s per user, output tokens/s per GPU) operating point."""

    candidate: Candidate
    concurrency: int
    tokens_per_s_per_user: float
    output_tokens_per_s_per_gpu: float
    ttft_ms: float
    tpot_ms: float
    meets_slo: bool


@dataclass(frozen=True, slots=True)
class PlanResult:
    """Ranked configurations, the frontier per accelerator id, rejected candidates."""

    configurations: tuple[Configuration, ...]
    frontier: Mapping[str, tuple[FrontierPoint, ...]]
    rejected: tuple[Rejection, ...]
    candidates_evaluated: int = 0
    points_evaluated: int = 0


@dataclass(slots=True)
class _Evaluated:
    """One candidate's estimate and per-level feasibility."""

    candidate: Candidate
    result: EstimateResult
    ttft_upper: FloatArray | None
    tpot_upper: FloatArray | None
    feasible: npt.NDArray[np.bool_]
    chosen: int | None = None


def layouts(
    model: ModelShape,
    max_gpus_per_replica: int,
    *,
    tp: Sequence[int] | None = None,
    pp: Sequence[int] | None = None,
    ep: Sequence[int] | None = None,
    attention_dp: Sequence[int] | None = None,
) -> list[Parallelism]:
    """Return the layouts to try: tp × attention_dp × pp × ep within the GPU limit.

    Defaults: tp in powers of two; pp = 1 (pipeline stages lengthen every step, so serving
    rarely wants them); for MoE models attention_dp in powers of two and the GPU limit itself
    (72 for an NVL72 rack) with tp × attention_dp within it, and ep ∈ {1, tp} without attention
    DP, {1, tp × attention_dp} (wide EP over the whole MoE group) with it; dense models keep
    attention_dp = ep = 1. Layouts that do not divide the model are kept so the plan can say
    why they were rejected.
    """
    limit = max_gpus_per_replica
    powers = [2**i for i in range(limit.bit_length())]
    tps = list(tp) if tp else powers
    pps = list(pp) if pp else [1]
    if attention_dp:
        adps = list(attention_dp)
    elif model.is_moe:
        adps = [*powers, limit]
    else:
        adps = [1]
    out: list[Parallelism] = []
    for t in sorted(set(tps)):
        for a in sorted(set(adps)):
            for p in sorted(set(pps)):
                if t * a * p > limit:
                    continue
                if ep:
                    eps = list(ep)
                elif model.is_moe:
                    eps = [1, t * a]
                else:
                    eps = [1]
                for e in sorted(set(eps)):
                    if e <= t * a:
                        out.append(Parallelism(tp=t, pp=p, ep=e, attention_dp=a))
    return out


def concurrency_levels(max_running: int, count: int = DEFAULT_CONCURRENCY_LEVELS) -> FloatArray:
    """Return up to ``count`` integer levels in [1, max_running]: powers of two plus geometric fill.

    Every level when ``max_running`` ≤ ``count``; the memory limit itself is always included.
    """
    return _levels(int(max_running), int(count)).copy()


@functools.lru_cache(maxsize=4096)
def _levels(max_running: int, count: int) -> FloatArray:
    """Memoised ``concurrency_levels`` (read-only use: callers must not modify the array)."""
    top = max(int(max_running), 1)
    if top <= count:
        return np.arange(1.0, top + 1.0)
    powers = 2.0 ** np.arange(int(math.log2(top)) + 1)
    if powers.size + 1 > count:
        return np.asarray(np.unique(np.round(np.geomspace(1.0, top, count))), dtype=np.float64)
    fill = np.geomspace(1.0, top, max(count - powers.size, 2))
    levels = np.unique(np.round(np.concatenate([powers, fill, [float(top)]])))
    if levels.size > count:  # drop fill points nearest a neighbour, keep powers and the top
        keep = np.isin(levels, powers) | (levels == top)
        spare = np.flatnonzero(~keep)
        drop = spare[np.round(np.linspace(0, spare.size - 1, levels.size - count)).astype(int)]
        levels = np.delete(levels, drop)
    return np.asarray(levels, dtype=np.float64)


def pareto_mask(x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Return which points no other point beats on both x and y (higher is better for both).

    Of exact duplicates only one is kept.
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    mask = np.zeros(xs.shape, dtype=bool)
    if xs.size == 0:
        return mask
    order = np.lexsort((-ys, -xs))  # x descending, then y descending
    y_sorted = ys[order]
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(y_sorted)[:-1]])
    mask[order] = y_sorted > best_before
    return mask


def _precheck(candidate: Candidate, question: PlanQuestion) -> Rejection | int:
    """Return a rejection for a candidate that cannot run, else its memory limit on requests."""
    c = candidate
    try:
        check_context(
            "input_tokens + output_tokens",
            question.input_tokens + question.output_tokens,
            c.model.max_context_tokens,
            c.model.id,
        )
    except ContextWindowError as exc:
        return Rejection(c, EXCEEDS_CONTEXT, str(exc))
    try:
        c.parallelism.check_divides(c.model)
    except InvalidLayoutError as exc:
        return Rejection(c, INVALID_LAYOUT, f"layout does not divide the model: {exc}")
    try:
        c.precision.validate()
    except UnsupportedDtypeError as exc:
        return Rejection(c, UNSUPPORTED_DTYPE, str(exc))
    # The GEMMs' dtype, and the embeddings', LM head's and router's (16-bit beside fp8 math).
    for dtype in (c.precision.compute_dtype, c.precision.unquantized_dtype):
        try:
            c.accelerator.peak_flops_s(dtype)
        except UnsupportedDtypeError:
            return Rejection(
                c, UNSUPPORTED_DTYPE, f"no peak for dtype {dtype} on {c.accelerator.id}"
            )
    if question.objective == "min_cost_per_million_tokens" and c.usd_per_gpu_hour is None:
        return Rejection(
            c,
            NO_PRICE,
            f"no price for {c.accelerator.id}: cannot rank by cost "
            "(give price_usd_per_hour for it)",
        )
    context = float(question.input_tokens + question.output_tokens)
    limit = max_batch_size(
        c.model,
        c.accelerator,
        precision=c.precision,
        parallelism=c.parallelism,
        context_tokens=context,
        step_tokens=c.params.prefill_chunk_tokens,
        memory_utilization=question.memory_utilization,
    )
    if limit < 1:
        weights_gb = weight_bytes_per_gpu(c.model, c.precision, c.parallelism).total_bytes / 1e9
        usable_gb = c.accelerator.memory_bytes * question.memory_utilization / 1e9
        return Rejection(
            c,
            DOES_NOT_FIT,
            f"does not fit: {weights_gb:.1f} GB of weights per GPU + "
            f"{RUNTIME_OVERHEAD_BYTES / 1e9:.1f} GB runtime + activations and one request's "
            f"KV cache exceed {usable_gb:.1f} GB usable",
        )
    return limit


def _evaluate_all(
    candidates: Sequence[Candidate], limits: Mapping[int, int], question: PlanQuestion
) -> dict[int, _Evaluated]:
    """Estimate every runnable candidate's levels, one stacked engine pass per shared setup.

    ``limits`` maps each runnable candidate's index to its memory limit on requests. Candidates
    sharing model, precision, layout and efficiency parameters (typically all the accelerators
    of one layout and precision) are scored together; the answer is keyed by candidate index.
    """
    # Accelerators' own GEMM priors differ only in compute efficiency: they still share a pass.
    unit = {"gemm_compute_efficiency_bf16": 1.0, "gemm_compute_efficiency_fp8": 1.0}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in limits:
        c = candidates[i]
        key = (
            c.model,
            c.precision,
            c.parallelism,
            c.params.replace(**unit),
            c.max_running_requests,
        )
        groups.setdefault(key, []).append(i)
    out: dict[int, _Evaluated] = {}
    for (model, precision, parallelism, _, running_cap), indices in groups.items():
        members = [candidates[i] for i in indices]
        levels = [
            _levels(
                limits[i] if running_cap is None else min(limits[i], running_cap),
                question.concurrency_levels,
            )
            for i in indices
        ]
        results = estimate_stacked(
            model,
            [c.accelerator for c in members],
            precision=precision,
            parallelism=parallelism,
            input_tokens=[question.input_tokens] * len(members),
            output_tokens=[question.output_tokens] * len(members),
            batch_sizes=levels,
            mode=question.mode,
            load_pattern=question.estimate_load_pattern,
            params=members[0].params,
            prices_usd_per_hour=[c.price_usd_per_hour for c in members],
            memory_utilization=question.memory_utilization,
            with_critical_batch=False,
            member_params=[c.params for c in members],
            max_running_requests=running_cap,
        )
        for i, c, r in zip(indices, members, results, strict=True):
            out[i] = _judge(c, question, r)
    return out


def _judge(c: Candidate, question: PlanQuestion, r: EstimateResult) -> _Evaluated:
    """Mark which levels of one candidate's estimate meet the targets."""
    slo = question.slo
    ttft_up = tpot_up = None
    if c.upper_bound is not None:
        ttft_up, tpot_up = c.upper_bound(r)
    use_upper = slo.use_interval_upper_bound
    ttft = ttft_up if use_upper and ttft_up is not None else r.ttft_ms
    tpot = tpot_up if use_upper and tpot_up is not None else r.tpot_ms
    feasible = r.fits.copy()
    if slo.ttft_ms_max is not None:
        feasible &= ttft <= slo.ttft_ms_max
    if slo.tpot_ms_max is not None:
        feasible &= tpot <= slo.tpot_ms_max
    return _Evaluated(c, r, ttft_up, tpot_up, feasible)


def _usd_per_million_tokens(r: EstimateResult) -> FloatArray:
    """Return all replica time priced over input + output tokens (per request ÷ its tokens)."""
    s_in, s_out = float(r.input_tokens), float(r.output_tokens)
    blended = r.usd_per_million_input_tokens * s_in + r.usd_per_million_output_tokens * s_out
    return np.asarray(blended / (s_in + s_out), dtype=np.float64)


def _replicas(requests_per_s: float | None, per_replica: FloatArray, dp: int = 1) -> FloatArray:
    """Return max(dp, ceil(rate ÷ per-replica rate)) (dp without a rate)."""
    if requests_per_s is None:
        return np.full_like(per_replica, float(dp))
    with np.errstate(divide="ignore"):
        return np.asarray(np.maximum(np.ceil(requests_per_s / per_replica), dp), dtype=np.float64)


def _choose(ev: _Evaluated, question: PlanQuestion) -> int:
    """Return the index of the best feasible level for the objective (ties: lower concurrency)."""
    r, idx = ev.result, np.flatnonzero(ev.feasible)
    level = r.batch_size[idx]
    per_gpu = r.output_tokens_per_s_per_gpu[idx]
    cost = np.nan_to_num(_usd_per_million_tokens(r)[idx], nan=np.inf)
    objective = question.objective
    if objective == "max_throughput_per_gpu":
        keys: tuple[FloatArray, ...] = (level, -per_gpu)
    elif objective == "min_cost_per_million_tokens":
        keys = (level, -per_gpu, cost)
    elif objective == "min_gpus_for_rate":
        gpus = (
            _replicas(question.requests_per_s, r.requests_per_s[idx], question.dp)
            * r.gpus_per_replica
        )
        keys = (level, -per_gpu, gpus)
    else:  # max_concurrency_under_slo
        keys = (-per_gpu, -level)
    return int(idx[np.lexsort(keys)[0]])


def _optional(value: float) -> float | None:
    return None if not math.isfinite(value) else value


def _configuration(ev: _Evaluated, i: int, question: PlanQuestion) -> Configuration:
    """Build the answer row for level ``i`` of an evaluated candidate."""
    r, c = ev.result, ev.candidate
    replicas = int(_replicas(question.requests_per_s, r.requests_per_s[i : i + 1], question.dp)[0])
    per_replica = r.usd_per_hour
    return Configuration(
        candidate=c,
        mode=r.mode,
        concurrency=int(r.batch_size[i]),
        max_concurrency=r.max_batch_size,
        ttft_ms=float(r.ttft_ms[i]),
        tpot_ms=float(r.tpot_ms[i]),
        ttft_ms_upper=None if ev.ttft_upper is None else float(ev.ttft_upper[i]),
        tpot_ms_upper=None if ev.tpot_upper is None else float(ev.tpot_upper[i]),
        e2e_latency_ms=float(r.e2e_latency_ms[i]),
        tokens_per_s_per_user=1000.0 / float(r.tpot_ms[i]),
        requests_per_s=float(r.requests_per_s[i]),
        output_tokens_per_s=float(r.output_tokens_per_s[i]),
        output_tokens_per_s_per_gpu=float(r.output_tokens_per_s_per_gpu[i]),
        gpus_per_replica=r.gpus_per_replica,
        replicas=replicas,
        gpus=replicas * r.gpus_per_replica,
        usd_per_hour=None if per_replica is None else per_replica * replicas,
        usd_per_hour_per_replica=per_replica,
        usd_per_million_output_tokens=_optional(float(r.usd_per_million_output_tokens[i])),
        usd_per_million_input_tokens=_optional(float(r.usd_per_million_input_tokens[i])),
        usd_per_million_tokens=_optional(float(_usd_per_million_tokens(r)[i])),
        energy_per_output_token_j=_optional(float(r.energy_per_output_token_j[i])),
        energy_per_token_j=_optional(float(r.energy_per_token_j[i])),
        memory_gb_per_gpu=float(r.total_gb[i]),
    )


def _rank_key(cfg: Configuration, objective: str) -> tuple[float, ...]:
    """Return the sort key of a configuration for the objective (unpriced cost sorts last)."""
    inf = math.inf
    cost = cfg.usd_per_million_tokens if cfg.usd_per_million_tokens is not None else inf
    fleet = cfg.usd_per_hour if cfg.usd_per_hour is not None else inf
    per_gpu = -cfg.output_tokens_per_s_per_gpu
    if objective == "max_throughput_per_gpu":
        return (per_gpu, cost, cfg.gpus_per_replica)
    if objective == "min_cost_per_million_tokens":
        return (cost, per_gpu, cfg.gpus_per_replica)
    if objective == "min_gpus_for_rate":
        return (float(cfg.gpus), fleet, per_gpu)
    return (-float(cfg.concurrency), per_gpu, cost)


def _miss_reason(ev: _Evaluated, question: PlanQuestion) -> Rejection:
    """Explain why no level of an evaluated candidate is feasible."""
    r, slo, c = ev.result, question.slo, ev.candidate
    if not r.fits.any():
        return Rejection(c, DOES_NOT_FIT, "does not fit at any concurrency")
    use_upper = slo.use_interval_upper_bound
    basis = " (80% interval upper bound)" if use_upper and ev.ttft_upper is not None else ""
    ttft = ev.ttft_upper if use_upper and ev.ttft_upper is not None else r.ttft_ms
    tpot = ev.tpot_upper if use_upper and ev.tpot_upper is not None else r.tpot_ms
    ttft_ok = np.ones_like(r.fits) if slo.ttft_ms_max is None else ttft <= slo.ttft_ms_max
    tpot_ok = np.ones_like(r.fits) if slo.tpot_ms_max is None else tpot <= slo.tpot_ms_max
    if not (ttft_ok & r.fits).any():
        i = int(np.argmin(np.where(r.fits, ttft, np.inf)))
        return Rejection(
            c,
            MISSES_TTFT,
            f"misses TTFT: best {ttft[i]:.1f} ms{basis} at concurrency {int(r.batch_size[i])} "
            f"> {slo.ttft_ms_max:g} ms",
        )
    if not (tpot_ok & r.fits).any():
        i = int(np.argmin(np.where(r.fits, tpot, np.inf)))
        return Rejection(
            c,
            MISSES_TPOT,
            f"misses TPOT: best {tpot[i]:.2f} ms{basis} at concurrency {int(r.batch_size[i])} "
            f"> {slo.tpot_ms_max:g} ms",
        )
    return Rejection(
        c,
        MISSES_SLO,
        f"misses TTFT or TPOT at every concurrency: TTFT ≤ {slo.ttft_ms_max:g} ms at "
        f"{int(ttft_ok.sum())} levels, TPOT ≤ {slo.tpot_ms_max:g} ms at {int(tpot_ok.sum())} "
        "levels, never both",
    )


def _frontier(evaluated: Sequence[_Evaluated]) -> dict[str, tuple[FrontierPoint, ...]]:
    """Return the Pareto frontier per accelerator, computed per model, ordered by x."""
    groups: dict[tuple[str, str], list[_Evaluated]] = {}
    for ev in evaluated:
        groups.setdefault((ev.candidate.accelerator.id, ev.candidate.model.id), []).append(ev)
    out: dict[str, list[FrontierPoint]] = {}
    for (acc_id, _), evs in groups.items():
        owner = np.concatenate([np.full(ev.result.batch_size.size, k) for k, ev in enumerate(evs)])
        level = np.concatenate([np.arange(ev.result.batch_size.size) for ev in evs])
        fits = np.concatenate([ev.result.fits for ev in evs])
        x = np.concatenate([1000.0 / ev.result.tpot_ms for ev in evs])
        y = np.concatenate([ev.result.output_tokens_per_s_per_gpu for ev in evs])
        on = np.flatnonzero(fits)[pareto_mask(x[fits], y[fits])]
        on = on[np.argsort(x[on], kind="stable")]
        points = out.setdefault(acc_id, [])
        for j in on:
            ev, i = evs[int(owner[j])], int(level[j])
            points.append(
                FrontierPoint(
                    candidate=ev.candidate,
                    concurrency=int(ev.result.batch_size[i]),
                    tokens_per_s_per_user=float(x[j]),
                    output_tokens_per_s_per_gpu=float(y[j]),
                    ttft_ms=float(ev.result.ttft_ms[i]),
                    tpot_ms=float(ev.result.tpot_ms[i]),
                    meets_slo=bool(ev.feasible[i]),
                )
            )
    return {k: tuple(v) for k, v in out.items()}


def plan(candidates: Sequence[Candidate], question: PlanQuestion) -> PlanResult:
    """Answer a planning question over candidates: ranked configurations, frontier, rejections.

    An infeasible question is an answer with no configuration and every candidate's reason.
    """
    question.validate()
    candidates = [
        dataclasses.replace(c, precision=c.precision.resolved(c.model, c.accelerator))
        for c in candidates
    ]
    prechecked = [_precheck(c, question) for c in candidates]
    limits = {i: pre for i, pre in enumerate(prechecked) if not isinstance(pre, Rejection)}
    by_index = _evaluate_all(candidates, limits, question)
    rejected: list[Rejection] = []
    evaluated: list[_Evaluated] = []
    configurations: list[Configuration] = []
    points = 0
    for i, pre in enumerate(prechecked):
        if isinstance(pre, Rejection):
            rejected.append(pre)
            continue
        ev = by_index[i]
        evaluated.append(ev)
        points += ev.result.batch_size.size
        if not ev.feasible.any():
            rejected.append(_miss_reason(ev, question))
            continue
        ev.chosen = _choose(ev, question)
        configurations.append(_configuration(ev, ev.chosen, question))
    configurations.sort(key=lambda cfg: _rank_key(cfg, question.objective))
    return PlanResult(
        configurations=tuple(configurations),
        frontier=_frontier(evaluated),
        rejected=tuple(rejected),
        candidates_evaluated=len(evaluated),
        points_evaluated=points,
    )
