"""Log–log roofline: bandwidth slope, a ceiling per dtype, the ridge point and the operators."""

from __future__ import annotations

import math
from typing import Any

import altair as alt

from service.charts.sources import RooflineData
from service.charts.style import ACCENT, INK, MUTED, PHASE_SHAPES, inline

WIDTH, HEIGHT = 640, 400


def _decade_floor(value: float) -> float:
    return float(10 ** math.floor(math.log10(value)))


def _decade_ceil(value: float) -> float:
    return float(10 ** math.ceil(math.log10(value)))


def _tflops(flops: float, time_ms: float) -> float:
    """Attained TFLOP/s of one operator: FLOPs ÷ seconds ÷ 1e12."""
    return flops / (time_ms * 1e-3) / 1e12


def plotted_operators(data: RooflineData) -> list[dict[str, Any]]:
    """Return the operator rows a log–log plot can show (positive FLOPs, bytes and time)."""
    batches = sorted({op["batch_size"] for op in data.operators})
    rows = []
    for op in data.operators:
        if op["flops"] > 0 and op["bytes"] > 0 and op["time_ms"] > 0:
            label = f"{op['phase']} B={op['batch_size']}" if op["operator"] == "total" else ""
            rows.append(
                {
                    **op,
                    "attained_tflops": _tflops(op["flops"], op["time_ms"]),
                    "label": label,
                    # Stagger labels of successive batch sizes so neighbours do not overlap.
                    "label_offset_px": -10 + 14 * (batches.index(op["batch_size"]) % 3),
                }
            )
    return rows


def _ceilings(data: RooflineData) -> list[dict[str, Any]]:
    """Group dtypes with equal peaks into one ceiling (bf16 and fp16 share one line)."""
    by_peak: dict[float, list[str]] = {}
    for dtype, tflops in data.peak_tflops.items():
        by_peak.setdefault(tflops, []).append(dtype)
    bandwidth_tb_s = data.memory_bandwidth_gb_s / 1e3
    return [
        {
            "dtypes": "/".join(dtypes),
            "peak_tflops": peak,
            # Ridge of this ceiling: TFLOP/s ÷ TB/s = FLOP/byte.
            "ridge_flop_per_byte": peak / bandwidth_tb_s,
            "label": f"{'/'.join(dtypes)} {peak:,.0f} TFLOP/s",
        }
        for peak, dtypes in sorted(by_peak.items())
    ]


