"""Planning use cases: fill the question from its workload, build candidates, search, shape.

Accelerators with no price (catalog or override) cannot be ranked by cost: under
``min_cost_per_million_tokens`` they are rejected with code ``no_price``; under the other
objectives they are ranked with null costs (cost tie-breaks put them last).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from service.db.calibration_repository import (
    AUTO,
    NOTHING_ASIDE,
    CalibrationRepository,
    LeftAside,
)
from service.engine.backend_names import canonical_backend
from service.engine.calibration.fit import CalibrationResult
from service.engine.calibration.intervals import estimate_intervals
from service.engine.errors import EngineError
from service.engine.estimate import EstimateResult
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.parallel import Parallelism
from service.engine.planning import (
    DEFAULT_LOAD_PATTERN,
    Candidate,
    Configuration,
    FrontierPoint,
    PlanQuestion,
    PlanResult,
    Rejection,
    Slo,
    layouts,
    plan,
)
from service.engine.precision import AUTO_ACTIVATIONS, AUTO_KV_CACHE, NATIVE, Precision
from service.engine.shapes import ModelShape
from service.engine.traffic.backends import scheduler_defaults
from service.engine.traffic.disaggregation import PoolGroup
from service.engine.traffic.fleet import FleetSize, fewest_replicas_bound, size_fleet
from service.engine.traffic.model import Replica, SloTarget, TrafficSpec
from service.engine.workloads import WORKLOADS, LengthStats, Workload
from service.services.catalog import CatalogService
from service.services.efficiency_lookup import (
    ResolvedEfficiency,
    choice_reason,
    resolve_efficiency,
    uncalibrated_note,
)
from service.services.errors import FieldError
from service.services.extrapolation import reach_params, request_widening
from service.services.traffic import (
    Deployment,
    TrafficRequest,
    capacity,
    percentiles_dict,
    pools_of,
    replica_for,
    scheduler_dict,
    traffic_spec,
)

DEFAULT_OBJECTIVE = "max_throughput_per_gpu"
DEFAULT_MODE = "serving"
# The API's default candidates: the shipped format and fp8, each as engines run it on the part.
NATIVE_AUTO = Precision(weights=NATIVE, activations=AUTO_ACTIVATIONS, kv_cache=AUTO_KV_CACHE)
FP8 = Precision(weights="fp8", activations="fp8", kv_cache=AUTO_KV_CACHE)


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A plan request in service terms; ``*_given``: the target was sent (maybe as null)."""

    models: tuple[str, ...]
    accelerators: tuple[str, ...] | None = None
    workload: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms_max: float | None = None
    ttft_given: bool = False
    tpot_ms_max: float | None = None
    tpot_given: bool = False
    use_interval_upper_bound: bool = False
    objective: str | None = None
    requests_per_s: float | None = None
    precisions: tuple[Precision, ...] = (NATIVE_AUTO, FP8)
    max_gpus_per_replica: int = 8
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    attention_dp: tuple[int, ...] | None = None
    dp: int = 1  # replicas of each layout at least (the rate may need more)
    mode: str | None = None
    load_pattern: str | None = None  # None: open_loop (PlanQuestion.load_pattern)
    price_usd_per_hour: Mapping[str, float] = field(default_factory=dict)
    backend: str | None = None
    calibration: str = "auto"
    concurrency_levels: int = 64
    # Work budget: candidates x concurrency levels one plan may evaluate (None: unbounded).
    max_points: int | None = None
    percentile_slo: tuple[tuple[str, float], ...] = ()  # e.g. ("ttft_ms_p90_max", 500.0)
    traffic: TrafficRequest | None = None  # stream and scheduler of the percentile sizing
    headroom: float = 0.2

    def __post_init__(self) -> None:
        # one spelling of the engine, so that profiles, priors and defaults match it
        if self.backend is not None:
            object.__setattr__(self, "backend", canonical_backend(self.backend))


def workload_to_dict(workload: Workload) -> dict[str, Any]:
    """Return a preset's JSON representation."""
    return {
        "id": workload.id,
        "input_tokens": workload.input_tokens,
        "output_tokens": workload.output_tokens,
        "ttft_ms_max": workload.ttft_ms_max,
        "tpot_ms_max": workload.tpot_ms_max,
        "objective": workload.objective,
        "mode": workload.mode,
        "description": workload.description,
        "rationale": workload.rationale,
        "input_lengths": _length_stats(workload.input_lengths),
        "output_lengths": _length_stats(workload.output_lengths),
        "source": workload.source,
    }


