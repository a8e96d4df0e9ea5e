"""Migration history checks (pytest-alembic) on the database this run targets."""

from __future__ import annotations

import json
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


def test_models_and_profiles_get_their_fitted_models_and_kinds(
    alembic_runner: MigrationContext, alembic_engine: Engine
) -> None:
    """0009 gives each stored model its kind (from its shape) and each stored profile rows for
    the models its domain was fitted on."""
    alembic_runner.migrate_up_to("0008")
    models = table(
        "models",
        *(column(c) for c in ("id", "name", "family", "total_params", "active_params")),
        *(column(c) for c in ("num_layers", "hidden_size", "num_experts", "shape", "sources")),
        *(column(c) for c in ("field_sources", "notes", "origin", "version", "created_at")),
        column("updated_at"),
    )
    profiles = table(
        "calibration_profiles",
        *(column(c) for c in ("id", "accelerator", "backend", "backend_version", "name")),
        column("version"), column("n_measurements"), column("result"), column("summary"),
        column("created_at"),
    )  # fmt: skip
    shapes = {"dense-m": ({}, 0), "moe-m": ({}, 8), "mla-m": ({"kv_lora_rank": 512}, 64)}
    at = datetime(2026, 12, 7, tzinfo=UTC)
    domain = {"models": [{"id": "dense-m", "kind": "dense"}, {"id": "moe-m", "kind": "moe"}]}
    with alembic_engine.begin() as connection:
        for model_id, (shape, experts) in shapes.items():
            connection.execute(
                models.insert().values(
                    id=model_id, name="", family="", total_params=1, active_params=1,
                    num_layers=1, hidden_size=1, num_experts=experts, shape=json.dumps(shape),
                    sources="[]", field_sources="{}", notes="", origin="user", version=1,
                    created_at=at, updated_at=at,
                )
            )  # fmt: skip
        for profile_id, result in (("p1", {"domain": domain}), ("p2", {})):
            connection.execute(
                profiles.insert().values(
                    id=profile_id, accelerator="h100-sxm", backend="", backend_version="",
                    name=profile_id, version=1, n_measurements=1, result=json.dumps(result),
                    summary="{}", created_at=at,
                )
            )  # fmt: skip
    alembic_runner.migrate_up_to("0009")
    with alembic_engine.connect() as connection:
        kinds = connection.execute(text("SELECT id, kind FROM models ORDER BY id")).all()
        fitted = connection.execute(
            text("SELECT profile_id, model_id, model_kind FROM calibration_profile_models")
        ).all()
    assert [tuple(r) for r in kinds] == [("dense-m", "dense"), ("mla-m", "mla"), ("moe-m", "moe")]
    assert sorted(tuple(r) for r in fitted) == [("p1", "dense-m", "dense"), ("p1", "moe-m", "moe")]
