"""Engine predictions of end-to-end runs, one vectorised engine pass per model and layout.

Runs that share (model, precision, layout, mode) go into one ``estimate_stacked`` call: each
distinct (input, output) length pair is a member, carrying the batch sizes (or concurrencies) of
all its runs. Every run's TTFT, TPOT and whole-request latency come out of that single pass.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration.measurements import ServingMeasurement, StaticMeasurement
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams, engine_only
from service.engine.estimate import EstimateResult, estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.parallel import Parallelism
from service.engine.precision import WIDE_DTYPES, Precision, default_kv_cache
from service.engine.shapes import ModelShape
from service.engine.traffic.backends import scheduler_defaults

Run = StaticMeasurement | ServingMeasurement
OUTPUTS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "e2e_latency_ms")


def precision_of(run: Run) -> Precision:
    """Engine precision of a run: unset activations follow 16-bit weights, else bf16 (fp8 and
    fp4 weights have theirs set on the accelerator first, ``fit.compute_dtypes_on``); an unset
    KV cache is fp8 beside fp8 or fp4 activations: on the shipped fp8 H100 serving runs a
    16-bit cache is physically impossible (docs/measurement-formats.md), whatever the engine
    does by default."""
    default = run.weights_dtype if run.weights_dtype in WIDE_DTYPES else "bf16"
    activations = run.activations_dtype or default
    kv = run.kv_cache_dtype or default_kv_cache(activations, quantized_cache=True)
    return Precision(weights=run.weights_dtype, activations=activations, kv_cache=kv)


def with_harness_terms(run: Run) -> bool:
    """Whether the closed-loop harness terms shape a run's prediction (closed-loop serving).

    Static batches never use them (their steps have no queue); open-loop and offline runs are
    predicted with the terms at their priors (``efficiency.engine_only``), so they neither use
    nor move what a closed-loop load generator's waves were fitted as.
    """
    return isinstance(run, ServingMeasurement) and run.load_pattern == "closed_loop"


def engine_load_pattern(run: Run) -> str:
    """The engine's load pattern for a run: ``offline`` runs queue every request at once; other
    serving runs are closed loops at their concurrency (an open loop's mean in flight)."""
    offline = isinstance(run, ServingMeasurement) and run.load_pattern == "offline"
    return "offline" if offline else "closed_loop"


def batch_of(run: Run) -> int:
    """Batch size of a static run, concurrency of a serving run."""
    return run.batch_size if isinstance(run, StaticMeasurement) else run.concurrency


def mode_of(run: Run) -> str:
    """Engine mode of a run."""
    return "static" if isinstance(run, StaticMeasurement) else "serving"


@dataclass(frozen=True)
class Target:
    """One measured value: run index, engine output name, metric key, value."""

    run: int
    output: str  # one of OUTPUTS
    metric: str  # "<kind>.<metric>" for quality reports
    value: float


def targets_of(runs: Sequence[Run]) -> list[Target]:
    """Every measured metric of ``runs`` the engine predicts, in run order."""
    out: list[Target] = []
    for i, r in enumerate(runs):
        if isinstance(r, StaticMeasurement):
            if r.ttft_ms is not None:
                out.append(Target(i, "ttft_ms", "static.ttft_ms", r.ttft_ms))
            if r.tpot_ms is not None and r.output_tokens > 1:
                out.append(Target(i, "tpot_ms", "static.tpot_ms", r.tpot_ms))
            whole = r.whole_batch_latency_ms()
            if whole is not None and (r.ttft_ms is None or r.tpot_ms is None):
                out.append(Target(i, "e2e_latency_ms", "static.latency_ms", whole))
        else:
            if r.ttft_ms is not None:
                out.append(Target(i, "ttft_ms", "serving.ttft_ms", r.ttft_ms))
            if r.tpot_ms is not None:
                out.append(Target(i, "tpot_ms", "serving.tpot_ms", r.tpot_ms))
    return out


@dataclass(frozen=True)
class _Stack:
    """Runs evaluated in one engine pass: shared model, precision, layout and mode."""

    model: ModelShape
    precision: Precision
    parallelism: Parallelism
    mode: str
    harness: bool  # closed-loop serving: the harness terms apply (``with_harness_terms``)
    load_pattern: str  # ``engine_load_pattern``
    max_running_requests: int | None  # the run's backend default cap (traffic.backends)
    identical_sequences: bool  # a static batch of copies of one prompt (``identical_prompts``)
    input_tokens: tuple[int, ...]  # per member
    output_tokens: tuple[int, ...]
    batches: tuple[NDArray[np.float64], ...]
    runs: NDArray[np.intp]  # run index of every point, members concatenated in order


class RunPredictor:
    """Engine predictions for a fixed set of runs (one ``estimate_stacked`` call per stack)."""

    def __init__(
        self, runs: Sequence[Run], accelerator: Accelerator, models: Mapping[str, ModelShape]
    ) -> None:
        self.runs = list(runs)
        self.accelerator = accelerator
        self.targets = targets_of(self.runs)
        self.measured = np.array([t.value for t in self.targets], dtype=float)
        self.target_run = np.array([t.run for t in self.targets], dtype=np.intp)
        self.target_output = np.array(
            [OUTPUTS.index(t.output) for t in self.targets], dtype=np.intp
        )
        self.serving = np.array(
            [isinstance(self.runs[t.run], ServingMeasurement) for t in self.targets], dtype=bool
        )
        self.stacks = _stacks(self.runs, models, accelerator)

    def outputs(
        self, params: EfficiencyParams, modes: Iterable[str] = ("static", "serving")
    ) -> NDArray[np.float64]:
        """Engine outputs per run, shape (len(OUTPUTS), runs); NaN for runs of other modes."""
        wanted = set(modes)
        out = np.full((len(OUTPUTS), len(self.runs)), np.nan)
        for s in self.stacks:
            if s.mode not in wanted:
                continue
            results = self._estimate(s, params if s.harness else engine_only(params))
            for k, name in enumerate(OUTPUTS):
                out[k, s.runs] = np.concatenate([getattr(r, name) for r in results])
        return out

    def running_batches(self) -> NDArray[np.float64]:
        """Per run, the requests its engine runs at once as estimates size it (a serving run's
        clients capped by KV room and the backend's running cap; a static run's batch). Memory
        alone sets it, so no fitted parameter does."""
        out = np.empty(len(self.runs))
        for s in self.stacks:
            results = self._estimate(s, DEFAULT_EFFICIENCY)
            out[s.runs] = np.concatenate([r.running_batch_size for r in results])
        return out

    def _estimate(self, s: _Stack, params: EfficiencyParams) -> list[EstimateResult]:
        return estimate_stacked(
            s.model,
            [self.accelerator] * len(s.batches),
            precision=s.precision,
            parallelism=s.parallelism,
            input_tokens=s.input_tokens,
            output_tokens=s.output_tokens,
            batch_sizes=s.batches,
            mode=s.mode,
            params=params,
            load_pattern=s.load_pattern,
            max_running_requests=s.max_running_requests,
            identical_sequences=s.identical_sequences,
            with_critical_batch=False,
        )

    def predict(
        self, params: EfficiencyParams, modes: Iterable[str] = ("static", "serving")
    ) -> NDArray[np.float64]:
        """Predicted value of every target with ``params`` (NaN for targets of other modes)."""
        return self.select(self.outputs(params, modes))

    def select(self, outputs: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pick every target's value from per-run ``outputs`` (leading axes kept)."""
        return np.asarray(outputs[..., self.target_output, self.target_run], dtype=np.float64)


def _running_cap(run: Run, accelerator: Accelerator) -> int | None:
    """As estimates do: the cap on running requests of the run's backend (None: KV limit)."""
    if not run.backend:
        return None
    return scheduler_defaults(run.backend, accelerator).max_running_requests


def _identical(run: Run) -> bool:
    return isinstance(run, StaticMeasurement) and run.identical_prompts


def _stacks(
    runs: Sequence[Run], models: Mapping[str, ModelShape], accelerator: Accelerator
) -> list[_Stack]:
    by_stack: dict[Hashable, dict[tuple[int, int], list[int]]] = {}
    for i, r in enumerate(runs):
        load = (with_harness_terms(r), engine_load_pattern(r), _running_cap(r, accelerator))
        key = (r.model, precision_of(r), r.tp, r.pp, mode_of(r), load, _identical(r))
        members = by_stack.setdefault(key, {})
        members.setdefault((r.input_tokens, r.output_tokens), []).append(i)
    out: list[_Stack] = []
    for members in by_stack.values():
        first = runs[next(iter(members.values()))[0]]
        idx = [i for rows in members.values() for i in rows]
        out.append(
            _Stack(
                model=models[first.model],
                precision=precision_of(first),
                parallelism=Parallelism(tp=first.tp, pp=first.pp),
                mode=mode_of(first),
                harness=with_harness_terms(first),
                load_pattern=engine_load_pattern(first),
                max_running_requests=_running_cap(first, accelerator),
                identical_sequences=_identical(first),
                input_tokens=tuple(k[0] for k in members),
                output_tokens=tuple(k[1] for k in members),
                batches=tuple(
                    np.array([batch_of(runs[i]) for i in rows], dtype=float)
                    for rows in members.values()
                ),
                runs=np.array(idx, dtype=np.intp),
            )
        )
    return out
