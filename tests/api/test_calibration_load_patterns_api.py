"""Load patterns through the API: stored with each measurement, readable on rows stored before
the field existed."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.models import CalibrationMeasurementRow

SERVING: dict[str, Any] = {
    "kind": "serving", "model": "qwen3-32b", "precision": {"weights": "fp8"},
    "parallelism": {"tp": 2}, "input_tokens": 1024, "output_tokens": 128, "concurrency": 16,
    "ttft_ms": 143.9, "tpot_ms": 9.77,
}  # fmt: skip
OPEN_LOOP: dict[str, Any] = {
    **SERVING, "concurrency": 3, "ttft_ms": 60.0, "tpot_ms": 8.1, "load_pattern": "open_loop",
    "request_rate_per_s": 2.5, "arrival_process": "poisson",
}  # fmt: skip


def _create(client: TestClient, headers: dict[str, str], *items: dict[str, Any]) -> str:
    body = {"accelerator": "h100-sxm", "name": "load", "measurements": list(items)}
    response = client.post("/v1/calibrations", json=body, headers=headers)
    assert response.status_code == 201, response.text
    profile_id: str = response.json()["id"]
    return profile_id


def _stored(client: TestClient, profile_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/calibrations/{profile_id}/measurements")
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_load_pattern_is_stored_with_the_measurement(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    profile_id = _create(client, auth_headers, SERVING, OPEN_LOOP)
    closed, opened = _stored(client, profile_id)
    assert (closed["load_pattern"], closed["request_rate_per_s"]) == ("closed_loop", None)
    assert (opened["load_pattern"], opened["request_rate_per_s"]) == ("open_loop", 2.5)
    assert opened["arrival_process"] == "poisson" and opened["concurrency"] == 3


def test_rows_stored_before_the_field_read_with_defaults(
    client: TestClient, auth_headers: dict[str, str], db_session: Session
) -> None:
    profile_id = _create(client, auth_headers, SERVING)
    new_fields = ("load_pattern", "request_rate_per_s", "arrival_process", "burstiness")
    query = select(CalibrationMeasurementRow).where(
        CalibrationMeasurementRow.profile_id == profile_id
    )
    for row in db_session.scalars(query):
        row.data = {k: v for k, v in row.data.items() if k not in new_fields}
    db_session.commit()
    db_session.expire_all()
    assert all("load_pattern" not in row.data for row in db_session.scalars(query))
    (stored,) = _stored(client, profile_id)
    assert stored["load_pattern"] == "closed_loop" and stored["request_rate_per_s"] is None
    assert stored["tpot_ms"] == SERVING["tpot_ms"]


def test_impossible_load_pattern_is_a_422_naming_the_field(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    bad = {**SERVING, "load_pattern": "open_loop"}  # no request rate
    body = {"accelerator": "h100-sxm", "name": "load", "measurements": [bad]}
    response = client.post("/v1/calibrations", json=body, headers=auth_headers)
    assert response.status_code == 422
    assert "measurements.0.request_rate_per_s" in response.text


def _extrapolation(client: TestClient, profile_id: str, **request: Any) -> dict[str, Any]:
    body = {
        "model": "qwen3-32b", "accelerator": "h100-sxm", "parallelism": {"tp": 2},
        "precision": {"weights": "fp8"}, "input_tokens": 1024, "output_tokens": 128,
        "mode": "serving", "calibration": profile_id, **request,
    }  # fmt: skip
    response = client.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    return {e["dimension"]: e for e in response.json()["calibration"]["extrapolation"]}


def test_an_estimate_names_a_load_pattern_its_profile_never_ran(
    client: TestClient, auth_headers: dict[str, str]
) -> None:
    closed_only = _create(client, auth_headers, SERVING, {**SERVING, "concurrency": 64})
    assert _extrapolation(client, closed_only, batch_sizes=[16]) == {}
    offline = _extrapolation(client, closed_only, batch_sizes=[16], load_pattern="offline")
    assert offline["load_pattern"]["requested"] == "offline"
    assert offline["load_pattern"]["fitted_values"] == ["closed_loop"]
    # an open-loop estimate's batch sizes are the requests in flight, checked as a load
    opened = _extrapolation(client, closed_only, batch_sizes=[4], load_pattern="open_loop")
    assert set(opened) == {"load_pattern", "concurrency"}
    assert opened["concurrency"]["requested"] == 4
    # a traffic-only answer is an open-loop stream: no concurrency of its own to check
    stream = _extrapolation(client, closed_only, traffic={"request_rate_per_s": 2.0})
    assert set(stream) == {"load_pattern"} and stream["load_pattern"]["requested"] == "open_loop"
    both = _create(client, auth_headers, SERVING, {**SERVING, "concurrency": 64}, OPEN_LOOP)
    assert _extrapolation(client, both, traffic={"request_rate_per_s": 2.0}) == {}
