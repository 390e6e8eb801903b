"""A deadline on reading each HTTP request: a client that sends its request slowly is cut off.

This module owns `read_deadline_protocol`, the uvicorn HTTP protocol `serve_http` runs: uvicorn's
own (httptools) with one addition. Uvicorn bounds the idle time between two requests of a kept-alive
connection (its keep-alive timeout), but not the time a request takes to arrive: a client that
opens a connection and sends nothing, or sends its headers or body a byte at a time (slow-loris),
holds a connection and a parser forever. Here a connection gets `read_timeout_s` from its opening,
and each later request from its first byte, to deliver the whole request (line, headers and body);
past it the connection is closed (an application waiting on the body then reads a disconnect).
The clock stops once the request is read: a long answer (a long poll, a page's event stream) is
not cut, and neither is a WebSocket once upgraded. Uvicorn is imported only when a server is built
(`daemon/plan.py` reads `READ_TIMEOUT_S` at every start).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

import structlog

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    _Protocol = HttpToolsProtocol
else:
    _Protocol = object  # uvicorn's class is mixed in by `read_deadline_protocol`

log = structlog.stdlib.get_logger(__name__)

#: Seconds a client has to send a whole request (its line, headers and body) once it began.
READ_TIMEOUT_S: Final = 10.0


class _ReadDeadline(_Protocol):
    """The deadline, mixed into uvicorn's httptools protocol (see the module)."""

    read_timeout_s: float = READ_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        super().handle_websocket_upgrade()

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.read_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            client = f"{self.client[0]}:{self.client[1]}" if self.client else None
            log.info("http_read_timeout", client=client, read_timeout_s=self.read_timeout_s)
            self.transport.close()


def read_deadline_protocol(read_timeout_s: float) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn's `Config(http=...)`, with `read_timeout_s` seconds to read
    each request (see the module)."""
    if not read_timeout_s > 0:
        raise ValueError(f"read_timeout_s must be positive, got {read_timeout_s}")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class ReadDeadlineProtocol(_ReadDeadline, HttpToolsProtocol):
        pass

    ReadDeadlineProtocol.read_timeout_s = read_timeout_s
    return ReadDeadlineProtocol
