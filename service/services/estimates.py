"""Analysis use cases: load a target, run the engine, shape the answer.

``AnalysisService`` orchestrates; the request specs live in ``analysis_specs``, the JSON
shaping in ``answer_json`` and the cached target lookup in ``target_lookup`` (their public
names are re-exported here for existing imports).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.engine.efficiency import EfficiencyParams
from service.engine.errors import EngineError
from service.engine.estimate import EstimateResult, estimate, estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.roofline import analyze_intensity
from service.engine.shapes import ModelShape
from service.engine.traffic.backends import scheduler_defaults
from service.services.analysis_specs import AnalysisTarget, EstimateSpec, IntensitySpec
from service.services.answer_json import (
    STACKED_COLUMNS,
    calibration_json,
    estimate_header,
    finite_or_none,
    json_floats,
    operator_json,
    point_json,
    split_answers,
    target_echo,
)
from service.services.catalog import CatalogService
from service.services.efficiency_lookup import (
    ResolvedEfficiency,
    interval_columns,
    uncalibrated_note,
)
from service.services.errors import FieldError, ServiceError
from service.services.extrapolation import Amounts, reach_params, request_extrapolation
from service.services.target_lookup import CatalogLookup, Loaded
from service.services.traffic import Deployment, prepare, run_traffic

__all__ = [
    "AnalysisService",
    "AnalysisTarget",
    "CatalogLookup",
    "EstimateSpec",
    "IntensitySpec",
    "Loaded",
    "finite_or_none",
    "json_floats",
]


def _engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine


class AnalysisService:
    """Intensity tables and estimates; each target is looked up once per service.

    Without a session, only targets given in ``loaded`` can be answered (the async endpoints
    look them up first and compute without touching the database).
    """

    def __init__(
        self,
        session: Session | None,
        *,
        viewer: str = "",
        loaded: Mapping[AnalysisTarget, Loaded] | None = None,
    ) -> None:
        """``viewer``: the caller's API key prefix ("" anonymous), whose private calibration
        profiles ``calibration`` may choose besides the published ones."""
        self.session = session
        self.viewer = viewer
        self.lookup = CatalogLookup(_engine_of(session)) if session is not None else None
        self._loaded: dict[AnalysisTarget, Loaded] = dict(loaded or {})

    def _load(self, target: AnalysisTarget) -> tuple[ModelShape, Accelerator, ResolvedEfficiency]:
        """Load model and accelerator (NotFoundError names which) and resolve calibration."""
        loaded = self._loaded.get(target)
        if loaded is None:
            if self.session is None or self.lookup is None:
                raise RuntimeError(f"no session to load {target}")
            loaded = self._loaded[target] = self.lookup.get(self.session, target, self.viewer)
        return loaded.model, loaded.accelerator, loaded.resolved

    @property
    def catalog(self) -> CatalogService:
        """Return the catalog service of this session (charts read accelerators through it)."""
        if self.session is None:
            raise RuntimeError("no session")
        return CatalogService(self.session)

    def intensity(self, spec: IntensitySpec) -> dict[str, Any]:
        """Tabulate one step's operators; raises NotFoundError or EngineError."""
        target = spec.target
        model, accelerator, resolved = self._load(target)
        result = analyze_intensity(
            model,
            accelerator,
            phase=spec.phase,
            batch_size=spec.batch_size,
            context_tokens=spec.context_tokens,
            precision=target.precision_on(model, accelerator),
            parallelism=target.parallelism,
            params=profile_params(resolved, target, model, None),
        )
        return {
            "model": model.id,
            "accelerator": accelerator.id,
            "phase": result.phase,
            "batch_size": result.batch_size,
            "context_tokens": result.context_tokens,
            **target_echo(target, result.precision, model),
            "compute_dtype": result.compute_dtype,
            "calibration": calibration_json(target, resolved, model),
            "calibration_note": uncalibrated_note(
                target.calibration, target.backend, resolved, accelerator.id
            ),
            "efficiency_prior": resolved.efficiency_prior,
            "ridge_point_flop_per_byte": finite_or_none(result.ridge_point_flop_per_byte),
            "critical_batch_size": result.critical_batch_size,
            "overhead_ms": finite_or_none(result.overhead_ms),
            "operators": [operator_json(row) for row in result.operators],
            "total": operator_json(result.total),
        }

    def estimate(self, spec: EstimateSpec) -> dict[str, Any]:
        """Estimate one sweep (and its traffic); raises NotFoundError, FieldError or EngineError.

        Without batch sizes (a traffic-only request) the answer has no points.
        """
        _check_load(spec)
        if not spec.batch_sizes and spec.traffic is None:
            raise FieldError("batch_sizes", "required unless traffic is given")
        if spec.traffic is not None and spec.target.dp != 1:
            raise FieldError(
                "parallelism.dp",
                f"traffic simulates one replica; with dp={spec.target.dp} give each replica's "
                "share of the arrivals and dp=1",
            )
        if spec.batch_sizes:
            answer = self._run_group([spec])[0]
        else:
            # a traffic-only answer's header comes from one point; the stream it simulates is
            # open loop, with no concurrency of its own (its extrapolation says so)
            only = dataclasses.replace(spec, batch_sizes=(1,))
            answer = {**self._run_group([only], stream=True)[0]}
            answer["points"] = []
        if spec.traffic is not None:
            answer["traffic"] = self.traffic(spec)
        return answer

    def traffic(self, spec: EstimateSpec) -> dict[str, Any]:
        """Simulate the spec's open-loop traffic on its target (FieldError names bad parts)."""
        assert spec.traffic is not None
        target = spec.target
        model, accelerator, resolved = self._load(target)
        deployment = Deployment(
            model,
            accelerator,
            target.precision,
            target.parallelism,
            profile_params(resolved, target, model, "serving"),
            target.backend,
        )
        prepared = prepare(
            deployment,
            spec.traffic,
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
        )
        return run_traffic(prepared)

    def estimate_many(self, specs: Sequence[EstimateSpec]) -> list[dict[str, Any] | Exception]:
        """Estimate many sweeps; each answer is a dict or the error that item raised.

        Specs that differ only in batch sizes share one engine call (the engine is elementwise
        over batch sizes), and each model and accelerator is loaded once.
        """
        groups: dict[tuple[Any, ...], list[int]] = {}
        answers: dict[int, dict[str, Any] | Exception] = {}
        for index, spec in enumerate(specs):
            if spec.traffic is not None or not spec.batch_sizes:  # one by one
                try:
                    answers[index] = self.estimate(spec)
                except (ServiceError, EngineError) as exc:
                    answers[index] = exc
                continue
            try:
                _check_load(spec)
            except FieldError as exc:
                answers[index] = exc
                continue
            groups.setdefault(spec.group_key, []).append(index)
        # Groups differing only in request lengths are stacked into one vectorised engine pass.
        stacks: dict[tuple[Any, ...], list[list[int]]] = {}
        for indices in groups.values():
            first = specs[indices[0]]
            key = (first.target, first.mode, first.load_pattern, first.price_usd_per_hour)
            stacks.setdefault(key, []).append(indices)
        for stacked in stacks.values():
            if len(stacked) > 1:
                try:
                    for indices, stacked_answers in zip(
                        stacked,
                        self._run_stacked([[specs[i] for i in g] for g in stacked]),
                        strict=True,
                    ):
                        answers.update(zip(indices, stacked_answers, strict=True))
                    continue
                except (ServiceError, EngineError):
                    pass  # answer group by group below, so each item gets its own error
            for indices in stacked:
                members = [specs[i] for i in indices]
                try:
                    results: Sequence[dict[str, Any] | Exception] = self._run_group(members)
                except (ServiceError, EngineError) as exc:
                    results = [exc] * len(members)
                answers.update(zip(indices, results, strict=True))
        return [answers[index] for index in range(len(specs))]

    def _run_stacked(self, groups: Sequence[Sequence[EstimateSpec]]) -> list[list[dict[str, Any]]]:
        """Run groups that share target, mode and price but differ in lengths as one engine pass.

        Answers match ``_run_group`` per group (same header, points and interval columns).
        """
        first = groups[0][0]
        target = first.target
        model, accelerator, resolved = self._load(target)
        batch_sizes = [[b for spec in group for b in spec.batch_sizes] for group in groups]
        results = estimate_stacked(
            model,
            [accelerator] * len(groups),
            precision=target.precision_on(model, accelerator),
            parallelism=target.parallelism,
            input_tokens=[group[0].input_tokens for group in groups],
            output_tokens=[group[0].output_tokens for group in groups],
            batch_sizes=[np.asarray(b, dtype=np.float64) for b in batch_sizes],
            mode=first.mode,
            load_pattern=first.load_pattern,
            max_running_requests=running_cap(target, accelerator),
            params=profile_params(resolved, target, model, first.mode),
            prices_usd_per_hour=[first.price_usd_per_hour] * len(groups),
        )
        columns: dict[str, Any] = {
            name: np.concatenate([getattr(r, name) for r in results]) for name in STACKED_COLUMNS
        }
        combined = dataclasses.replace(results[0], **columns)
        points = point_json(combined, [b for sizes in batch_sizes for b in sizes], target.dp)
        answers: list[list[dict[str, Any]]] = []
        start = 0
        for group, result, sizes in zip(groups, results, batch_sizes, strict=True):
            found, amounts = self._extrapolation(
                target, model, accelerator, resolved, result, first.load_pattern
            )
            header = estimate_header(target, model, accelerator, resolved, result, first, found)
            mine = points[start : start + len(sizes)]
            start += len(sizes)
            for name, column in interval_columns(resolved, result, amounts).items():
                for point, bound in zip(mine, column, strict=True):
                    point[name] = bound
            answers.append(split_answers(header, mine, group))
        return answers

    def _run_group(
        self, specs: Sequence[EstimateSpec], stream: bool = False
    ) -> list[dict[str, Any]]:
        """Run specs sharing a group key as one engine call and split the points per spec
        (``stream``: the answer is a simulated open-loop stream, checked as one against the
        profile's domain: open loop, no concurrency of its own)."""
        first = specs[0]
        target = first.target
        model, accelerator, resolved = self._load(target)
        batch_sizes = [b for spec in specs for b in spec.batch_sizes]
        result = estimate(
            model,
            accelerator,
            precision=target.precision_on(model, accelerator),
            parallelism=target.parallelism,
            input_tokens=first.input_tokens,
            output_tokens=first.output_tokens,
            batch_sizes=np.asarray(batch_sizes, dtype=np.float64),
            mode=first.mode,
            load_pattern=first.load_pattern,
            max_running_requests=running_cap(target, accelerator),
            params=profile_params(resolved, target, model, first.mode),
            price_usd_per_hour=first.price_usd_per_hour,
        )
        found, amounts = self._extrapolation(
            target, model, accelerator, resolved, result, first.load_pattern, stream
        )
        header = estimate_header(target, model, accelerator, resolved, result, first, found)
        points = point_json(result, batch_sizes, target.dp)
        for name, column in interval_columns(resolved, result, amounts).items():
            for point, bound in zip(points, column, strict=True):
                point[name] = bound
        return split_answers(header, points, specs)

    @staticmethod
    def _extrapolation(
        target: AnalysisTarget,
        model: ModelShape,
        accelerator: Accelerator,
        resolved: ResolvedEfficiency,
        result: EstimateResult,
        load_pattern: str,
        stream: bool = False,
    ) -> tuple[list[dict[str, Any]], Amounts | None]:
        """What of the request lies outside the profile's domain, and the widening amounts."""
        return request_extrapolation(
            resolved.profile,
            model,
            accelerator.id,
            result,
            weights_dtype=result.precision.weights,  # native resolved by the engine
            backend=target.backend,
            load_pattern=load_pattern,
            stream=stream,
        )


def _check_load(spec: EstimateSpec) -> None:
    """Load patterns are serving questions; FieldError names ``load_pattern`` otherwise."""
    if spec.load_pattern != "closed_loop" and spec.mode != "serving":
        raise FieldError("load_pattern", f"{spec.load_pattern} needs mode serving")


def running_cap(target: AnalysisTarget, accelerator: Accelerator) -> int | None:
    """The named backend's default cap on running requests (vLLM ``max_num_seqs``), if any."""
    if not target.backend:
        return None
    return scheduler_defaults(target.backend, accelerator).max_running_requests


def profile_params(
    resolved: ResolvedEfficiency, target: AnalysisTarget, model: ModelShape, mode: str | None
) -> EfficiencyParams:
    """The resolved parameters within the profile's reach for this model, layout, backend and
    mode."""
    return reach_params(
        resolved.profile,
        resolved.params,
        gpus=target.parallelism.gpus_per_replica,
        backend=target.backend,
        mode=mode,
        model=model,
    )
