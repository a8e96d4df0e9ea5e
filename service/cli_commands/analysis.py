"""``ridgeline estimate`` and ``ridgeline intensity``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import typer

from service.api.schemas.analysis import (
    EstimateResponse,
    ExtrapolationOut,
    IntensityResponse,
    PointOut,
)
from service.api.schemas.traffic import TrafficOut
from service.cli_commands.connection import ApiKeyOption, UrlOption, open_client
from service.cli_commands.errors import reported
from service.cli_commands.options import (
    Activations,
    AttentionDp,
    Backend,
    CalibrationOpt,
    Ep,
    KvCache,
    Pp,
    Tp,
    Weights,
    int_list,
    layout,
    present,
)
from service.cli_commands.output import CsvOption, JsonOption, emit, number, table

ModelArg = Annotated[str, typer.Argument(help="Model id, e.g. llama-3.1-70b.")]
AcceleratorArg = Annotated[str, typer.Argument(help="Accelerator id, e.g. h100-sxm.")]


def calibration_note(calibration: Any, why_none: str | None = None) -> str:
    """The table footer's account of the calibration (``why_none``: the answer's
    ``calibration_note``, said when no profile applies)."""
    if calibration is None:
        return "spec-sheet roofline (no calibration)" + (f" [{why_none}]" if why_none else "")
    note = f"calibration {calibration.name} ({calibration.id})"
    if calibration.transferred_from:
        note += f", transferred from {calibration.transferred_from}"
    if calibration.reason:
        note += f" [{calibration.reason}]"
    outside = [_outside(item) for item in calibration.extrapolation]
    if outside:
        note += "; outside its fit (intervals widened): " + ", ".join(outside)
    return note


def _outside(item: ExtrapolationOut) -> str:
    """``concurrency 512 (fitted 8-128)`` or ``model deepseek-r1 (fitted qwen3-32b)``."""
    requested = item.requested if isinstance(item.requested, str) else f"{item.requested:g}"
    if item.fitted_low is not None and item.fitted_high is not None:
        fitted = f"{item.fitted_low:g}-{item.fitted_high:g}"
    else:
        fitted = "/".join(item.fitted_values)
    return f"{item.dimension} {requested} (fitted {fitted})"


def estimate_rows(answer: EstimateResponse) -> Iterable[Mapping[str, Any]]:
    """One CSV row per point, with the request's model and accelerator."""
    for point in answer.points:
        yield {"model": answer.model, "accelerator": answer.accelerator, **point.model_dump()}


def traffic_table(traffic: TrafficOut) -> Any:
    """Percentiles of an open-loop stream, with saturation and goodput in the title."""
    title = (
        f"{number(traffic.request_rate_per_s, 2)} requests/s ({traffic.arrival.process}): "
        f"load {number(traffic.load_factor, 2)} of {number(traffic.saturation_requests_per_s, 2)}"
        " requests/s" + (f"; {traffic.message}" if traffic.message else "")
    )
    pools = traffic.disaggregation
    if traffic.goodput is not None:
        per = " per group" if pools is not None else ""
        title += f"; goodput {number(traffic.goodput.requests_per_s, 2)} requests/s{per}"
    if pools is not None:
        title += (
            f"; {pools.prefill_replicas}P{pools.decode_replicas}D over {pools.kv_transfer.link} "
            f"(load prefill {number(pools.prefill.load_factor, 2)}, decode "
            f"{number(pools.decode.load_factor, 2)}, KV link "
            f"{number(traffic.request_rate_per_s / pools.kv_transfer.capacity_requests_per_s, 2)}"
            f"; bottleneck {pools.bottleneck})"
        )
    columns = ["metric (ms)", "mean", "p50", "p90", "p99"]
    rows = [
        [name, number(p.mean), number(p.p50), number(p.p90), number(p.p99)]
        for name, p in (
            ("TTFT", traffic.ttft_ms),
            ("TPOT", traffic.tpot_ms),
            ("E2E", traffic.e2e_latency_ms),
            ("queue wait", traffic.queue_wait_ms),
            *((("KV transfer", pools.kv_transfer.transfer_ms),) if pools is not None else ()),
        )
    ]
    return table(title, columns, rows)


