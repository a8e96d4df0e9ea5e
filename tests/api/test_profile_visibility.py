"""Calibration profile visibility: a private profile is listed, read and used (by id or by
"auto") only with the API key that uploaded it; everyone else sees published profiles only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.client.measurement_files import read_measurement_file
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.auth import revoke_key
from service.services.calibration import check_visibility
from service.services.errors import FieldError
from service.settings import Settings

GEMM = Path(__file__).parents[1] / "data" / "benchmarks" / "h100_gemm_subset.csv"
ESTIMATE = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1, 8],
}


def upload(
    client: TestClient, key: str, name: str, backend: str | None = None, **query: str
) -> dict[str, Any]:
    rows = read_measurement_file(GEMM, accelerator="h100-sxm").measurements
    body = {"accelerator": "h100-sxm", "name": name, "backend": backend, "measurements": rows}
    response = client.post("/v1/calibrations", params=query, json=body, headers={"X-API-Key": key})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def headers(key: str | None) -> dict[str, str]:
    return {} if key is None else {"X-API-Key": key}


def chosen(client: TestClient, key: str | None, calibration: str = "auto") -> Any:
    response = client.post(
        "/v1/estimates", json={**ESTIMATE, "calibration": calibration}, headers=headers(key)
    )
    if response.status_code != 200:
        return response.status_code
    calibration_out = response.json()["calibration"]
    return None if calibration_out is None else calibration_out["id"]


@pytest.fixture
def keys(make_api_key: Callable[..., str]) -> dict[str, str]:
    return {"alice": make_api_key("write"), "bob": make_api_key("write")}


@pytest.fixture
def profiles(client: TestClient, keys: dict[str, str]) -> dict[str, str]:
    """Alice publishes one profile, then stores a newer private one; Bob stores nothing."""
    published = upload(client, keys["alice"], "shared")
    private = upload(client, keys["alice"], "mine", visibility="private")
    assert published["visibility"] == "published" and private["visibility"] == "private"
    return {"published": published["id"], "private": private["id"]}


def test_only_the_owner_lists_and_reads_a_private_profile(
    client: TestClient, keys: dict[str, str], profiles: dict[str, str]
) -> None:
    made_up = "rl_0123456789ab_not-a-real-key"
    for key, expected in (
        (None, [profiles["published"]]),
        (keys["bob"], [profiles["published"]]),
        (made_up, [profiles["published"]]),
        (keys["alice"], [profiles["published"], profiles["private"]]),
    ):
        listed = client.get("/v1/calibrations", headers=headers(key))
        assert listed.status_code == 200
        assert [p["id"] for p in listed.json()["items"]] == expected, key
    private = profiles["private"]
    for path in (f"/v1/calibrations/{private}", f"/v1/calibrations/{private}/measurements"):
        for key in (None, keys["bob"], made_up):
            hidden = client.get(path, headers=headers(key))
            assert hidden.status_code == 404, (path, key)
            assert hidden.headers["content-type"] == "application/problem+json"
        assert client.get(path, headers=headers(keys["alice"])).status_code == 200
    # Bob's 404 is the same answer as for an id that never existed.
    unknown = client.get("/v1/calibrations/cal_nope", headers=headers(keys["bob"])).json()
    assert client.get(f"/v1/calibrations/{private}").json()["title"] == unknown["title"]


def test_auto_picks_published_profiles_and_the_callers_own(
    client: TestClient, keys: dict[str, str], profiles: dict[str, str]
) -> None:
    # The private profile is the newest, but only its owner's "auto" takes it; asking as
    # Alice first must not leave it in a cache other callers read.
    assert chosen(client, keys["alice"]) == profiles["private"]
    assert chosen(client, None) == profiles["published"]
    assert chosen(client, keys["bob"]) == profiles["published"]
    assert chosen(client, keys["alice"]) == profiles["private"]
    # By id: the owner may use it, anyone else gets the unknown-id 404.
    assert chosen(client, keys["alice"], profiles["private"]) == profiles["private"]
    assert chosen(client, keys["bob"], profiles["private"]) == 404
    assert chosen(client, None, profiles["private"]) == 404
    assert chosen(client, None, profiles["published"]) == profiles["published"]


def test_another_keys_newer_private_profile_is_never_chosen(
    client: TestClient, keys: dict[str, str], profiles: dict[str, str]
) -> None:
    bobs = upload(client, keys["bob"], "bobs", visibility="private")["id"]
    assert chosen(client, keys["bob"]) == bobs
    assert chosen(client, keys["alice"]) == profiles["private"]
    assert chosen(client, None) == profiles["published"]


def test_batches_and_intensity_apply_the_same_visibility(
    client: TestClient, keys: dict[str, str], profiles: dict[str, str]
) -> None:
    items = [{**ESTIMATE, "calibration": profiles["private"]}, {**ESTIMATE}]
    for key, first_status in ((keys["alice"], None), (keys["bob"], 404)):
        response = client.post("/v1/estimates/batch", json={"items": items}, headers=headers(key))
        assert response.status_code == 200
        first, second = response.json()["items"]
        if first_status is None:
            assert first["calibration"]["id"] == profiles["private"]
            assert second["calibration"]["id"] == profiles["private"]  # auto: her own, newest
        else:
            assert first["status"] == first_status
            assert second["calibration"]["id"] == profiles["published"]
    step = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "phase": "decode",
        "batch_size": 8,
        "context_tokens": 1024,
        "calibration": profiles["private"],
    }
    assert client.post("/v1/intensity", json=step, headers=headers(keys["bob"])).status_code == 404
    mine = client.post("/v1/intensity", json=step, headers=headers(keys["alice"]))
    assert mine.status_code == 200 and mine.json()["calibration"]["id"] == profiles["private"]


def test_a_revoked_key_loses_its_private_profiles_on_the_next_request_everywhere(
    client: TestClient,
    other_worker: TestClient,
    keys: dict[str, str],
    profiles: dict[str, str],
    settings: Settings,
) -> None:
    """Two app instances on one database (two replicas): both have just verified Alice's key
    (cached for KEY_CACHE_TTL_S = 30 s). The key is revoked as `ridgeline revoke-key` does;
    the very next request on each instance, with no time passing, sees published profiles only:
    the listing, the profile and its measurements, "auto" and the id in an estimate."""
    alice, private = keys["alice"], profiles["private"]
    for app in (client, other_worker):
        assert chosen(app, alice) == private  # the key is verified and cached on both
        assert app.get(f"/v1/calibrations/{private}", headers=headers(alice)).status_code == 200
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            revoke_key(session, alice.split("_")[1])
    finally:
        engine.dispose()
    for app in (client, other_worker):
        listed = app.get("/v1/calibrations", headers=headers(alice)).json()["items"]
        assert [p["id"] for p in listed] == [profiles["published"]]
        for path in (f"/v1/calibrations/{private}", f"/v1/calibrations/{private}/measurements"):
            assert app.get(path, headers=headers(alice)).status_code == 404, path
        assert chosen(app, alice) == profiles["published"]
        assert chosen(app, alice, private) == 404


PLAN = {
    "models": ["llama-3.1-8b"],
    "accelerators": ["h100-sxm"],
    "workload": "chat",
    "slo": {"ttft_ms_max": 5000, "tpot_ms_max": 200},
    "concurrency_levels": 4,
}
CHARTS: dict[str, dict[str, str]] = {
    "roofline": {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "batch_sizes": "1,8"},
    "sweep": {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "batch_sizes": "1,8"},
    "traffic": {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "rates": "1,2"},
    "frontier": {"models": "llama-3.1-8b", "accelerators": "h100-sxm", "workload": "chat"},
}


@pytest.fixture
def unlimited(settings: Settings) -> Iterator[TestClient]:
    """A client without rate limits: these tests send more heavy requests than its burst."""
    app = create_app(settings.model_copy(update={"rate_limit_enabled": False}))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def distinct(unlimited: TestClient, keys: dict[str, str]) -> dict[str, str]:
    """Alice publishes a profile, then stores a newer private one fitted on the same GEMMs
    measured 1.5x slower, so that charts drawn with one or the other differ."""
    rows = read_measurement_file(GEMM, accelerator="h100-sxm").measurements
    slower = [{**row, "latency_ms": row["latency_ms"] * 1.5} for row in rows]
    ids = {}
    for name, measurements, query in (
        ("published", rows, {}),
        ("private", slower, {"visibility": "private"}),
    ):
        response = unlimited.post(
            "/v1/calibrations",
            params=query,
            json={"accelerator": "h100-sxm", "name": name, "measurements": measurements},
            headers=headers(keys["alice"]),
        )
        assert response.status_code == 201, response.text
        ids[name] = response.json()["id"]
    return ids


def plan_calibrations(client: TestClient, key: str | None, calibration: str = "auto") -> Any:
    response = client.post(
        "/v1/plans", json={**PLAN, "calibration": calibration}, headers=headers(key)
    )
    if response.status_code != 200:
        return response.status_code
    configurations = response.json()["configurations"]
    assert configurations
    return {c["calibration"]["id"] for c in configurations}


def test_plans_use_a_private_profile_only_with_its_owners_key(
    unlimited: TestClient, keys: dict[str, str], distinct: dict[str, str]
) -> None:
    alice, bob, private = keys["alice"], keys["bob"], distinct["private"]
    assert plan_calibrations(unlimited, alice) == {private}  # "auto": her own, newest
    assert plan_calibrations(unlimited, bob) == {distinct["published"]}
    assert plan_calibrations(unlimited, None) == {distinct["published"]}
    assert plan_calibrations(unlimited, alice, private) == {private}
    for key in (bob, None, "rl_0123456789ab_not-a-real-key"):
        assert plan_calibrations(unlimited, key, private) == 404, key


def chart(client: TestClient, name: str, key: str | None, calibration: str) -> Any:
    params = {**CHARTS[name], "calibration": calibration, "format": "vega"}
    response = client.get(f"/v1/charts/{name}", params=params, headers=headers(key))
    return response.json() if response.status_code == 200 else response.status_code


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_charts_use_a_private_profile_only_with_its_owners_key(
    unlimited: TestClient, keys: dict[str, str], distinct: dict[str, str], name: str
) -> None:
    """The private profile's fit is 1.5x slower, so its chart differs from the published one's:
    another caller's "auto" draws the published profile's chart, and its id is a 404."""
    alice, bob, private = keys["alice"], keys["bob"], distinct["private"]
    published_chart = chart(unlimited, name, bob, distinct["published"])
    private_chart = chart(unlimited, name, alice, private)
    assert isinstance(published_chart, dict) and isinstance(private_chart, dict)
    assert published_chart != private_chart
    assert chart(unlimited, name, alice, "auto") == private_chart
    assert chart(unlimited, name, bob, "auto") == published_chart
    assert chart(unlimited, name, None, "auto") == published_chart
    assert chart(unlimited, name, bob, private) == 404
    assert chart(unlimited, name, None, private) == 404


def test_visibility_must_be_published_or_private(client: TestClient, keys: dict[str, str]) -> None:
    rows = read_measurement_file(GEMM, accelerator="h100-sxm").measurements
    response = client.post(
        "/v1/calibrations",
        params={"visibility": "secret"},
        json={"accelerator": "h100-sxm", "name": "x", "measurements": rows},
        headers={"X-API-Key": keys["alice"]},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "visibility"


def test_a_private_profile_needs_an_owning_key() -> None:
    # Writes over HTTP always carry a verified key; the in-process CLI may not.
    check_visibility("private", "0123456789ab")
    check_visibility("published", "")
    with pytest.raises(FieldError, match="needs an API key"):
        check_visibility("private", "")


def test_auto_says_why_it_took_no_profile_and_counts_only_visible_ones(
    client: TestClient, keys: dict[str, str]
) -> None:
    """With no profile to take, ``calibration_note`` says so and counts the profiles of other
    backends the caller may see; with a profile, or with ``none``, it is null."""

    def note(key: str | None, **fields: str) -> Any:
        response = client.post("/v1/estimates", json={**ESTIMATE, **fields}, headers=headers(key))
        assert response.status_code == 200, response.text
        assert response.json()["calibration"] is None
        return response.json()["calibration_note"]

    plain = (
        "auto: no profile of backend vllm or fitted without a backend for this accelerator, "
        "so the spec sheet with vllm's engine priors"
    )
    assert note(None, backend="vllm") == plain
    assert note(None, backend="vllm", calibration="none") is None
    upload(client, keys["alice"], "trt", backend="trtllm")
    upload(client, keys["bob"], "bobs sglang", backend="sglang", visibility="private")
    listing = "(GET /v1/calibrations?accelerator=h100-sxm)"
    assert note(None, backend="vllm") == (
        f"{plain}; 1 profile of other backends is stored for it; auto never applies another "
        "engine's overheads: name one by id to use its kernel efficiencies with vllm's engine "
        f"priors {listing}"
    )
    bobs = note(keys["bob"], backend="vllm")
    assert bobs.startswith(f"{plain}; 2 profiles of other backends are")
    assert note(keys["bob"]) == (
        "auto: no profile fitted without a backend for this accelerator, so the spec sheet "
        "with the generic engine priors; 2 profiles of named backends are stored for it: name "
        f"the request's backend to use them {listing}"
    )
    assert "the generic engine priors; 1 profile" in note(None, backend="lmdeploy")
    # on another accelerator, the profile auto could take here is named as a transfer
    assert note(None, backend="trtllm", accelerator="h200-sxm") == (
        "auto: no profile of backend trtllm or fitted without a backend for this accelerator, "
        "so the spec sheet with trtllm's engine priors; 1 profile of backend trtllm or fitted "
        "without a backend is stored for other accelerators; auto never transfers one: name it "
        "by id to apply it to this accelerator's spec sheet, with wider intervals "
        "(GET /v1/calibrations)"
    )
    assert "stored for other accelerators" not in note(None, accelerator="h200-sxm")
    taken = client.post("/v1/estimates", json={**ESTIMATE, "backend": "trtllm"}).json()
    assert taken["calibration"] is not None and taken["calibration_note"] is None
    step = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "phase": "decode",
            "batch_size": 8, "context_tokens": 1024, "backend": "vllm"}  # fmt: skip
    response = client.post("/v1/intensity", json=step)
    assert response.status_code == 200, response.text
    intensity = response.json()
    assert intensity["calibration"] is None
    assert intensity["calibration_note"] == note(None, backend="vllm")
    # a plan says it per accelerator, and only where profiles were left aside
    plan = {"models": ["llama-3.1-8b"], "accelerators": ["h100-sxm", "a100-sxm-80gb"],
            "input_tokens": 1024, "output_tokens": 128, "backend": "vllm",
            "slo": {"ttft_ms_max": 100000, "tpot_ms_max": 1000},
            "concurrency_levels": 2}  # fmt: skip
    response = client.post("/v1/plans", json=plan)
    assert response.status_code == 200, response.text
    notes = response.json()["notes"]
    assert f"h100-sxm: {note(None, backend='vllm')}" in notes
    assert not any(n.startswith("a100-sxm-80gb: auto") for n in notes)
    trt = client.post("/v1/plans", json={**plan, "backend": "trtllm"})
    assert trt.status_code == 200, trt.text
    expected = note(None, backend="trtllm", accelerator="a100-sxm-80gb")
    assert f"a100-sxm-80gb: {expected}" in trt.json()["notes"]
    assert not any(n.startswith("h100-sxm: auto") for n in trt.json()["notes"])
