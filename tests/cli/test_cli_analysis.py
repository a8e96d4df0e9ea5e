"""``ridgeline estimate|intensity|plan`` give the API's numbers as tables, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import Result

from service.api.schemas.analysis import CalibrationOut
from service.cli_commands.analysis import calibration_note
from service.cli_commands.output import number
from service.client import Ridgeline

Invoke = Callable[..., Result]

ESTIMATE_ARGS = ("estimate", "llama-3.1-70b", "h100-sxm", "-b", "1,64,512", "--calibration", "none")
ESTIMATE_BODY: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "accelerator": "h100-sxm",
    "input_tokens": 1024,
    "output_tokens": 128,
    "batch_sizes": [1, 64, 512],
    "calibration": "none",
}


def test_estimate_json_equals_api_and_client(
    ridgeline_cli: Invoke, client: TestClient, api_key: str
) -> None:
    result = ridgeline_cli(*ESTIMATE_ARGS, "--json")
    assert result.exit_code == 0, result.stderr
    from_cli = json.loads(result.stdout)
    from_api = client.post("/v1/estimates", json=ESTIMATE_BODY).json()
    from_client = Ridgeline(http_client=client).estimate(ESTIMATE_BODY).model_dump(mode="json")
    assert from_cli == from_api == from_client
    assert [p["batch_size"] for p in from_cli["points"]] == [1, 64, 512]


def test_estimate_options_reach_the_request(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(
        "estimate", "llama-3.1-8b", "h200-sxm", "-b", "4", "--input-tokens", "512",
        "--output-tokens", "64", "--mode", "serving", "--weights", "fp8", "--activations", "fp8",
        "--tp", "2", "--calibration", "none", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    body = {
        "model": "llama-3.1-8b",
        "accelerator": "h200-sxm",
        "batch_sizes": [4],
        "input_tokens": 512,
        "output_tokens": 64,
        "mode": "serving",
        "precision": {"weights": "fp8", "activations": "fp8"},
        "parallelism": {"tp": 2},
        "calibration": "none",
    }
    assert json.loads(result.stdout) == client.post("/v1/estimates", json=body).json()


def test_load_pattern_option_reaches_the_request(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "500", "--mode", "serving",
        "--backend", "trtllm", "--load-pattern", "offline", "--calibration", "none", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["load_pattern"] == "offline"
    body = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "batch_sizes": [500],
            "input_tokens": 1024, "output_tokens": 128, "mode": "serving", "backend": "trtllm",
            "load_pattern": "offline", "calibration": "none"}  # fmt: skip
    assert answer == client.post("/v1/estimates", json=body).json()


def test_table_title_names_the_load_pattern_and_backend(ridgeline_cli: Invoke) -> None:
    """A serving table says whether its batch sizes are clients or queued requests."""
    common = ("estimate", "llama-3.1-8b", "h100-sxm", "-b", "500", "--mode", "serving",
              "--calibration", "none")  # fmt: skip
    offline = ridgeline_cli(*common, "--backend", "trtllm", "--load-pattern", "offline")
    assert offline.exit_code == 0, offline.stderr
    assert "serving (offline), trtllm, 1024 in / 128 out" in " ".join(offline.stdout.split())
    closed = ridgeline_cli(*common)
    assert "serving (closed loop), 1024 in / 128 out" in " ".join(closed.stdout.split())


def test_table_footer_prints_the_bracketed_note_as_text(ridgeline_cli: Invoke) -> None:
    """The footer's "[...]" is the answer's own text, not rich markup to swallow."""
    result = ridgeline_cli(
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "4", "--mode", "serving",
        "--backend", "lmdeploy",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert (
        "spec-sheet roofline (no calibration) [auto: no profile of backend lmdeploy or fitted "
        "without a backend for this accelerator, so the spec sheet with the generic engine "
        "priors]"
    ) in " ".join(result.stdout.split())


def test_table_footer_names_what_lies_outside_the_profile() -> None:
    calibration = CalibrationOut.model_validate(
        {"id": "cal_1", "name": "h100 serving", "transferred_from": "h100-sxm",
         "reason": "the profile named by id",
         "extrapolation": [
             {"dimension": "concurrency", "requested": 512.0, "fitted_low": 8.0,
              "fitted_high": 128.0},
             {"dimension": "model", "requested": "deepseek-r1", "fitted_values": ["qwen3-32b"]},
         ]}
    )  # fmt: skip
    assert calibration_note(calibration) == (
        "calibration h100 serving (cal_1), transferred from h100-sxm [the profile named by id]; "
        "outside its fit "
        "(intervals widened): concurrency 512 (fitted 8-128), model deepseek-r1 (fitted qwen3-32b)"
    )


def test_attention_dp_option_reaches_the_request(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(
        "estimate", "deepseek-v3", "h200-sxm", "-b", "64", "--attention-dp", "8", "--ep", "8",
        "--calibration", "none", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["parallelism"] == {
        "tp": 1, "pp": 1, "ep": 8, "attention_dp": 8, "pp_virtual_stages": 1, "dp": 1,
    }  # fmt: skip
    assert answer["gpus_per_replica"] == 8


def test_estimate_csv_rows_carry_the_same_numbers(
    ridgeline_cli: Invoke, client: TestClient
) -> None:
    result = ridgeline_cli(*ESTIMATE_ARGS, "--csv")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    points = client.post("/v1/estimates", json=ESTIMATE_BODY).json()["points"]
    assert len(rows) == len(points) == 3
    for row, point in zip(rows, points, strict=True):
        assert int(row["batch_size"]) == point["batch_size"]
        assert float(row["tpot_ms"]) == point["tpot_ms"]
        assert float(row["memory.total_gb"]) == point["memory"]["total_gb"]
        assert row["decode.bound"] == point["decode"]["bound"]


def test_estimate_table_shows_each_batch(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(*ESTIMATE_ARGS)
    assert result.exit_code == 0, result.stderr
    points = client.post("/v1/estimates", json=ESTIMATE_BODY).json()["points"]
    assert "llama-3.1-70b on h100-sxm" in result.stdout
    lines = result.stdout.splitlines()
    for point in points:
        row = next(line for line in lines if line.startswith(f"│ {point['batch_size']} "))
        assert f"{point['tpot_ms']:,.2f}" in row and point["decode"]["bound"] in row


def test_serving_table_says_what_each_ttft_waits_for(
    ridgeline_cli: Invoke, client: TestClient
) -> None:
    """The footer names the parts of TTFT before the request's own prompt, as the API gives."""
    args = ("estimate", "qwen3-32b", "h100-sxm", "-b", "1,64", "--mode", "serving",
            "--backend", "sglang", "--tp", "2", "--calibration", "none")  # fmt: skip
    result = ridgeline_cli(*args)
    assert result.exit_code == 0, result.stderr
    body = {"model": "qwen3-32b", "accelerator": "h100-sxm", "batch_sizes": [1, 64],
            "mode": "serving", "backend": "sglang", "parallelism": {"tp": 2},
            "calibration": "none", "input_tokens": 1024, "output_tokens": 128}  # fmt: skip
    points = client.post("/v1/estimates", json=body).json()["points"]
    line = next(x for x in result.stdout.splitlines() if x.startswith("TTFT before its own"))
    for p in points:
        waits = (p["queue_wait_ms"], p["admission_wait_ms"], p["prompts_ahead_ms"])
        assert f"{p['batch_size']}: " + " + ".join(number(w) for w in waits) in line
    # SGLang's lockstep waves put other prompts ahead of a request; a lone client has none
    assert points[1]["prompts_ahead_ms"] > 0 == points[0]["prompts_ahead_ms"]
    static = ridgeline_cli(*ESTIMATE_ARGS)
    assert "TTFT before its own" not in static.stdout