def _length_stats(stats: LengthStats | None) -> dict[str, Any] | None:
    """A preset's length distribution in the traffic lengths format (percentiles, min, max)
    with its mean: sent back as traffic.input_tokens or output_tokens it is the same mix."""
    if stats is None:
        return None
    return {
        "percentiles": {f"p{level * 100:g}": tokens for level, tokens in stats.percentiles},
        "min": stats.minimum,
        "max": stats.maximum,
        "mean": round(stats.mean, 1),
    }


def list_workloads() -> list[dict[str, Any]]:
    """Return every workload preset."""
    return [workload_to_dict(w) for w in WORKLOADS.values()]


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@functools.lru_cache(maxsize=256)
def _precision(p: Precision) -> dict[str, str]:
    """Return a precision's JSON (memoised: answers share these dicts, never modify them)."""
    return {
        "weights": p.weights,
        "activations": p.activations,
        "kv_cache": p.kv_cache,
        "ssm_state": p.ssm_state,
    }


@functools.lru_cache(maxsize=256)
def _parallelism(par: Parallelism) -> dict[str, int]:
    """Return a layout's JSON (memoised: answers share these dicts, never modify them)."""
    return {
        "tp": par.tp,
        "pp": par.pp,
        "ep": par.ep,
        "attention_dp": par.attention_dp,
        "pp_virtual_stages": par.pp_virtual_stages,
    }


def _layout(c: Candidate) -> dict[str, int]:
    return _parallelism(c.parallelism)


def _configuration(rank: int, cfg: Configuration) -> dict[str, Any]:
    c = cfg.candidate
    return {
        "rank": rank,
        "model": c.model.id,
        "accelerator": c.accelerator.id,
        "parallelism": _layout(c),
        "precision": _precision(c.precision),
        "mode": cfg.mode,
        "concurrency": cfg.concurrency,
        "max_concurrency": cfg.max_concurrency,
        "ttft_ms": cfg.ttft_ms,
        "tpot_ms": cfg.tpot_ms,
        "ttft_ms_upper": cfg.ttft_ms_upper,
        "tpot_ms_upper": cfg.tpot_ms_upper,
        "e2e_latency_ms": cfg.e2e_latency_ms,
        "tokens_per_s_per_user": cfg.tokens_per_s_per_user,
        "requests_per_s_per_replica": cfg.requests_per_s,
        "output_tokens_per_s_per_replica": cfg.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": cfg.output_tokens_per_s_per_gpu,
        "gpus_per_replica": cfg.gpus_per_replica,
        "replicas": cfg.replicas,
        "gpus": cfg.gpus,
        "usd_per_gpu_hour": c.usd_per_gpu_hour,
        "usd_per_hour": _finite(cfg.usd_per_hour),
        "usd_per_hour_per_replica": _finite(cfg.usd_per_hour_per_replica),
        "usd_per_million_output_tokens": cfg.usd_per_million_output_tokens,
        "usd_per_million_input_tokens": cfg.usd_per_million_input_tokens,
        "usd_per_million_tokens": cfg.usd_per_million_tokens,
        "energy_per_output_token_j": cfg.energy_per_output_token_j,
        "energy_per_token_j": cfg.energy_per_token_j,
        "memory_gb_per_gpu": cfg.memory_gb_per_gpu,
        "calibration": c.calibration,
        "traffic": None,
    }


def _frontier_point(p: FrontierPoint) -> dict[str, Any]:
    return {
        "model": p.candidate.model.id,
        "parallelism": _layout(p.candidate),
        "precision": _precision(p.candidate.precision),
        "concurrency": p.concurrency,
        "tokens_per_s_per_user": p.tokens_per_s_per_user,
        "output_tokens_per_s_per_gpu": p.output_tokens_per_s_per_gpu,
        "ttft_ms": p.ttft_ms,
        "tpot_ms": p.tpot_ms,
        "meets_slo": p.meets_slo,
    }


