"""Catalog deletion tombstones: seeded rows users deleted, which seeding must not restore.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "catalog_deletions",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "id", name=op.f("pk_catalog_deletions")),
    )


def downgrade() -> None:
    op.drop_table("catalog_deletions")
