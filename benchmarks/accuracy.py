"""Calibration accuracy on held-out measured data: uncalibrated vs calibrated, side by side.

Run: ``.venv/bin/python benchmarks/accuracy.py`` (a few minutes on 2 cores). Writes
``benchmarks/results/accuracy.md``. Only the measured data in ``benchmarks/data`` (sources in
its README) is used, and every calibrated number is measured on data left out of the fit that
produced it.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.interpolate import LinearNDInterpolator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_data import (
    ARGONNE_TTFT,
    SERVING_FILES,
    accelerators,
    argonne_static,
    kernel_measurements,
    models,
    serving_runs,
)

from service.engine.calibration.domain import (
    doublings_below_above,
    extrapolation,
    extrapolation_amounts,
    model_kind,
)
from service.engine.calibration.end_to_end import RunPredictions, predict_runs
from service.engine.calibration.fit import CalibrationResult, fit
from service.engine.calibration.intervals import (
    DEFAULT_SPREADS,
    DIRECTIONS,
    TRANSFER_LOG_SIGMA,
    Interval,
    directed,
    extra_spread,
    prediction_interval,
    residual_quantiles,
)
from service.engine.calibration.kernel_models import KernelBatch, KernelMeasurement
from service.engine.calibration.measurements import (
    AttentionMeasurement,
    CollectiveMeasurement,
    GemmMeasurement,
    Measurement,
    ServingMeasurement,
    StaticMeasurement,
)
from service.engine.calibration.priors import prior_backend, with_engine_priors
from service.engine.calibration.quality import ErrorStats, error_stats
from service.engine.calibration.run_predictor import RunPredictor, batch_of, precision_of
from service.engine.efficiency import (
    DEFAULT_EFFICIENCY,
    EfficiencyParams,
    spec_sheet_efficiency,
    transfer_efficiency,
)
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.memory import weight_bytes_per_gpu
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

RESULT = Path(__file__).resolve().parent / "results" / "accuracy.md"
PRIOR = DEFAULT_EFFICIENCY
Run = StaticMeasurement | ServingMeasurement


def spec_sheet(accelerator: Accelerator, runs: Sequence[Run]) -> EfficiencyParams:
    """What ``calibration: none`` gives a request naming the runs' backend (one backend)."""
    backend = prior_backend([r.backend for r in runs])
    return with_engine_priors(spec_sheet_efficiency(accelerator), backend)


lines: list[str] = []


def out(text: str = "") -> None:
    """Print a line and keep it for the result file."""
    print(text, flush=True)
    lines.append(text)


def fmt(s: ErrorStats) -> str:
    """MdAPE / MAPE cell."""
    if s.n == 0:
        return "–"
    return f"{s.mdape_pct:5.1f} / {s.mape_pct:5.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Emit a markdown table."""
    out("| " + " | ".join(header) + " |")
    out("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        out("| " + " | ".join(row) + " |")
    out()


class Coverage:
    """Accumulates 80%-interval coverage of held-out predictions per label."""

    def __init__(self) -> None:
        self.hits: dict[str, list[bool]] = {}

    def add(
        self, label: str, result: CalibrationResult, pred: RunPredictions, *, transferred: bool
    ) -> None:
        """Score held-out predictions against the profile's intervals for each metric."""
        profile = result if not transferred else replace(result, transferred_from="h100-sxm")
        for metric in np.unique(pred.metric):
            mask = pred.metric == metric
            band = profile.interval(str(metric), pred.predicted[mask])
            inside = (pred.measured[mask] >= band.low) & (pred.measured[mask] <= band.high)
            self.hits.setdefault(f"{label} {metric}", []).extend(inside.tolist())

    def rows(self) -> list[list[str]]:
        """Table rows: label, n, coverage (each also recorded against the 70–90% target)."""
        for k, v in self.hits.items():
            check(f"coverage {k}, %", 100 * float(np.mean(v)), 70.0, 90.0)
        return [[k, str(len(v)), f"{100 * np.mean(v):.0f}%"] for k, v in self.hits.items()]


class GroupCoverage:
    """80%-interval coverage and calibrated-vs-spec-sheet verdict per held-out group.

    Every protocol reports each held-out group here; groups of at least ``MIN_GROUP`` points are
    checked against the issue's 72–88% target (not only pooled).
    """

    MIN_GROUP = 20

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, int, float]] = []
        # per row above: each point's log distance from its band's centre, in band half-widths
        # (inside the band where at most 1)
        self.positions: list[NDArray[np.float64]] = []
        self.shapes: dict[str, ModelShape] = {}
        # serving run → the requests its engine runs at once on the H100 (set by main)
        self.running: dict[Run, float] = {}
        self.spreads: dict[tuple[str, str], list[float]] = {}
        # per (kind, metric): held-out log residuals, training in-domain residuals, doublings
        self.pooled: dict[tuple[str, str], tuple[list[np.ndarray], ...]] = {}
        # per metric: every held-out point's load (batch size or concurrency) and whether its
        # interval held the measurement
        self.by_load: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def add(
        self,
        protocol: str,
        group: str,
        result: CalibrationResult,
        pred: RunPredictions,
        runs: Sequence[Run],
        *,
        transferred: bool = False,
    ) -> None:
        """Score one held-out group's predictions against the profile's domain-aware intervals."""
        profile = result if not transferred else replace(result, transferred_from="h100-sxm")
        for metric in np.unique(pred.metric):
            mask = pred.metric == metric
            low = np.empty(int(mask.sum()))
            high = np.empty(int(mask.sum()))
            for k, (i, p) in enumerate(zip(pred.run[mask], pred.predicted[mask], strict=True)):
                run = runs[int(i)]
                amounts = run_extrapolation(
                    profile, run, self.shapes, running=self.running.get(run)
                )
                band = profile.interval(str(metric), np.array([p]), extrapolating=amounts)
                low[k], high[k] = band.low[0], band.high[0]
            band = Interval(low, high)
            inside = (pred.measured[mask] >= band.low) & (pred.measured[mask] <= band.high)
            centre, half = np.log(band.low * band.high) / 2, np.log(band.high / band.low) / 2
            self.positions.append((np.log(pred.measured[mask]) - centre) / half)
            self._record_spread(protocol, str(metric), profile, pred, mask, runs)
            by_load = self.by_load.setdefault(str(metric), ([], []))
            by_load[0].append(np.array([float(batch_of(runs[int(i)])) for i in pred.run[mask]]))
            by_load[1].append(inside)
            self.rows.append(
                (protocol, group, str(metric), int(inside.size), 100 * float(np.mean(inside)))
            )

    def _record_spread(
        self,
        protocol: str,
        metric: str,
        result: CalibrationResult,
        pred: RunPredictions,
        mask: np.ndarray,
        runs: Sequence[Run],
    ) -> None:
        """Keep the extra log-spread this held-out group needed beyond its fit's in-domain band."""
        kind = PROTOCOL_KIND.get(protocol)
        if kind is None or result.domain is None or int(mask.sum()) < 8:
            return
        if kind == "model" and runs[0].backend not in result.domain.backends:
            kind = "backend"  # fitted on other engines: a backend (and model) extrapolation
        elif kind == "model" and model_kind(self.shapes[runs[0].model]) not in {
            m.kind for m in result.domain.models
        }:
            kind = "model_kind"  # no fitted model of its kind (dense, MoE, MLA)
        r = np.log(pred.measured[mask] / pred.predicted[mask])
        if kind not in ("concurrency", "gpus"):
            self._keep_spread(kind, metric, result, r, np.ones(r.size))
            return
        chosen = [runs[int(i)] for i in pred.run[mask]]
        if kind == "gpus":
            dimension, values = "gpus", [float(x.tp * x.pp) for x in chosen]
        else:
            static = isinstance(chosen[0], StaticMeasurement)
            dimension = "batch_size" if static else "concurrency"
            values = [float(batch_of(x)) for x in chosen]
        for direction, far in zip(
            DIRECTIONS,
            doublings_below_above(result.domain, dimension, np.array(values)),
            strict=True,
        ):
            if np.any(far > 0):
                outside = far > 0
                kept = directed(kind, direction)
                self._keep_spread(kept, metric, result, r[outside], far[outside])

    def _keep_spread(
        self,
        kind: str,
        metric: str,
        result: CalibrationResult,
        r: np.ndarray,
        far: np.ndarray,
    ) -> None:
        """Record one group's held-out residuals of a kind (``far``: doublings outside)."""
        spread = extra_spread(residual_quantiles(r), result.quantiles(metric))
        self.spreads.setdefault((kind, metric), []).append(spread / float(np.median(far)))
        pooled = self.pooled.setdefault((kind, metric), ([], [], []))
        pooled[0].append(r)
        pooled[1].append(result.residuals.get(metric, np.array([])))
        pooled[2].append(far)

    def pooled_spread(self, kind: str, metric: str) -> float:
        """The spread of one kind as ``extrapolation_cv`` measures it inside a profile: from
        the held-out residuals of every group of the kind pooled into one band, against the
        pooled in-domain residuals of their training fits (per doubling: over the median
        doublings outside)."""
        outside, inside, far = (np.concatenate(part) for part in self.pooled[(kind, metric)])
        spread = extra_spread(residual_quantiles(outside), residual_quantiles(inside))
        return spread / float(np.median(far))

    def load_rows(self) -> list[list[str]]:
        """Coverage (n) per metric and load band, every protocol pooled."""
        rows = []
        for metric, (loads, hits) in self.by_load.items():
            load, hit = np.concatenate(loads), np.concatenate(hits)
            rows.append(
                [metric, *by_load(load, lambda s, hit=hit: f"{100 * np.mean(hit[s]):.0f}%")]
            )
        return rows

    def width_limit_rows(self) -> list[list[str]]:
        """How many checked groups one band scale could bring into 72–88%: as the service
        answers, with the best single scale per metric, the best per (protocol, metric), and
        the best per metric once each group's own median bias is removed."""
        checked = [
            (row, z)
            for row, z in zip(self.rows, self.positions, strict=True)
            if row[3] >= self.MIN_GROUP
        ]
        scales = np.arange(0.2, 4.0, 0.01)

        def in_range(zs: Sequence[NDArray[np.float64]], scale: float) -> int:
            return sum(72.0 <= 100 * float(np.mean(np.abs(z) <= scale)) <= 88.0 for z in zs)

        def best(by: Callable[[tuple[str, str, str, int, float]], str], debias: bool) -> list[str]:
            cells: dict[str, list[NDArray[np.float64]]] = {}
            for row, z in checked:
                cells.setdefault(by(row), []).append(z - np.median(z) if debias else z)
            total, picked = 0, []
            for key, zs in sorted(cells.items()):
                counts = [in_range(zs, float(s)) for s in scales]
                top = int(np.argmax(counts))
                total += counts[top]
                picked.append(f"{key} × {scales[top]:.2f}")
            return [str(total), "; ".join(picked)]

        def per_metric(row: tuple[str, str, str, int, float]) -> str:
            return row[2]

        def per_protocol(row: tuple[str, str, str, int, float]) -> str:
            return f"{row[0]} · {row[2]}"

        return [
            ["as answered (scale 1)", str(in_range([z for _, z in checked], 1.0)), "–"],
            ["one scale per metric", *best(per_metric, False)],
            ["one scale per (protocol, metric)", *best(per_protocol, False)],
            ["each group's bias removed, one scale per metric", *best(per_metric, True)],
            ["each group's bias removed, one per (protocol, metric)", *best(per_protocol, True)],
        ]

    def table_rows(self) -> list[list[str]]:
        """Rows of every group; groups of ``MIN_GROUP`` points or more checked (72–88%)."""
        rows = []
        for protocol, group, metric, n, pct in self.rows:
            counted = n >= self.MIN_GROUP
            if counted:
                check(f"group coverage {protocol} · {group} {metric}, %", pct, 72.0, 88.0)
            verdict = ("met" if 72.0 <= pct <= 88.0 else "**missed**") if counted else "n < 20"
            rows.append([protocol, group, metric, str(n), f"{pct:.0f}%", verdict])
        return rows


