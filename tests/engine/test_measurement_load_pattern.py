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