def estimate_tables(answer: EstimateResponse) -> Iterable[Any]:
    """The estimate as a rich table with a one-line header."""
    layout_note = (
        f"tp={answer.parallelism.tp} pp={answer.parallelism.pp} ep={answer.parallelism.ep}, "
        f"{answer.precision.weights}/{answer.precision.activations}/{answer.precision.kv_cache}"
    )
    # a serving sweep's batch sizes are clients (closed loop), requests in flight (open loop)
    # or queued requests (offline)
    mode = (
        f"serving ({answer.load_pattern.replace('_', ' ')})"
        if answer.mode == "serving"
        else answer.mode
    )
    engine = f", {answer.backend}" if answer.backend else ""
    title = (
        f"{answer.model} on {answer.accelerator} ({layout_note}), {mode}{engine}, "
        f"{answer.input_tokens} in / {answer.output_tokens} out"
    )
    columns = [
        "batch", "TTFT ms", "TPOT ms", "E2E ms", "out tok/s", "total tok/s", "req/s",
        "decode FLOP/B", "decode bound", "memory GB", "fits", "$/M out tok",
    ]  # fmt: skip
    rows = [
        [
            str(p.batch_size),
            number(p.ttft_ms),
            number(p.tpot_ms, 2),
            number(p.e2e_latency_ms),
            number(p.output_tokens_per_s),
            number(p.total_tokens_per_s),
            number(p.requests_per_s, 2),
            number(p.decode.arithmetic_intensity_flop_per_byte),
            p.decode.bound,
            number(p.memory.total_gb),
            "yes" if p.memory.fits else "no",
            number(p.cost.usd_per_million_output_tokens, 3),
        ]
        for p in answer.points
    ]
    yield table(title, columns, rows)
    if answer.mode == "serving":
        yield ttft_parts_line(answer.points)
    critical = answer.critical_batch_size
    if answer.traffic is not None:
        yield traffic_table(answer.traffic)
    calibration = calibration_note(answer.calibration, answer.calibration_note)
    yield (
        f"ridge point {number(answer.ridge_point_flop_per_byte)} FLOP/byte, "
        f"decode compute-bound from batch {critical if critical is not None else '-'}, "
        f"{number(answer.points[0].memory.capacity_gb) if answer.points else '-'} GB per GPU, "
        f"KV cache fits {answer.max_batch_size} sequences; {calibration}"
    )


def ttft_parts_line(points: Sequence[PointOut]) -> str:
    """What each serving point's TTFT waits for before its own prompt runs, in ms."""
    parts = ", ".join(
        f"{p.batch_size}: {number(p.queue_wait_ms)} + {number(p.admission_wait_ms)} + "
        f"{number(p.prompts_ahead_ms)}"
        for p in points
    )
    return f"TTFT before its own prompt, ms (queue wait + admission wait + prompts ahead): {parts}"


_RATIO = re.compile(r"^\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*$")


def pool_ratio(text: str) -> dict[str, int]:
    """Parse ``1P2D`` into traffic.disaggregation's replica counts (the API checks 1-16)."""
    match = _RATIO.match(text)
    if match is None:
        raise typer.BadParameter(
            f"expected XPYD such as 1P2D, got {text!r}", param_hint="--disaggregation"
        )
    return {"prefill_replicas": int(match.group(1)), "decode_replicas": int(match.group(2))}