def test_intensity_json_equals_api(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(
        "intensity", "llama-3.1-70b", "h100-sxm", "--batch-size", "64",
        "--context-tokens", "4096", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    body = {"model": "llama-3.1-70b", "accelerator": "h100-sxm", "phase": "decode",
            "batch_size": 64, "context_tokens": 4096}  # fmt: skip
    assert json.loads(result.stdout) == client.post("/v1/intensity", json=body).json()
    table = ridgeline_cli("intensity", "llama-3.1-70b", "h100-sxm", "--batch-size", "64")
    assert "ridge point" in table.stdout


def test_plan_json_equals_api(ridgeline_cli: Invoke, client: TestClient) -> None:
    result = ridgeline_cli(
        "plan", "llama-3.1-8b", "-a", "h100-sxm", "-a", "l40s", "-w", "chat",
        "--tpot-ms-max", "40", "-p", "bf16", "-p", "fp8:fp8", "--price", "h100-sxm=2.5",
        "--requests-per-s", "10", "--load-pattern", "closed_loop", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    body = {
        "models": ["llama-3.1-8b"],
        "accelerators": ["h100-sxm", "l40s"],
        "workload": "chat",
        "slo": {"tpot_ms_max": 40},
        "precisions": [{"weights": "bf16"}, {"weights": "fp8", "activations": "fp8"}],
        "price_usd_per_hour": {"h100-sxm": 2.5},
        "requests_per_s": 10,
        "load_pattern": "closed_loop",
    }
    expected = client.post("/v1/plans", json=body)
    assert expected.status_code == 200, expected.text
    answer = json.loads(result.stdout)
    assert answer == expected.json()
    assert answer["workload"]["load_pattern"] == "closed_loop"
    assert answer["configurations"], "the chat preset should be feasible for an 8B model"
    table = ridgeline_cli("plan", "llama-3.1-8b", "-a", "h100-sxm", "-w", "chat", "--top", "3")
    assert table.exit_code == 0, table.stderr
    assert "h100-sxm" in table.stdout and "configurations shown" in table.stdout
    assert "serving (open loop)" in table.stdout  # the plan's default load pattern


def test_plan_table_shows_the_blended_price_it_ranks_by(
    ridgeline_cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("plan", "llama-3.1-8b", "-a", "h100-sxm", "-w", "chat", "--top", "1")
    answer = json.loads(ridgeline_cli(*args, "--json").stdout)
    assert answer["objective"] == "min_cost_per_million_tokens"
    best = answer["configurations"][0]
    assert best["usd_per_million_tokens"] != best["usd_per_million_output_tokens"]
    monkeypatch.setenv("COLUMNS", "250")  # wide enough that rich does not fold the columns
    table = ridgeline_cli(*args)
    assert table.exit_code == 0, table.stderr
    assert "$/M tok" in table.stdout
    assert number(best["usd_per_million_tokens"], 3) in table.stdout
    assert number(best["usd_per_million_output_tokens"], 3) in table.stdout


def test_unknown_model_exits_1_with_the_problem(ridgeline_cli: Invoke) -> None:
    result = ridgeline_cli("estimate", "no-such-model", "h100-sxm", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "404" in result.stderr and "no-such-model" in result.stderr


def test_invalid_value_names_the_field(ridgeline_cli: Invoke) -> None:
    result = ridgeline_cli("estimate", "llama-3.1-8b", "h100-sxm", "--weights", "fp7")
    assert result.exit_code == 1
    assert "422" in result.stderr and "precision.weights" in result.stderr


def test_json_and_csv_together_is_refused(ridgeline_cli: Invoke) -> None:
    result = ridgeline_cli(*ESTIMATE_ARGS, "--json", "--csv")
    assert result.exit_code == 2


def test_estimate_with_a_rate_prints_percentiles_and_goodput(
    ridgeline_cli: Invoke, client: TestClient
) -> None:
    args = (
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "8", "--mode", "serving",
        "--calibration", "none", "--rate", "4", "--arrival-cv", "1.5",
        "--slo-ttft-p90-ms", "300", "--slo-tpot-p99-ms", "30",
    )  # fmt: skip
    result = ridgeline_cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    traffic = json.loads(result.stdout)["traffic"]
    assert traffic["arrival"] == {"process": "gamma", "cv": 1.5}
    assert traffic["goodput"]["slo"] == {"ttft_ms_p90_max": 300.0, "tpot_ms_p99_max": 30.0}
    table = ridgeline_cli(*args)
    assert table.exit_code == 0, table.stderr
    assert "goodput" in table.stdout and "p99" in table.stdout and "TTFT" in table.stdout


def test_client_sends_traffic_and_parses_it(client: TestClient) -> None:
    from service.client import TrafficIn

    answer = Ridgeline(http_client=client).estimate(
        {**ESTIMATE_BODY, "model": "llama-3.1-8b"},
        traffic=TrafficIn(request_rate_per_s=2.0),
    )
    assert answer.traffic is not None
    assert answer.traffic.request_rate_per_s == 2.0
    assert answer.traffic.ttft_ms.p50 is not None


def test_estimate_with_disaggregated_pools_sends_and_prints_them(ridgeline_cli: Invoke) -> None:
    """--disaggregation 1P2D --kv-link scale_out is traffic.disaggregation {1, 2, scale_out}:
    the answer names the pools and the group's GPUs (3 replicas of tp 1)."""
    args = (
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "8", "--mode", "serving",
        "--calibration", "none", "--rate", "4", "--disaggregation", "1p2d",
        "--kv-link", "scale_out",
    )  # fmt: skip
    result = ridgeline_cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    pools = json.loads(result.stdout)["traffic"]["disaggregation"]
    assert (pools["prefill_replicas"], pools["decode_replicas"], pools["gpus"]) == (1, 2, 3)
    assert pools["kv_transfer"]["link"] == "scale_out"
    table = ridgeline_cli(*args)
    assert table.exit_code == 0, table.stderr
    assert "1P2D over scale_out" in table.stdout and "KV transfer" in table.stdout
    # with targets, the goodput is the group's and the title says so
    slo = ("--slo-ttft-p90-ms", "2000", "--slo-tpot-p99-ms", "100")
    grouped = ridgeline_cli(*args, *slo)
    assert grouped.exit_code == 0, grouped.stderr
    assert re.search(r"goodput [0-9.]+ requests/s per group", " ".join(grouped.stdout.split()))


def test_estimate_with_a_lengths_preset_draws_its_lengths(ridgeline_cli: Invoke) -> None:
    """--lengths-preset azure-code-2023: mean lengths 2,079.7 in / 29.23 out (the preset's
    trapezoid sums, tests/engine/test_workload_lengths.py)."""
    result = ridgeline_cli(
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "8", "--mode", "serving",
        "--calibration", "none", "--rate", "2", "--lengths-preset", "azure-code-2023", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    traffic = json.loads(result.stdout)["traffic"]
    assert traffic["mean_input_tokens"] == pytest.approx(2079.723)
    assert traffic["mean_output_tokens"] == pytest.approx(29.23)


@pytest.mark.parametrize(
    "extra",
    [
        ("--rate", "4", "--disaggregation", "two-to-one"),
        ("--disaggregation", "1P1D"),  # without --rate
        ("--rate", "4", "--kv-link", "scale_up"),  # without --disaggregation
    ],
)
def test_bad_pool_options_are_usage_errors(ridgeline_cli: Invoke, extra: tuple[str, ...]) -> None:
    result = ridgeline_cli("estimate", "llama-3.1-8b", "h100-sxm", "-b", "8", *extra)
    assert result.exit_code == 2, result.stdout


def test_pool_counts_out_of_range_are_the_apis_422(ridgeline_cli: Invoke) -> None:
    result = ridgeline_cli(
        "estimate", "llama-3.1-8b", "h100-sxm", "-b", "8", "--mode", "serving",
        "--calibration", "none", "--rate", "4", "--disaggregation", "17P1D",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "422" in result.stderr and "traffic.disaggregation.prefill_replicas" in result.stderr