def _rejected(r: Rejection) -> dict[str, Any]:
    c = r.candidate
    return {
        "model": c.model.id,
        "accelerator": c.accelerator.id,
        "parallelism": _layout(c),
        "precision": _precision(c.precision),
        "code": r.code,
        "reason": r.reason,
    }


@dataclass(frozen=True, slots=True)
class ProfileUpperBound:
    """The upper end of the 80% interval that ``POST /v1/estimates`` answers for one candidate
    (the hook for ``use_interval_upper_bound``): the profile's held-out band, widened for a
    transfer and for what of the candidate lies outside the profile's domain
    (``intervals.estimate_intervals``, ``extrapolation.request_widening``)."""

    profile: Mapping[str, Any]
    transferred: bool
    model: ModelShape
    accelerator_id: str
    weights_dtype: str
    backend: str | None
    load_pattern: str

    def __call__(self, result: EstimateResult) -> tuple[FloatArray, FloatArray]:
        """Return the intervals' upper ends of TTFT and TPOT at each point of ``result``."""
        amounts = request_widening(
            self.profile,
            self.model,
            self.accelerator_id,
            result,
            weights_dtype=self.weights_dtype,
            backend=self.backend,
            load_pattern=self.load_pattern,
        )
        bands = estimate_intervals(
            self.profile, result, transferred=self.transferred, extrapolating=amounts
        )
        return bands["ttft_ms"].high, bands["tpot_ms"].high


def upper_bound(
    resolved: ResolvedEfficiency,
    backend: str | None,
    accelerator: Accelerator,
    model: ModelShape,
    precision: Precision,
    load_pattern: str,
) -> ProfileUpperBound | None:
    """The candidate's interval upper bound, or None without a calibration profile."""
    if resolved.profile is None:
        return None
    return ProfileUpperBound(
        profile=resolved.profile,
        transferred=resolved.transferred,
        model=model,
        accelerator_id=accelerator.id,
        weights_dtype=precision.resolved(model, accelerator).weights,
        backend=backend,
        load_pattern=load_pattern,
    )


def _harness_terms_left_out(
    accelerator_id: str, resolved: ResolvedEfficiency, question: PlanQuestion
) -> str | None:
    """A note naming the profile's fitted closed-loop harness terms that this plan's load
    pattern leaves out (None when there are none, or the plan is a closed loop)."""
    if resolved.profile is None or question.estimate_load_pattern == "closed_loop":
        return None
    fitted = CalibrationResult.from_dict(resolved.profile).harness_terms().get("closed_loop")
    if not fitted:
        return None
    shown = ", ".join(f"{name} {value:.3g}" for name, value in sorted(fitted.items()))
    profile_id = resolved.calibration["id"] if resolved.calibration else "?"
    return (
        f"{accelerator_id}: profile {profile_id} was fitted on closed-loop runs whose load "
        f"generator's terms ({shown}) this {question.load_pattern} plan leaves out; "
        "load_pattern closed_loop applies them"
    )


