"""Analysis use cases: load catalog entries, resolve calibration, run the engine, shape the answer.

Answers are JSON-ready dicts in which every non-finite number is None (never NaN or inf).
Catalog entries and calibration profiles come from process-local caches checked by one
freshness query per target (``CatalogLookup``); only a miss loads ORM rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, Select, Subquery
from sqlalchemy.orm import Session, sessionmaker

from service.db.calibration_repository import AUTO
from service.db.freshness import freshness_query, linked_profile
from service.db.reader import AutocommitReader
from service.engine.errors import EngineError
from service.engine.estimate import EstimateResult, estimate, estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.parallel import SINGLE_GPU, Parallelism
from service.engine.precision import BF16, Precision
from service.engine.roofline import IntensityRow, analyze_intensity
from service.engine.shapes import ModelShape
from service.services.catalog import (
    CatalogService,
    CatalogTokens,
    catalog_cache,
    read_tokens,
)
from service.services.efficiency_lookup import (
    NONE,
    ResolvedEfficiency,
    choice_reason,
    interval_columns,
    profile_cache,
)
from service.services.errors import FieldError, NotFoundError, ServiceError
from service.services.extrapolation import reach_params, request_extrapolation
from service.services.traffic import Deployment, TrafficRequest, prepare, run_traffic


@dataclass(frozen=True, slots=True)
class AnalysisTarget:
    """What is analysed: model, accelerator, numeric format, layout and calibration choice."""

    model: str
    accelerator: str
    precision: Precision = BF16
    parallelism: Parallelism = SINGLE_GPU
    backend: str | None = None
    calibration: str = "auto"


@dataclass(frozen=True, slots=True)
class IntensitySpec:
    """One step to tabulate operator by operator."""

    target: AnalysisTarget
    phase: str
    batch_size: int
    context_tokens: int


@dataclass(frozen=True, slots=True)
class EstimateSpec:
    """One sweep over batch sizes (static) or concurrencies (serving)."""

    target: AnalysisTarget
    input_tokens: int
    output_tokens: int
    batch_sizes: tuple[int, ...]
    mode: str = "static"
    price_usd_per_hour: float | None = None
    traffic: TrafficRequest | None = None

    @property
    def group_key(self) -> tuple[Any, ...]:
        """Return everything but the batch sizes: specs sharing it can run as one engine call."""
        return (
            self.target,
            self.input_tokens,
            self.output_tokens,
            self.mode,
            self.price_usd_per_hour,
            self.traffic,
        )


def finite_or_none(value: float | None) -> float | None:
    """Return ``value`` as a float, or None when it is missing, NaN or infinite."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def json_floats(values: npt.ArrayLike) -> list[Any]:
    """Return an array as (nested) lists of floats with None in place of NaN and infinities."""
    array = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(array)
    if finite.all():
        return list(array.tolist())
    cleaned = array.astype(object)
    cleaned[~finite] = None
    return list(cleaned.tolist())


