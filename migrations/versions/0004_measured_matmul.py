"""Measured maximum achievable matmul TFLOP/s per dtype on accelerators (nullable JSON).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("accelerators") as batch:
        batch.add_column(sa.Column("measured_matmul_tflops", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("accelerators") as batch:
        batch.drop_column("measured_matmul_tflops")