class PlanningService:
    """Answer planning questions against the catalog within one session."""

    def __init__(self, session: Session, *, viewer: str = "") -> None:
        """``viewer``: the caller's API key prefix ("" anonymous), whose private calibration
        profiles ``calibration`` may choose besides the published ones."""
        self.session = session
        self.viewer = viewer
        self.catalog = CatalogService(session)

    def _workload(self, spec: PlanSpec) -> Workload | None:
        if spec.workload is None:
            return None
        preset = WORKLOADS.get(spec.workload)
        if preset is None:
            known = ", ".join(WORKLOADS)
            raise FieldError("workload", f"unknown workload {spec.workload!r}; known: {known}")
        return preset

    def question(self, spec: PlanSpec) -> tuple[PlanQuestion, Workload | None]:
        """Fill lengths, targets, objective and mode from the workload; FieldError names gaps."""
        preset = self._workload(spec)
        input_tokens = spec.input_tokens or (preset.input_tokens if preset else None)
        output_tokens = spec.output_tokens or (preset.output_tokens if preset else None)
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if value is None:
                raise FieldError(name, "required when no workload preset is given")
        assert input_tokens is not None and output_tokens is not None
        ttft = spec.ttft_ms_max if spec.ttft_given or preset is None else preset.ttft_ms_max
        tpot = spec.tpot_ms_max if spec.tpot_given or preset is None else preset.tpot_ms_max
        objective = spec.objective or (preset.objective if preset else DEFAULT_OBJECTIVE)
        if objective == "min_gpus_for_rate" and spec.requests_per_s is None:
            raise FieldError("requests_per_s", "objective min_gpus_for_rate needs a request rate")
        question = PlanQuestion(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            slo=Slo(ttft, tpot, spec.use_interval_upper_bound),
            objective=objective,
            requests_per_s=spec.requests_per_s,
            mode=spec.mode or (preset.mode if preset else DEFAULT_MODE),
            load_pattern=spec.load_pattern or DEFAULT_LOAD_PATTERN,
            concurrency_levels=spec.concurrency_levels,
            dp=spec.dp,
        )
        try:
            question.validate()
        except EngineError as exc:
            raise FieldError("body", str(exc)) from exc
        return question, preset

    def _accelerators(self, spec: PlanSpec) -> list[Accelerator]:
        """Load the candidate accelerators once each; NotFoundError names an unknown id."""
        everything = self.catalog.all_accelerators() if spec.accelerators is None else []
        loaded = {acc.id: acc for acc in everything}

        def load(acc_id: str) -> Accelerator:
            if acc_id not in loaded:
                loaded[acc_id] = self.catalog.accelerator(acc_id)
            return loaded[acc_id]

        for acc_id in spec.price_usd_per_hour:
            load(acc_id)  # price overrides must name catalog accelerators
        if spec.accelerators is None:
            return everything
        return [load(a) for a in dict.fromkeys(spec.accelerators)]

    def _resolve(
        self, spec: PlanSpec, acc: Accelerator, models: list[ModelShape], aside: LeftAside
    ) -> dict[str, ResolvedEfficiency]:
        """The profile ``spec.calibration`` resolves to on ``acc``, per model. Only ``auto``
        depends on the model (``profile_choice`` prefers one fitted on it or its kind), and
        only where the accelerator has a profile it may take at all. ``aside``: the profiles
        ``auto`` does not consider for ``acc``."""

        def resolve(model: ModelShape) -> ResolvedEfficiency:
            return resolve_efficiency(
                self.session,
                acc.id,
                spec.backend,
                spec.calibration,
                model_id=model.id,
                viewer=self.viewer,
                accelerator=acc,
            )

        if not models:
            return {}
        first = resolve(models[0])
        if first.calibration is None:
            first = dataclasses.replace(first, left_aside=aside)
        if spec.calibration != AUTO or first.calibration is None:
            return {model.id: first for model in models}
        return {model.id: first if i == 0 else resolve(model) for i, model in enumerate(models)}

    def candidates(
        self, spec: PlanSpec, question: PlanQuestion
    ) -> tuple[list[Candidate], list[str]]:
        """Load models and accelerators (NotFoundError names the id) and enumerate candidates.

        A profile's engine overheads apply in the modes it has runs of (``reach.within_reach``),
        and its intervals for the question's lengths (``ProfileUpperBound``).
        """
        models: list[ModelShape] = [self.catalog.model_shape(m) for m in dict.fromkeys(spec.models)]
        accelerators = self._accelerators(spec)
        notes: list[str] = []
        candidates: list[Candidate] = []
        aside = (
            CalibrationRepository(self.session).left_aside_by_accelerator(
                [a.id for a in accelerators], spec.backend, self.viewer
            )
            if spec.calibration == AUTO
            else {}
        )
        for acc in accelerators:
            price = spec.price_usd_per_hour.get(acc.id)
            running_cap = (
                scheduler_defaults(spec.backend, acc).max_running_requests if spec.backend else None
            )
            by_model = self._resolve(spec, acc, models, aside.get(acc.id, NOTHING_ASIDE))
            for model in models:
                resolved = by_model[model.id]
                if spec.use_interval_upper_bound and resolved.profile is None:
                    notes.append(
                        f"{acc.id}: no calibration intervals; targets judged on point predictions"
                    )
                left_out = _harness_terms_left_out(acc.id, resolved, question)
                if left_out:
                    notes.append(left_out)
                if resolved.left_aside != NOTHING_ASIDE:  # auto took none, though some exist
                    why = uncalibrated_note(spec.calibration, spec.backend, resolved, acc.id)
                    notes.append(f"{acc.id}: {why}")
                calibration = (
                    None
                    if resolved.calibration is None
                    else {
                        **resolved.calibration,
                        "reason": choice_reason(spec.calibration, spec.backend, resolved, model),
                    }
                )
                for layout in layouts(
                    model,
                    spec.max_gpus_per_replica,
                    tp=spec.tp,
                    pp=spec.pp,
                    ep=spec.ep,
                    attention_dp=spec.attention_dp,
                ):
                    # as the engine resolves them here: DeepSeek-V3's native fp8 weights with
                    # auto activations are the fp8/fp8 candidate on an fp8 part, one candidate
                    asked = (p.resolved(model, acc, spec.backend) for p in spec.precisions)
                    for precision in dict.fromkeys(asked):
                        candidates.append(
                            Candidate(
                                model=model,
                                accelerator=acc,
                                precision=precision,
                                parallelism=layout,
                                params=reach_params(
                                    resolved.profile,
                                    resolved.params,
                                    gpus=layout.gpus_per_replica,
                                    backend=spec.backend,
                                    mode=question.mode,
                                    model=model,
                                ),
                                price_usd_per_hour=price,
                                calibration=calibration,
                                upper_bound=upper_bound(
                                    resolved,
                                    spec.backend,
                                    acc,
                                    model,
                                    precision,
                                    question.estimate_load_pattern,
                                ),
                                max_running_requests=running_cap,
                            )
                        )
        return candidates, list(dict.fromkeys(notes))

    def plan(self, spec: PlanSpec) -> dict[str, Any]:
        """Answer as a JSON-ready dict (no configuration is an answer, not an error)."""
        question, preset = self.question(spec)
        candidates, notes = self.candidates(spec, question)
        points = len(candidates) * question.concurrency_levels
        if spec.max_points is not None and points > spec.max_points:
            raise FieldError(
                "concurrency_levels",
                f"this plan has {len(candidates)} candidates (models x accelerators x "
                f"precisions x layouts) x {question.concurrency_levels} concurrency levels = "
                f"{points} points; the work budget is {spec.max_points} points per plan: "
                "name fewer models, accelerators or precisions per request, or lower "
                "concurrency_levels",
            )
        if spec.percentile_slo and spec.requests_per_s is None:
            raise FieldError(
                "requests_per_s", "percentile targets size a fleet for a rate: give requests_per_s"
            )
        result = plan(candidates, question)
        answer = self._answer(question, preset, result, notes)
        if spec.percentile_slo:
            size_by_traffic(answer, result, question, spec)
        elif spec.traffic is not None and spec.traffic.disaggregation:
            answer["notes"].append(
                "traffic.disaggregation sizes fleets for percentile targets (slo.*_p50/p90/"
                "p99_max); none were given, so configurations are single replicas"
            )
        return answer

    @staticmethod
    def _answer(
        question: PlanQuestion,
        preset: Workload | None,
        result: PlanResult,
        notes: Sequence[str],
    ) -> dict[str, Any]:
        slo = question.slo
        return {
            "objective": question.objective,
            "requests_per_s": question.requests_per_s,
            "workload": {
                "id": preset.id if preset else None,
                "input_tokens": question.input_tokens,
                "output_tokens": question.output_tokens,
                "ttft_ms_max": slo.ttft_ms_max,
                "tpot_ms_max": slo.tpot_ms_max,
                "use_interval_upper_bound": slo.use_interval_upper_bound,
                "mode": question.mode,
                "load_pattern": question.load_pattern if question.mode == "serving" else None,
            },
            "configurations": [
                _configuration(rank, cfg) for rank, cfg in enumerate(result.configurations, 1)
            ],
            "frontier": {
                acc: [_frontier_point(p) for p in points] for acc, points in result.frontier.items()
            },
            "rejected": [_rejected(r) for r in result.rejected],
            "notes": list(notes),
            "candidates_evaluated": result.candidates_evaluated,
            "points_evaluated": result.points_evaluated,
        }


