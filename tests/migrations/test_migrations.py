"""Migration history checks (pytest-alembic) on the database this run targets."""

from __future__ import annotations

from datetime import UTC, datetime

from pytest_alembic import MigrationContext
from pytest_alembic.tests import (
    test_model_definitions_match_ddl,
    test_single_head_revision,
    test_up_down_consistency,
    test_upgrade,
)
from sqlalchemy import Engine, column, inspect, table, text

__all__ = [
    "test_model_definitions_match_ddl",
    "test_single_head_revision",
    "test_up_down_consistency",
    "test_upgrade",
]


def test_downgrade_to_base_removes_every_table(
    alembic_runner: MigrationContext, alembic_engine: Engine
) -> None:
    alembic_runner.migrate_up_to("heads")
    tables = set(inspect(alembic_engine).get_table_names())
    assert {"accelerators", "models", "api_keys", "alembic_version"} <= tables
    alembic_runner.migrate_down_to("base")
    assert set(inspect(alembic_engine).get_table_names()) <= {"alembic_version"}


def test_profile_backends_take_one_spelling(
    alembic_runner: MigrationContext, alembic_engine: Engine
) -> None:
    """0008 renames stored backends to the canonical name; a rename that would collide with a
    profile of the same series takes the next free version."""
    alembic_runner.migrate_up_to("0007")
    profiles = table(
        "calibration_profiles",
        *(column(c) for c in ("id", "accelerator", "backend", "backend_version", "name")),
        column("version"), column("n_measurements"), column("result"), column("summary"),
        column("created_at"),
    )  # fmt: skip
    rows = [
        ("p1", "trtllm", 1, 1), ("p2", "TensorRT-LLM", 1, 2), ("p3", "vLLM", 1, 3),
        ("p4", "", 1, 4),
    ]  # fmt: skip
    with alembic_engine.begin() as connection:
        for profile_id, backend, version, minute in rows:
            connection.execute(
                profiles.insert().values(
                    id=profile_id, accelerator="h100-sxm", backend=backend, backend_version="",
                    name="run", version=version, n_measurements=1, result="{}", summary="{}",
                    created_at=datetime(2026, 12, 6, 12, minute, tzinfo=UTC),
                )
            )  # fmt: skip
    alembic_runner.migrate_up_to("0008")
    with alembic_engine.connect() as connection:
        stored = connection.execute(
            text("SELECT id, backend, version FROM calibration_profiles ORDER BY id")
        ).all()
    assert [tuple(r) for r in stored] == [
        ("p1", "trtllm", 1), ("p2", "trtllm", 2), ("p3", "vllm", 1), ("p4", "", 1),
    ]  # fmt: skip
