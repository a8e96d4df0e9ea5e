"""HTTP tests of the open-loop traffic part of POST /v1/estimates."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.schemas.analysis import EstimateResponse


def body(**traffic: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 1024,
        "output_tokens": 128,
        "mode": "serving",
        "calibration": "none",
        "traffic": {"request_rate_per_s": 4.0, **traffic},
    }
    return request


def post(client: TestClient, request: dict[str, Any]) -> Any:
    return client.post("/v1/estimates", json=request)


def test_rate_based_estimate_has_percentiles_and_saturation(client: TestClient) -> None:
    response = post(client, body())
    assert response.status_code == 200, response.text
    answer = response.json()
    EstimateResponse.model_validate(answer)
    assert answer["points"] == []
    traffic = answer["traffic"]
    for metric in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "queue_wait_ms"):
        p = traffic[metric]
        assert p["p50"] <= p["p90"] <= p["p99"]
    assert traffic["saturated"] is False and traffic["overload_factor"] is None
    assert traffic["saturation_requests_per_s"] > 4.0
    assert traffic["load_factor"] == pytest.approx(4.0 / traffic["saturation_requests_per_s"])
    assert traffic["achieved_requests_per_s"] == pytest.approx(4.0, rel=0.15)
    assert traffic["scheduler"]["scheduling"] == "decode_first"
    assert traffic["scheduler"]["max_num_batched_tokens"] == 8192


def test_points_are_unchanged_by_traffic(client: TestClient) -> None:
    plain = {k: v for k, v in body().items() if k != "traffic"}
    plain["batch_sizes"] = [1, 8]
    without = post(client, plain).json()
    with_traffic = post(client, {**body(), "batch_sizes": [1, 8]}).json()
    assert with_traffic["points"] == without["points"]
    assert "traffic" in with_traffic


def test_backend_defaults_follow_the_engine_docs(client: TestClient) -> None:
    sglang = post(client, {**body(), "backend": "sglang"}).json()["traffic"]["scheduler"]
    assert sglang["scheduling"] == "prefill_first"
    assert sglang["max_num_batched_tokens"] == 8192
    vllm = post(client, {**body(), "backend": "vllm"}).json()["traffic"]["scheduler"]
    assert vllm["max_running_requests"] == 1024  # H100: 80 GB ≥ 70 GiB, not an A100
    trtllm = post(client, {**body(), "backend": "trtllm"}).json()["traffic"]["scheduler"]
    assert trtllm["max_running_requests"] == 2048  # the LLM API's max_batch_size default
    own = post(client, body(max_num_batched_tokens=2048, max_running_requests=64))
    assert own.json()["traffic"]["scheduler"]["max_num_batched_tokens"] == 2048
    assert own.json()["traffic"]["scheduler"]["max_running_requests"] == 64


def test_distributions_and_bursty_arrivals(client: TestClient) -> None:
    response = post(
        client,
        body(
            arrival={"process": "gamma", "cv": 2.0},
            input_tokens={"percentiles": {"p50": 300, "p90": 900}, "max": 2000},
            output_tokens={"histogram": {"bin_edges_tokens": [1, 100, 400], "shares": [0.5, 0.5]}},
        ),
    )
    assert response.status_code == 200, response.text
    traffic = response.json()["traffic"]
    assert traffic["arrival"] == {"process": "gamma", "cv": 2.0}
    assert traffic["mean_output_tokens"] == pytest.approx(0.5 * 50.5 + 0.5 * 250.0)


def test_beyond_saturation_is_a_200_that_says_by_how_much(client: TestClient) -> None:
    response = post(client, body(request_rate_per_s=500.0))
    assert response.status_code == 200
    traffic = response.json()["traffic"]
    assert traffic["saturated"] is True
    assert traffic["overload_factor"] == pytest.approx(500.0 / traffic["saturation_requests_per_s"])
    assert "cannot keep up" in traffic["message"]


def test_goodput_meets_its_targets(client: TestClient) -> None:
    slo = {"ttft_ms_p90_max": 100.0, "tpot_ms_p99_max": 15.0}
    response = post(client, body(slo=slo))
    assert response.status_code == 200, response.text
    goodput = response.json()["traffic"]["goodput"]
    assert goodput["slo"] == slo
    assert goodput["requests_per_s"] > 0
    assert goodput["ttft_ms"]["p90"] <= 100.0 and goodput["tpot_ms"]["p99"] <= 15.0


@pytest.mark.parametrize(
    ("traffic", "field"),
    [
        ({"request_rate_per_s": 0}, "traffic.request_rate_per_s"),
        ({"request_rate_per_s": -1.0}, "traffic.request_rate_per_s"),
        (
            {"input_tokens": {"percentiles": {"p50": 500, "p90": 100}, "max": 900}},
            "traffic.input_tokens.percentiles",
        ),
        (
            {
                "output_tokens": {
                    "histogram": {"bin_edges_tokens": [1, 10, 20], "shares": [0.5, 0.2]}
                }
            },
            "traffic.output_tokens.histogram.shares",
        ),
        ({"input_tokens": {"percentiles": {"p50": 500}}}, "traffic.input_tokens.max"),
        ({"input_tokens": {"percentiles": {"p100": 500}, "max": 900}}, "traffic.input_tokens"),
        ({"arrival": {"process": "poisson", "cv": 3.0}}, "traffic.arrival.cv"),
        ({"arrival": {"process": "weibull"}}, "traffic.arrival.process"),
        ({"scheduling": "random"}, "traffic.scheduling"),
        (
            {"max_running_requests": 4096, "max_num_batched_tokens": 1024},
            "traffic.max_running_requests",
        ),
        ({"num_requests": 1_000_000}, "traffic.num_requests"),
        ({"slo": {"ttft_ms_p95_max": 10}}, "traffic.slo.ttft_ms_p95_max"),
        ({"surprise": 1}, "traffic.surprise"),
    ],
)
def test_bad_traffic_is_a_422_naming_the_field(
    client: TestClient, traffic: dict[str, Any], field: str
) -> None:
    response = post(client, body(**traffic))
    assert response.status_code == 422, response.text
    fields = [e["field"] for e in response.json()["errors"]]
    assert any(f.startswith(field) for f in fields), fields


def test_without_batch_sizes_or_traffic_is_a_422(client: TestClient) -> None:
    request = {k: v for k, v in body().items() if k != "traffic"}
    response = post(client, request)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "batch_sizes"


def test_batch_items_may_carry_traffic(client: TestClient) -> None:
    plain = {k: v for k, v in body().items() if k != "traffic"}
    response = client.post(
        "/v1/estimates/batch", json={"items": [body(), {**plain, "batch_sizes": [4]}]}
    )
    assert response.status_code == 200
    first, second = response.json()["items"]
    assert first["traffic"]["ttft_ms"]["p50"] > 0
    assert "traffic" not in second or second["traffic"] is None


def test_the_readme_example_answers(client: TestClient) -> None:
    request = {
        "model": "llama-3.1-8b",
        "accelerator": "a100-sxm-80gb",
        "backend": "vllm",
        "input_tokens": 1024,
        "output_tokens": 256,
        "traffic": {
            "request_rate_per_s": 6,
            "arrival": {"process": "gamma", "cv": 1.5},
            "input_tokens": {"percentiles": {"p50": 300, "p90": 1200, "p99": 2500}, "max": 4000},
            "output_tokens": {"percentiles": {"p50": 200, "p90": 500}, "mean": 260},
            "slo": {"ttft_ms_p90_max": 500, "tpot_ms_p99_max": 50},
        },
    }
    response = post(client, request)
    assert response.status_code == 200, response.text
    traffic = response.json()["traffic"]
    assert traffic["mean_output_tokens"] == pytest.approx(260.0, rel=0.01)
    # vLLM on an A100: 2,048 tokens per step and 256 running requests (EngineArgs defaults).
    assert traffic["scheduler"]["max_num_batched_tokens"] == 2048
    assert traffic["scheduler"]["max_running_requests"] == 256
    assert traffic["goodput"]["requests_per_s"] > 0


def test_prefix_cache_hits_shorten_ttft(client: TestClient) -> None:
    cold = post(client, body()).json()["traffic"]
    warm = post(client, body(prefix_cache_hit_rate=0.75)).json()["traffic"]
    assert warm["prefix_cache_hit_rate"] == 0.75
    assert warm["ttft_ms"]["p50"] < cold["ttft_ms"]["p50"]
    bad = post(client, body(prefix_cache_hit_rate=1.0))
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "traffic.prefix_cache_hit_rate"


def test_speculative_decoding_shortens_tpot(client: TestClient) -> None:
    plain = post(client, body()).json()["traffic"]
    fast = post(client, body(speculative={"draft_tokens": 3, "acceptance_rate": 0.7})).json()
    scheduler = fast["traffic"]["scheduler"]
    assert scheduler["decode_tokens_per_step"] == 4
    assert scheduler["tokens_per_decode_step"] == pytest.approx((1 - 0.7**4) / (1 - 0.7))
    assert fast["traffic"]["tpot_ms"]["p50"] < plain["tpot_ms"]["p50"]
    bad = post(client, body(speculative={"draft_tokens": 0, "acceptance_rate": 0.7}))
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "traffic.speculative.draft_tokens"


def test_mtp_drafter_needs_a_model_with_mtp_layers(client: TestClient) -> None:
    spec = {"draft_tokens": 2, "acceptance_rate": 0.7, "drafter": "mtp"}
    bad = post(client, body(speculative=spec))  # Llama-3.1-8B ships no MTP module
    assert bad.status_code == 422
    error = bad.json()["errors"][0]
    assert error["field"] == "traffic.speculative.drafter" and "MTP layers" in error["message"]
    unknown = post(client, body(speculative={**spec, "drafter": "eagle"}))
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["field"] == "traffic.speculative.drafter"
    assert client.get("/v1/models/deepseek-v3").json()["mtp_layers"] == 1


def test_deepseek_v3_drafts_with_its_mtp_module(client: TestClient) -> None:
    """The MTP drafter's k block steps make each step slower than the unpriced drafter's."""
    request = {**body(), "model": "deepseek-v3", "accelerator": "h200-sxm"}
    request["parallelism"] = {"tp": 8}
    spec = {"draft_tokens": 2, "acceptance_rate": 0.7}
    generic = post(client, {**request, "traffic": {**request["traffic"], "speculative": spec}})
    mtp_spec = {**spec, "drafter": "mtp"}
    mtp = post(client, {**request, "traffic": {**request["traffic"], "speculative": mtp_spec}})
    assert generic.status_code == 200 and mtp.status_code == 200, mtp.text
    assert mtp.json()["traffic"]["tpot_ms"]["p50"] > generic.json()["traffic"]["tpot_ms"]["p50"]


def test_json_integers_with_a_zero_fraction_are_integers(client: TestClient) -> None:
    """JSON Schema's integer includes 512.0: the same stream as 512."""
    as_ints = post(client, body(input_tokens=512, max_running_requests=64, seed=3)).json()
    as_floats = post(client, body(input_tokens=512.0, max_running_requests=64.0, seed=3.0))
    assert as_floats.status_code == 200, as_floats.text
    assert as_floats.json()["traffic"] == as_ints["traffic"]
    assert as_ints["traffic"]["mean_input_tokens"] == 512
    assert as_ints["traffic"]["scheduler"]["max_running_requests"] == 64


