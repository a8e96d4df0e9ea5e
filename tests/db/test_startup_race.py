"""Replicas starting together on an empty database (issue 15, finding 4): all of them succeed.

Each replica is a process (Alembic's context is process-global) running the same start-up
work as ``ridgeline serve``: migrate to head, then seed, on one fresh database.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from sqlalchemy import func, select
from support import make_test_settings

from service.db.migrate import is_at_head
from service.db.models import AcceleratorRow
from service.db.session import make_engine, make_session_factory, session_scope
from service.services.bootstrap import prepare_database

REPLICAS = 4


def _start(url: str, data_dir: str, go: multiprocessing.synchronize.Event) -> None:

    settings = make_test_settings(
        url, Path(data_dir), migrate_on_startup=True, seed_on_startup=True
    )
    engine = make_engine(url)
    go.wait(30)
    try:
        prepare_database(settings, engine)
    finally:
        engine.dispose()


def test_replicas_migrate_and_seed_one_empty_database_together(
    database_factory: object, tmp_path: Path
) -> None:
    url = database_factory.empty()  # type: ignore[attr-defined]
    context = multiprocessing.get_context("fork")
    go = context.Event()
    processes = [
        context.Process(target=_start, args=(url, str(tmp_path), go)) for _ in range(REPLICAS)
    ]
    for process in processes:
        process.start()
    go.set()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * REPLICAS
    engine = make_engine(url)
    try:
        assert is_at_head(engine)
        with session_scope(make_session_factory(engine)) as session:
            count = session.scalar(select(func.count()).select_from(AcceleratorRow))
        assert count and count > 10
    finally:
        engine.dispose()
