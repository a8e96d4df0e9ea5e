"""Shared rate-limit buckets; calibration profiles get an owner and a visibility.

``rate_limit_buckets`` holds one token bucket per (rule, client) that every worker process and
replica spends from (``service.db.rate_limit_repository``). Profiles stored before this
revision were used by every caller's ``"auto"``: they become ``published`` with no owner.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_buckets",
        sa.Column("bucket", sa.String(200), primary_key=True),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
    )
    op.create_index("ix_rate_limit_buckets_updated_s", "rate_limit_buckets", ["updated_s"])
    with op.batch_alter_table("calibration_profiles") as batch:
        batch.add_column(
            sa.Column("owner", sa.String(64), nullable=False, server_default=sa.text("''"))
        )
        batch.add_column(
            sa.Column(
                "visibility",
                sa.String(16),
                nullable=False,
                server_default=sa.text("'published'"),
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("calibration_profiles") as batch:
        batch.drop_column("visibility")
        batch.drop_column("owner")
    op.drop_index("ix_rate_limit_buckets_updated_s", table_name="rate_limit_buckets")
    op.drop_table("rate_limit_buckets")
