"""Shared token buckets: the only place SQL for the rate_limit_buckets table lives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, case, delete, literal
from sqlalchemy.dialects import postgresql, sqlite

from service.db.models import RateLimitBucketRow

_TABLE: Table = RateLimitBucketRow.__table__  # type: ignore[assignment]


def _least(a: ColumnElement[float], b: ColumnElement[float]) -> ColumnElement[float]:
    return case((a < b, a), else_=b)  # portable LEAST (SQLite has no LEAST)


def spend(
    connection: Connection,
    bucket: str,
    spent: float,
    *,
    now_s: float,
    per_second: float,
    burst: float,
) -> float:
    """Refill a shared bucket to ``now_s``, take ``spent`` tokens; return the tokens left.

    One atomic statement (INSERT ... ON CONFLICT DO UPDATE ... RETURNING), so concurrent
    spenders on any process never lose each other's spending. The balance may go negative:
    tokens spent locally before the spender learnt the bucket was empty are a debt that the
    refill repays before the client is allowed again.
    """
    insert = (postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert)(
        _TABLE
    )
    current = _TABLE.c.tokens
    elapsed = case((now_s > _TABLE.c.updated_s, now_s - _TABLE.c.updated_s), else_=0.0)
    refilled = _least(current + elapsed * per_second, literal(float(burst)))
    statement: Any = insert.values(bucket=bucket, tokens=burst - spent, updated_s=now_s)
    statement = statement.on_conflict_do_update(
        index_elements=[_TABLE.c.bucket],
        set_={"tokens": refilled - spent, "updated_s": now_s},
    ).returning(_TABLE.c.tokens)
    return float(connection.execute(statement).scalar_one())


def spend_all(
    connection: Connection,
    spent: Mapping[str, tuple[float, float, float]],
    now_s: float,
) -> dict[str, float]:
    """``spend`` each ``bucket -> (spent, per_second, burst)``; return each bucket's balance."""
    return {
        bucket: spend(connection, bucket, n, now_s=now_s, per_second=rate, burst=burst)
        for bucket, (n, rate, burst) in spent.items()
    }


def forget_idle(connection: Connection, before_s: float) -> int:
    """Delete buckets untouched since ``before_s`` (they would be full again); return how many."""
    result = connection.execute(delete(_TABLE).where(_TABLE.c.updated_s < before_s))
    return int(getattr(result, "rowcount", 0))
