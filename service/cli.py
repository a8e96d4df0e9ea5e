"""The ``ridgeline`` command line: serve, migrate, seed, API keys and the OpenAPI document.

Other features add subcommands in ``service/cli_<name>.py`` modules that define
``register(app: typer.Typer) -> None``; they are discovered and registered on start.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.orm import Session

import service
from service.db.session import make_engine, make_session_factory, session_scope
from service.settings import Settings

app = typer.Typer(
    name="ridgeline",
    help="Roofline estimates of LLM inference speed and cost.",
    no_args_is_help=True,
    add_completion=False,
)


@contextmanager
def db_session(settings: Settings | None = None, *, migrate: bool = True) -> Iterator[Session]:
    """Open a committed-on-success session, upgrading the schema first when allowed."""
    settings = settings or Settings()
    if migrate and settings.migrate_on_startup:
        from service.db.migrate import upgrade

        upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            yield session
    finally:
        engine.dispose()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
) -> None:
    """Run the HTTP API with uvicorn (migrating and seeding once before workers start)."""
    import uvicorn

    from service.api.logs import configure_logging
    from service.api.problems import database_unavailable
    from service.api.workers import (
        Supervisor,
        WorkerConfig,
        reuse_port_supported,
        uvicorn_options,
    )
    from service.services.bootstrap import prepare_database

    os.environ["RIDGELINE_WORKERS"] = str(workers)  # each worker's share of the pool budget
    settings = Settings()
    engine = make_engine(settings.database_url)
    try:
        prepare_database(settings, engine)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        # The workers start anyway, answer /readyz 503 and retry with backoff (api.startup).
        typer.echo(f"database unavailable ({type(exc).__name__}); workers will wait for it")
    else:
        # Workers must not repeat migrations or seeding: it is done above.
        os.environ["RIDGELINE_MIGRATE_ON_STARTUP"] = "false"
        os.environ["RIDGELINE_SEED_ON_STARTUP"] = "false"
    finally:
        engine.dispose()
    if workers > 1 and reuse_port_supported():
        configure_logging(settings.log_level)
        Supervisor(WorkerConfig(host, port, settings.log_level.lower()), workers).run()
        return
    uvicorn.run(
        "service.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=False,
        log_level=settings.log_level.lower(),
        **uvicorn_options(settings),
    )


@app.command()
def migrate(
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Upgrade the database schema to a revision (default: head)."""
    from service.db.migrate import upgrade

    settings = Settings()
    upgrade(settings.database_url, revision)
    typer.echo(f"database upgraded to {revision}")


@app.command()
def seed(
    restore_deleted: Annotated[
        bool, typer.Option("--restore-deleted", help="Bring back seeded rows users deleted.")
    ] = False,
) -> None:
    """Insert and refresh catalog rows from hardware_catalog/ (user rows are never touched)."""
    from service.services.seed import seed_catalog

    with db_session() as session:
        report = seed_catalog(session, restore_deleted=restore_deleted)
    typer.echo(
        f"inserted {len(report.inserted)}, updated {len(report.updated)}, "
        f"unchanged {report.unchanged}, kept user rows {len(report.kept_user_rows)}, "
        f"kept deleted {len(report.kept_deleted)}"
    )


@app.command("create-key")
def create_key(
    name: Annotated[str, typer.Option(help="Who or what the key is for.")],
    scope: Annotated[
        list[str] | None, typer.Option(help="read, write or admin (repeatable).")
    ] = None,
) -> None:
    """Create an API key and print it once (only its HMAC is stored)."""
    from service.services import auth

    settings = Settings()
    try:
        scopes = auth.normalise_scopes(scope or ["write"])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scope") from exc
    with db_session(settings) as session:
        row, key = auth.create_key(session, settings.api_key_pepper, name, scopes)
        key_id = row.id
    typer.echo(key)
    typer.echo(
        f"key id {key_id}, scopes {','.join(scopes)}: store it now, it is not shown again", err=True
    )


@app.command("list-keys")
def list_keys() -> None:
    """List API keys (id, name, prefix, scopes, created, revoked); never the keys themselves."""
    from service.services import auth

    with db_session() as session:
        for row in auth.list_keys(session):
            revoked = row.revoked_at.isoformat() if row.revoked_at else "-"
            typer.echo(
                f"{row.id}\t{row.name}\t{row.prefix}\t{','.join(row.scopes)}\t"
                f"{row.created_at.isoformat()}\t{revoked}"
            )


@app.command("revoke-key")
def revoke_key(
    key: Annotated[str, typer.Argument(help="Key id or lookup prefix (see list-keys).")],
) -> None:
    """Revoke an API key so it is refused from now on."""
    from service.services import auth
    from service.services.errors import NotFoundError

    try:
        with db_session() as session:
            row = auth.revoke_key(session, key)
            key_id, name = row.id, row.name
    except NotFoundError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"revoked key {key_id} ({name})")


@app.command("export-openapi")
def export_openapi(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """Write the OpenAPI document as JSON."""
    from service.api.app import create_app

    document = json.dumps(create_app(Settings()).openapi(), indent=2, sort_keys=True) + "\n"
    if output is None:
        typer.echo(document, nl=False)
    else:
        output.write_text(document)
        typer.echo(f"wrote {output}", err=True)


def register_extensions(target: typer.Typer) -> list[str]:
    """Import every ``service.cli_*`` module and let it add its commands to ``target``."""
    names = sorted(
        info.name for info in pkgutil.iter_modules(service.__path__) if info.name.startswith("cli_")
    )
    for name in names:
        module = importlib.import_module(f"service.{name}")
        module.register(target)
    return names


register_extensions(app)

if __name__ == "__main__":
    app()