def _calibration_out(
    target: AnalysisTarget,
    resolved: ResolvedEfficiency,
    extrapolation: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The answer's ``calibration`` object: the profile used, why, and (estimates) what of the
    request lies outside its domain; None for the spec sheet."""
    if resolved.calibration is None:
        return None
    reason = choice_reason(target.calibration, target.backend, resolved.calibration)
    out = {**resolved.calibration, "reason": reason}
    return out if extrapolation is None else {**out, "extrapolation": extrapolation}


def _target_echo(target: AnalysisTarget, used: Precision) -> dict[str, Any]:
    """Return the precision the engine used (``native`` resolved) and the layout."""
    layout = target.parallelism
    return {
        "precision": {
            "weights": used.weights,
            "activations": used.activations,
            "kv_cache": used.kv_cache,
            "weights_source": target.precision.weights_source,
        },
        "parallelism": {
            "tp": layout.tp,
            "pp": layout.pp,
            "ep": layout.ep,
            "attention_dp": layout.attention_dp,
        },
    }


def _operator(row: IntensityRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "flops": finite_or_none(row.flops),
        "bytes": finite_or_none(row.bytes),
        "arithmetic_intensity_flop_per_byte": finite_or_none(
            row.arithmetic_intensity_flop_per_byte
        ),
        "bound": row.bound,
        "time_ms": finite_or_none(row.time_ms),
    }


_POINT_FLOATS = (
    "running_batch_size",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_ms",
    "queue_wait_ms",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "requests_per_s",
    "output_tokens_per_s_per_gpu",
    "decode_arithmetic_intensity_flop_per_byte",
    "prefill_arithmetic_intensity_flop_per_byte",
    "weights_gb",
    "kv_cache_gb",
    "activations_gb",
    "runtime_overhead_gb",
    "total_gb",
    "capacity_gb",
    "usable_gb",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "energy_per_output_token_j",
    "energy_per_token_j",
)


def _points(result: EstimateResult, batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Turn the engine's columns into one JSON object per batch size (columns converted once)."""
    stacked = np.vstack([getattr(result, name) for name in _POINT_FLOATS])
    columns = json_floats(stacked)
    return [
        {
            "batch_size": batch,
            "running_batch_size": running,
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "e2e_latency_ms": e2e,
            "queue_wait_ms": queue,
            "output_tokens_per_s": output_tps,
            "total_tokens_per_s": total_tps,
            "requests_per_s": rps,
            "output_tokens_per_s_per_gpu": output_tps_gpu,
            "decode": {"arithmetic_intensity_flop_per_byte": decode_ai, "bound": decode_bound},
            "prefill": {"arithmetic_intensity_flop_per_byte": prefill_ai, "bound": prefill_bound},
            "memory": {
                "weights_gb": weights,
                "kv_cache_gb": kv,
                "activations_gb": activations,
                "runtime_overhead_gb": runtime,
                "total_gb": total,
                "capacity_gb": capacity,
                "usable_gb": usable,
                "fits": fits,
            },
            "cost": {
                "usd_per_million_output_tokens": usd_out,
                "usd_per_million_input_tokens": usd_in,
            },
            "energy": {"per_output_token_j": j_out, "per_token_j": j_all},
        }
        for (  # batch size, then _POINT_FLOATS in order, then the bounds and fits
            batch,
            running,
            ttft,
            tpot,
            e2e,
            queue,
            output_tps,
            total_tps,
            rps,
            output_tps_gpu,
            decode_ai,
            prefill_ai,
            weights,
            kv,
            activations,
            runtime,
            total,
            capacity,
            usable,
            usd_out,
            usd_in,
            j_out,
            j_all,
            decode_bound,
            prefill_bound,
            fits,
        ) in zip(
            batch_sizes,
            *columns,
            result.decode_bound.tolist(),
            result.prefill_bound.tolist(),
            result.fits.tolist(),
            strict=True,
        )
    ]


# EstimateResult columns joined back together when stacked results are shaped as points.
_STACKED_COLUMNS = (*_POINT_FLOATS, "batch_size", "decode_bound", "prefill_bound", "fits")


def _split_answers(
    header: dict[str, Any], points: list[dict[str, Any]], specs: Sequence[EstimateSpec]
) -> list[dict[str, Any]]:
    """Give each spec the header and its own slice of the points, in order."""
    answers: list[dict[str, Any]] = []
    start = 0
    for spec in specs:
        end = start + len(spec.batch_sizes)
        answers.append({**header, "points": points[start:end]})
        start = end
    return answers


@dataclass(frozen=True, slots=True)
class Loaded:
    """A target's engine inputs: model, accelerator and resolved calibration."""

    model: ModelShape
    accelerator: Accelerator
    resolved: ResolvedEfficiency


_QUERIES: dict[str, Select[Any]] = {}


def _freshness(target: AnalysisTarget) -> tuple[Select[Any], dict[str, Any]]:
    """Return the freshness query for a target's calibration choice and its extra parameters.

    Besides the model and accelerator tokens it reads the profile id the choice resolves to
    and the token of that profile's source accelerator, all in one statement.
    """
    params: dict[str, Any] = {}
    linked: Subquery | None = None
    if target.calibration == NONE:
        key = NONE
    else:
        key, linked, params = linked_profile(target.backend, target.calibration)
    query = _QUERIES.get(key)
    if query is None:
        query = _QUERIES.setdefault(key, freshness_query(linked))
    return query, params


class CatalogLookup:
    """Loads targets through the process-local catalog and profile caches of one database."""

    def __init__(self, engine: Engine) -> None:
        self.catalog = catalog_cache(engine)
        self.profiles = profile_cache(engine)

    def tokens(self, db: Connection | Session, target: AnalysisTarget) -> CatalogTokens:
        """Run the one freshness query of a target (row tokens and the profile it resolves to)."""
        query, params = _freshness(target)
        return read_tokens(db, query, target.model, target.accelerator, **params)

    def _profile_id(self, tokens: CatalogTokens, target: AnalysisTarget) -> str | None:
        if target.calibration == NONE:
            return None
        if tokens.extra is None and target.calibration != AUTO:
            raise NotFoundError("calibration profile", target.calibration)
        return None if tokens.extra is None else str(tokens.extra)

    def cached(self, tokens: CatalogTokens, target: AnalysisTarget) -> Loaded | None:
        """Return the target from the caches, or None on a miss; NotFoundError if absent."""
        entries = self.catalog.cached(tokens)
        if entries is None:
            return None
        profile_id = self._profile_id(tokens, target)
        if profile_id is None:
            return Loaded(*entries, self.profiles.uncalibrated(tokens, entries[1], target.backend))
        resolved = self.profiles.cached(tokens, profile_id)
        return None if resolved is None else Loaded(*entries, resolved)

    def load(self, session: Session, tokens: CatalogTokens, target: AnalysisTarget) -> Loaded:
        """Load what the caches miss from ORM rows and cache it."""
        model, accelerator = self.catalog.load(session, tokens)
        profile_id = self._profile_id(tokens, target)
        resolved = (
            self.profiles.uncalibrated(tokens, accelerator, target.backend)
            if profile_id is None
            else self.profiles.resolve(session, tokens, profile_id, accelerator)
        )
        return Loaded(model, accelerator, resolved)

    def get(self, session: Session, target: AnalysisTarget) -> Loaded:
        """Return a target within a session: one freshness query, ORM loads only on a miss."""
        tokens = self.tokens(session, target)
        return self.cached(tokens, target) or self.load(session, tokens, target)

    def fresh(
        self, target: AnalysisTarget, reader: AutocommitReader
    ) -> tuple[CatalogTokens, Loaded | None]:
        """Run the freshness query on ``reader``; return tokens and any cached target."""
        tokens = reader.run(lambda connection: self.tokens(connection, target))
        return tokens, self.cached(tokens, target)

    def load_in_session(
        self, factory: sessionmaker[Session], tokens: CatalogTokens, target: AnalysisTarget
    ) -> Loaded:
        """Load a missed target in a short session of its own (run it off the event loop)."""
        with factory() as session:
            return self.load(session, tokens, target)


def _engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine


class AnalysisService:
    """Intensity tables and estimates; each target is looked up once per service.

    Without a session, only targets given in ``loaded`` can be answered (the async endpoints
    look them up first and compute without touching the database).
    """

    def __init__(
        self, session: Session | None, *, loaded: Mapping[AnalysisTarget, Loaded] | None = None
    ) -> None:
        self.session = session
        self.lookup = CatalogLookup(_engine_of(session)) if session is not None else None
        self._loaded: dict[AnalysisTarget, Loaded] = dict(loaded or {})

    def _load(self, target: AnalysisTarget) -> tuple[ModelShape, Accelerator, ResolvedEfficiency]:
        """Load model and accelerator (NotFoundError names which) and resolve calibration."""
        loaded = self._loaded.get(target)
        if loaded is None:
            if self.session is None or self.lookup is None:
                raise RuntimeError(f"no session to load {target}")
            loaded = self._loaded[target] = self.lookup.get(self.session, target)
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
            precision=target.precision,
            parallelism=target.parallelism,
            params=reach_params(
                resolved.profile,
                resolved.params,
                gpus=target.parallelism.gpus_per_replica,
                backend=target.backend,
            ),
        )
        return {
            "model": model.id,
            "accelerator": accelerator.id,
            "phase": result.phase,
            "batch_size": result.batch_size,
            "context_tokens": result.context_tokens,
            **_target_echo(target, result.precision),
            "compute_dtype": result.compute_dtype,
            "calibration": _calibration_out(target, resolved),
            "efficiency_prior": resolved.efficiency_prior,
            "ridge_point_flop_per_byte": finite_or_none(result.ridge_point_flop_per_byte),
            "critical_batch_size": result.critical_batch_size,
            "overhead_ms": finite_or_none(result.overhead_ms),
            "operators": [_operator(row) for row in result.operators],
            "total": _operator(result.total),
        }

    def estimate(self, spec: EstimateSpec) -> dict[str, Any]:
        """Estimate one sweep (and its traffic); raises NotFoundError, FieldError or EngineError.

        Without batch sizes (a traffic-only request) the answer has no points.
        """
        if not spec.batch_sizes and spec.traffic is None:
            raise FieldError("batch_sizes", "required unless traffic is given")
        if spec.batch_sizes:
            answer = self._run_group([spec])[0]
        else:
            answer = {**self._run_group([dataclasses.replace(spec, batch_sizes=(1,))])[0]}
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
            resolved.params,
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
            groups.setdefault(spec.group_key, []).append(index)
        # Groups differing only in request lengths are stacked into one vectorised engine pass.
        stacks: dict[tuple[Any, ...], list[list[int]]] = {}
        for indices in groups.values():
            first = specs[indices[0]]
            key = (first.target, first.mode, first.price_usd_per_hour)
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
            precision=target.precision,
            parallelism=target.parallelism,
            input_tokens=[group[0].input_tokens for group in groups],
            output_tokens=[group[0].output_tokens for group in groups],
            batch_sizes=[np.asarray(b, dtype=np.float64) for b in batch_sizes],
            mode=first.mode,
            params=reach_params(
                resolved.profile,
                resolved.params,
                gpus=target.parallelism.gpus_per_replica,
                backend=target.backend,
            ),
            prices_usd_per_hour=[first.price_usd_per_hour] * len(groups),
        )
        columns: dict[str, Any] = {
            name: np.concatenate([getattr(r, name) for r in results]) for name in _STACKED_COLUMNS
        }
        combined = dataclasses.replace(results[0], **columns)
        points = _points(combined, [b for sizes in batch_sizes for b in sizes])
        answers: list[list[dict[str, Any]]] = []
        start = 0
        for group, result, sizes in zip(groups, results, batch_sizes, strict=True):
            found, amounts = self._extrapolation(target, model, accelerator, resolved, result)
            header = self._header(target, model, accelerator, resolved, result, first, found)
            mine = points[start : start + len(sizes)]
            start += len(sizes)
            for name, column in interval_columns(resolved, result, amounts).items():
                for point, bound in zip(mine, column, strict=True):
                    point[name] = bound
            answers.append(_split_answers(header, mine, group))
        return answers

    def _run_group(self, specs: Sequence[EstimateSpec]) -> list[dict[str, Any]]:
        """Run specs sharing a group key as one engine call and split the points per spec."""
        first = specs[0]
        target = first.target
        model, accelerator, resolved = self._load(target)
        batch_sizes = [b for spec in specs for b in spec.batch_sizes]
        result = estimate(
            model,
            accelerator,
            precision=target.precision,
            parallelism=target.parallelism,
            input_tokens=first.input_tokens,
            output_tokens=first.output_tokens,
            batch_sizes=np.asarray(batch_sizes, dtype=np.float64),
            mode=first.mode,
            params=reach_params(
                resolved.profile,
                resolved.params,
                gpus=target.parallelism.gpus_per_replica,
                backend=target.backend,
            ),
            price_usd_per_hour=first.price_usd_per_hour,
        )
        found, amounts = self._extrapolation(target, model, accelerator, resolved, result)
        header = self._header(target, model, accelerator, resolved, result, first, found)
        points = _points(result, batch_sizes)
        for name, column in interval_columns(resolved, result, amounts).items():
            for point, bound in zip(points, column, strict=True):
                point[name] = bound
        return _split_answers(header, points, specs)

    @staticmethod
    def _extrapolation(
        target: AnalysisTarget,
        model: ModelShape,
        accelerator: Accelerator,
        resolved: ResolvedEfficiency,
        result: EstimateResult,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """What of the request lies outside the profile's domain, and the widening amounts."""
        return request_extrapolation(
            resolved.profile,
            model,
            accelerator.id,
            result,
            weights_dtype=result.precision.weights,  # native resolved by the engine
            backend=target.backend,
        )

    @staticmethod
    def _header(
        target: AnalysisTarget,
        model: ModelShape,
        accelerator: Accelerator,
        resolved: ResolvedEfficiency,
        result: EstimateResult,
        first: EstimateSpec,
        extrapolation: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Return the fields an estimate answer carries besides its points."""
        price = (
            first.price_usd_per_hour
            if first.price_usd_per_hour is not None
            else accelerator.price_usd_per_hour
        )
        return {
            "model": model.id,
            "accelerator": accelerator.id,
            "mode": result.mode,
            "backend": target.backend,
            **_target_echo(target, result.precision),
            "compute_dtype": result.compute_dtype,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "gpus_per_replica": result.gpus_per_replica,
            "calibration": _calibration_out(target, resolved, extrapolation or []),
            "efficiency_prior": resolved.efficiency_prior,
            "ridge_point_flop_per_byte": finite_or_none(result.ridge_point_flop_per_byte),
            "critical_batch_size": result.critical_batch_size,
            "max_batch_size": result.max_batch_size,
            "price_usd_per_hour": finite_or_none(price),
            "usd_per_hour": finite_or_none(result.usd_per_hour),
            "traffic": None,
        }
