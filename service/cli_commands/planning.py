"""``ridgeline plan``: ranked deployments for a workload and latency targets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import typer

from service.api.schemas.planning import PlanResponse
from service.cli_commands.connection import ApiKeyOption, UrlOption, open_client
from service.cli_commands.errors import reported
from service.cli_commands.options import Backend, CalibrationOpt, present
from service.cli_commands.output import CsvOption, JsonOption, emit, number, table

PRECISION_PARTS = ("weights", "activations", "kv_cache")


def parse_precision(text: str) -> dict[str, str]:
    """``fp8`` → weights only; ``fp8:fp8`` → weights and activations; a third part: KV cache."""
    parts = [p for p in text.split(":")]
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise typer.BadParameter(f"expected WEIGHTS[:ACTIVATIONS[:KV_CACHE]], got {text!r}")
    return dict(zip(PRECISION_PARTS, parts, strict=False))


def parse_prices(items: list[str]) -> dict[str, float]:
    """``h100-sxm=2.5`` pairs into a per-accelerator hourly price."""
    prices: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            prices[key] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key:
            raise typer.BadParameter(f"expected ACCELERATOR=USD_PER_HOUR, got {item!r}")
    return prices


def plan_rows(answer: PlanResponse) -> Iterable[Mapping[str, Any]]:
    """One CSV row per ranked configuration."""
    return (c.model_dump() for c in answer.configurations)


def plan_tables(answer: PlanResponse, top: int) -> Iterable[Any]:
    """The best configurations as a rich table, then the rejected count and notes.

    ``$/M tok`` is the blend of input and output prices at the workload's token mix, which
    min_cost_per_million_tokens ranks by; ``$/M out tok`` prices output tokens alone.
    """
    w = answer.workload
    targets = f"TTFT ≤ {number(w.ttft_ms_max)} ms, TPOT ≤ {number(w.tpot_ms_max)} ms"
    load = f" ({w.load_pattern.replace('_', ' ')})" if w.load_pattern else ""
    title = (
        f"plan for {w.id or 'custom workload'}: {w.input_tokens} in / {w.output_tokens} out, "
        f"{w.mode}{load}, {targets}, objective {answer.objective}"
    )
    columns = [
        "#", "model", "accelerator", "tp/pp/ep", "precision", "conc.", "TTFT ms", "TPOT ms",
        "tok/s/GPU", "replicas", "GPUs", "$/h", "$/M tok", "$/M out tok",
    ]  # fmt: skip
    rows = [
        [
            str(c.rank),
            c.model,
            c.accelerator,
            f"{c.parallelism.tp}/{c.parallelism.pp}/{c.parallelism.ep}",
            f"{c.precision.weights}/{c.precision.activations}/{c.precision.kv_cache}",
            str(c.concurrency),
            number(c.ttft_ms),
            number(c.tpot_ms, 2),
            number(c.output_tokens_per_s_per_gpu),
            str(c.replicas),
            str(c.gpus),
            number(c.usd_per_hour, 2),
            number(c.usd_per_million_tokens, 3),
            number(c.usd_per_million_output_tokens, 3),
        ]
        for c in answer.configurations[:top]
    ]
    yield table(title, columns, rows)
    shown = min(top, len(answer.configurations))
    yield (
        f"{shown} of {len(answer.configurations)} configurations shown, "
        f"{len(answer.rejected)} candidates rejected, {answer.candidates_evaluated} evaluated"
    )
    yield from answer.notes


def plan(
    models: Annotated[list[str], typer.Argument(help="Model ids.")],
    accelerator: Annotated[
        list[str] | None,
        typer.Option("--accelerator", "-a", help="Accelerator id (repeatable; default: all)."),
    ] = None,
    workload: Annotated[
        str | None, typer.Option("--workload", "-w", help="Preset: chat, code-completion, ...")
    ] = None,
    input_tokens: Annotated[int | None, typer.Option(min=1)] = None,
    output_tokens: Annotated[int | None, typer.Option(min=1)] = None,
    ttft_ms_max: Annotated[float | None, typer.Option(help="TTFT target (ms).")] = None,
    tpot_ms_max: Annotated[float | None, typer.Option(help="TPOT target (ms).")] = None,
    objective: Annotated[str | None, typer.Option(help="e.g. min_cost_per_million_tokens.")] = None,
    requests_per_s: Annotated[float | None, typer.Option(help="Traffic to size for.")] = None,
    precision: Annotated[
        list[str] | None,
        typer.Option("--precision", "-p", help="WEIGHTS[:ACTIVATIONS[:KV]] (repeatable)."),
    ] = None,
    max_gpus_per_replica: Annotated[int | None, typer.Option(min=1)] = None,
    price: Annotated[
        list[str] | None, typer.Option(help="ACCELERATOR=USD_PER_HOUR per GPU (repeatable).")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="static or serving.")] = None,
    load_pattern: Annotated[
        str | None,
        typer.Option(
            "--load-pattern",
            help="Serving: open_loop (requests arrive on their own, the default), closed_loop "
            "(clients that send the next request when the last ends) or offline.",
        ),
    ] = None,
    backend: Backend = None,
    calibration: CalibrationOpt = None,
    top: Annotated[int, typer.Option(min=1, help="Rows of the table.")] = 10,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Rank deployments (accelerator, layout, precision, concurrency) meeting the targets."""
    slo = present(ttft_ms_max=ttft_ms_max, tpot_ms_max=tpot_ms_max)
    body = present(
        models=models,
        accelerators=accelerator or None,
        workload=workload,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        slo=slo or None,
        objective=objective,
        requests_per_s=requests_per_s,
        precisions=[parse_precision(p) for p in precision] if precision else None,
        max_gpus_per_replica=max_gpus_per_replica,
        price_usd_per_hour=parse_prices(price) if price else None,
        mode=mode,
        load_pattern=load_pattern,
        backend=backend,
        calibration=calibration,
    )
    with reported(), open_client(url, api_key) as client:
        answer = client.plan(body)
    emit(
        answer,
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: plan_rows(answer),
        render=lambda: plan_tables(answer, top),
    )
