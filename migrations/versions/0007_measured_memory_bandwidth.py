"""Accelerator measured DRAM read bandwidth (GB/s; null when not measured).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("accelerators") as batch:
        batch.add_column(sa.Column("measured_memory_bandwidth_gb_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("accelerators") as batch:
        batch.drop_column("measured_memory_bandwidth_gb_s")
