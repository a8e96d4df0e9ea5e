"""The ``ridgeline`` analysis and catalog commands, each on the local database or a server.

``service.cli`` discovers this package (``cli_*``) and calls ``register``.
"""

from __future__ import annotations

import typer

from service.cli_commands.analysis import estimate, intensity
from service.cli_commands.calibrate import calibrate
from service.cli_commands.catalog import catalog_app
from service.cli_commands.planning import plan


def register(app: typer.Typer) -> None:
    """Add estimate, intensity, plan, calibrate and the catalog group to ``app``."""
    app.command()(estimate)
    app.command()(intensity)
    app.command()(plan)
    app.command()(calibrate)
    app.add_typer(catalog_app, name="catalog")