def estimate(
    model: ModelArg,
    accelerator: AcceleratorArg,
    batch_sizes: Annotated[
        str, typer.Option("--batch-sizes", "-b", help="Comma-separated batch sizes.")
    ] = "1,8,64,256",
    input_tokens: Annotated[int, typer.Option(min=1, help="Prompt tokens per request.")] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1, help="Generated tokens per request.")] = 128,
    mode: Annotated[str, typer.Option(help="static or serving.")] = "static",
    load_pattern: Annotated[
        str | None,
        typer.Option(
            "--load-pattern",
            help="Serving: closed_loop (batch sizes are clients, the default), open_loop "
            "(batch sizes are requests in flight on average, arriving on their own) or "
            "offline (batch sizes are requests queued at once).",
        ),
    ] = None,
    weights: Weights = None,
    activations: Activations = None,
    kv_cache: KvCache = None,
    tp: Tp = None,
    pp: Pp = None,
    ep: Ep = None,
    attention_dp: AttentionDp = None,
    backend: Backend = None,
    calibration: CalibrationOpt = None,
    price_usd_per_hour: Annotated[
        float | None, typer.Option(help="Per-GPU price overriding the catalog's.")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            help="Open-loop traffic in requests/s: adds p50/p90/p99, saturation (docs/traffic.md).",
        ),
    ] = None,
    arrival_cv: Annotated[
        float | None,
        typer.Option(help="Gamma arrivals with this coefficient of variation (default Poisson)."),
    ] = None,
    slo_ttft_p90_ms: Annotated[
        float | None, typer.Option(help="With --rate: goodput target TTFT p90 (ms).")
    ] = None,
    slo_tpot_p99_ms: Annotated[
        float | None, typer.Option(help="With --rate: goodput target TPOT p99 (ms).")
    ] = None,
    disaggregation: Annotated[
        str | None,
        typer.Option(
            "--disaggregation",
            help="With --rate: serve the stream with X prefill-only and Y decode-only replicas, "
            "written XPYD (e.g. 1P2D; traffic.disaggregation, docs/traffic.md).",
        ),
    ] = None,
    kv_link: Annotated[
        str | None,
        typer.Option(help="With --disaggregation: auto, scale_up or scale_out (default auto)."),
    ] = None,
    lengths_preset: Annotated[
        str | None,
        typer.Option(
            "--lengths-preset",
            help="With --rate: prompt and output lengths drawn from this workload preset's "
            "distributions (e.g. azure-conversation-2023; GET /v1/workloads).",
        ),
    ] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Predict TTFT, TPOT, throughput, memory and cost per batch size (POST /v1/estimates)."""
    body = {
        "model": model,
        "accelerator": accelerator,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "batch_sizes": int_list(batch_sizes),
        "mode": mode,
        **layout(weights, activations, kv_cache, tp, pp, ep, attention_dp),
        **present(
            backend=backend,
            calibration=calibration,
            price_usd_per_hour=price_usd_per_hour,
            load_pattern=load_pattern,
        ),
    }
    if rate is not None:
        traffic: dict[str, Any] = {"request_rate_per_s": rate}
        if arrival_cv is not None:
            traffic["arrival"] = {"process": "gamma", "cv": arrival_cv}
        slo = present(ttft_ms_p90_max=slo_ttft_p90_ms, tpot_ms_p99_max=slo_tpot_p99_ms)
        if slo:
            traffic["slo"] = slo
        if disaggregation is not None:
            traffic["disaggregation"] = {
                **pool_ratio(disaggregation),
                **present(kv_link=kv_link),
            }
        elif kv_link is not None:
            raise typer.BadParameter("--kv-link needs --disaggregation", param_hint="--kv-link")
        if lengths_preset is not None:
            traffic["input_tokens"] = traffic["output_tokens"] = {"workload": lengths_preset}
        body["traffic"] = traffic
    elif disaggregation or kv_link or lengths_preset:
        raise typer.BadParameter(
            "--disaggregation, --kv-link and --lengths-preset need --rate", param_hint="--rate"
        )
    with reported(), open_client(url, api_key) as client:
        answer = client.estimate(body)
    emit(
        answer,
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: estimate_rows(answer),
        render=lambda: estimate_tables(answer),
    )


def intensity_rows(answer: IntensityResponse) -> Iterable[Mapping[str, Any]]:
    """One CSV row per operator, then the total."""
    yield from (op.model_dump() for op in answer.operators)
    yield answer.total.model_dump()


def intensity_tables(answer: IntensityResponse) -> Iterable[Any]:
    """Operators as a rich table, the total last."""
    title = (
        f"{answer.model} on {answer.accelerator}: {answer.phase}, batch {answer.batch_size}, "
        f"context {answer.context_tokens} tokens ({answer.compute_dtype})"
    )
    columns = ["operator", "GFLOP", "MB", "FLOP/byte", "bound", "time ms"]
    ops = [*answer.operators, answer.total]
    rows = [
        [
            op.name,
            number(op.flops / 1e9, 2),
            number(op.bytes / 1e6, 2),
            number(op.arithmetic_intensity_flop_per_byte),
            op.bound,
            number(op.time_ms, 4),
        ]
        for op in ops
    ]
    yield table(title, columns, rows)
    critical = answer.critical_batch_size
    yield (
        f"ridge point {number(answer.ridge_point_flop_per_byte)} FLOP/byte; "
        f"decode turns compute-bound at batch {critical if critical is not None else '-'}"
    )


def intensity(
    model: ModelArg,
    accelerator: AcceleratorArg,
    phase: Annotated[str, typer.Option(help="prefill or decode.")] = "decode",
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", min=1)] = 1,
    context_tokens: Annotated[
        int, typer.Option(min=1, help="Prefill: prompt tokens; decode: tokens already cached.")
    ] = 2048,
    weights: Weights = None,
    activations: Activations = None,
    kv_cache: KvCache = None,
    tp: Tp = None,
    pp: Pp = None,
    ep: Ep = None,
    attention_dp: AttentionDp = None,
    backend: Backend = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Per-operator FLOPs, bytes, arithmetic intensity and bound of one step."""
    body = {
        "model": model,
        "accelerator": accelerator,
        "phase": phase,
        "batch_size": batch_size,
        "context_tokens": context_tokens,
        **layout(weights, activations, kv_cache, tp, pp, ep, attention_dp),
        **present(backend=backend, calibration=calibration),
    }
    with reported(), open_client(url, api_key) as client:
        answer = client.intensity(body)
    emit(
        answer,
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: intensity_rows(answer),
        render=lambda: intensity_tables(answer),
    )