PLAN_REQUESTS = 300  # simulated requests per sizing run unless the plan's traffic says
MAX_SIZED_CONFIGURATIONS = 5  # exact fleets for the cheapest five; the rest are bounded out


def size_by_traffic(
    answer: dict[str, Any], result: PlanResult, question: PlanQuestion, spec: PlanSpec
) -> None:
    """Size each configuration's fleet from the percentile targets and re-rank by fleet cost.

    Branch and bound: a candidate cannot need fewer replicas than the rate over 1.25 × its
    closed-loop capacity, so candidates are sized in order of that lower bound on fleet cost
    (GPUs where unpriced) and sizing stops once the next bound exceeds the fifth fleet found;
    those left are listed in ``rejected`` as ``outranked`` with their bound.
    """
    assert spec.requests_per_s is not None
    rate = spec.requests_per_s
    base = spec.traffic or TrafficRequest(request_rate_per_s=rate, num_requests=PLAN_REQUESTS)
    request = dataclasses.replace(base, request_rate_per_s=rate, slo=spec.percentile_slo)
    rows = answer["configurations"]
    bounds: list[tuple[float, int, Deployment, Any, float]] = []
    for index, cfg in enumerate(result.configurations):
        c = cfg.candidate
        deployment = Deployment(
            c.model, c.accelerator, c.precision, c.parallelism, c.params, spec.backend
        )
        stream, targets, source = traffic_spec(
            deployment,
            request,
            input_tokens=question.input_tokens,
            output_tokens=question.output_tokens,
        )
        price = c.usd_per_gpu_hour
        try:
            if request.disaggregation:
                replica, _ = replica_for(deployment, stream)
                cap, replicas_bound = _group_bound(replica, stream, request, rate, spec.headroom)
            else:
                cap = capacity(deployment, stream)
                replicas_bound = fewest_replicas_bound(rate, spec.headroom, cap)
        except (EngineError, FieldError):
            continue
        per_replica = cfg.gpus_per_replica * (price if price is not None else math.inf)
        bound = replicas_bound * per_replica if price is not None else math.inf
        bounds.append((bound, index, deployment, (stream, targets, source), cap))
    bounds.sort(key=lambda b: (b[0], b[1]))
    sized: list[tuple[float, int, dict[str, Any]]] = []
    rejected = answer["rejected"]
    tokens_per_request = None
    for bound, index, deployment, (stream, targets, source), cap in bounds:
        row = rows[index]
        if len(sized) >= MAX_SIZED_CONFIGURATIONS and bound > sized[-1][0]:
            rejected.append(_outranked(row, bound, sized[-1][0]))
            continue
        chosen: dict[str, Any] | None = None
        colocated: FleetSize | None = None
        group_replicas = 1
        try:
            replica, _ = replica_for(deployment, stream)
            if request.disaggregation:
                fleet, chosen, group_replicas, cap = _size_groups(
                    replica, stream, targets, request, rate, spec.headroom, row
                )
                colocated = _size_colocated(replica, stream, targets, rate, spec.headroom)
                if chosen is not None:
                    chosen["tried"].append(_tried("colocated", colocated.replicas, row))
            else:
                fleet = size_fleet(
                    replica,
                    stream,
                    targets,
                    total_per_s=rate,
                    headroom=spec.headroom,
                    capacity_per_s=cap,
                )
        except (EngineError, FieldError) as exc:
            rejected.append(_traffic_rejection(row, "misses_slo", str(exc)))
            continue
        if fleet.replicas is None or fleet.result is None:
            reason = (
                f"percentile targets not met within {fleet.simulations} sizing runs "
                f"(last: {fleet.requests_per_s_per_replica:.3g} requests/s per replica)"
            )
            if colocated is not None and colocated.replicas is not None:
                reason += (
                    f"; by no pool ratio, while {max(colocated.replicas, spec.dp)} colocated "
                    "replicas meet them (the same plan without traffic.disaggregation)"
                )
            rejected.append(_traffic_rejection(row, "misses_slo", reason))
            continue
        tokens_per_request = stream.input_tokens.mean + stream.output_tokens.mean
        price = row["usd_per_gpu_hour"]
        # At least dp replicas: more than the sizing needs only lowers each one's load.
        replicas = max(fleet.replicas * group_replicas, spec.dp)
        gpus = replicas * row["gpus_per_replica"]
        fleet_usd = gpus * price if price is not None else None
        if chosen is not None and colocated is not None:
            chosen["colocated"] = _colocated_dict(colocated, spec.dp, gpus, fleet_usd, row)
        at = fleet.result
        row.update(
            replicas=replicas,
            gpus=gpus,
            usd_per_hour=fleet_usd,
            traffic={
                "requests_per_s_per_replica": fleet.requests_per_s_per_replica,
                "headroom": spec.headroom,
                "capacity_requests_per_s": cap,
                "scheduler": scheduler_dict(replica, source),
                "ttft_ms": percentiles_dict(at.ttft_ms),
                "tpot_ms": percentiles_dict(at.tpot_ms),
                "e2e_latency_ms": percentiles_dict(at.e2e_latency_ms),
                "usd_per_million_tokens_at_rate": (
                    fleet_usd / (rate * tokens_per_request * 3600.0) * 1e6
                    if fleet_usd is not None
                    else None
                ),
                "simulations": fleet.simulations,
                "disaggregation": chosen,
            },
        )
        cost = fleet_usd if fleet_usd is not None else math.inf
        sized.append((cost, gpus, row))
        sized.sort(key=lambda item: (item[0], item[1]))
    ranked = [row for _, _, row in sized]
    for rank, row in enumerate(ranked, 1):
        row["rank"] = rank
    answer["configurations"] = ranked
    answer["notes"].append(
        f"percentile targets {dict(spec.percentile_slo)}: fleets sized by simulating Poisson-"
        f"or-given traffic at {rate:g} requests/s with {spec.headroom:g} headroom, ranked by "
        "fleet cost (GPUs where unpriced)"
    )
    if request.disaggregation:
        names = ", ".join(f"{x}P{y}D" for x, y, _ in request.disaggregation)
        answer["notes"].append(
            "disaggregated pools: each configuration sized as groups of prefill + decode "
            f"replicas for the ratios {names}; its traffic.disaggregation says which ratio won "
            "(the cheapest fleet) and what the colocated fleet of the same configuration needs"
        )
        top = ranked[0]["traffic"]["disaggregation"] if ranked else None
        alone = top.get("colocated") if top else None
        if alone and alone["cheaper"]:
            answer["notes"].append(_colocated_note(ranked[0], alone))


