"""Chart specifications built from plain data: ceilings, operators, intervals, memory limit."""

from __future__ import annotations

from typing import Any

import pytest

from service.charts.frontier import frontier_chart, frontier_rows
from service.charts.render import render
from service.charts.roofline import plotted_operators, roofline_chart
from service.charts.sources import FrontierData, RooflineData, SweepData, TrafficSweepData
from service.charts.style import to_spec
from service.charts.sweep import memory_limit, sweep_chart, sweep_rows
from service.charts.traffic import traffic_chart, traffic_rows


def rows_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for values in spec.get("datasets", {}).values() for row in values]


def operator(
    name: str, flops: float, bytes_: float, time_ms: float, batch: int = 1
) -> dict[str, Any]:
    return {
        "phase": "decode",
        "batch_size": batch,
        "operator": name,
        "kind": "gemm",
        "flops": flops,
        "bytes": bytes_,
        "arithmetic_intensity_flop_per_byte": flops / bytes_ if bytes_ else 0.0,
        "bound": "memory",
        "time_ms": time_ms,
    }


ROOF = RooflineData(
    accelerator_id="chip",
    accelerator_name="Test Chip",
    model_id="tiny",
    memory_bandwidth_gb_s=2000.0,
    peak_tflops={"bf16": 400.0, "fp16": 400.0, "fp8": 800.0},
    compute_dtype="bf16",
    ridge_point_flop_per_byte=200.0,
    operators=[
        operator("ffn", 4e9, 2e9, 1.0),
        operator("embedding", 0.0, 1e6, 0.001),
        operator("total", 5e9, 3e9, 1.5),
    ],
)


def test_roofline_groups_equal_peaks_and_marks_ridge() -> None:
    spec = to_spec(roofline_chart(ROOF))
    labels = {r["label"] for r in rows_of(spec) if "x2" in r}
    assert labels == {"bf16/fp16 400 TFLOP/s", "fp8 800 TFLOP/s"}
    ceilings = {r["label"]: r for r in rows_of(spec) if "x2" in r}
    # Each ceiling starts at its own ridge: peak TFLOP/s ÷ bandwidth TB/s.
    assert ceilings["fp8 800 TFLOP/s"]["x"] == pytest.approx(800 / 2.0)
    texts = [r.get("text", "") for r in rows_of(spec)]
    assert "ridge 200 FLOP/byte (bf16)" in texts


def test_zero_flop_operators_are_left_off_the_log_axes() -> None:
    names = [op["operator"] for op in plotted_operators(ROOF)]
    assert names == ["ffn", "total"]
    ffn = plotted_operators(ROOF)[0]
    # 4e9 FLOP in 1 ms = 4 TFLOP/s.
    assert ffn["attained_tflops"] == pytest.approx(4.0)
    assert plotted_operators(ROOF)[1]["label"] == "decode B=1"


def sweep_point(batch: int, ttft: float, fits: bool = True, **extra: float) -> dict[str, Any]:
    return {
        "batch_size": batch,
        "ttft_ms": ttft,
        "tpot_ms": ttft / 10,
        "output_tokens_per_s": 100.0 * batch,
        "memory": {"fits": fits},
        **extra,
    }


def test_sweep_draws_interval_band_only_when_present() -> None:
    plain = SweepData("chip", "tiny", "static", 128, 32, 8, [sweep_point(1, 10.0)])
    assert all(r["p10"] is None for r in sweep_rows(plain))
    with_band = SweepData(
        "chip",
        "tiny",
        "static",
        128,
        32,
        8,
        [sweep_point(1, 10.0, ttft_ms_p10=8.0, ttft_ms_p90=13.0)],
    )
    ttft = next(r for r in sweep_rows(with_band) if r["metric"] == "TTFT (ms)")
    assert (ttft["p10"], ttft["p90"]) == (8.0, 13.0)
    marks = [
        layer.get("mark")
        for panel in to_spec(sweep_chart(with_band))["hconcat"]
        for layer in panel["layer"]
    ]
    assert any(isinstance(m, dict) and m.get("type") == "area" for m in marks)
    plain_marks = [
        layer.get("mark")
        for panel in to_spec(sweep_chart(plain))["hconcat"]
        for layer in panel["layer"]
    ]
    assert not any(isinstance(m, dict) and m.get("type") == "area" for m in plain_marks)