def roofline_chart(data: RooflineData) -> alt.LayerChart:
    """Build the roofline chart of one model on one accelerator."""
    operators = plotted_operators(data)
    ceilings = _ceilings(data)
    bandwidth_tb_s = data.memory_bandwidth_gb_s / 1e3
    highest = max(c["ridge_flop_per_byte"] for c in ceilings)
    intensities = [op["arithmetic_intensity_flop_per_byte"] for op in operators]
    x_lo = _decade_floor(min([1.0, *intensities]) / 2)
    x_hi = _decade_ceil(max([highest, *intensities]) * 3)
    top = max(c["peak_tflops"] for c in ceilings)
    y_lo = _decade_floor(min([x_lo * bandwidth_tb_s, *(o["attained_tflops"] for o in operators)]))
    y_hi = _decade_ceil(top * 1.5)
    x_scale = alt.Scale(type="log", domain=[x_lo, x_hi])
    y_scale = alt.Scale(type="log", domain=[y_lo, y_hi])
    x_title, y_title = "arithmetic intensity (FLOP/byte)", "performance (TFLOP/s)"
    x = alt.X("x:Q", scale=x_scale, title=x_title)
    y = alt.Y("y:Q", scale=y_scale, title=y_title)
    slope = (
        alt.Chart(
            inline(
                [
                    {"x": x_lo, "y": x_lo * bandwidth_tb_s},
                    {"x": highest, "y": highest * bandwidth_tb_s},
                ]
            )
        )
        .mark_line(color=INK, strokeWidth=2, clip=True)
        .encode(x=x, y=y)
    )
    bandwidth_label = (
        alt.Chart(
            inline(
                [
                    {
                        "x": x_lo * 2,
                        "y": x_lo * 2 * bandwidth_tb_s,
                        "text": f"HBM {data.memory_bandwidth_gb_s:,.0f} GB/s",
                    }
                ]
            )
        )
        .mark_text(align="left", dx=6, dy=-10, color=INK, angle=0)
        .encode(x=x, y=y, text="text:N")
    )
    ceiling_rows = [
        {"x": c["ridge_flop_per_byte"], "x2": x_hi, "y": c["peak_tflops"], "label": c["label"]}
        for c in ceilings
    ]
    ceiling_lines = (
        alt.Chart(inline(ceiling_rows))
        .mark_rule(color=MUTED, strokeDash=[6, 3], clip=True)
        .encode(x=x, x2="x2:Q", y=y)
    )
    ceiling_labels = (
        alt.Chart(inline(ceiling_rows))
        .mark_text(align="right", baseline="bottom", dy=-3, color=MUTED, fontSize=10)
        .encode(x="x2:Q", y=y, text="label:N")
    )
    compute_peak = data.ridge_point_flop_per_byte * bandwidth_tb_s
    ridge_text = f"ridge {data.ridge_point_flop_per_byte:,.0f} FLOP/byte ({data.compute_dtype})"
    ridge_rows = [{"x": data.ridge_point_flop_per_byte, "y": compute_peak, "text": ridge_text}]
    ridge_point = (
        alt.Chart(inline(ridge_rows))
        .mark_point(shape="diamond", size=140, filled=True, color=ACCENT)
        .encode(x=x, y=y, tooltip=[alt.Tooltip("text:N", title="ridge point")])
    )
    ridge_label = (
        alt.Chart(inline(ridge_rows))
        .mark_text(align="right", dx=-10, dy=-10, color=ACCENT, fontWeight="bold")
        .encode(x=x, y=y, text="text:N")
    )
    op_x = alt.X("arithmetic_intensity_flop_per_byte:Q", scale=x_scale, title=x_title)
    op_y = alt.Y("attained_tflops:Q", scale=y_scale, title=y_title)
    op_points = (
        alt.Chart(inline(operators))
        .mark_point(filled=True, size=70, opacity=0.85, clip=True)
        .encode(
            x=op_x,
            y=op_y,
            color=alt.Color("operator:N", title="operator"),
            shape=alt.Shape(
                "phase:N",
                title="phase",
                scale=alt.Scale(domain=list(PHASE_SHAPES), range=list(PHASE_SHAPES.values())),
            ),
            tooltip=[
                alt.Tooltip("operator:N"),
                alt.Tooltip("phase:N"),
                alt.Tooltip("batch_size:Q", title="batch"),
                alt.Tooltip("arithmetic_intensity_flop_per_byte:Q", format=",.1f"),
                alt.Tooltip("attained_tflops:Q", format=",.1f"),
                alt.Tooltip("bound:N"),
                alt.Tooltip("time_ms:Q", format=",.3f"),
            ],
        )
    )
    labelled = [op for op in operators if op["label"]]
    op_labels = [
        alt.Chart(inline([op for op in labelled if op["label_offset_px"] == offset]))
        .mark_text(align="left", dx=8, dy=offset, fontSize=10, color=INK)
        .encode(x=op_x, y=op_y, text="label:N")
        for offset in sorted({op["label_offset_px"] for op in labelled})
    ]
    return alt.LayerChart(
        layer=[
            slope,
            bandwidth_label,
            ceiling_lines,
            ceiling_labels,
            op_points,
            *op_labels,
            ridge_point,
            ridge_label,
        ],
        width=WIDTH,
        height=HEIGHT,
        title=alt.Title(
            f"Roofline: {data.model_id} on {data.accelerator_name}",
            subtitle=f"compute dtype {data.compute_dtype}; labels mark each step's total",
        ),
    )