def _group_bound(
    replica: Replica, stream: TrafficSpec, request: TrafficRequest, rate: float, headroom: float
) -> tuple[float, float]:
    """Return the best group capacity and the fewest replicas any ratio could need (bound)."""
    best_cap, fewest = 0.0, math.inf
    for ratio in request.disaggregation:
        pools = pools_of(ratio)
        cap = PoolGroup(replica, pools).capacity(stream)
        best_cap = max(best_cap, cap)
        fewest = min(fewest, fewest_replicas_bound(rate, headroom, cap) * pools.replicas)
    return best_cap, fewest


def _size_groups(
    replica: Replica,
    stream: TrafficSpec,
    targets: Sequence[SloTarget],
    request: TrafficRequest,
    rate: float,
    headroom: float,
    row: dict[str, Any],
) -> tuple[FleetSize, dict[str, Any] | None, int, float]:
    """Size the fleet as groups for each ratio; return the cheapest (GPUs where unpriced).

    Returns the winner's sizing, the ``disaggregation`` part of the answer, replicas per group
    and the group's capacity; a sizing with ``replicas`` None when no ratio meets the targets.
    """
    tried: list[dict[str, Any]] = []
    best: tuple[float, int, FleetSize, Any, float] | None = None
    last: FleetSize | None = None
    for ratio in request.disaggregation:
        pools = pools_of(ratio)
        group = PoolGroup(replica, pools)
        cap = group.capacity(stream)
        fleet = size_fleet(
            group, stream, targets, total_per_s=rate, headroom=headroom, capacity_per_s=cap
        )
        last = fleet
        entry = _tried(pools.name, fleet.replicas, row, pools.replicas)
        tried.append(entry)
        gpus, usd = entry["gpus"], entry["usd_per_hour"]
        if gpus is None:
            continue
        key = (usd if usd is not None else math.inf, gpus)
        if best is None or key < (best[0], best[1]):
            best = (key[0], gpus, fleet, pools, cap)
    if best is None:
        assert last is not None
        return last, None, 1, 0.0
    _, _, fleet, pools, cap = best
    chosen = {
        "prefill_replicas": pools.prefill_replicas,
        "decode_replicas": pools.decode_replicas,
        "groups": fleet.replicas,
        "tried": tried,
    }
    return fleet, chosen, pools.replicas, cap