# Which extrapolation kind each issue-11 protocol enacts (intervals.DEFAULT_SPREADS).
PROTOCOL_KIND = {
    "static vllm": "model",
    "static trtllm": "model",
    "serving vllm": "gpus",
    "serving sglang": "gpus",
    "serving trtllm": "gpus",
    "leave-model-out": "model",
    "concurrency fit ≤ 32 → predict ≥ 64": "concurrency",
    "concurrency fit ≥ 64 → predict ≤ 32": "concurrency",
    "serving → static": "mode",
    "static → serving": "mode",
    "transfer": "accelerator",
}


def run_extrapolation(
    result: CalibrationResult,
    run: Run,
    shapes: dict[str, ModelShape],
    prefill_only: bool = False,
    running: float | None = None,
) -> dict[str, object]:
    """How a held-out run lies outside the profile's domain (kind → amount), as the service does
    (``prefill_only`` for a static batch's TTFT). ``running``: the requests its engine runs at
    once (``RunPredictor.running_batches``), the load the service checks; default the run's
    batch or concurrency."""
    if result.domain is None:
        return {}
    mode = "static" if isinstance(run, StaticMeasurement) else "serving"
    request = {
        "mode": mode,
        "batch_sizes": float(batch_of(run)) if running is None else running,
        "input_tokens": float(run.input_tokens),
        "output_tokens": float(run.output_tokens),
        "gpus": float(run.tp * run.pp),
    }
    found = extrapolation(
        result.domain,
        model=shapes[run.model],
        accelerator=result.domain.accelerator,
        weights_dtype=run.weights_dtype,
        backend=run.backend,
        **request,  # type: ignore[arg-type]
    )
    return extrapolation_amounts(
        result.domain,
        found,
        prefill_only=prefill_only,
        **request,  # type: ignore[arg-type]
    )


def versus(after: ErrorStats, before: ErrorStats) -> str:
    """Calibrated cell; bold with FAIL when its median APE is worse than the spec sheet's."""
    cell = fmt(after)
    if after.n and before.n and after.mdape_pct > before.mdape_pct:
        FAILURES.append(cell)
        return f"**{cell} FAIL**"
    return cell


def by_load(load: NDArray[np.float64], cell: Callable[[NDArray[np.bool_]], str]) -> list[str]:
    """One cell per LOAD_BANDS band: ``cell`` of the band's points and their count, or – when
    none."""
    cells = []
    for _, low, high in LOAD_BANDS:
        sel = (load >= low) & (load <= high)
        cells.append(f"{cell(sel)} ({int(sel.sum())})" if sel.any() else "–")
    return cells


Ratios = NDArray[np.float64]  # predicted / measured, one per held-out run


class LoadBias:
    """Median predicted / measured by load band, spec sheet and calibrated, of the held-out
    groups where calibrated is worse than the spec sheet (the FAIL cells)."""

    def __init__(self) -> None:
        self.groups: list[tuple[str, Ratios, Ratios, Ratios]] = []

    def add(
        self,
        name: str,
        runs: Sequence[Run],
        calibrated: RunPredictions,
        spec: RunPredictions,
        mask: NDArray[np.bool_],
    ) -> None:
        """Keep one FAIL cell's loads and both ratios (``mask`` picks its metric's rows)."""
        load = np.array([float(batch_of(runs[i])) for i in calibrated.run[mask]])
        measured = calibrated.measured[mask]
        self.groups.append(
            (name, load, spec.predicted[mask] / measured, calibrated.predicted[mask] / measured)
        )

    def rows(self) -> list[list[str]]:
        """Per FAIL cell and load band: spec / calibrated median ratio (runs)."""
        return [
            [
                name,
                *by_load(
                    load,
                    lambda s, spec=spec, cal=calibrated: (
                        f"{np.median(spec[s]):.2f} / {np.median(cal[s]):.2f}"
                    ),
                ),
            ]
            for name, load, spec, calibrated in self.groups
        ]


COVERAGE = Coverage()
GROUPS = GroupCoverage()
LOSSES = LoadBias()
FAILURES: list[str] = []
CHECKS: list[tuple[str, float, float, float, int]] = []  # (what, value, low, high, decimals)


def check(what: str, value: float, low: float, high: float, decimals: int = 1) -> None:
    """Record a number against its target range for the summary table (shown with
    ``decimals`` places, enough to tell a miss from a hit)."""
    CHECKS.append((what, value, low, high, decimals))


