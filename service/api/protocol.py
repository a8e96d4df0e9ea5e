"""uvicorn's h11 protocol with a deadline for a request's headers (slow-client defence).

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but waits forever for the
headers of a request that has started: 20,000 connections each trickling a header byte now
and then made a replica unreachable. Here a connection has ``header_timeout_s`` seconds from
its first byte (or the end of its previous response) to finish a request's headers; past it
uvicorn's own keep-alive handler closes it. The body has its own read timeout in the app
(``BodySizeLimitMiddleware``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from service.settings import get_settings


class HeaderTimeoutH11Protocol(H11Protocol):
    """H11Protocol whose connections must finish each request's headers in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = get_settings().header_timeout_s
        self._header_deadline: asyncio.TimerHandle | None = None

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _expire(self) -> None:
        self._header_deadline = None
        if self._waiting_for_headers():
            self.timeout_keep_alive_handler()  # closes the connection as an idle one

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()  # the headers are in: the request is being served

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle now: the keep-alive timeout applies until the next byte

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