def _size_colocated(
    replica: Replica,
    stream: TrafficSpec,
    targets: Sequence[SloTarget],
    rate: float,
    headroom: float,
) -> FleetSize:
    """Size the colocated fleet of the same configuration (each replica prefills and decodes).

    An engine error here (none is known: the pools ran the same replica) leaves the fleet
    unsized rather than rejecting the pools.
    """
    try:
        return size_fleet(
            replica,
            stream,
            targets,
            total_per_s=rate,
            headroom=headroom,
            capacity_per_s=replica.capacity(stream),
        )
    except EngineError:
        return FleetSize(None, math.nan, None, 0)


def _tried(name: str, count: int | None, row: dict[str, Any], per_group: int = 1) -> dict[str, Any]:
    """One entry of ``tried``: groups (replicas for colocated), GPUs and price of the fleet."""
    gpus = None if count is None else count * per_group * row["gpus_per_replica"]
    price = row["usd_per_gpu_hour"]
    usd = gpus * price if gpus is not None and price is not None else None
    return {"ratio": name, "groups": count, "gpus": gpus, "usd_per_hour": usd}


def _colocated_dict(
    fleet: FleetSize, dp: int, pools_gpus: int, pools_usd: float | None, row: dict[str, Any]
) -> dict[str, Any]:
    """Compare the colocated fleet (at least dp replicas, as the pools) with the chosen pools.

    Cheaper: fewer dollars per hour, or fewer GPUs where unpriced; the same accelerator prices
    both, so the two agree. ``saving_*``: the pools' figure less the colocated one.
    """
    if fleet.replicas is None:
        return {
            "replicas": None,
            "gpus": None,
            "usd_per_hour": None,
            "cheaper": False,
            "saving_gpus": None,
            "saving_usd_per_hour": None,
        }
    replicas = max(fleet.replicas, dp)
    gpus = replicas * row["gpus_per_replica"]
    price = row["usd_per_gpu_hour"]
    usd = gpus * price if price is not None else None
    saving_usd = pools_usd - usd if pools_usd is not None and usd is not None else None
    return {
        "replicas": replicas,
        "gpus": gpus,
        "usd_per_hour": usd,
        "cheaper": (saving_usd > 0.0) if saving_usd is not None else gpus < pools_gpus,
        "saving_gpus": pools_gpus - gpus,
        "saving_usd_per_hour": saving_usd,
    }


