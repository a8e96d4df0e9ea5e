"""Calibration profiles, their measurements, and idempotency keys.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calibration_profiles",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("accelerator", sa.String(length=100), nullable=False),
        sa.Column("backend", sa.String(length=50), nullable=False),
        sa.Column("backend_version", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("n_measurements", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibration_profiles")),
        sa.UniqueConstraint(
            "accelerator",
            "backend",
            "name",
            "version",
            name=op.f("uq_calibration_profiles_accelerator_backend_name_version"),
        ),
    )
    op.create_index(
        "ix_calibration_profiles_lookup",
        "calibration_profiles",
        ["accelerator", "backend", "created_at"],
    )
    op.create_table(
        "calibration_measurements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("profile_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["profile_id"],
            ["calibration_profiles.id"],
            name=op.f("fk_calibration_measurements_profile_id_calibration_profiles"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibration_measurements")),
        sa.UniqueConstraint(
            "profile_id", "position", name=op.f("uq_calibration_measurements_profile_id_position")
        ),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint(
            "owner", "endpoint", "key", name=op.f("uq_idempotency_keys_owner_endpoint_key")
        ),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("calibration_measurements")
    op.drop_index("ix_calibration_profiles_lookup", table_name="calibration_profiles")
    op.drop_table("calibration_profiles")
