"""Shared token buckets: the only place SQL for the rate_limit_buckets table lives."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Table,
    bindparam,
    case,
    cast,
    delete,
    extract,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite

from service.db.models import RateLimitBucketRow

_TABLE: Table = RateLimitBucketRow.__table__  # type: ignore[assignment]


def _least(a: ColumnElement[float], b: ColumnElement[float]) -> ColumnElement[float]:
    return case((a < b, a), else_=b)  # portable LEAST (SQLite has no LEAST)


def _greatest(a: ColumnElement[float], b: ColumnElement[float]) -> ColumnElement[float]:
    return case((a > b, a), else_=b)  # portable GREATEST


def database_clock(dialect: str) -> ColumnElement[float]:
    """The database server's time in epoch seconds, one value per statement.

    Every replica then refills a shared bucket on the same clock (replica clocks may differ).
    PostgreSQL: ``statement_timestamp()`` (fixed for the statement); SQLite: ``julianday('now')``
    converted with the Unix epoch's Julian day, 2440587.5 (https://sqlite.org/lang_datefunc.html).
    """
    if dialect == "postgresql":
        return cast(extract("epoch", func.statement_timestamp()), Float)
    return (func.julianday("now") - 2440587.5) * 86400.0


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


@functools.cache
def _take_statements(dialect: str, given_clock: bool) -> tuple[Any, Any]:
    """The take upsert and the balance query, built once per dialect (they bind ``bucket``,
    ``per_second``, ``burst`` and, with ``given_clock``, ``now_s``)."""
    now: Any = bindparam("now_s", type_=Float) if given_clock else database_clock(dialect)
    per_second, burst = bindparam("per_second", type_=Float), bindparam("burst", type_=Float)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    elapsed = _greatest(now - _TABLE.c.updated_s, literal(0.0))
    refilled = _least(_TABLE.c.tokens + elapsed * per_second, burst)
    statement: Any = insert(_TABLE).values(
        bucket=bindparam("bucket"), tokens=burst - 1.0, updated_s=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=[_TABLE.c.bucket],
        set_={"tokens": refilled - 1.0, "updated_s": _greatest(_TABLE.c.updated_s, now)},
        where=refilled >= 1.0,
    ).returning(_TABLE.c.tokens)
    balance = select(refilled).where(_TABLE.c.bucket == bindparam("bucket"))
    return statement, balance


def take(
    connection: Connection,
    buckets: Sequence[tuple[str, float, float]],
    now_s: float | None = None,
) -> tuple[int, float] | None:
    """Take one token from each ``(bucket, per_second, burst)`` in order, or report a refusal.

    Each take is one atomic statement (INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING):
    a new bucket starts full and gives one token; an existing one is refilled to now and gives
    one only if it holds one, so concurrent takers on any replica can never together spend more
    than the bucket holds, and a bucket never goes negative. Returns None when every bucket gave
    its token, else ``(index, tokens)`` of the first one that had none (with its refilled
    balance); the caller must then roll the transaction back, so the earlier buckets keep their
    tokens. ``now_s`` defaults to the database's clock (``database_clock``); the bucket's time
    never moves backwards.

    PostgreSQL commits the transaction without waiting for its WAL flush (``synchronous_commit
    = off`` for this transaction only): a crash can lose the last few hundred milliseconds of
    takes, which only gives those tokens back, and no other data is affected
    (https://www.postgresql.org/docs/current/wal-async-commit.html).
    """
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.execute(text("SET LOCAL synchronous_commit TO OFF"))
    statement, balance = _take_statements(dialect, now_s is not None)
    for index, (bucket, per_second, burst) in enumerate(buckets):
        values = {"bucket": bucket, "per_second": per_second, "burst": burst, "now_s": now_s}
        if connection.execute(statement, values).first() is None:
            return index, float(connection.execute(balance, values).scalar_one())
    return None


def forget_idle(connection: Connection, before_s: float) -> int:
    """Delete buckets untouched since ``before_s`` (they would be full again); return how many."""
    result = connection.execute(delete(_TABLE).where(_TABLE.c.updated_s < before_s))
    return int(getattr(result, "rowcount", 0))
