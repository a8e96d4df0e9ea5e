"""``auto`` prefers a profile fitted on the request's model, or on a model of its kind.

Adds ``models.kind`` (dense / moe / mla) and ``calibration_profile_models`` (the models each
profile's end-to-end runs were fitted on, with their kind), and fills both from what is
stored: a model's kind from its shape, a profile's models from its result's domain.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _kind(shape: dict[str, Any], num_experts: int) -> str:
    """service.engine.calibration.domain.model_kind as of this revision (its own copy)."""
    if int(shape.get("kv_lora_rank") or 0) > 0:
        return "mla"
    return "moe" if num_experts > 0 else "dense"


def upgrade() -> None:
    op.add_column(
        "models", sa.Column("kind", sa.String(length=16), nullable=False, server_default="dense")
    )
    op.create_table(
        "calibration_profile_models",
        sa.Column("profile_id", sa.String(length=40), nullable=False),
        sa.Column("model_id", sa.String(length=100), nullable=False),
        sa.Column("model_kind", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["profile_id"],
            ["calibration_profiles.id"],
            name=op.f("fk_calibration_profile_models_profile_id_calibration_profiles"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "profile_id", "model_id", name=op.f("pk_calibration_profile_models")
        ),
    )
    connection = op.get_bind()
    models = sa.table(
        "models",
        sa.column("id", sa.String),
        sa.column("num_experts", sa.Integer),
        sa.column("shape", sa.JSON),
        sa.column("kind", sa.String),
    )
    for row in connection.execute(sa.select(models.c.id, models.c.num_experts, models.c.shape)):
        kind = _kind(row.shape or {}, int(row.num_experts or 0))
        if kind != "dense":
            connection.execute(models.update().where(models.c.id == row.id).values(kind=kind))
    profiles = sa.table("calibration_profiles", sa.column("id", sa.String), sa.column("result", sa.JSON))
    fitted = sa.table(
        "calibration_profile_models",
        sa.column("profile_id", sa.String),
        sa.column("model_id", sa.String),
        sa.column("model_kind", sa.String),
    )
    rows: list[dict[str, str]] = []
    for row in connection.execute(sa.select(profiles.c.id, profiles.c.result)):
        domain = (row.result or {}).get("domain") or {}
        kinds = {str(m["id"]): str(m["kind"]) for m in domain.get("models", ())}
        rows += [
            {"profile_id": row.id, "model_id": model_id, "model_kind": kind}
            for model_id, kind in kinds.items()
        ]
    if rows:
        connection.execute(fitted.insert(), rows)


def downgrade() -> None:
    op.drop_table("calibration_profile_models")
    with op.batch_alter_table("models") as batch:
        batch.drop_column("kind")
