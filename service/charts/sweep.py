"""TTFT, TPOT and throughput against batch size or concurrency, with intervals and memory limit."""

from __future__ import annotations

from typing import Any

import altair as alt

from service.charts.sources import SweepData
from service.charts.style import ACCENT, INK, LINE_COLOUR, inline

PANEL_WIDTH, PANEL_HEIGHT = 230, 200
# (point field, panel title); a field ``<name>_p10``/``<name>_p90`` on a point draws its band.
METRICS = (
    ("ttft_ms", "TTFT (ms)"),
    ("tpot_ms", "TPOT (ms)"),
    ("output_tokens_per_s", "output tokens/s"),
)
INTERVAL_SUFFIXES = ("_p10", "_p90")


def _fits(point: dict[str, Any]) -> bool:
    memory = point.get("memory") or {}
    return bool(memory.get("fits", True))


def memory_limit(data: SweepData) -> int | None:
    """Return the largest batch whose memory fits: the estimate's figure, else the points'."""
    if data.max_batch_size is not None:
        return data.max_batch_size
    fitting = [int(p["batch_size"]) for p in data.points if _fits(p)]
    return max(fitting) if fitting else 0


def sweep_rows(data: SweepData) -> list[dict[str, Any]]:
    """Flatten points into one row per (batch, metric), with the 80% band when present."""
    rows = []
    for point in data.points:
        for field, title in METRICS:
            value = point.get(field)
            if value is None:
                continue
            lo, hi = (point.get(field + suffix) for suffix in INTERVAL_SUFFIXES)
            rows.append(
                {
                    "batch_size": point["batch_size"],
                    "metric": title,
                    "value": value,
                    "p10": lo,
                    "p90": hi,
                    "fits": "fits" if _fits(point) else "exceeds memory",
                }
            )
    return rows


def _panel(
    rows: list[dict[str, Any]], title: str, x_title: str, limit: int | None, domain: list[float]
) -> alt.LayerChart:
    mine = [r for r in rows if r["metric"] == title]
    x_scale = alt.Scale(type="log", base=2, domain=domain)
    x = alt.X("batch_size:Q", scale=x_scale, title=x_title)
    y = alt.Y("value:Q", scale=alt.Scale(type="log", zero=False), title=title)
    layers: list[alt.Chart] = []
    banded = [r for r in mine if r["p10"] is not None and r["p90"] is not None]
    if banded:
        layers.append(
            alt.Chart(inline(banded))
            .mark_area(opacity=0.25, color=LINE_COLOUR)
            .encode(x=x, y=alt.Y("p10:Q", title=title), y2="p90:Q")
        )
    layers.append(alt.Chart(inline(mine)).mark_line(color=LINE_COLOUR).encode(x=x, y=y))
    layers.append(
        alt.Chart(inline(mine))
        .mark_point(filled=True, size=40)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "fits:N",
                title="memory",
                scale=alt.Scale(domain=["fits", "exceeds memory"], range=[LINE_COLOUR, ACCENT]),
            ),
            tooltip=[
                alt.Tooltip("batch_size:Q", title=x_title),
                alt.Tooltip("value:Q", title=title, format=",.2f"),
                alt.Tooltip("p10:Q", format=",.2f"),
                alt.Tooltip("p90:Q", format=",.2f"),
            ],
        )
    )
    if limit:
        marker = [{"batch_size": limit, "text": f"memory limit {limit}"}]
        layers.append(
            alt.Chart(inline(marker))
            .mark_rule(color=ACCENT, strokeDash=[4, 3])
            .encode(x=alt.X("batch_size:Q", scale=x_scale))
        )
        layers.append(
            alt.Chart(inline(marker))
            .mark_text(align="right", baseline="top", dx=-4, y=4, color=ACCENT, fontSize=10)
            .encode(x=alt.X("batch_size:Q", scale=x_scale), text="text:N")
        )
    return alt.LayerChart(layer=layers, width=PANEL_WIDTH, height=PANEL_HEIGHT)


def sweep_chart(data: SweepData) -> alt.HConcatChart:
    """Build three panels (TTFT, TPOT, throughput) sharing the batch or concurrency axis."""
    rows = sweep_rows(data)
    limit = memory_limit(data)
    batches = [float(p["batch_size"]) for p in data.points]
    domain = [min(batches), max(batches)]
    x_title = "concurrency" if data.mode == "serving" else "batch size"
    note = (
        f"fits up to {limit} sequences of {data.input_tokens}+{data.output_tokens} tokens"
        if limit
        else "the weights alone do not fit in memory: add GPUs (tp) or quantise"
    )
    panels = [_panel(rows, title, x_title, limit, domain) for _, title in METRICS]
    return alt.HConcatChart(
        hconcat=panels,
        title=alt.Title(
            f"{data.model_id} on {data.accelerator_id}, {data.mode} "
            f"({data.input_tokens} in / {data.output_tokens} out)",
            subtitle=note,
            color=INK,
        ),
    )
