"""Start-up work: migrate to head and seed the catalog, as the settings ask."""

from __future__ import annotations

import logging

from sqlalchemy import Engine

from service.db.locks import database_lock
from service.db.migrate import upgrade
from service.db.session import make_session_factory, session_scope
from service.services.seed import SeedReport, seed_catalog
from service.settings import Settings

logger = logging.getLogger("ridgeline.bootstrap")


def prepare_database(settings: Settings, engine: Engine) -> SeedReport | None:
    """Upgrade to head (if enabled) then seed (if enabled); return the seed report.

    Both run under the database's start-up lock (``database_lock``), so replicas starting
    together on one database do this one after another: the first migrates and seeds, the
    others find the schema at head and the catalog seeded (seeding is idempotent).
    """
    if not settings.migrate_on_startup and not settings.seed_on_startup:
        return None
    with database_lock(engine):
        if settings.migrate_on_startup:
            upgrade(settings.database_url)
        if not settings.seed_on_startup:
            return None
        with session_scope(make_session_factory(engine)) as session:
            report = seed_catalog(session)
    logger.info(
        "catalog seeded",
        extra={
            "fields": {
                "inserted": len(report.inserted),
                "updated": len(report.updated),
                "kept_user_rows": len(report.kept_user_rows),
            }
        },
    )
    return report
