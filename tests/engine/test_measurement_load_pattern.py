"""The load pattern a serving measurement records, and its validation."""

from __future__ import annotations

import dataclasses

import pytest

from service.engine.calibration.measurements import (
    MeasurementError,
    ServingMeasurement,
    StaticMeasurement,
    validate,
)
from service.engine.calibration.parsers import parse_csv, parse_measurement_dicts


def _serving(**changes: object) -> ServingMeasurement:
    base = ServingMeasurement(
        model="qwen3-32b", input_tokens=1024, output_tokens=128, concurrency=16,
        ttft_ms=140.0, tpot_ms=9.8,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_defaults_are_closed_loop_and_static() -> None:
    m = _serving()
    assert (m.load_pattern, m.request_rate_per_s, m.arrival_process) == ("closed_loop", None, "")
    validate(m)
    s = StaticMeasurement(model="x", batch_size=1, input_tokens=1, output_tokens=1, latency_ms=1.0)
    assert s.load_pattern == "static"
    validate(s)


def test_open_loop_needs_a_rate() -> None:
    validate(_serving(load_pattern="open_loop", request_rate_per_s=4.0, arrival_process="poisson"))
    with pytest.raises(MeasurementError) as info:
        validate(_serving(load_pattern="open_loop"), 3)
    assert (info.value.row, info.value.field) == (3, "request_rate_per_s")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"load_pattern": "static"}, "load_pattern"),
        ({"load_pattern": "poisson"}, "load_pattern"),
        ({"request_rate_per_s": 4.0}, "request_rate_per_s"),
        ({"load_pattern": "offline", "arrival_process": "poisson"}, "arrival_process"),
        ({"load_pattern": "open_loop", "request_rate_per_s": -1.0}, "request_rate_per_s"),
        ({"load_pattern": "open_loop", "request_rate_per_s": float("inf")}, "request_rate_per_s"),
        (
            {"load_pattern": "open_loop", "request_rate_per_s": 2.0, "arrival_process": "bursty"},
            "arrival_process",
        ),
        ({"load_pattern": "open_loop", "request_rate_per_s": 2.0, "burstiness": 0.0}, "burstiness"),
    ],
)
def test_impossible_load_descriptions_name_the_field(
    changes: dict[str, object], field: str
) -> None:
    with pytest.raises(MeasurementError) as info:
        validate(_serving(**changes), 1)
    assert info.value.field == field


def test_static_load_pattern_is_static() -> None:
    s = StaticMeasurement(model="x", batch_size=1, input_tokens=1, output_tokens=1, latency_ms=1.0)
    with pytest.raises(MeasurementError) as info:
        validate(dataclasses.replace(s, load_pattern="closed_loop"))  # type: ignore[arg-type]
    assert info.value.field == "load_pattern"


def test_serving_csv_load_columns_are_optional() -> None:
    header = "model,isl,osl,concurrency,tp,ttft_ms,tpot_ms"
    plain = parse_csv(f"{header}\nqwen3-32b,1024,128,16,1,100,10\n").measurements[0]
    assert isinstance(plain, ServingMeasurement) and plain.load_pattern == "closed_loop"
    text = (
        f"{header},load_pattern,request_rate_per_s,arrival_process\n"
        "qwen3-32b,1024,128,6,1,100,10,open_loop,4,poisson\n"
        "qwen3-32b,1024,128,500,1,900,30,offline,,\n"
    )
    opened, offline = parse_csv(text).measurements
    assert isinstance(opened, ServingMeasurement) and isinstance(offline, ServingMeasurement)
    assert (opened.load_pattern, opened.request_rate_per_s, opened.arrival_process) == (
        "open_loop", 4.0, "poisson",
    )  # fmt: skip
    assert (offline.load_pattern, offline.concurrency) == ("offline", 500)
    with pytest.raises(MeasurementError) as info:
        parse_csv(f"{header},load_pattern\nqwen3-32b,1024,128,6,1,100,10,open_loop\n")
    assert (info.value.row, info.value.field) == (1, "request_rate_per_s")


def test_api_dicts_carry_the_load_pattern() -> None:
    item = {
        "kind": "serving", "model": "qwen3-32b", "input_tokens": 1024, "output_tokens": 128,
        "concurrency": 6, "ttft_ms": 100.0, "tpot_ms": 10.0, "load_pattern": "open_loop",
        "request_rate_per_s": 4.0, "arrival_process": "constant",
    }  # fmt: skip
    parsed = parse_measurement_dicts([item])
    (m,) = parsed.measurements
    assert isinstance(m, ServingMeasurement) and parsed.warnings == ()
    assert (m.load_pattern, m.request_rate_per_s, m.arrival_process) == (
        "open_loop", 4.0, "constant",
    )  # fmt: skip
    static = {"kind": "static", "model": "x", "batch_size": 1, "input_tokens": 1,
              "output_tokens": 1, "latency_ms": 5.0, "load_pattern": "offline"}  # fmt: skip
    with pytest.raises(MeasurementError) as info:
        parse_measurement_dicts([static])
    assert info.value.field == "load_pattern"
