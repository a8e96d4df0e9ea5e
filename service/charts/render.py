"""Render one Vega-Lite specification as SVG, PNG or JSON, offline (vl-convert, no browser)."""

from __future__ import annotations

import json
from typing import Any, Literal

import vl_convert as vlc

ChartFormat = Literal["svg", "png", "vega"]
FORMATS: tuple[ChartFormat, ...] = ("svg", "png", "vega")
MEDIA_TYPES: dict[ChartFormat, str] = {
    "svg": "image/svg+xml",
    "png": "image/png",
    "vega": "application/json",
}
# Device pixels per CSS pixel for PNG output: 2 keeps labels sharp on high-DPI screens.
PNG_SCALE = 2.0


def render(spec: dict[str, Any], fmt: ChartFormat) -> bytes:
    """Return the chart in the requested format, all three from the same specification."""
    if fmt == "svg":
        return vlc.vegalite_to_svg(spec).encode("utf-8")
    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec, scale=PNG_SCALE))
    return json.dumps(spec, allow_nan=False).encode("utf-8")
