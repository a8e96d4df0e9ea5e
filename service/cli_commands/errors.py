"""Turn client and input errors into a short message on stderr and exit status 1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from service.client import RidgelineError
from service.engine.calibration.measurements import MeasurementError


@contextmanager
def reported() -> Iterator[None]:
    """Report a RidgelineError (with its field errors) or a bad benchmark file, then exit 1."""
    console = Console(stderr=True)
    try:
        yield
    except RidgelineError as exc:
        console.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        for item in exc.errors:
            console.print(f"  {item.get('field', '?')}: {item.get('message', '')}", markup=False)
        raise typer.Exit(1) from exc
    except (MeasurementError, OSError, ValueError) as exc:
        console.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from exc
