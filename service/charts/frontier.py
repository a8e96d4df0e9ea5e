"""Per accelerator, the plan frontier: tokens/s per user against tokens/s per GPU."""

from __future__ import annotations

from typing import Any

import altair as alt

from service.charts.sources import FrontierData
from service.charts.style import inline

WIDTH, HEIGHT = 560, 380


def frontier_rows(data: FrontierData) -> list[dict[str, Any]]:
    """Flatten the plan frontier into one row per (accelerator, configuration)."""
    rows = []
    for accelerator, points in data.frontier.items():
        for point in points:
            layout = point.get("parallelism") or {}
            precision = point.get("precision") or {}
            model = point.get("model", data.model_ids[0] if data.model_ids else "")
            rows.append(
                {
                    **{k: v for k, v in point.items() if not isinstance(v, dict)},
                    "accelerator": accelerator,
                    "series": accelerator
                    if len(data.model_ids) < 2
                    else f"{accelerator} · {model}",
                    "tp": layout.get("tp", 1),
                    "precision": "/".join(str(v) for v in precision.values()),
                    "slo": "meets targets" if point.get("meets_slo", True) else "misses targets",
                }
            )
    return rows


def frontier_chart(data: FrontierData) -> alt.LayerChart:
    """Build the frontier chart; one line per accelerator, best configurations only."""
    rows = frontier_rows(data)
    x = alt.X("tokens_per_s_per_user:Q", scale=alt.Scale(type="log"), title="tokens/s per user")
    y = alt.Y(
        "output_tokens_per_s_per_gpu:Q",
        scale=alt.Scale(type="log"),
        title="output tokens/s per GPU",
    )
    color = alt.Color("series:N", title="accelerator")
    tooltip = [
        alt.Tooltip("accelerator:N"),
        alt.Tooltip("tp:Q"),
        alt.Tooltip("precision:N"),
        alt.Tooltip("concurrency:Q"),
        alt.Tooltip("slo:N", title="latency targets"),
        alt.Tooltip("tokens_per_s_per_user:Q", format=",.1f"),
        alt.Tooltip("output_tokens_per_s_per_gpu:Q", format=",.1f"),
    ]
    missing = [a for a, points in data.frontier.items() if not points]
    subtitle = (
        f"no configuration meets the targets on: {', '.join(missing)}"
        if missing
        else "points: layouts and concurrencies no other beats on both axes; hollow: misses targets"
    )
    layers: list[alt.Chart] = [
        alt.Chart(inline(rows))
        .mark_line()
        .encode(x=x, y=y, color=color, order="tokens_per_s_per_user:Q"),
        alt.Chart(inline(rows))
        .mark_point(size=60)
        .encode(
            x=x,
            y=y,
            color=color,
            fill=alt.condition(
                alt.datum.slo == "meets targets",
                alt.Fill("series:N", legend=None),
                alt.value("white"),
            ),
            tooltip=tooltip,
        ),
    ]
    if not rows:
        layers = [
            alt.Chart(inline([{"text": "no configuration meets the targets"}]))
            .mark_text(fontSize=14)
            .encode(text="text:N")
        ]
    return alt.LayerChart(
        layer=layers,
        width=WIDTH,
        height=HEIGHT,
        title=alt.Title(f"Throughput frontier: {', '.join(data.model_ids)}", subtitle=subtitle),
    )
