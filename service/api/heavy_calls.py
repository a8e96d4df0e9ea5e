"""Run a heavy route's work in a heavy-work slot: in a child process or a worker thread.

A heavy call is a module-level function ``fn(session, argument) -> Response`` (picklable by
reference, with a picklable argument). It runs with its own session, in this process
(``heavy_processes = 0``) or in a child process that keeps one small engine per database URL.
Errors become their problem+json answers where the call ran, so only bytes travel back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from service.api.heavy import HEAVY_RETRY_AFTER_S, HeavyWork
from service.api.problems import (
    database_problem,
    database_unavailable,
    error_problem,
    problem,
    problem_response,
    pydantic_errors,
    validation_problem,
)
from service.db.session import make_engine, make_session_factory, session_scope

HeavyCall = Callable[[Session, Any], Response]
Answer = tuple[int, bytes, dict[str, str]]
_CHILD_ENGINES: dict[str, tuple[Engine, sessionmaker[Session]]] = {}
MAX_CHILD_ENGINES = 8


def _answer(response: Response) -> Answer:
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return response.status_code, bytes(response.body), headers


def _problem_answer(exc: Exception) -> Answer:
    if isinstance(exc, RequestValidationError):
        return _answer(validation_problem(pydantic_errors(exc.errors())))
    if database_unavailable(exc):
        return _answer(database_problem())
    return _answer(problem_response(error_problem(exc)))


def call_in_session(factory: sessionmaker[Session], fn: HeavyCall, argument: Any) -> Answer:
    """Run ``fn`` with a session of its own; return its answer (errors as problems)."""
    try:
        with session_scope(factory) as session:
            return _answer(fn(session, argument))
    except Exception as exc:
        return _problem_answer(exc)


def _child_call(database_url: str, fn: HeavyCall, argument: Any) -> Answer:
    """The body of a heavy call in a child process."""
    entry = _CHILD_ENGINES.get(database_url)
    if entry is None:
        if len(_CHILD_ENGINES) >= MAX_CHILD_ENGINES:
            for engine, _ in _CHILD_ENGINES.values():
                engine.dispose()
            _CHILD_ENGINES.clear()
        engine = make_engine(database_url, pool_size=1)
        entry = _CHILD_ENGINES[database_url] = (engine, make_session_factory(engine))
    return call_in_session(entry[1], fn, argument)


async def run_heavy(request: Request, fn: HeavyCall, argument: Any) -> Response:
    """Run ``fn(session, argument)`` in a heavy-work slot; 503 when the queue is full."""
    heavy: HeavyWork = request.app.state.heavy
    async with heavy.slot():
        pool = heavy.pool()
        if pool is None:
            factory = request.app.state.session_factory
            status, body, headers = await run_in_threadpool(call_in_session, factory, fn, argument)
        else:
            url = request.app.state.settings.database_url
            try:
                status, body, headers = await asyncio.wrap_future(
                    pool.submit(_child_call, url, fn, argument)
                )
            except BrokenProcessPool:
                heavy.discard_pool()
                return problem(
                    503,
                    "Service Unavailable",
                    "a heavy-work process stopped; retry shortly",
                    "heavy-work-restarting",
                    headers={"Retry-After": str(HEAVY_RETRY_AFTER_S)},
                )
    return Response(body, status_code=status, headers=headers)
