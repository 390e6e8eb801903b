"""The limits of the MCP endpoint: how many sessions and requests one token holds, and for how long.

This module owns `SessionLimits`, the ASGI layer between the bearer-token check and the SDK's
session manager that enforces `McpLimits` (`limits.py`, `[mcp]` in the config), so that one client
cannot exhaust the daemon's memory or connections. Every request is counted against its principal
(`agent:NAME` for an agent token, `cycle:ID` for a cycle token; an agent has one token at a time):

- At most `max_requests_in_flight` requests of a principal are served at once; one more is
  answered 429 at once, unread.
- At most `max_sessions_per_token` sessions of a principal are open, those being opened included.
  A request that would open one more ends the principal's least recently used idle session first
  (idle: no request of it in flight, an open GET stream included); when every one of them is busy,
  it is answered 429. So a client that crashed and reconnects is never locked out, and a flood
  only churns the flooder's own sessions: the count never passes the cap.
- A session with no request in flight for `session_idle_s` is ended by the SDK (its id then
  answers 404, and a client starts a new one), and `drop` ends every session of a principal: the
  MCP server drops a cycle token's sessions when the cycle closes.
- A request body over `max_request_bytes` is answered 413 by the SDK before it is read whole
  (`mcp_endpoint` passes the limit and the idle time to the SDK's session manager).

A 429 carries a JSON-RPC error object (`id` null) naming the limit, which the SDK's client raises
as an `McpError` with that message, and a `Retry-After`. A session is ended the way a client ends
one, by a `DELETE` with its id passed to the session manager, so the SDK frees it by its own path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openbell.agents.outside.limits import McpLimits

_SESSION_HEADER: Final = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
#: Headers of the opening request that the `DELETE` ending its session does not repeat.
_NOT_REPEATED: Final = frozenset(
    {b"content-length", b"content-type", _SESSION_HEADER, MCP_PROTOCOL_VERSION_HEADER.encode()}
)
#: The parts of the opening request's scope kept to end its session (the principal, the host).
_KEPT: Final = (
    "type",
    "asgi",
    "http_version",
    "scheme",
    "server",
    "client",
    "root_path",
    "path",
    "raw_path",
    "headers",
    "user",
    "auth",
)


@dataclass(slots=True)
class _Session:
    principal: str
    #: The scope of the request that opened it, trimmed to what its `DELETE` needs.
    opening: Scope
    last_active: float
    #: Its requests being served (an open GET stream included) and, of those, its calls (not GET).
    in_flight: int = 0
    calls: int = 0


class SessionLimits:
    """The ASGI layer of the limits in front of the SDK's session manager (`app`); it must run
    behind the bearer-token check. `on_end(principal, session_id)` is told of every session it
    ends or sees gone."""

    def __init__(
        self,
        app: ASGIApp,
        limits: McpLimits,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        on_end: Callable[[str, str], None] = lambda _principal, _session: None,
    ) -> None:
        self._app = app
        self._limits = limits
        self._monotonic = monotonic
        self._on_end = on_end
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, int] = {}
        self._in_flight: dict[str, int] = {}
        #: Principals whose sessions end as soon as their calls are answered (`drop`).
        self._dropped: set[str] = set()
        self._admitting = asyncio.Lock()

    def open_sessions(self, principal: str) -> int:
        """The sessions of `principal` open or being opened."""
        mine = sum(1 for session in self._sessions.values() if session.principal == principal)
        return mine + self._opening.get(principal, 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        principal = _principal(scope)
        limit = self._limits.max_requests_in_flight
        if self._in_flight.get(principal, 0) >= limit:
            message = (
                f"Too many requests in flight for this token ({limit}, [mcp] "
                "max_requests_in_flight): wait for an answer before sending more."
            )
            await _refused(message)(scope, receive, send)
            return
        _add(self._in_flight, principal, 1)
        try:
            session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
            if session_id is None:
                await self._open(principal, scope, receive, send)
            else:
                await self._serve(principal, session_id, scope, receive, send)
        finally:
            _add(self._in_flight, principal, -1)

    async def drop(self, principal: str) -> None:
        """End every session of `principal`: now, or once the calls it has in flight are answered
        (an open GET stream is cut). `principal` must open no more sessions (its token is dead)."""
        self._dropped.add(principal)
        for session_id, session in list(self._sessions.items()):
            if session.principal == principal and session.calls == 0:
                await self._end(session_id)
        self._forget_dropped(principal)

    async def _open(self, principal: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session id: the SDK opens a session for it (and discards it again
        unless it was a successful `initialize`)."""
        async with self._admitting:
            admitted = await self._make_room(principal)
            if admitted:
                _add(self._opening, principal, 1)
        if not admitted:
            cap = self._limits.max_sessions_per_token
            message = (
                f"Too many open MCP sessions for this token: {cap} are open and busy ([mcp] "
                "max_sessions_per_token). End one (DELETE) or wait for one to finish its request."
            )
            await _refused(message)(scope, receive, send)
            return
        answered = _Answer(send)
        try:
            await self._app(scope, receive, answered.send)
        finally:
            _add(self._opening, principal, -1)
            opened = answered.session_id if answered.ok else None
            if opened is not None:
                opening = {key: scope[key] for key in _KEPT if key in scope}
                self._sessions[opened] = _Session(principal, opening, self._monotonic())
            if principal in self._dropped:  # opened while it was dropped
                if opened is not None:
                    await self._end(opened)
                self._forget_dropped(principal)

    async def _serve(
        self, principal: str, session_id: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            await self._app(scope, receive, send)  # the SDK answers 404: unknown, or not theirs
            return
        call = scope["method"] != "GET"  # a GET is the session's stream, not a call
        session.in_flight += 1
        session.calls += call
        answered = _Answer(send)
        try:
            await self._app(scope, receive, answered.send)
        finally:
            session.in_flight -= 1
            session.calls -= call
            session.last_active = self._monotonic()
            gone = answered.status == 404 or (scope["method"] == "DELETE" and answered.ok)
            if self._sessions.get(session_id) is not session:
                pass  # ended meanwhile
            elif gone:
                del self._sessions[session_id]
                self._on_end(principal, session_id)
            elif principal in self._dropped and session.calls == 0:
                await self._end(session_id)
                self._forget_dropped(principal)

    def _forget_dropped(self, principal: str) -> None:
        if not self.open_sessions(principal):
            self._dropped.discard(principal)

    async def _make_room(self, principal: str) -> bool:
        """Whether `principal` may open one more session, after ending its expired sessions and,
        at the cap, its least recently used idle ones."""
        now = self._monotonic()
        for session_id, session in list(self._sessions.items()):
            expired = now - session.last_active >= self._limits.session_idle_s
            if session.principal == principal and session.in_flight == 0 and expired:
                await self._end(session_id)  # the SDK ended it already, or is about to
        while True:
            mine = [s for s in self._sessions.items() if s[1].principal == principal]
            if len(mine) + self._opening.get(principal, 0) < self._limits.max_sessions_per_token:
                return True
            idle = [(s.last_active, key) for key, s in mine if s.in_flight == 0]
            if not idle:
                return False
            await self._end(min(idle)[1])

    async def _end(self, session_id: str) -> None:
        """End a session as its client would: a `DELETE` with its id, to the session manager
        (nothing if it ended meanwhile)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        headers = [
            (name, value) for name, value in session.opening["headers"] if name not in _NOT_REPEATED
        ]
        scope = {
            **session.opening,
            "method": "DELETE",
            "query_string": b"",
            "headers": [*headers, (_SESSION_HEADER, session_id.encode("latin-1"))],
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(_message: Message) -> None:
            return None

        await self._app(scope, receive, discard)
        self._on_end(session.principal, session_id)


class _Answer:
    """Watches a response start: its status and the session id it gives."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status: int | None = None
        self.session_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and self.status < 400

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.session_id = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
        await self._send(message)


def _principal(scope: Scope) -> str:
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        raise TypeError("an MCP request reached the session limits without a verified token")
    return user.access_token.client_id


def _add(counts: dict[str, int], key: str, change: int) -> None:
    count = counts.get(key, 0) + change
    if count:
        counts[key] = count
    else:
        counts.pop(key, None)


def _refused(message: str) -> Response:
    """A 429 with a JSON-RPC error object, as the SDK answers its own refusals."""
    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message)
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=429,
        media_type="application/json",
        headers={"Retry-After": "1"},
    )
