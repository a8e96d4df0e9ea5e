"""TTFT, TPOT and end-to-end latency against request rate: p50 line in a p50–p99 band."""

from __future__ import annotations

from typing import Any

import altair as alt

from service.charts.sources import TrafficSweepData
from service.charts.style import ACCENT, INK, LINE_COLOUR, inline

PANEL_WIDTH, PANEL_HEIGHT = 230, 200
# (traffic answer field, panel title): each field holds {mean, p50, p90, p99} in ms.
METRICS = (
    ("ttft_ms", "TTFT (ms)"),
    ("tpot_ms", "TPOT (ms)"),
    ("e2e_latency_ms", "end-to-end (ms)"),
)
PERCENTILES = ("p50", "p90", "p99")


def traffic_rows(data: TrafficSweepData) -> list[dict[str, Any]]:
    """Flatten the answers into one row per (rate, metric) with p50, p90 and p99."""
    rows = []
    for answer in data.answers:
        for field, title in METRICS:
            values = answer[field]
            if values.get("p50") is None:
                continue
            rows.append(
                {
                    "request_rate_per_s": answer["request_rate_per_s"],
                    "metric": title,
                    **{p: values.get(p) for p in PERCENTILES},
                    "load": "saturated" if answer["saturated"] else "keeps up",
                }
            )
    return rows


def _panel(rows: list[dict[str, Any]], title: str, saturation: float) -> alt.LayerChart:
    mine = [r for r in rows if r["metric"] == title]
    x = alt.X("request_rate_per_s:Q", title="requests/s", scale=alt.Scale(zero=True))
    log = alt.Scale(type="log", zero=False)
    y = alt.Y("p50:Q", scale=log, title=title)
    banded = [r for r in mine if r["p99"] is not None]
    layers: list[alt.Chart] = [
        alt.Chart(inline(banded))
        .mark_area(opacity=0.25, color=LINE_COLOUR)
        .encode(x=x, y=y, y2="p99:Q"),
        alt.Chart(inline(mine)).mark_line(color=LINE_COLOUR).encode(x=x, y=y),
        alt.Chart(inline(mine))
        .mark_point(filled=True, size=40)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "load:N",
                title="replica",
                scale=alt.Scale(domain=["keeps up", "saturated"], range=[LINE_COLOUR, ACCENT]),
            ),
            tooltip=[
                alt.Tooltip("request_rate_per_s:Q", title="requests/s", format=",.2f"),
                *(alt.Tooltip(f"{p}:Q", format=",.1f") for p in PERCENTILES),
            ],
        ),
    ]
    marker = [{"request_rate_per_s": saturation, "text": f"saturation {saturation:,.2f}/s"}]
    layers.append(
        alt.Chart(inline(marker))
        .mark_rule(color=ACCENT, strokeDash=[4, 3])
        .encode(x=alt.X("request_rate_per_s:Q"))
    )
    layers.append(
        alt.Chart(inline(marker))
        .mark_text(align="right", baseline="top", dx=-4, y=4, color=ACCENT, fontSize=10)
        .encode(x=alt.X("request_rate_per_s:Q"), text="text:N")
    )
    return alt.LayerChart(layer=layers, width=PANEL_WIDTH, height=PANEL_HEIGHT)


def traffic_chart(data: TrafficSweepData) -> alt.HConcatChart:
    """Build three panels (TTFT, TPOT, e2e) sharing the request-rate axis."""
    rows = traffic_rows(data)
    panels = [_panel(rows, title, data.saturation_requests_per_s) for _, title in METRICS]
    return alt.HConcatChart(
        hconcat=panels,
        title=alt.Title(
            f"{data.model_id} on {data.accelerator_id}, open-loop {data.arrival} arrivals "
            f"({data.input_tokens} in / {data.output_tokens} out)",
            subtitle="line: p50; band: p50 to p99 of the simulated requests",
            color=INK,
        ),
    )
