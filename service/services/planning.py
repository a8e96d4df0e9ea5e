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
from service.services.plan_fleets import size_by_traffic
from service.services.traffic import (
    TrafficRequest,
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