def _colocated_note(row: dict[str, Any], colocated: dict[str, Any]) -> str:
    """Say that the top configuration would cost less colocated, and by how much."""
    chosen = row["traffic"]["disaggregation"]
    name = f"{chosen['prefill_replicas']}P{chosen['decode_replicas']}D"
    if colocated["saving_usd_per_hour"] is not None:
        saved = colocated["saving_usd_per_hour"]
        by = f"{saved:.4g} $/h ({saved / row['usd_per_hour']:.0%}) less"
    else:
        by = f"{colocated['saving_gpus']} GPUs fewer"
    return (
        f"the top configuration ({row['model']} on {row['accelerator']}) would cost {by} "
        f"colocated: {colocated['replicas']} colocated replica(s), {colocated['gpus']} GPU(s), "
        f"meet the targets, against its {chosen['groups']} × {name} group(s), {row['gpus']} "
        "GPUs; the pools stay the answer, as asked; the same plan without "
        "traffic.disaggregation ranks colocated fleets"
    )


def _outranked(row: dict[str, Any], bound: float, tenth: float) -> dict[str, Any]:
    return _traffic_rejection(
        row,
        "outranked",
        f"not sized: its fleet costs at least {bound:.4g} $/h at the rate (capacity bound), "
        f"more than the {MAX_SIZED_CONFIGURATIONS}th sized fleet ({tenth:.4g} $/h)",
    )


def _traffic_rejection(row: dict[str, Any], code: str, reason: str) -> dict[str, Any]:
    return {
        "model": row["model"],
        "accelerator": row["accelerator"],
        "parallelism": row["parallelism"],
        "precision": row["precision"],
        "code": code,
        "reason": reason,
    }
