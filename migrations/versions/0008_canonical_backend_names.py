"""Calibration profiles name their backend in one spelling (lower case, engine aliases).

Requests are matched to profiles by backend; a profile stored as ``TensorRT-LLM`` or ``vLLM``
was chosen only for a request spelled the same way. Rows are renamed to the canonical name
(``service.engine.backend_names`` at this revision); a row whose renamed (accelerator,
backend, name, version) is taken by another takes the next free version of that series.
Downgrading keeps the canonical names (the old spellings are not recorded).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# service.engine.backend_names.ALIASES as of this revision (a migration keeps its own copy).
_ALIASES = {
    "tensorrt-llm": "trtllm",
    "tensorrt_llm": "trtllm",
    "tensorrtllm": "trtllm",
    "trt-llm": "trtllm",
}


def _canonical(name: str) -> str:
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def upgrade() -> None:
    connection = op.get_bind()
    profiles = sa.table(
        "calibration_profiles",
        sa.column("id", sa.String),
        sa.column("accelerator", sa.String),
        sa.column("backend", sa.String),
        sa.column("name", sa.String),
        sa.column("version", sa.Integer),
        sa.column("created_at", sa.DateTime),
    )
    rows = connection.execute(
        sa.select(
            profiles.c.id,
            profiles.c.accelerator,
            profiles.c.backend,
            profiles.c.name,
            profiles.c.version,
        ).order_by(profiles.c.created_at, profiles.c.id)
    ).all()
    taken = {(r.accelerator, r.backend, r.name, r.version) for r in rows}
    for r in rows:
        backend = _canonical(r.backend)
        if backend == r.backend:
            continue
        version = r.version
        while (r.accelerator, backend, r.name, version) in taken:
            version += 1
        taken.discard((r.accelerator, r.backend, r.name, r.version))
        taken.add((r.accelerator, backend, r.name, version))
        connection.execute(
            profiles.update()
            .where(profiles.c.id == r.id)
            .values(backend=backend, version=version)
        )


def downgrade() -> None:
    pass
