"""Shared chart styling and the step from an Altair chart to a Vega-Lite specification."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt

PHASE_SHAPES = {"decode": "circle", "prefill": "square"}
INK, MUTED, ACCENT = "#1f2933", "#7b8794", "#c81d25"
LINE_COLOUR = "#3b82c4"  # the series line of the sweep and traffic charts
CONFIG: dict[str, Any] = {
    "background": "white",
    "font": "DejaVu Sans, Helvetica, Arial, sans-serif",
    "axis": {"gridColor": "#e4e7eb", "labelColor": "#3e4c59", "titleColor": INK},
    "view": {"stroke": "#cbd2d9"},
}


def inline(rows: Sequence[dict[str, Any]]) -> alt.InlineData:
    """Wrap rows (plain dicts, no pandas) as Vega-Lite inline data."""
    return alt.InlineData(values=list(rows))


def to_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """Return the chart's Vega-Lite specification with the house style applied."""
    spec: dict[str, Any] = chart.to_dict()
    spec["config"] = {**CONFIG, **spec.get("config", {})}
    return spec