@pytest.mark.parametrize(
    ("traffic", "field"),
    [
        ({"input_tokens": 512.5}, "traffic.input_tokens"),
        ({"max_running_requests": True}, "traffic.max_running_requests"),
        ({"prefix_cache_hit_rate": "0.5"}, "traffic.prefix_cache_hit_rate"),
        ({"arrival": {"process": "gamma", "cv": True}}, "traffic.arrival.cv"),
    ],
)
def test_non_numbers_and_fractions_are_refused(
    client: TestClient, traffic: dict[str, Any], field: str
) -> None:
    response = post(client, body(**traffic))
    assert response.status_code == 422, response.text
    assert all(e["field"].startswith(field) for e in response.json()["errors"])


def test_the_document_states_poisson_takes_no_cv(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["ArrivalIn"]["if"] == {"properties": {"process": {"const": "poisson"}}}
    assert schemas["ArrivalIn"]["then"] == {"properties": {"cv": {"enum": [1, None]}}}
    accepted = post(client, body(arrival={"process": "poisson", "cv": 1.0}))
    assert accepted.status_code == 200, accepted.text


def test_a_workload_preset_supplies_the_length_distributions(client: TestClient) -> None:
    """The azure-conversation-2023 preset's distributions have means 1,152.9 (input) and
    213.4 (output) tokens: the trapezoid sums of its percentile knots (engine test)."""
    preset = {"workload": "azure-conversation-2023"}
    response = post(client, body(input_tokens=preset, output_tokens=preset, num_requests=200))
    assert response.status_code == 200, response.text
    traffic = response.json()["traffic"]
    assert traffic["mean_input_tokens"] == pytest.approx(1152.912)
    assert traffic["mean_output_tokens"] == pytest.approx(213.356)


def test_a_listed_distribution_sent_back_is_the_same_mix(client: TestClient) -> None:
    items = {w["id"]: w for w in client.get("/v1/workloads").json()["items"]}
    listed = items["azure-code-2023"]["output_lengths"]
    response = post(client, body(output_tokens=listed, num_requests=200))
    assert response.status_code == 200, response.text
    assert response.json()["traffic"]["mean_output_tokens"] == pytest.approx(29.23)


@pytest.mark.parametrize(
    ("lengths", "field"),
    [
        ({"workload": "no-such-preset"}, "traffic.input_tokens"),
        ({"workload": "chat"}, "traffic.input_tokens"),  # a preset without distributions
        (
            {"workload": "azure-code-2023", "percentiles": {"p50": 100}, "max": 900},
            "traffic.input_tokens",
        ),
    ],
)
def test_a_bad_length_preset_is_a_422(
    client: TestClient, lengths: dict[str, Any], field: str
) -> None:
    response = post(client, body(input_tokens=lengths))
    assert response.status_code == 422, response.text
    fields = [e["field"] for e in response.json()["errors"]]
    assert any(f.startswith(field) for f in fields), fields


@pytest.mark.parametrize("backend", ["vllm", "sglang", "trtllm"])
def test_an_open_loop_estimate_agrees_with_the_simulated_stream_below_saturation(
    client: TestClient, backend: str
) -> None:
    """Two computations of the same open-loop load: the step-by-step simulation of a Poisson
    stream, and the closed form at the requests it holds in flight (Little's law: rate × mean
    end-to-end latency). Well below saturation their mean TTFT and TPOT agree. The closed loop at
    that concurrency is another load: SGLang's prefill-first scheduler keeps a closed loop's
    clients in lockstep waves, each request's prompt behind half the others'."""
    stream = post(client, {**body(request_rate_per_s=6.0, num_requests=1500), "backend": backend})
    traffic = stream.json()["traffic"]
    assert traffic["load_factor"] < 0.5
    in_flight = traffic["achieved_requests_per_s"] * traffic["e2e_latency_ms"]["mean"] / 1e3
    plain = {k: v for k, v in body().items() if k != "traffic"}
    points = {
        pattern: post(
            client,
            {**plain, "backend": backend, "batch_sizes": [round(in_flight)],
             "load_pattern": pattern},
        ).json()["points"][0]
        for pattern in ("open_loop", "closed_loop")
    }  # fmt: skip
    opened = points["open_loop"]
    assert opened["ttft_ms"] == pytest.approx(traffic["ttft_ms"]["mean"], rel=0.25)
    assert opened["tpot_ms"] == pytest.approx(traffic["tpot_ms"]["mean"], rel=0.10)
    assert opened["requests_per_s"] == pytest.approx(traffic["achieved_requests_per_s"], rel=0.15)
    if backend == "sglang":
        assert points["closed_loop"]["ttft_ms"] > 3 * traffic["ttft_ms"]["mean"]
