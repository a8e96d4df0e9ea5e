"""pytest-alembic fixtures: an empty database of the kind this run targets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pytest_alembic.config import Config
from sqlalchemy import Engine

from service.db.migrate import MIGRATIONS_DIR
from service.db.session import make_engine


@pytest.fixture
def alembic_config() -> Config:
    return Config(config_options={"script_location": str(MIGRATIONS_DIR)})


@pytest.fixture
def alembic_engine(database_factory: Any) -> Iterator[Engine]:
    engine = make_engine(database_factory.empty())
    yield engine
    engine.dispose()
