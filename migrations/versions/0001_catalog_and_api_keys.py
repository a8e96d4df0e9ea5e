"""Catalog tables (accelerators, models) and API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _catalog_columns() -> list[sa.Column]:
    """Provenance, version and timestamp columns shared by catalog tables."""
    return [
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("field_sources", sa.JSON(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("seed_hash", sa.String(length=64), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "accelerators",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("vendor", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("memory_gb", sa.Float(), nullable=False),
        sa.Column("memory_type", sa.String(length=50), nullable=False),
        sa.Column("memory_bandwidth_gb_s", sa.Float(), nullable=False),
        sa.Column("peak_tflops", sa.JSON(), nullable=False),
        sa.Column("interconnect_gb_s", sa.Float(), nullable=False),
        sa.Column("tdp_w", sa.Float(), nullable=True),
        sa.Column("price_usd_per_hour", sa.Float(), nullable=True),
        sa.Column("price", sa.JSON(), nullable=True),
        sa.Column("confidence", sa.String(length=20), nullable=True),
        *_catalog_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accelerators")),
    )
    op.create_index(op.f("ix_accelerators_memory_gb"), "accelerators", ["memory_gb"])
    op.create_index(op.f("ix_accelerators_vendor"), "accelerators", ["vendor"])

    op.create_table(
        "models",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("family", sa.String(length=100), nullable=False),
        sa.Column("hf_repo", sa.String(length=200), nullable=True),
        sa.Column("total_params", sa.BigInteger(), nullable=False),
        sa.Column("active_params", sa.BigInteger(), nullable=False),
        sa.Column("num_layers", sa.Integer(), nullable=False),
        sa.Column("hidden_size", sa.Integer(), nullable=False),
        sa.Column("num_experts", sa.Integer(), nullable=False),
        sa.Column("vendor_stated_params", sa.JSON(), nullable=True),
        sa.Column("shape", sa.JSON(), nullable=False),
        *_catalog_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
    )
    op.create_index(op.f("ix_models_family"), "models", ["family"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_index(op.f("ix_models_family"), table_name="models")
    op.drop_table("models")
    op.drop_index(op.f("ix_accelerators_vendor"), table_name="accelerators")
    op.drop_index(op.f("ix_accelerators_memory_gb"), table_name="accelerators")
    op.drop_table("accelerators")
