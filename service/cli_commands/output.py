"""Render answers as rich tables (default), JSON (--json) or CSV (--csv) on stdout."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]
CsvOption = Annotated[bool, typer.Option("--csv", help="Print CSV rows for scripts.")]


def plain(value: Any) -> Any:
    """JSON-ready data from pydantic models (and containers of them)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested objects into dotted column names (lists become JSON text)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def write_csv(rows: Iterable[Mapping[str, Any]]) -> None:
    """Write flattened rows as CSV with the union of their columns."""
    flat = [flatten(plain(row)) for row in rows]
    columns: list[str] = []
    for row in flat:
        columns.extend(c for c in row if c not in columns)
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)


def number(value: float | int | None, digits: int = 1) -> str:
    """Format a number for a table cell (blank for null)."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    magnitude = abs(value)
    if magnitude and (magnitude >= 1e7 or magnitude < 10 ** (-digits)):
        return f"{value:.3g}"
    return f"{value:,.{digits}f}"


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """A rich table with right-aligned columns after the first."""
    out = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        out.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        out.add_row(*row)
    return out


def emit(
    answer: Any,
    *,
    as_json: bool,
    as_csv: bool,
    rows: Callable[[], Iterable[Mapping[str, Any]]],
    render: Callable[[], Iterable[Any]],
) -> None:
    """Print ``answer`` as JSON, its ``rows`` as CSV, or the rich renderables of ``render``."""
    if as_json and as_csv:
        raise typer.BadParameter("choose one of --json and --csv")
    if as_json:
        sys.stdout.write(json.dumps(plain(answer), indent=2) + "\n")
    elif as_csv:
        write_csv(rows())
    else:
        # Rich wraps at 80 columns when not on a terminal: give piped tables room instead.
        console = Console(width=None if sys.stdout.isatty() else 200)
        for renderable in render():
            # plain strings are the answer's own text: "[auto: ...]" is not rich markup
            console.print(renderable, markup=False)