# --------------------------------------------------------------------------------------------
def gemm_section(h100: Accelerator) -> None:
    """GEMM table: fit on half the (n, k) shapes, test on the other half."""
    gemms = [m for m in kernel_measurements(("gemm.csv",)) if isinstance(m, GemmMeasurement)]
    shapes = sorted({(m.n, m.k) for m in gemms})
    order = np.random.default_rng(0).permutation(len(shapes))
    train_shapes = {shapes[i] for i in order[: len(shapes) // 2]}
    train: list[Measurement] = [m for m in gemms if (m.n, m.k) in train_shapes]
    test = [m for m in gemms if (m.n, m.k) not in train_shapes]
    result = fit(train, h100, {}, cross_validate=False)
    out("## 1. H100 GEMM table — fit on half the (n, k) shapes, test on the other half")
    out()
    out(
        f"{len(train)} training rows ({len(train_shapes)} weight shapes), {len(test)} test rows "
        f"({len(shapes) - len(train_shapes)} unseen weight shapes; every m from 1 to 16384). "
        "Cells: MdAPE / MAPE in %. Target: calibrated MdAPE ≤ 10%."
    )
    out()
    rows = []
    train_batch = KernelBatch(train)
    train_log_ratio = np.log(
        train_batch.measured_ms / train_batch.predict_ms(h100, result.efficiency)
    )
    for dtype in ("bf16", "fp8", "all"):
        sel = [m for m in test if dtype in ("all", m.dtype)]
        batch = KernelBatch(sel)
        before = error_stats(batch.predict_ms(h100, PRIOR), batch.measured_ms)
        fitted = batch.predict_ms(h100, result.efficiency)
        after = error_stats(fitted, batch.measured_ms)
        corrected = fitted * np.exp(_interpolated_log_ratio(train, train_log_ratio, sel))
        table_corrected = error_stats(corrected, batch.measured_ms)
        rows.append([dtype, str(before.n), fmt(before), fmt(after), fmt(table_corrected)])
        if dtype == "all":
            check("GEMM held-out shapes, MdAPE %", after.mdape_pct, 0.0, 10.0)
    table(
        [
            "dtype",
            "n test",
            "uncalibrated",
            "calibrated (held-out shapes)",
            "calibrated × interpolated table ratio",
        ],
        rows,
    )
    out(
        "Last column: the parametric fit times the training shapes' measured / fitted ratio, "
        "interpolated linearly in log2 m and by inverse squared distance over the 4 nearest "
        "training shapes in (log2 n, log2 k), the way measured-database tools interpolate a "
        "kernel table. It wins on held-out kernel shapes; applied to estimates it did not win "
        "end to end (see the narrative at the end), so estimates use the parametric model."
    )
    fitted = {k: v for k, v in result.parameters.items() if k.startswith("gemm_")}
    out(
        "Fitted GEMM parameters (training half): "
        + ", ".join(f"`{k}`={v:.3g}" for k, v in fitted.items())
    )
    out()


def _interpolated_log_ratio(
    train: Sequence[GemmMeasurement], log_ratio: np.ndarray, test: Sequence[GemmMeasurement]
) -> np.ndarray:
    """Per test GEMM, the training table's log(measured / fitted) at its (m, n, k)."""
    by_shape: dict[tuple[str, int, int], dict[int, list[float]]] = {}
    for g, r in zip(train, log_ratio, strict=True):
        by_shape.setdefault((g.dtype, g.n, g.k), {}).setdefault(g.m, []).append(float(r))
    out = np.zeros(len(test))
    for i, g in enumerate(test):
        shapes = [(n, k, rows) for (d, n, k), rows in by_shape.items() if d == g.dtype]
        dist = np.array([np.hypot(np.log2(n / g.n), np.log2(k / g.k)) for n, k, _ in shapes])
        nearest = np.argsort(dist, kind="stable")[:4]
        values = []
        for j in nearest:
            rows = shapes[int(j)][2]
            ms = sorted(rows)
            values.append(
                np.interp(np.log2(g.m), np.log2(ms), [float(np.mean(rows[m])) for m in ms])
            )
        weights = 1.0 / np.maximum(dist[nearest], 1e-12) ** 2
        out[i] = float(np.sum(weights * np.array(values)) / np.sum(weights))
    return out


def kernel_cv_section(h100: Accelerator) -> None:
    """Attention and NCCL tables: 5-fold held-out error from the fit's own cross-validation."""
    data = kernel_measurements(("decode_attention.csv", "prefill_attention.csv", "nccl.csv"))
    result = fit(data, h100, {}, cross_validate=True)
    out("## 2. Other H100 kernel tables — 5-fold cross-validation")
    out()
    rows = []
    for key, q in result.quality.items():
        assert q.held_out is not None
        rows.append([key, str(q.before.n), fmt(q.before), fmt(q.after), fmt(q.held_out)])
    table(["kernel", "n", "uncalibrated", "calibrated (in-sample)", "calibrated (held-out)"], rows)


# --------------------------------------------------------------------------------------------
# Section 2a: the attention and NCCL tables interpolated, against the parametric fit, on whole
# held-out shapes (issue 11: "let the held-out numbers decide, per kernel kind").
Coords = tuple[tuple[object, ...], tuple[float, ...], tuple[float, ...]]  # key, shape, size


def _table_log_ratio(
    train: Sequence[Coords],
    train_log_ratio: np.ndarray,
    test: Sequence[Coords],
    neighbours: int = 4,
) -> np.ndarray:
    """Per test row, the training table's log(measured / fitted) at its coordinates; NaN outside.

    Section 1's construction generalised: rows match on the key (KV dtype, collective); within
    each training shape (heads, GPUs) the ratio is linear in the log2 size coordinates (batch,
    length, bytes: ``np.interp`` in 1-D, Delaunay triangles in 2-D), averaged by inverse
    squared distance in log2 shape over the ``neighbours`` nearest training shapes measured at
    that size. Outside the table (a shape coordinate beyond the training shapes' range, or a
    size no training shape covers) the value is NaN: the caller falls back to the fit.
    """
    cells: dict[tuple[tuple[object, ...], tuple[float, ...]], dict[tuple[float, ...], list]] = {}
    for (key, shape, size), r in zip(train, train_log_ratio, strict=True):
        cells.setdefault((key, shape), {}).setdefault(size, []).append(float(r))
    groups = list(cells)
    sizes = np.array([size for _, _, size in test], dtype=float)
    values = np.full((len(groups), len(test)), np.nan)
    for g, group in enumerate(groups):
        points = np.array(list(cells[group]), dtype=float)
        mean = np.array([np.mean(v) for v in cells[group].values()])
        if points.shape[1] == 1:
            order = np.argsort(points[:, 0])
            x = points[order, 0]
            values[g] = np.interp(sizes[:, 0], x, mean[order], left=np.nan, right=np.nan)
        else:
            values[g] = LinearNDInterpolator(points, mean)(sizes)
    out = np.full(len(test), np.nan)
    for t, (key, shape, _) in enumerate(test):
        same = [g for g, (k, _) in enumerate(groups) if k == key]
        shapes = np.array([groups[g][1] for g in same], dtype=float)
        if not same or np.any(shape < shapes.min(0)) or np.any(shape > shapes.max(0)):
            continue
        covered = [i for i, g in enumerate(same) if np.isfinite(values[g, t])]
        if not covered:
            continue
        dist = np.linalg.norm(shapes[covered] - np.array(shape), axis=1)
        nearest = np.argsort(dist, kind="stable")[:neighbours]
        weights = 1.0 / np.maximum(dist[nearest], 1e-12) ** 2
        picked = values[[same[covered[int(j)]] for j in nearest], t]
        out[t] = float(np.sum(weights * picked) / np.sum(weights))
    return out


def _attention_coords(m: AttentionMeasurement) -> Coords:
    return (
        (m.phase, m.kv_dtype),
        (np.log2(m.num_heads), np.log2(m.num_kv_heads), np.log2(m.head_dim)),
        (np.log2(m.batch_size), np.log2(m.context_tokens)),
    )


def _collective_coords(m: CollectiveMeasurement) -> Coords:
    return ((m.op,), (np.log2(m.num_gpus),), (np.log2(m.message_bytes),))


TableCells = dict[str, tuple[ErrorStats, ErrorStats, ErrorStats, int]]


def _table_protocol(
    h100: Accelerator,
    train: Sequence[KernelMeasurement],
    test: Sequence[KernelMeasurement],
    coords: Callable[[Any], Coords],
    label: Callable[[Any], str],
) -> TableCells:
    """Per label: uncalibrated, calibrated, calibrated × table ratio on ``test``; rows outside."""
    result = fit(list(train), h100, {}, cross_validate=False)
    train_batch = KernelBatch(train)
    log_ratio = np.log(train_batch.measured_ms / train_batch.predict_ms(h100, result.efficiency))
    cells: TableCells = {}
    for name in dict.fromkeys(label(m) for m in test):
        sel = [m for m in test if label(m) == name]
        batch = KernelBatch(sel)
        fitted = batch.predict_ms(h100, result.efficiency)
        table_log = _table_log_ratio(
            [coords(m) for m in train], log_ratio, [coords(m) for m in sel]
        )
        outside = np.isnan(table_log)
        # Outside the table the ratio is 1: the fitted curve, not the edge's local residual.
        corrected = fitted * np.exp(np.where(outside, 0.0, table_log))
        cells[name] = (
            error_stats(batch.predict_ms(h100, PRIOR), batch.measured_ms),
            error_stats(fitted, batch.measured_ms),
            error_stats(corrected, batch.measured_ms),
            int(np.count_nonzero(outside)),
        )
    return cells


def _every_other(values: set[float]) -> set[float]:
    """The 2nd, 4th, ... of the sorted values (the ends stay in training: held out inside)."""
    return set(sorted(values)[1::2])


def _winner(rows: Sequence[tuple[ErrorStats, ErrorStats, ErrorStats, int]]) -> str:
    """Which of parametric and table wins on every protocol in both MdAPE and MAPE."""
    table_wins = [t.mdape_pct < c.mdape_pct and t.mape_pct < c.mape_pct for _, c, t, _ in rows]
    fit_wins = [c.mdape_pct <= t.mdape_pct and c.mape_pct <= t.mape_pct for _, c, t, _ in rows]
    if all(table_wins):
        return "the interpolated table (lower MdAPE and MAPE on every protocol)"
    if all(fit_wins):
        return "the parametric fit (the table lowers neither MdAPE nor MAPE on any protocol)"
    return "neither clearly (the protocols or the two statistics disagree)"


def kernel_table_section(h100: Accelerator) -> None:
    """Attention and NCCL: the interpolated table against the parametric fit on held-out shapes."""
    attention = [
        m
        for m in kernel_measurements(("decode_attention.csv", "prefill_attention.csv"))
        if isinstance(m, AttentionMeasurement)
    ]
    collectives = [
        m for m in kernel_measurements(("nccl.csv",)) if isinstance(m, CollectiveMeasurement)
    ]
    configs = sorted({(m.num_heads, m.num_kv_heads) for m in attention})
    order = np.random.default_rng(0).permutation(len(configs))
    held_configs = {configs[i] for i in order[len(configs) // 2 :]}
    held_lengths = {
        phase: _every_other({m.context_tokens for m in attention if m.phase == phase})
        for phase in ("decode", "prefill")
    }
    held_bytes = _every_other({m.message_bytes for m in collectives})
    attention_protocols = {
        f"head configurations ({len(held_configs)} of {len(configs)} (heads, KV heads) held "
        "out in both tables)": lambda m: (m.num_heads, m.num_kv_heads) in held_configs,
        "every other length (decode context, prefill sequence) held out": lambda m: (
            m.context_tokens in held_lengths[m.phase]
        ),
    }
    collective_protocols = {
        "every other message size held out": lambda m: m.message_bytes in held_bytes,
        "4 GPUs held out (fit and table on 2 and 8)": lambda m: m.num_gpus == 4,
    }
    results: dict[str, list[tuple[str, tuple[ErrorStats, ErrorStats, ErrorStats, int]]]] = {}
    for name, held in attention_protocols.items():
        train = [m for m in attention if not held(m)]
        test = [m for m in attention if held(m)]
        cells = _table_protocol(
            h100, train, test, _attention_coords, lambda m: f"attention_{m.phase}"
        )
        for kind, cell in cells.items():
            results.setdefault(kind, []).append((name, cell))
    for name, held in collective_protocols.items():
        train = [m for m in collectives if not held(m)]
        test = [m for m in collectives if held(m)]
        cells = _table_protocol(h100, train, test, _collective_coords, lambda m: "collective")
        results.setdefault("collective", []).extend((name, c) for c in cells.values())
    out("## 2a. Attention and NCCL tables — interpolated table vs parametric fit, held-out shapes")
    out()
    out(
        "Whole shapes held out, as section 1 holds out weight shapes: the same (heads, KV heads) "
        f"configurations in the decode and prefill tables (held out: "
        f"{', '.join(f'{h}/{kv}' for h, kv in sorted(held_configs))}; head_dim is 128 "
        "throughout), or every other length; for NCCL every other message size, or every "
        "collective on 4 GPUs. One fit per protocol on the rest (attention: both tables "
        "together, as a profile fits them). Last column: the fit times the training table's "
        "measured / fitted ratio, linear in log2 of the size coordinates (attention: batch and "
        "length, on Delaunay triangles; NCCL: bytes) within each training shape, averaged by "
        "inverse squared distance over the 4 nearest training shapes in log2 (heads, KV heads, "
        "head_dim) or log2 GPUs with the same KV dtype or operation. Outside the table (a shape "
        "coordinate beyond the training shapes' range, or a size none of them covers) the ratio "
        "is 1: the fitted curve carries the physics there, an edge residual is a local "
        "measurement. Cells: MdAPE / MAPE in %."
    )
    out()
    for kind, rows in results.items():
        out(f"**{kind}**")
        out()
        table(
            [
                "protocol",
                "n test",
                "outside table",
                "uncalibrated",
                "calibrated",
                "calibrated × interpolated table ratio",
            ],
            [
                [name, str(b.n), str(outside), fmt(b), fmt(c), fmt(t)]
                for name, (b, c, t, outside) in rows
            ],
        )
        out(f"Wins on held-out {kind} shapes: {_winner([cell for _, cell in rows])}.")
        out()
    out(
        "Applied in estimates, neither table won end to end (narrative item (18)), so estimates "
        "keep the parametric attention and collective models."
    )
    out()


# --------------------------------------------------------------------------------------------
def _heldout_rows(
    folds: Sequence[tuple[str, Sequence[Run], Sequence[Run]]],
    accelerator: Accelerator,
    shapes: dict[str, ModelShape],
    kernels: list[Measurement],
    metrics: Sequence[str],
    coverage_label: str,
) -> tuple[list[list[str]], dict[str, tuple[list[float], list[float], list[float]]]]:
    """Fit on each fold's training runs (+ kernels), predict its held-out runs."""
    rows: list[list[str]] = []
    pooled: dict[str, tuple[list[float], list[float], list[float]]] = {
        m: ([], [], []) for m in metrics
    }
    for name, train, test in folds:
        result = fit([*kernels, *train], accelerator, shapes, cross_validate=True)
        calibrated = result.predict(test, accelerator, shapes)
        uncalibrated = predict_runs(test, accelerator, shapes, spec_sheet(accelerator, test))
        COVERAGE.add(coverage_label, result, calibrated, transferred=False)
        GROUPS.add(coverage_label, name, result, calibrated, test)
        row = [name, str(len(test))]
        for metric in metrics:
            mask = calibrated.metric == metric
            before = error_stats(uncalibrated.predicted[mask], uncalibrated.measured[mask])
            after = error_stats(calibrated.predicted[mask], calibrated.measured[mask])
            cell = versus(after, before)
            row += [fmt(before), cell]
            if cell.endswith("FAIL**"):
                where = name if coverage_label in name else f"{coverage_label} · {name}"
                LOSSES.add(f"{where} · {metric}", test, calibrated, uncalibrated, mask)
            pooled[metric][0].extend(uncalibrated.predicted[mask].tolist())
            pooled[metric][1].extend(calibrated.predicted[mask].tolist())
            pooled[metric][2].extend(calibrated.measured[mask].tolist())
        rows.append(row)
    return rows, pooled


TARGETS = {"static.latency_ms": 12.0, "serving.tpot_ms": 10.0, "serving.ttft_ms": 25.0}


def _pooled_row(
    name: str,
    pooled: dict[str, tuple[list[float], list[float], list[float]]],
    targets: dict[str, float] | None = None,
) -> list[str]:
    n = len(next(iter(pooled.values()))[2])
    row = [f"**{name}**", str(n)]
    limits = TARGETS if targets is None else targets
    for metric, (before, after, measured) in pooled.items():
        calibrated = error_stats(after, measured)
        row += [f"**{fmt(error_stats(before, measured))}**", f"**{fmt(calibrated)}**"]
        if metric in limits:
            check(f"{name} {metric}, MdAPE %", calibrated.mdape_pct, 0.0, limits[metric])
    return row


def static_section(
    h100: Accelerator, shapes: dict[str, ModelShape], aliases: dict[str, str]
) -> None:
    """Argonne static batches on H100: leave one model out, per engine."""
    runs, skipped = argonne_static("h100-sxm", aliases)
    kernels = kernel_measurements()
    out("## 3. Static batches on H100 (Argonne vLLM and TensorRT-LLM, fp16) — leave one model out")
    out()
    out(
        "Whole-batch latency (prefill of B·L tokens + L decode steps, input = output = L). "
        "Each engine gets its own profile: the H100 kernel tables plus the static runs of the "
        "other models of that engine; the held-out model's runs are predicted. Cells: MdAPE / "
        "MAPE in %. Target: calibrated MdAPE ≤ 12%. The uncalibrated column (spec-sheet "
        "roofline with the engine's priors) is issue 3's baseline."
    )
    out()
    out(
        "Model names map to catalog ids through each catalog model's `hf_repo`. Not in the "
        "catalog, hence left out of fit and test: " + ", ".join(f"`{s}`" for s in skipped) + ". "
        "(Qwen2-7B/72B share most of Qwen2.5's shape, but the catalog does not state that, so "
        "they are not substituted.) llama.cpp rows are excluded (other Throughput semantics)."
    )
    out()
    rows: list[list[str]] = []
    for backend in ("vllm", "trtllm"):
        mine = [r for r in runs if r.backend == backend]
        names = sorted({r.model for r in mine})
        folds = [
            (
                f"{backend} · {name}",
                [r for r in mine if r.model != name],
                [r for r in mine if r.model == name],
            )
            for name in names
        ]
        got, pooled = _heldout_rows(
            folds, h100, shapes, kernels, ["static.latency_ms"], f"static {backend}"
        )
        rows += got
        rows.append(_pooled_row(f"{backend} · all held-out", pooled))
    table(["engine · held-out model", "runs", "uncalibrated", "calibrated"], rows)


def serving_section(
    h100: Accelerator, shapes: dict[str, ModelShape], aliases: dict[str, str]
) -> None:
    """Qwen3-32B serving on H100: hold out each (backend, tp) group."""
    runs = serving_runs(aliases)
    kernels = kernel_measurements()
    out("## 4. Serving Qwen3-32B on H100 — hold out each (backend, tp) group")
    out()
    out(
        "Each backend gets its own profile: kernel tables plus that backend's runs at the other "
        "tensor-parallel sizes; the held-out group is predicted. Cells: MdAPE / MAPE in %. "
        "Targets: TPOT MdAPE ≤ 10%, TTFT MdAPE ≤ 25%."
    )
    out()
    rows: list[list[str]] = []
    for backend in ("vllm", "sglang", "trtllm"):
        mine = [r for r in runs if r.backend == backend]
        tps = sorted({r.tp for r in mine})
        folds = [
            (
                f"{backend} · tp{tp}",
                [r for r in mine if r.tp != tp],
                [r for r in mine if r.tp == tp],
            )
            for tp in tps
        ]
        got, pooled = _heldout_rows(
            folds,
            h100,
            shapes,
            kernels,
            ["serving.ttft_ms", "serving.tpot_ms"],
            f"serving {backend}",
        )
        rows += got
        rows.append(_pooled_row(f"{backend} · all held-out", pooled))
    table(
        ["backend · held-out tp", "runs", "TTFT uncal.", "TTFT cal.", "TPOT uncal.", "TPOT cal."],
        rows,
    )


def _a100_memory_evidence(
    accs: dict[str, Accelerator], shapes: dict[str, ModelShape], aliases: dict[str, str]
) -> None:
    """Show from the Argonne rows which A100 SXM4 part they ran on (40 vs 80 GB)."""
    h100_runs, _ = argonne_static("h100-sxm", aliases)
    a100_runs, _ = argonne_static("a100-sxm", aliases)

    def key(r: StaticMeasurement) -> tuple[object, ...]:
        return (
            r.backend,
            r.model,
            r.weights_dtype,
            r.tp,
            r.batch_size,
            r.input_tokens,
            r.output_tokens,
        )

    h100_ms = {key(r): r.whole_batch_latency_ms() for r in h100_runs}
    pairs = [(r, r.whole_batch_latency_ms(), h100_ms.get(key(r))) for r in a100_runs]
    matched = [(r, a, h) for r, a, h in pairs if a and h]
    h100_bw = accs["h100-sxm"].memory_bandwidth_gb_s
    bw = {t: accs[t].memory_bandwidth_gb_s for t in ("a100-sxm-80gb", "a100-sxm-40gb")}
    out("**Which A100 part.** The source does not name the A100 memory size; the data does.")
    out()
    out(
        "1. At batch 1 and tp 1 decode streams the weights, so the A100/H100 latency ratio is "
        "capped by the HBM bandwidth ratio: "
        + ", ".join(f"{h100_bw:g}/{v:g} = {h100_bw / v:.2f} ({t})" for t, v in bw.items())
        + ". Measured ratios (matched model, precision, lengths):"
    )
    out()
    rows: list[list[str]] = []
    for backend in ("trtllm", "vllm"):
        ratios = [
            a / h for r, a, h in matched if r.backend == backend and r.batch_size == 1 and r.tp == 1
        ]
        if ratios:
            above = sum(x > h100_bw / bw["a100-sxm-80gb"] for x in ratios)
            rows.append(
                [
                    backend,
                    str(len(ratios)),
                    f"{min(ratios):.2f}–{max(ratios):.2f}",
                    f"{np.median(ratios):.2f}",
                    f"{above}/{len(ratios)}",
                ]
            )
    table(
        ["engine", "B=1, tp1 pairs", "A100/H100 latency", "median", "above the 80 GB bound"], rows
    )
    out(
        "2. KV-cache room per GPU for the largest tp4 model: weights per GPU vs memory "
        "(× 0.9 usable, vLLM's default gpu_memory_utilization), and the A100/H100 latency ratio "
        "by tokens held (batch × (input + output)):"
    )
    out()
    big = [(r, a, h) for r, a, h in matched if r.tp == 4]
    if big:
        # The most weight bytes per GPU (ties broken by id: the section is the same every run).
        def tp4_weight_bytes(m: str) -> float:
            return weight_bytes_per_gpu(shapes[m], Precision(), Parallelism(tp=4)).total_bytes

        model = max(sorted({r.model for r, _, _ in big}), key=tp4_weight_bytes)
        weights_gb = tp4_weight_bytes(model) / 1e9
        room = {t: 0.9 * accs[t].memory_gb - weights_gb for t in bw}
        out(
            f"   {model}: {weights_gb:.1f} GB of bf16 weights per GPU leaves "
            + ", ".join(f"{v:.1f} GB ({t})" for t, v in room.items())
            + " for KV cache and activations."
        )
        out()
        rows = []
        for backend in ("trtllm", "vllm"):
            mine = [
                (r.batch_size * (r.input_tokens + r.output_tokens), a / h)
                for r, a, h in big
                if r.model == model and r.backend == backend
            ]
            for tokens in sorted({t for t, _ in mine}):
                ratios = [x for t, x in mine if t == tokens]
                rows.append(
                    [
                        backend,
                        f"{tokens:,}",
                        str(len(ratios)),
                        f"{min(ratios):.2f}–{max(ratios):.2f}",
                    ]
                )
        table(["engine", "tokens held", "runs", "A100/H100 latency"], rows)
    out(
        "Ratios above the 80 GB bandwidth bound, and the jump once the tokens held outgrow a "
        "few GB of KV room (impossible on 80 GB), both point to the 40 GB part, so "
        "`a100-sxm-40gb` is the target below; `a100-sxm-80gb` is kept as a sensitivity row "
        "(not checked against the target)."
    )
    out()


def transfer_section(
    accs: dict[str, Accelerator], shapes: dict[str, ModelShape], aliases: dict[str, str]
) -> None:
    """Fit on H100 (kernels + every H100 static run of the engine), predict A100 and GH200."""
    h100 = accs["h100-sxm"]
    kernels = kernel_measurements()
    h100_runs, _ = argonne_static("h100-sxm", aliases)
    out("## 5. Transfer — fit on H100, predict A100 and GH200 static batches")
    out()
    out(
        "Profile per engine from the H100 kernel tables and all H100 static runs of that engine, "
        "applied unchanged to the target's spec sheet (`transferred_from = h100-sxm`). "
        "GH200 uses the catalog's HBM3e figures. Target: calibrated MdAPE ≤ 20%."
    )
    out()
    _a100_memory_evidence(accs, shapes, aliases)
    rows: list[list[str]] = []
    for backend in ("vllm", "trtllm"):
        train = [r for r in h100_runs if r.backend == backend]
        result = fit([*kernels, *train], h100, shapes, cross_validate=True)
        for label, target, counted in (
            ("a100-sxm", "a100-sxm-40gb", True),
            ("a100-sxm", "a100-sxm-80gb", False),
            ("gh200", "gh200", True),
        ):
            runs, _ = argonne_static(label, aliases)
            mine = [r for r in runs if r.backend == backend]
            if not mine:
                continue
            acc = accs[target]
            # As the service does: fitted efficiencies scaled by the two chips' measured
            # matmul fractions; the uncalibrated column uses the target's own spec-sheet prior.
            moved = replace(
                result.transfer_to(acc),
                efficiency=transfer_efficiency(result.efficiency, h100, acc),
            )
            calibrated = moved.predict(mine, acc, shapes)
            uncalibrated = predict_runs(mine, acc, shapes, spec_sheet(acc, mine))
            after = error_stats(calibrated.predicted, calibrated.measured)
            if counted:
                COVERAGE.add(f"transfer {backend} → {target}", moved, calibrated, transferred=True)
                GROUPS.add("transfer", f"{backend} → {target}", moved, calibrated, mine)
                check(f"transfer {backend} → {target}, MdAPE %", after.mdape_pct, 0.0, 20.0)
            name = f"{backend} → {target}" + ("" if counted else " (sensitivity, not the target)")
            rows.append(
                [
                    name,
                    str(len(mine)),
                    ", ".join(sorted({r.model for r in mine})),
                    fmt(error_stats(uncalibrated.predicted, uncalibrated.measured)),
                    fmt(after),
                ]
            )
    table(
        ["engine → accelerator", "runs", "models", "uncalibrated", "calibrated (transferred)"], rows
    )


def coverage_section() -> None:
    """Coverage of the 80% intervals on every held-out prediction above."""
    out("## 6. Coverage of the 80% prediction intervals on held-out data")
    out()
    out(
        "Intervals come from each training fit's own cross-validated residuals (nested: the "
        "held-out group never enters them), widened for transfer as documented in "
        "`service/engine/calibration/intervals.py`. Target: 70–90%."
    )
    out()
    table(["held-out set · metric", "n", "coverage"], COVERAGE.rows())
    transfer = [hit for k, v in COVERAGE.hits.items() if k.startswith("transfer") for hit in v]
    if transfer:
        out(
            f"All transfer rows together (not a target row, for context): {len(transfer)} runs, "
            f"{100 * np.mean(transfer):.0f}% inside. The transfer widening is one log-spread, "
            f"{TRANSFER_LOG_SIGMA:.3f}, from these four transfers' held-out residuals pooled "
            "into one band (section 11a), so this coverage is not independent of it. One spread "
            "cannot know a "
            "target's own systematic transfer error, so per target the coverage is high where "
            "the H100 profile transfers well and low where it does not; pooled over the targets "
            "it is what one spread can be checked on. The widening is combined with the H100 "
            "residual band in quadrature (independent errors add variances). Until an earlier "
            "revision it was added to each quantile linearly, which over-widened (pooled 88%, "
            "per target 95 / 98 / 78 / 98%); the combination was corrected after seeing those "
            "figures."
        )
    out()


def timing_section(
    accs: dict[str, Accelerator], shapes: dict[str, ModelShape], aliases: dict[str, str]
) -> None:
    """Wall time of fits: the full serving CSV, and 10,000 mixed measurements."""
    h100 = accs["h100-sxm"]
    serving: list[Measurement] = list(serving_runs(aliases))
    data: list[Measurement] = kernel_measurements()
    static, _ = argonne_static("h100-sxm", aliases)
    data += [r for r in static if r.backend == "vllm"]
    data += [r for r in serving_runs(aliases) if r.backend == "vllm"]
    gemms = [m for m in data if isinstance(m, GemmMeasurement)]
    data += gemms[: 10_000 - len(data)]
    out("## 12. Fit time")
    out()
    out(
        "Best of 3 wall times of one `fit()` call on this machine (2 shared cores, other work "
        "running). Targets: full serving CSV with cross-validation < 10 s; 10,000 mixed "
        "measurements < 5 s without and < 20 s with cross-validation."
    )
    out()
    cases = (
        ("serving_qwen3_32b.csv (all backends)", serving, {True: 10.0}),
        ("10,000 mixed", data, {False: 5.0, True: 20.0}),
    )
    rows = []
    for label, measurements, targets in cases:
        kinds: dict[str, int] = {}
        for m in measurements:
            kinds[m.kind] = kinds.get(m.kind, 0) + 1
        for cv in (False, True):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                fit(measurements, h100, shapes, cross_validate=cv)
                best = min(best, time.perf_counter() - start)
            if cv in targets:
                what = f"fit time, {label}, {'with' if cv else 'without'} CV, s"
                check(what, best, 0.0, targets[cv])
            rows.append(
                [
                    label,
                    ", ".join(f"{k} {v}" for k, v in kinds.items()),
                    "yes" if cv else "no",
                    f"{best:.2f} s",
                ]
            )
    table(["measurements", "by kind", "cross-validation", "wall time"], rows)
    out(
        "The end-to-end stage predicts runs in one `estimate_stacked` pass per (model, precision, "
        "layout, mode) and builds the predictions' exact bilinear response to the overheads and "
        "queue terms from 4 (static) or 12 (serving) such passes; the fit and every "
        "cross-validation fold then run on arrays (`service/engine/calibration/response.py`)."
    )
    out()


# --------------------------------------------------------------------------------------------
# Protocols of issue 11 ("Benchmark and targets"): other models, other concurrency ranges, the
# other load pattern. Serving sets: Qwen3-32B (vLLM, SGLang, TensorRT-LLM), Llama-3.1-8B
# (TensorRT-LLM), gpt-oss-120b (vLLM; MoE, 4-bit expert weights run weight-only on H100).
SERVING_METRICS = ["serving.ttft_ms", "serving.tpot_ms"]
SERVING_HEADER = ["held-out group", "runs", "TTFT spec", "TTFT cal.", "TPOT spec", "TPOT cal."]


def _serving_protocol(
    title: str,
    folds: Sequence[tuple[str, Sequence[Run], Sequence[Run]]],
    h100: Accelerator,
    shapes: dict[str, ModelShape],
    label: str,
    targets: dict[str, float],
    metrics: Sequence[str] = SERVING_METRICS,
    header: Sequence[str] = SERVING_HEADER,
) -> None:
    kernels = kernel_measurements()
    rows, pooled = _heldout_rows(folds, h100, shapes, kernels, metrics, label)
    rows.append(_pooled_row(f"{title} · all held-out", pooled, targets))
    table(header, rows)


def _leave_model_out_folds(runs: list) -> list[tuple[str, list, list]]:
    """Per (model, backend): train on the other models of that backend (else of every backend)."""
    folds = []
    for model in sorted({r.model for r in runs}):
        for backend in sorted({r.backend for r in runs if r.model == model}):
            test = [r for r in runs if r.model == model and r.backend == backend]
            train = [r for r in runs if r.model != model and r.backend == backend]
            note = ""
            if not train:
                train = [r for r in runs if r.model != model]
                note = " (fit: other backends)"
            folds.append((f"{model} · {backend}{note}", train, test))
    return folds


def leave_model_out_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Serving: fit the other serving models (same backend where it has one), predict one."""
    out("## 7. Serving — leave one model out")
    out()
    out(
        "Per held-out (model, backend): the profile is fitted on the H100 kernel tables plus the "
        "serving runs of the other models with the same backend; SGLang has only Qwen3-32B, so "
        "its group is fitted on the other models' runs of every backend (a generic profile). "
        "Spec = spec-sheet roofline with the backend's engine priors (`calibration: none` naming "
        "that backend). Targets: pooled TPOT MdAPE ≤ 8%, "
        "TTFT ≤ 25%; a group where calibrated is worse than spec is bold with FAIL."
    )
    out()
    _serving_protocol(
        "leave-model-out",
        _leave_model_out_folds(runs),
        h100,
        shapes,
        "leave-model-out",
        {"serving.tpot_ms": 8.0, "serving.ttft_ms": 25.0},
    )


LOW_MAX, HIGH_MIN = 32, 64


def ttft_signature_section(runs: list) -> None:
    """Per serving data set: how much of its closed-loop TTFT follows the completion interval."""
    out("## 7a. Closed-loop TTFT signature of each serving data set")
    out()
    out(
        "Why TTFT does not carry from one serving model to another here. Per (model, backend), "
        f"runs at concurrency ≤ {LOW_MAX}: least squares in relative error of the measured "
        "TTFT on a constant, the prompt tokens per GPU (S_in / tp: prefill work) and the "
        "completion interval "
        "S_out · TPOT / C (the mean time between two of the C clients' completions in a "
        "closed loop), and the same without the last regressor. Coefficient ≈ 1: a new request "
        "waits about one completion interval before its prompt runs (as if the engine admitted "
        "one client fewer than the load generator holds); ≈ 0: it does not. A fit sees this "
        "wait only in runs that have it, so a profile fitted on data sets without it cannot "
        "predict it for one that has it (section 7). A descriptive check, in sample; no "
        "parameter of the engine comes from it."
    )
    out()
    rows: list[list[str]] = []
    for model, backend in sorted({(r.model, r.backend) for r in runs}):
        mine = [
            r
            for r in runs
            if (r.model, r.backend) == (model, backend)
            and r.concurrency <= LOW_MAX
            and r.ttft_ms
            and r.tpot_ms
        ]
        ttft = np.array([r.ttft_ms for r in mine])
        prompt = np.array([r.input_tokens / r.tp for r in mine])
        interval = np.array([r.output_tokens * r.tpot_ms / r.concurrency for r in mine])
        full = np.column_stack([np.ones(len(mine)), prompt, interval])
        # rows divided by the measured TTFT: least squares in relative error
        coef, *_ = np.linalg.lstsq(full / ttft[:, None], np.ones(len(mine)), rcond=None)
        without, *_ = np.linalg.lstsq(full[:, :2] / ttft[:, None], np.ones(len(mine)), rcond=None)
        mdape = float(np.median(np.abs(full @ coef / ttft - 1.0))) * 100.0
        mdape_without = float(np.median(np.abs(full[:, :2] @ without / ttft - 1.0))) * 100.0
        rows.append(
            [
                f"{model} · {backend}",
                str(len(mine)),
                f"{coef[2]:.2f}",
                f"{mdape_without:.1f}",
                f"{mdape:.1f}",
            ]
        )
    table(
        [
            "data set",
            "runs",
            "completion-interval coefficient",
            "MdAPE % without it",
            "MdAPE % with it",
        ],
        rows,
    )
    out()


CONCURRENCY_BINS = (8, 16, 32, 64, 128)


def sequence_cost_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Per serving data set: the per-sequence cost each run implies, by concurrency."""
    out("## 7b. Per-sequence cost implied by each serving run, by concurrency")
    out()
    out(
        "Evidence for `sequence_overhead_full_batch` (efficiency.py). Per run: the spec sheet "
        "with the backend's engine priors predicts TPOT with `sequence_layer_overhead_us` at 0 "
        "and at 1 µs, charged on every running sequence (no knee); the per-sequence-per-layer "
        "cost that would make the prediction match the measured TPOT is (measured − at 0) / "
        "(at 1 − at 0). Medians per (model, backend) and concurrency, over TP degrees and "
        "lengths. A constant per-sequence cost would give a flat row; a row that falls means "
        "each added sequence costs less than the ones before. In sample and descriptive (it "
        "also absorbs whatever else the spec sheet misses at that load); no parameter is "
        "fitted from it."
    )
    out()
    linear = DEFAULT_EFFICIENCY.replace(sequence_overhead_full_batch=1e6)
    bins = list(itertools.pairwise((0, *CONCURRENCY_BINS)))
    rows: list[list[str]] = []
    for model, backend in sorted({(r.model, r.backend) for r in runs}):
        mine = [r for r in runs if (r.model, r.backend) == (model, backend) and r.tpot_ms]
        base = spec_sheet_efficiency(h100, with_engine_priors(linear, backend))
        at = [
            predict_runs(mine, h100, shapes, base.replace(sequence_layer_overhead_us=cost))
            for cost in (0.0, 1.0)
        ]
        tpot = at[0].metric == "serving.tpot_ms"
        measured = at[0].measured[tpot]
        zero, one = at[0].predicted[tpot], at[1].predicted[tpot]
        implied = (measured - zero) / (one - zero)
        concurrency = np.array([mine[i].concurrency for i in at[0].run[tpot]])
        cells = []
        for low, top in bins:
            chosen = (concurrency > low) & (concurrency <= top)
            cells.append(f"{np.median(implied[chosen]):.2f}" if chosen.any() else "–")
        beyond = concurrency > CONCURRENCY_BINS[-1]
        count = int(beyond.sum())
        cells.append(f"{np.median(implied[beyond]):.2f} ({count})" if count else "–")
        rows.append([f"{model} · {backend}", str(len(mine)), *cells])
    labels = [f"{low + 1}–{top}" if low else f"≤ {top}" for low, top in bins]
    header = ["data set", "runs", *labels, f"> {CONCURRENCY_BINS[-1]} (runs)"]
    table(header, rows)
    out()


def _implied_prompt_cost(
    h100: Accelerator, shapes: dict[str, ModelShape], run: ServingMeasurement
) -> tuple[float, float, float]:
    """(cost per prompt the run's TPOT implies, decode-only step, one prompt's prefill alone),
    ms. In a closed loop a request's decode window holds (1 − q) · (R − 1) other prompts
    (serving.py); the spec sheet with the backend's priors gives the decode-only step at R and
    the lone prefill, with no per-sequence term and no eager floor (what the cost stands in
    for)."""
    base = spec_sheet_efficiency(h100, with_engine_priors(DEFAULT_EFFICIENCY, run.backend))
    params = base.replace(
        sequence_layer_overhead_us=0.0, sequence_layer_sharded_us=0.0, eager_layer_launch_us=0.0
    )
    # static mode: batch 1 is one prompt's prefill alone, batch R the decode-only step
    static = estimate(
        shapes[run.model],
        h100,
        precision=precision_of(run),
        parallelism=Parallelism(tp=run.tp),
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        mode="static",
        params=params,
        batch_sizes=[1, run.concurrency],
    )
    behind = (1.0 - params.prefill_queue_share) * (run.concurrency - 1)
    per_prompt_ms = (run.tpot_ms - static.tpot_ms[1]) * (run.output_tokens - 1) / behind
    return float(per_prompt_ms), float(static.tpot_ms[1]), float(static.ttft_ms[0])


def prompt_cost_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Per serving data set and TP degree: what a prompt costs inside other requests' TPOT."""
    out("## 7c. What the other requests' prompts cost inside a request's TPOT")
    out()
    out(
        "What the per-sequence term of 7b stands in for. In a closed loop each request's decode "
        "window holds (1 − q) · (R − 1) other prompts (serving.py), so a run's measured TPOT "
        "implies a cost per prompt of (measured TPOT − decode-only step) · (S_out − 1) / "
        "((1 − q) · (R − 1)); the table divides it by the spec sheet's prefill of one prompt "
        "alone (decode-only step and prefill from `calibration: none` with the backend's "
        "priors and no per-sequence term; q the backend's prior). Runs at concurrency 16–128 "
        "with at most 256 output tokens, where prompts carry most of TPOT. 1 means prompts cost "
        "inside the engine what the kernel model says; median and interquartile range. In "
        "sample and descriptive; nothing is fitted from it."
    )
    out()
    ratios: dict[tuple[str, str, int, str], list[float]] = {}
    for r in runs:
        if 16 <= r.concurrency <= 128 and r.output_tokens <= 256:
            per_prompt_ms, _, prefill_ms = _implied_prompt_cost(h100, shapes, r)
            key = (r.model, r.backend, r.tp, precision_of(r).weights)
            ratios.setdefault(key, []).append(per_prompt_ms / prefill_ms)
    rows = [
        [
            f"{model} · {backend} · tp{tp} · {weights}",
            str(len(v)),
            f"{np.median(v):.2f}",
            f"{np.percentile(v, 25):.2f}–{np.percentile(v, 75):.2f}",
        ]
        for (model, backend, tp, weights), v in sorted(ratios.items())
    ]
    table(["data set · tp · weights", "runs", "prompt cost / spec prefill", "IQR"], rows)
    out()


def eager_floor_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Per serving data set: the step that carries a short prompt, per layer, and the fit."""
    out("## 7d. Steps that carry a prompt: the eager launch floor")
    out()
    out(
        "Evidence for `eager_layer_launch_us` (efficiency.py). Left: per run at 1,024 prompt "
        "tokens, concurrency 16–128 and at most 256 output tokens, the step that carries a "
        "prompt as the measured TPOT implies it (the spec sheet's decode-only step plus the "
        "per-prompt cost of 7c, no eager floor), per decoder layer in µs, median per TP degree; "
        "beside it the spec sheet's own mixed step. A step launched outside a CUDA graph lasts "
        "at least layers · the launch time, so where the kernels get faster with TP and the "
        "implied step does not, a floor binds. Right: `eager_layer_launch_us` fitted on that "
        "data set alone (kernel tables plus its runs, prior of its backend). In sample and "
        "descriptive."
    )
    out()
    implied: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for r in runs:
        if r.input_tokens == 1024 and 16 <= r.concurrency <= 128 and r.output_tokens <= 256:
            per_prompt_ms, decode_ms, prefill_ms = _implied_prompt_cost(h100, shapes, r)
            layers = shapes[r.model].num_layers
            implied.setdefault((r.model, r.backend, r.tp), []).append(
                (
                    1000.0 * (decode_ms + per_prompt_ms) / layers,
                    1000.0 * (decode_ms + prefill_ms) / layers,
                )
            )
    kernels = kernel_measurements()
    fitted: dict[tuple[str, str], float] = {}
    for model, backend in sorted({(m, b) for m, b, _ in implied}):
        own = [r for r in runs if r.model == model and r.backend == backend]
        result = fit([*kernels, *own], h100, shapes, cross_validate=False)
        fitted[(model, backend)] = result.values["eager_layer_launch_us"]
    rows = []
    for (model, backend, tp), v in sorted(implied.items()):
        step, spec = np.median(np.array(v), axis=0)
        rows.append(
            [
                f"{model} · {backend} · tp{tp}",
                str(len(v)),
                f"{step:.0f}",
                f"{spec:.0f}",
                f"{fitted[(model, backend)]:.0f}",
            ]
        )
    header = ["data set · tp", "runs", "implied step / layer, µs", "spec step / layer, µs"]
    table([*header, "fitted eager_layer_launch_us"], rows)
    out()


def kernel_tables_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Section 7's folds fitted with and without the kernel tables beside the serving runs."""
    out("## 7e. What the kernel tables add to a serving profile")
    out()
    out(
        "Section 7's leave-one-model-out folds, each fitted twice: on the H100 kernel tables "
        "plus the training runs (as everywhere above), and on the training runs alone, where "
        "the kernel efficiencies keep their spec-sheet defaults and the engine overheads absorb "
        "the kernels' error. The service makes the first kind from several files in one upload "
        "(`file` repeated, or `ridgeline calibrate` with several files), or from runs uploaded "
        "after a profile of the kernel tables (`fit.kernels_from`); the second only when no "
        "kernel table was ever uploaded for the accelerator. Cells: held-out MdAPE in %."
    )
    out()
    kernels = kernel_measurements()
    rows: list[list[str]] = []
    pooled: dict[str, list[list[float]]] = {}
    for name, train, test in _leave_model_out_folds(runs):
        row = [name, str(len(test))]
        for label, extra in (("with", kernels), ("without", [])):
            result = fit([*extra, *train], h100, shapes, cross_validate=False)
            predicted = result.predict(test, h100, shapes)
            for metric in SERVING_METRICS:
                mask = predicted.metric == metric
                got = pooled.setdefault(f"{label} {metric}", [[], []])
                got[0].extend(predicted.predicted[mask].tolist())
                got[1].extend(predicted.measured[mask].tolist())
                stats = error_stats(predicted.predicted[mask], predicted.measured[mask])
                row.append(f"{stats.mdape_pct:.1f}")
        rows.append(row)
    total = ["**all held-out**", str(sum(int(r[1]) for r in rows))]
    for label in ("with", "without"):
        for metric in SERVING_METRICS:
            got = pooled[f"{label} {metric}"]
            total.append(f"**{error_stats(np.array(got[0]), np.array(got[1])).mdape_pct:.1f}**")
    rows.append(total)
    header = ["held-out group", "runs", "TTFT with tables", "TPOT with tables"]
    table([*header, "TTFT runs only", "TPOT runs only"], rows)
    out()


def _per_sequence_cost(params: EfficiencyParams, tp: int) -> float:
    """µs per running sequence per layer at ``tp``: the part every rank pays plus the part the
    tensor-parallel ranks share (operators.py)."""
    return params.sequence_layer_overhead_us + params.sequence_layer_sharded_us / tp


def sharded_cost_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Per serving data set: the per-sequence cost fitted at each TP degree alone, and the two
    parts fitted on all of them."""
    out("## 7g. Per-sequence cost by TP degree")
    out()
    out(
        "Evidence for `sequence_layer_sharded_us` (efficiency.py). Per data set, a profile "
        "(kernel tables plus the runs) fitted on the runs of each TP degree alone gives the "
        "per-sequence cost per layer at that degree (µs; at one degree the two parts cannot be "
        "told apart, so the cell is their sum there, `sequence_layer_overhead_us` + "
        "`sequence_layer_sharded_us` / tp). A cost that every rank pays in full would give a "
        "flat row; one the ranks share falls as 1 / tp. The last columns fit all degrees "
        "together: the part every rank pays and the shared part. In sample and descriptive."
    )
    out()
    kernels = kernel_measurements()
    degrees = (1, 2, 4, 8)
    rows: list[list[str]] = []
    for model, backend in sorted({(r.model, r.backend) for r in runs}):
        mine = [r for r in runs if (r.model, r.backend) == (model, backend)]
        row = [f"{model} · {backend}", str(len(mine))]
        for tp in degrees:
            alone = [r for r in mine if r.tp == tp]
            if len(alone) < MIN_TP_RUNS:
                row.append("–")
                continue
            params = fit([*kernels, *alone], h100, shapes, cross_validate=False).efficiency
            row.append(f"{_per_sequence_cost(params, tp):.2f}")
        both = fit([*kernels, *mine], h100, shapes, cross_validate=False).efficiency
        row += [f"{both.sequence_layer_overhead_us:.2f}", f"{both.sequence_layer_sharded_us:.2f}"]
        rows.append(row)
    header = ["data set", "runs", *(f"tp {tp} alone" for tp in degrees)]
    table([*header, "all: every rank", "all: shared (÷ tp)"], rows)
    out()


MIN_TP_RUNS = 5  # runs of one TP degree below which 7g leaves its cell empty
AHEAD_CONCURRENCIES = (4, 8, 16, 32, 64)


def prompts_ahead_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Per serving data set: closed-loop TTFT beyond a lone request's, in its own TTFTs."""
    out("## 7f. Closed-loop TTFT beyond the engine's own, by concurrency")
    out()
    out(
        "Evidence for `prefill_queue_ln_prompts` (efficiency.py). Per run: measured TTFT ÷ "
        "the spec sheet's TTFT for it − 1 (the backend's priors: half a decode step's wait, "
        "its own prompt, and no other prompts ahead except SGLang's queue share of ½), i.e. "
        "how many of its own TTFTs a request waits beyond that. Medians per (model, backend) "
        "and concurrency. Prompts ahead in a fixed share q of the R − 1 others would grow in "
        "proportion to C − 1, and a wait in decode steps with the decode step. The vLLM rows "
        "grow about as ln C (last row) on both models, the TensorRT-LLM Qwen3-32B row as "
        "1.2–1.6 ln C; the Llama-3.1-8B row keeps the completion-interval wait of section 7a. "
        "In sample and descriptive: read before the term was added; it is fitted per profile "
        "(prior 0)."
    )
    out()
    rows: list[list[str]] = []
    for model, backend in sorted({(r.model, r.backend) for r in runs}):
        mine = [r for r in runs if (r.model, r.backend) == (model, backend) and r.ttft_ms]
        spec = predict_runs(mine, h100, shapes, spec_sheet(h100, mine))
        ttft = spec.metric == "serving.ttft_ms"
        beyond = spec.measured[ttft] / spec.predicted[ttft] - 1.0
        load = np.array([mine[i].concurrency for i in spec.run[ttft]])
        cells = [
            f"{np.median(beyond[load == c]):.1f}" if np.any(load == c) else "–"
            for c in AHEAD_CONCURRENCIES
        ]
        rows.append([f"{model} · {backend}", str(int(np.sum(ttft))), *cells])
    rows.append(["ln C", "", *(f"{np.log(c):.1f}" for c in AHEAD_CONCURRENCIES)])
    table(["data set", "runs", *(f"C = {c}" for c in AHEAD_CONCURRENCIES)], rows)
    out()


def concurrency_section(h100: Accelerator, shapes: dict[str, ModelShape], runs: list) -> None:
    """Serving: fit concurrency ≤ 32, predict ≥ 64, and the reverse, per (model, backend)."""
    out("## 8. Serving — leave a concurrency range out")
    out()
    out(
        f"Per (model, backend): fit on the kernel tables plus the runs at concurrency ≤ "
        f"{LOW_MAX}, predict those at ≥ {HIGH_MIN} (and the reverse). Target: pooled TPOT "
        "MdAPE ≤ 10% each way."
    )
    out()
    for direction, train_of, test_of in (
        ("fit ≤ 32 → predict ≥ 64", lambda c: c <= LOW_MAX, lambda c: c >= HIGH_MIN),
        ("fit ≥ 64 → predict ≤ 32", lambda c: c >= HIGH_MIN, lambda c: c <= LOW_MAX),
    ):
        out(f"**{direction}**")
        out()
        folds = []
        for model, backend in sorted({(r.model, r.backend) for r in runs}):
            mine = [r for r in runs if r.model == model and r.backend == backend]
            train = [r for r in mine if train_of(r.concurrency)]
            test = [r for r in mine if test_of(r.concurrency)]
            if train and test:
                folds.append((f"{model} · {backend}", train, test))
        _serving_protocol(
            f"concurrency {direction}",
            folds,
            h100,
            shapes,
            f"concurrency {direction}",
            {"serving.tpot_ms": 10.0},
        )


def static_serving_section(
    h100: Accelerator, shapes: dict[str, ModelShape], aliases: dict[str, str], runs: list
) -> None:
    """A profile fitted on serving runs predicts static batches, and the reverse."""
    static, _ = argonne_static("h100-sxm", aliases)
    out("## 9. Static ↔ serving")
    out()
    out(
        "Per backend with both kinds (vLLM, TensorRT-LLM): fit on the kernel tables plus every "
        "serving run of that backend, predict its Argonne static batches (whole-batch latency); "
        "and fit on the static batches, predict the serving runs. The static runs are 2024 "
        "releases and fp16 Llama/Mistral models, the serving runs 2025–26 releases on other "
        "models, so this is also a software-version and model transfer. No MdAPE target beyond "
        "no worse than the spec sheet."
    )
    out()
    folds = []
    for backend in ("vllm", "trtllm"):
        srv = [r for r in runs if r.backend == backend]
        sta = [r for r in static if r.backend == backend]
        folds.append((f"{backend} · serving → static", srv, sta))
    _serving_protocol(
        "serving → static",
        folds,
        h100,
        shapes,
        "serving → static",
        {},
        ["static.latency_ms"],
        ["held-out group", "runs", "latency spec", "latency cal."],
    )
    folds = []
    for backend in ("vllm", "trtllm"):
        srv = [r for r in runs if r.backend == backend]
        sta = [r for r in static if r.backend == backend]
        folds.append((f"{backend} · static → serving", sta, srv))
    _serving_protocol("static → serving", folds, h100, shapes, "static → serving", {})


def static_ttft_section(
    accs: dict[str, Accelerator], shapes: dict[str, ModelShape], aliases: dict[str, str], runs: list
) -> None:
    """Serving profiles predict the Argonne static TTFT runs (16 × 1,024 prompts, one token)."""
    out("## 9a. Static TTFT from serving profiles")
    out()
    out(
        "Per backend: fit on the H100 kernel tables plus every serving run of that backend (as "
        "section 9), predict the Argonne TTFT runs (a static batch of 16 prompts of 1,024 tokens "
        "generating one token: its prefill; 2024 releases, fp16) on H100 directly and on GH200 "
        "and A100-40GB transferred as in section 5. Intervals as the service answers a static "
        "estimate (`intervals.prediction_interval` on the stored profile): the serving TTFT band, "
        "widened for the mode by the serving → static spread and for the prompt length alone "
        "(`domain.extrapolation_amounts(prefill_only=True)`), and for a transfer. Three runs per "
        "cell (Llama-2-7B, Llama-3-8B, Mistral-7B): descriptive, no target."
    )
    out()
    h100 = accs["h100-sxm"]
    kernels = kernel_measurements()
    rows: list[list[str]] = []
    for backend in ("vllm", "trtllm"):
        result = fit(
            [*kernels, *(r for r in runs if r.backend == backend)],
            h100,
            shapes,
            cross_validate=True,
        )
        for label, target in (("h100-sxm", "h100-sxm"), ("gh200", "gh200"),
                              ("a100-sxm", "a100-sxm-40gb")):  # fmt: skip
            found, _ = argonne_static(label, aliases, ARGONNE_TTFT)
            mine = [r for r in found if r.backend == backend]
            acc = accs[target]
            profile = result
            if target != "h100-sxm":
                profile = replace(
                    result.transfer_to(acc),
                    efficiency=transfer_efficiency(result.efficiency, h100, acc),
                )
            calibrated = profile.predict(mine, acc, shapes)
            spec = predict_runs(mine, acc, shapes, spec_sheet(acc, mine))
            stored = profile.to_dict()
            low, high = [], []
            for i, p in zip(calibrated.run, calibrated.predicted, strict=True):
                amounts = run_extrapolation(profile, mine[int(i)], shapes, prefill_only=True)
                band = prediction_interval(
                    stored, "ttft_ms", np.array([p]), mode="static", extrapolating=amounts
                )
                low.append(float(band.low[0]))
                high.append(float(band.high[0]))
            inside = (calibrated.measured >= np.array(low)) & (
                calibrated.measured <= np.array(high)
            )
            ratio = calibrated.predicted / calibrated.measured
            rows.append(
                [
                    f"{backend} → {target}",
                    str(len(mine)),
                    f"{float(np.median(calibrated.measured)):.0f}",
                    f"{float(np.median(spec.predicted / spec.measured)):.2f}",
                    f"{float(np.median(ratio)):.2f}",
                    f"{float(np.median(np.array(low) / calibrated.predicted)):.2f}–"
                    f"{float(np.median(np.array(high) / calibrated.predicted)):.2f}",
                    f"{int(inside.sum())} of {inside.size}",
                ]
            )
    table(
        [
            "profile → accelerator",
            "runs",
            "measured TTFT, ms",
            "spec / measured",
            "calibrated / measured",
            "80% interval / prediction",
            "inside",
        ],
        rows,
    )


LOW_CONCURRENCY = 8


def spec_sheet_section(
    h100: Accelerator, shapes: dict[str, ModelShape], aliases: dict[str, str], runs: list
) -> None:
    """Spec sheet alone: median predicted / measured per model and TP degree."""
    static, _ = argonne_static("h100-sxm", aliases)
    out("## 10. Spec sheet alone — median predicted / measured")
    out()
    out(
        "`calibration: none` on H100 naming the runs' backend (`spec_sheet_efficiency` with that "
        "backend's engine priors, `priors.with_engine_priors`), no fit. Static: every Argonne "
        f"H100 batch; serving: runs at concurrency ≤ {LOW_CONCURRENCY} (TPOT; TTFT shown for "
        "context, it carries the harness's queueing). Target: median ratio 0.9–1.1 per model "
        "and TP degree."
    )
    out()
    rows: list[list[str]] = []
    for backend, model, tp, mine in _static_groups(static):
        pred = predict_runs(mine, h100, shapes, spec_sheet(h100, mine))
        ratio = float(np.median(pred.predicted / pred.measured))
        name = f"static · {backend} · {model} · tp{tp}"
        check(f"spec-sheet ratio {name}", ratio, 0.9, 1.1, decimals=2)
        rows.append([name, str(len(mine)), "–", f"{ratio:.2f}"])
    for model, backend, tp in sorted({(r.model, r.backend, r.tp) for r in runs}):
        mine = [
            r
            for r in runs
            if (r.model, r.backend, r.tp) == (model, backend, tp)
            and r.concurrency <= LOW_CONCURRENCY
        ]
        if not mine:
            continue
        pred = predict_runs(mine, h100, shapes, spec_sheet(h100, mine))
        k = pred.metric == "serving.tpot_ms"
        t = pred.metric == "serving.ttft_ms"
        ratio = float(np.median(pred.predicted[k] / pred.measured[k]))
        ttft = float(np.median(pred.predicted[t] / pred.measured[t]))
        name = f"serving · {backend} · {model} · tp{tp}"
        check(f"spec-sheet TPOT ratio {name}", ratio, 0.9, 1.1, decimals=2)
        rows.append([name, str(len(mine)), f"{ttft:.2f}", f"{ratio:.2f}"])
    table(["set · backend · model · tp", "runs", "TTFT ratio", "TPOT / latency ratio"], rows)
    _static_step_floor(h100, shapes, static)


def _static_groups(
    static: Sequence[StaticMeasurement],
) -> Iterator[tuple[str, str, int, list[StaticMeasurement]]]:
    """The static runs per (backend, model, tp), vLLM first, in a stable order."""
    for backend in ("vllm", "trtllm"):
        for model in sorted({r.model for r in static if r.backend == backend}):
            for tp in sorted({r.tp for r in static if r.backend == backend and r.model == model}):
                yield (
                    backend,
                    model,
                    tp,
                    [r for r in static if (r.backend, r.model, r.tp) == (backend, model, tp)],
                )


def _static_step_floor(
    h100: Accelerator, shapes: dict[str, ModelShape], static: Sequence[StaticMeasurement]
) -> None:
    """Batch-1 time per output token of the dense static runs: measured, spec sheet, weights."""
    out()
    out(
        "Where the static ratios fall with TP: at batch 1 a decode step streams each GPU's "
        "weights once, so the weight time (fp16 weights per GPU ÷ spec HBM bandwidth) shrinks "
        "as 1 / tp, while the rest of the measured time per output token (whole-batch latency "
        "÷ output tokens, median over the lengths; dense models) does not shrink, and for vLLM "
        "grows. The spec sheet with the engine priors, which the 2025–26 serving runs match "
        "(ratios above), leaves a part of that rest unexplained in these 2024 releases, and "
        "the part grows with TP."
    )
    out()
    rows: list[list[str]] = []
    for backend, model, tp, mine in _static_groups(static):
        ones = [r for r in mine if r.batch_size == 1]
        if shapes[model].is_moe or not ones:
            continue
        spec = predict_runs(ones, h100, shapes, spec_sheet(h100, ones)).predicted
        tokens = np.array([r.output_tokens for r in ones], dtype=float)
        measured_ms = float(np.median([r.latency_ms for r in ones] / tokens))
        spec_ms = float(np.median(spec / tokens))
        weights = weight_bytes_per_gpu(shapes[model], Precision(), Parallelism(tp=tp))
        weight_ms = weights.total_bytes / h100.memory_bandwidth_bytes_s * 1e3
        rows.append(
            [
                f"{backend} · {model} · tp{tp}",
                f"{measured_ms:.2f}",
                f"{spec_ms:.2f}",
                f"{weight_ms:.2f}",
                f"{measured_ms - spec_ms:.2f}",
            ]
        )
    table(
        [
            "static · backend · model · tp",
            "measured ms / token",
            "spec sheet ms / token",
            "weight ms",
            "unexplained ms",
        ],
        rows,
    )


def spreads_section() -> None:
    """Extra log-spread each extrapolation kind needed, measured on the protocols above."""
    out("## 11a. Measured extrapolation spreads")
    out()
    out(
        "Per held-out group of the protocols above: the log-spread that, added in quadrature to "
        "the training fit's in-domain 80% band, reaches the group's own held-out band "
        "(`intervals.extra_spread`; per doubling outside the fitted range for concurrency and "
        "GPU count, sections 4 and 8, each direction apart: `_above` when the held-out points "
        "lie above the fitted range, `_below` when below). Model: sections 3 and 7, as "
        "`model_kind` where the held-out model is of a kind (dense, MoE, MLA) that no fitted "
        "model is (Mixtral-8x7B among dense static models; gpt-oss-120b and Qwen3-32B on vLLM, "
        "each fitted on the other); mode: section 9. "
        "Pooled: the held-out residuals of every group of a kind in one band against the "
        "pooled in-domain residuals of their training fits, the statistic `extrapolation_cv.py` "
        "uses inside a profile (until this revision the median over groups was used, which "
        "leaves the groups above the median under-covered). These are the `DEFAULT_SPREADS` of "
        "`service/engine/calibration/intervals.py`, used when a profile's own runs cannot "
        "measure a kind (one model, one mode); a profile that can measures its own "
        "(`extrapolation_cv.py`). The accelerator value is `TRANSFER_LOG_SIGMA`, the "
        "widening of a profile applied to another accelerator. The last column is the value "
        "the service uses now; a row whose pooled value moved by more than 0.005 is marked "
        "stale (copy the pooled values into intervals.py and rerun)."
    )
    out()
    rows = []
    for (kind, metric), values in sorted(GROUPS.spreads.items()):
        if kind == "accelerator":
            used: float | None = TRANSFER_LOG_SIGMA
        else:
            spread = DEFAULT_SPREADS.get(metric, {}).get(kind)
            used = None if spread is None else spread.log_sigma
        pooled = GROUPS.pooled_spread(kind, metric)
        state = "–" if used is None else f"{used:.3f}"
        if used is not None and abs(used - pooled) > 0.005:
            state += " **stale**"
        rows.append(
            [
                kind,
                metric,
                str(len(values)),
                f"{pooled:.3f}",
                f"{float(np.median(values)):.3f}",
                f"{max(values):.3f}",
                state,
            ]
        )
    header = ["kind", "metric", "groups", "pooled log-spread", "group median", "group max"]
    table([*header, "in intervals.py"], rows)


def group_coverage_section() -> None:
    """80% coverage per held-out group, every protocol."""
    out("## 11. Interval coverage per held-out group (every protocol)")
    out()
    out(
        "Each held-out group's 80% intervals come from its own training fit (cross-validated "
        "residuals, widened by the profile's domain distance, `intervals.py`). Target 72–88% "
        "for every group of 20 or more points."
    )
    out()
    table(["protocol", "group", "metric", "n", "coverage", ""], GROUPS.table_rows())
    out(
        "Coverage by load, every protocol's held-out points pooled (batch size for static "
        "batches, concurrency for serving runs): one band width for every load over-covers "
        "light loads and under-covers heavy ones where the residuals' spread grows with load "
        "(narrative item 19)."
    )
    out()
    table(["metric", *(label for label, _, _ in LOAD_BANDS)], GROUPS.load_rows())
    out("## 11b. Where the calibrated answer loses to the spec sheet, by load")
    out()
    out(
        "Every cell marked FAIL above (calibrated median APE worse than the spec sheet's): the "
        "median predicted / measured of the spec sheet and of the calibrated profile (runs) per "
        "load band (batch size for static batches, concurrency for serving runs). A calibrated "
        "ratio that drifts from 1 with load while the spec sheet's stays near it points at a "
        "load-dependent term the training runs set for their own regime."
    )
    out()
    table(["held-out cell", *(label for label, _, _ in LOAD_BANDS)], LOSSES.rows())
    out("## 11c. What a band width alone could reach, per group")
    out()
    out(
        "The groups of section 11 that are checked (20 points or more), scored again with every "
        "80% band scaled about its centre in log space, the scale chosen after the fact to put "
        "the most groups in 72–88% (a bound on any width rule, not a rule: it sees the held-out "
        "points). The last row first moves each group's band centre onto the group's own median "
        "measurement, removing the bias a group shares: what remains is scatter. The gap "
        "between the rows says how much of the per-group miss is width and how much is bias."
    )
    out()
    table(["band", "groups in 72–88%", "scales"], GROUPS.width_limit_rows())


# Load bands of the coverage-by-load table: label, lowest and highest load (inclusive).
LOAD_BANDS = (("≤ 8", 0, 8), ("16–32", 9, 32), ("48–96", 33, 96), ("≥ 128", 97, 1e9))


# What changed for issue 11 and which choices were made after seeing which held-out numbers:
# prose, kept as markdown beside this script and copied into the result file as it stands.
ISSUE_11_NOTES = Path(__file__).resolve().parent / "accuracy_notes.md"


def summary_section() -> None:
    """Every number with a target: met or missed."""
    out("## 13. Targets")
    out()
    rows = [
        [
            what,
            f"{value:.{decimals}f}",
            f"{low:g}–{high:g}",
            "met" if low <= value <= high else "**missed**",
        ]
        for what, value, low, high, decimals in CHECKS
    ]
    table(["what", "value", "target", ""], rows)
    out(
        f"Held-out cells (group × metric) where calibrated is worse than the spec sheet (bold "
        f"FAIL above): "
        f"{len(FAILURES)}."
    )
    out()
    out(ISSUE_11_NOTES.read_text(encoding="utf-8").rstrip("\n"))
    out()
    out(
        "Serving model (`service/engine/serving.py`): the running batch R decodes R tokens per "
        "step; a prompt runs as whole chunks beside them (engines never spread a prompt over "
        "the decode steps as slivers) and adds `prompt_s`; per cycle of one slot the other "
        "R − 1 prompts run either before a new request's first token (`prefill_queue_share` · "
        "(R − 1), in its TTFT) or while it decodes (the rest, in its TPOT, which excludes the "
        "first token): 0 for arrivals spread over the decode cycle, ½ for lockstep waves of "
        "equal-length closed-loop clients, which prefill-first schedulers (SGLang by default) "
        "keep in step. TTFT = admission wait + prompts ahead + its own chunks. The serving fit "
        "is staged: host overheads on TPOT (and static runs), then the admission wait and queue "
        "share on TTFT with the overheads fixed, alternating until the share settles (TPOT "
        "depends on it). "
        "**Model selection:** this serving structure was revised after seeing the "
        "cross-validated results of section 4, so its held-out figures carry that "
        "model-selection bias. The previous structure amortised R·S_in/S_out prefill tokens "
        "into every step and also counted the prompts ahead in TTFT; its held-out MdAPE was "
        "TPOT 9.6 / 11.1 / 7.2% and TTFT 17.7 / 16.3 / 21.7% (vLLM / SGLang / TensorRT-LLM), "
        "with SGLang's TPOT error growing with R·S_in/S_out (26.9% at 128 output tokens, "
        "19.5% at concurrency 128). The revision lowered every backend's TPOT error and vLLM's "
        "and SGLang's TTFT error, and raised TensorRT-LLM's TTFT error, the vLLM tp1 run's "
        "errors and SGLang tp1's TPOT error (see the table above). Splits, rows, bounds and "
        "priors were not changed. "
        "What limits the misses, and the weakest figures: "
        "held-out (backend, tp) groups with one or a few rows (vLLM tp1 is a single fp8 run; "
        "SGLang tp1 is another release, 0.5.8, at concurrency 16 only, whose measured TPOT of "
        "25–27 ms at every length is at or below the predicted decode-only step, leaving no "
        "room for the prompts that the share of about ½ fitted at tp2–8 puts in the decode "
        "window) cannot be predicted from the other layouts; TensorRT-LLM's TTFT is about 4–7 "
        "prompts' prefill at concurrency 8 to 64 and proportional to the prompt length, a "
        "shape neither the admission wait (in decode steps) nor the queue share (in prompts per "
        "running request) reproduces; "
        "per-step overheads fitted on two TP sizes extrapolate imperfectly to the third; "
        "Mixtral-8x7B is the only MoE model, so leaving it out extrapolates from dense models; "
        "the A100 memory size is not stated by the source (section 5 infers the 40 GB part from "
        "the data); the transfer widening is one measured spread (intervals.py), not one per "
        "target, so it over-covers where the transfer is accurate and under-covers where it "
        "is not. "
        "No parameter was tuned on a test split."
    )
    out()


def main() -> None:
    """Run every section and write the result file."""
    started = time.perf_counter()
    accs = accelerators()
    shapes, aliases = models()
    GROUPS.shapes = shapes
    h100 = accs["h100-sxm"]
    all_serving = serving_runs(aliases, SERVING_FILES)
    running = RunPredictor(all_serving, h100, shapes).running_batches()
    GROUPS.running = dict(zip(all_serving, running.tolist(), strict=True))
    out("# Calibration accuracy (held-out data only)")
    out()
    out(
        "Generated by `benchmarks/accuracy.py` from `benchmarks/data` (sources in its "
        "README.md). Uncalibrated = spec-sheet roofline (`spec_sheet_efficiency`) with the runs' "
        "backend's engine priors, as `calibration: none` answers a request naming that backend; "
        "calibrated "
        "= the profile fitted by `service.engine.calibration.fit` on data that excludes the "
        "test rows. APE = |predicted / measured − 1|."
    )
    out()
    gemm_section(h100)
    kernel_cv_section(h100)
    kernel_table_section(h100)
    static_section(h100, shapes, aliases)
    serving_section(h100, shapes, aliases)
    transfer_section(accs, shapes, aliases)
    coverage_section()
    leave_model_out_section(h100, shapes, all_serving)
    ttft_signature_section(all_serving)
    sequence_cost_section(h100, shapes, all_serving)
    prompt_cost_section(h100, shapes, all_serving)
    eager_floor_section(h100, shapes, all_serving)
    kernel_tables_section(h100, shapes, all_serving)
    prompts_ahead_section(h100, shapes, all_serving)
    sharded_cost_section(h100, shapes, all_serving)
    concurrency_section(h100, shapes, all_serving)
    static_serving_section(h100, shapes, aliases, all_serving)
    static_ttft_section(accs, shapes, aliases, all_serving)
    spec_sheet_section(h100, shapes, aliases, all_serving)
    spreads_section()
    group_coverage_section()
    timing_section(accs, shapes, aliases)
    summary_section()
    out(f"Total benchmark time: {time.perf_counter() - started:.0f} s.")
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
