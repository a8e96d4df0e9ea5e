"""``ridgeline catalog ls|show|import-hf``: accelerators and models in the catalog."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from service.api.schemas.accelerators import Accelerator
from service.api.schemas.models import Model
from service.cli_commands.connection import ApiKeyOption, UrlOption, open_client
from service.cli_commands.errors import reported
from service.cli_commands.output import CsvOption, JsonOption, emit, flatten, number, table
from service.client import NotFoundError, Ridgeline

catalog_app = typer.Typer(help="List, show and import catalog entries.", no_args_is_help=True)


class Kind(StrEnum):
    """Which catalog collection."""

    accelerators = "accelerators"
    models = "models"


def accelerator_table(items: list[Accelerator]) -> Any:
    """Accelerators with memory, bandwidth, dense peaks and price."""
    rows = [
        [
            a.id,
            a.vendor,
            number(a.memory_gb, 0),
            number(a.memory_bandwidth_gb_s, 0),
            number(a.peak_tflops.get("bf16"), 0),
            number(a.peak_tflops.get("fp8"), 0),
            number(a.ridge_point_flop_per_byte.get("bf16"), 0),
            number(a.price_usd_per_hour, 2),
        ]
        for a in items
    ]
    columns = ["id", "vendor", "memory GB", "GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "ridge bf16",
               "$/h"]  # fmt: skip
    return table(f"{len(items)} accelerators", columns, rows)


def model_table(items: list[Model]) -> Any:
    """Models with parameter counts and the shape fields that matter most."""
    rows = [
        [
            m.id,
            number((m.total_params or 0) / 1e9, 1),
            number((m.active_params or 0) / 1e9, 1),
            str(m.num_layers),
            str(m.hidden_size),
            f"{m.num_heads}/{m.num_kv_heads}",
            f"{m.num_experts}/{m.experts_per_token}" if m.num_experts else "-",
            str(m.max_context_tokens or "-"),
        ]
        for m in items
    ]
    columns = ["id", "total B", "active B", "layers", "hidden", "heads/kv", "experts/top-k",
               "context"]  # fmt: skip
    return table(f"{len(items)} models", columns, rows)


def detail_table(entry: Accelerator | Model) -> Any:
    """Every field of one entry, flattened."""
    data = flatten(entry.model_dump(mode="json"))
    return table(entry.id, ["field", "value"], [[k, str(v)] for k, v in data.items()])


@catalog_app.command("ls")
def list_entries(
    kind: Annotated[Kind, typer.Argument(help="accelerators or models.")] = Kind.accelerators,
    vendor: Annotated[str | None, typer.Option(help="Accelerators of this vendor.")] = None,
    family: Annotated[str | None, typer.Option(help="Models of this family.")] = None,
    moe: Annotated[bool | None, typer.Option("--moe/--dense", help="Only MoE/dense.")] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """List accelerators (default) or models."""
    with reported(), open_client(url, api_key) as client:
        items: list[Any]
        if kind is Kind.accelerators:
            items = list(client.list_accelerators(vendor=vendor))
        else:
            items = list(client.list_models(family=family, moe=moe))

    def render() -> Iterable[Any]:
        yield accelerator_table(items) if kind is Kind.accelerators else model_table(items)

    emit(items, as_json=as_json, as_csv=as_csv, rows=lambda: items, render=render)


def _lookup(client: Ridgeline, entry_id: str, kind: Kind | None) -> Accelerator | Model:
    if kind is Kind.models:
        return client.get_model(entry_id)
    if kind is Kind.accelerators:
        return client.get_accelerator(entry_id)
    try:
        return client.get_accelerator(entry_id)
    except NotFoundError:
        return client.get_model(entry_id)


@catalog_app.command("show")
def show(
    entry_id: Annotated[str, typer.Argument(help="Accelerator or model id.")],
    kind: Annotated[Kind | None, typer.Option("--kind", help="Where to look.")] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Show every field of one accelerator or model."""
    with reported(), open_client(url, api_key) as client:
        entry = _lookup(client, entry_id, kind)
    emit(
        entry,
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: [entry.model_dump(mode="json")],
        render=lambda: [detail_table(entry)],
    )


@catalog_app.command("import-hf")
def import_hf(
    config: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="A Hugging Face config.json.")
    ],
    model_id: Annotated[str, typer.Option("--id", help="Catalog id, e.g. qwen3-8b.")],
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    hf_repo: Annotated[
        str | None, typer.Option(help="Hugging Face repo, e.g. Qwen/Qwen3-8B.")
    ] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Add a model to the catalog from its Hugging Face config.json."""
    with reported():
        hf_config = json.loads(config.read_text(encoding="utf-8"))
        fields = {k: v for k, v in {"name": name, "hf_repo": hf_repo}.items() if v is not None}
        with open_client(url, api_key) as client:
            model = client.import_hf(model_id, hf_config, **fields)
    emit(
        model,
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: [model.model_dump(mode="json")],
        render=lambda: [detail_table(model)],
    )