def test_memory_limit_falls_back_to_largest_fitting_point() -> None:
    points = [sweep_point(1, 1.0), sweep_point(4, 2.0), sweep_point(16, 3.0, fits=False)]
    assert memory_limit(SweepData("chip", "tiny", "static", 1, 1, None, points)) == 4
    assert memory_limit(SweepData("chip", "tiny", "static", 1, 1, 12, points)) == 12
    svg = render(
        to_spec(sweep_chart(SweepData("chip", "tiny", "static", 1, 1, None, points))), "svg"
    )
    assert b"memory limit 4" in svg


def test_empty_frontier_says_so() -> None:
    svg = render(to_spec(frontier_chart(FrontierData(["tiny"], {"chip": []}))), "svg")
    assert b"no configuration meets the targets" in svg


def test_frontier_marks_points_that_miss_the_targets() -> None:
    point = {
        "model": "tiny",
        "parallelism": {"tp": 2, "pp": 1, "ep": 1},
        "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"},
        "concurrency": 8,
        "tokens_per_s_per_user": 50.0,
        "output_tokens_per_s_per_gpu": 300.0,
        "meets_slo": False,
    }
    rows = frontier_rows(FrontierData(["tiny"], {"chip": [point]}))
    assert rows[0]["tp"] == 2 and rows[0]["precision"] == "fp8/fp8/bf16"
    assert rows[0]["slo"] == "misses targets" and rows[0]["series"] == "chip"
    two_models = frontier_rows(FrontierData(["tiny", "big"], {"chip": [point]}))
    assert two_models[0]["series"] == "chip · tiny"


def traffic_answer(
    rate: float, ttft: tuple[float, float, float], saturated: bool = False
) -> dict[str, Any]:
    def band(p50: float, p90: float, p99: float) -> dict[str, float]:
        return {"mean": p50, "p50": p50, "p90": p90, "p99": p99}

    return {
        "request_rate_per_s": rate,
        "ttft_ms": band(*ttft),
        "tpot_ms": band(20.0, 22.0, 25.0),
        "e2e_latency_ms": band(5000.0, 5600.0, 6100.0),
        "saturated": saturated,
    }


TRAFFIC = TrafficSweepData(
    "chip",
    "tiny",
    1024,
    256,
    "Poisson",
    4.0,
    [traffic_answer(1.0, (100.0, 140.0, 210.0)), traffic_answer(5.0, (900.0, 2e3, 4e3), True)],
)


def test_traffic_band_spans_p50_to_p99_in_every_panel() -> None:
    rows = traffic_rows(TRAFFIC)
    ttft = [r for r in rows if r["metric"] == "TTFT (ms)"]
    assert [(r["p50"], r["p99"]) for r in ttft] == [(100.0, 210.0), (900.0, 4000.0)]
    assert [r["load"] for r in ttft] == ["keeps up", "saturated"]
    spec = to_spec(traffic_chart(TRAFFIC))
    assert len(spec["hconcat"]) == 3
    for panel in spec["hconcat"]:
        area = next(layer for layer in panel["layer"] if layer["mark"]["type"] == "area")
        assert area["encoding"]["y"]["field"] == "p50"
        assert area["encoding"]["y2"]["field"] == "p99"
        assert area["encoding"]["x"]["field"] == "request_rate_per_s"
    svg = render(spec, "svg")
    assert b"saturation 4.00/s" in svg


def test_traffic_rows_skip_metrics_without_samples() -> None:
    answer = traffic_answer(1.0, (100.0, 140.0, 210.0))
    answer["tpot_ms"] = {"mean": None, "p50": None, "p90": None, "p99": None}
    rows = traffic_rows(TrafficSweepData("chip", "tiny", 1, 1, "Poisson", 2.0, [answer]))
    assert {r["metric"] for r in rows} == {"TTFT (ms)", "end-to-end (ms)"}
