"""The daemon's HTTP server: one Starlette app on uvicorn, inside the caller's event loop.

This module owns `serve_http`, `HttpServer`, `WebParts` and `health_routes`. `serve_http` binds
the socket itself (a port in use is an `OperatorError`, not uvicorn's `sys.exit`), enters the
`lifespans` it is given (in the order given: a mounted sub-app's, such as the MCP session
manager's task group, since Starlette does not run a mounted app's lifespan), and serves from a
task of its own until `HttpServer.close()`, which stops accepting, lets requests in flight finish
for `SHUTDOWN_GRACE_S` (then cancels them), and exits the lifespans. Uvicorn installs no signal
handler here (the daemon owns SIGINT and SIGTERM, `daemon.stopping`) and writes no access log.

The app has two kinds of route:
- `open_routes`: never behind the read token: `health_routes` (`/healthz`: the `HealthBoard`
  status as JSON, 200, or 503 when a market is overdue; `/metrics`: the Prometheus text format;
  GET and HEAD only, 405 otherwise), for systemd probes and Prometheus scrapers, which hold no
  token and read nothing an agent wrote; and `/mcp`, which checks its own agent tokens.
- `routes`: the read routes (the JSON API, the pages, their static files). With a `read_token`,
  each request needs it: `Authorization: Bearer TOKEN`, or the cookie `openbell_read` that a
  browser gets by opening any read URL once with `?token=TOKEN` (answered by a redirect to the
  same URL without it, so the token stays out of the address bar, history and referrers; the
  cookie is HttpOnly and SameSite=Lax, so a link from elsewhere still works, and every read route
  is a GET without side effects). The token is compared in constant time and never logged.
  Anything else is 401.
Unknown paths are 404 (401 first when a read token is set and missing). Every redirect the app
answers stays on this site (`redirects.py`: the token's redirect is built on site, and the app's
outermost middleware keeps any other `Location` on it), and every request must arrive whole
within `read_timeout_s` of its first byte (`read_deadline.py`), or its connection is closed.

The server listens on loopback only unless the operator allowed another address
(`[http] allow_remote = true`): exposing it is a decision, not a default.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import socket
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from openbell.daemon.health import HealthBoard
from openbell.daemon.read_deadline import READ_TIMEOUT_S, read_deadline_protocol
from openbell.daemon.redirects import OnSiteRedirects, on_site_location
from openbell.markets.errors import ConfigError, OperatorError

if TYPE_CHECKING:
    from sqlalchemy import Engine

log = structlog.stdlib.get_logger(__name__)

#: Seconds requests in flight (a live page's event stream) get to finish when the server closes.
SHUTDOWN_GRACE_S: Final = 2
#: The cookie a browser keeps the read token in.
TOKEN_COOKIE: Final = "openbell_read"  # noqa: S105 (a cookie name)
_METRICS_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: A context manager the server enters before it serves and exits after it stopped.
Lifespan = Callable[[], AbstractAsyncContextManager[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebParts:
    """What the ops layer mounts into the daemon's server: read `routes` (behind the read token),
    `open_routes` with their own authentication (`/mcp`), and the `lifespans` they need."""

    routes: Sequence[BaseRoute] = ()
    open_routes: Sequence[BaseRoute] = ()
    lifespans: Sequence[Lifespan] = ()


#: The body of `/healthz` now (`HealthBoard.status`), for the pages' last-bell panel.
HealthView = Callable[[], dict[str, Any]]
#: Builds the web parts over the daemon's engine and its health (`LivePlan.web`).
WebFactory = Callable[["Engine", HealthView], WebParts]


def is_loopback(host: str) -> bool:
    """Whether `host` names the loopback interface (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def health_routes(board: HealthBoard, now: Callable[[], datetime]) -> list[BaseRoute]:
    """`/healthz` and `/metrics` over `board`, at the instant `now()` of each request."""

    async def healthz(_request: Request) -> Response:
        healthy, body = board.status(now())
        return Response(
            json.dumps(body) + "\n",
            status_code=200 if healthy else 503,
            media_type="application/json",
        )

    async def metrics(_request: Request) -> Response:
        return Response(board.metrics(), media_type=_METRICS_TYPE)

    return [
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/metrics", metrics, methods=["GET", "HEAD"]),
    ]


class ReadTokenGuard:
    """ASGI middleware: lets a request through only with the read token (see the module)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in {"http", "websocket"}:
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        if self._matches(_bearer(connection)) or self._matches(
            connection.cookies.get(TOKEN_COOKIE)
        ):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)  # policy violation
        elif self._matches(connection.query_params.get("token")):
            await self._keep(connection)(scope, receive, send)
        else:
            await PlainTextResponse(
                "a read token is required: Authorization: Bearer TOKEN, or ?token=TOKEN once\n",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )(scope, receive, send)

    def _keep(self, connection: HTTPConnection) -> Response:
        """A redirect to the URL without its token, which the browser keeps in a cookie. Relative
        (the Host header is the client's to choose) and on site (`redirects.py`): a path such as
        `//evil.example/x` redirects to `/`."""
        target = connection.url.remove_query_params("token")
        response = RedirectResponse(on_site_location(target.path, target.query), status_code=303)
        response.set_cookie(
            TOKEN_COOKIE, self._token.decode(), httponly=True, samesite="lax", path="/"
        )
        return response

    def _matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self._token)


def _bearer(connection: HTTPConnection) -> str | None:
    scheme, _, credentials = connection.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def build_app(
    *,
    routes: Sequence[BaseRoute] = (),
    open_routes: Sequence[BaseRoute] = (),
    read_token: str | None = None,
) -> Starlette:
    """The app: `open_routes` first, then `routes`, behind `read_token` when one is given; every
    redirect it answers stays on site (`redirects.OnSiteRedirects`)."""
    on_site = [Middleware(OnSiteRedirects)]
    if not read_token:
        return Starlette(routes=[*open_routes, *routes], middleware=on_site)
    guarded = Starlette(routes=list(routes), middleware=[Middleware(ReadTokenGuard, read_token)])
    return Starlette(routes=[*open_routes, Mount("", app=guarded)], middleware=on_site)


class HttpServer:
    """A running server: its bound `port` and `url`; `close()` stops it (once)."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None], host: str, port: int):
        self._server = server
        self._task = task
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        """`http://HOST:PORT` of the bound address (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        """Stop accepting, let requests in flight finish (`SHUTDOWN_GRACE_S`), exit the
        lifespans."""
        self._server.should_exit = True
        await asyncio.shield(self._task)


async def serve_http(
    host: str,
    port: int,
    *,
    routes: Sequence[BaseRoute] = (),
    open_routes: Sequence[BaseRoute] = (),
    lifespans: Sequence[Lifespan] = (),
    allow_remote: bool = False,
    read_token: str | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> HttpServer:
    """Serve the app of `routes` and `open_routes` (see the module) on `host:port` (0: any free
    port) until `close()`; a connection that does not deliver a request within `read_timeout_s`
    is closed (`read_deadline.py`).

    Raises `ConfigError` for a non-loopback `host` unless `allow_remote`, `OperatorError` when the
    address cannot be listened on (a port in use), and what a lifespan raises on entry.
    """
    if not allow_remote and not is_loopback(host):
        raise ConfigError(
            f"[http] listen = {host!r} is not a loopback address: other machines could reach "
            "the pages and /mcp; use 127.0.0.1, or set [http] allow_remote = true deliberately "
            "(with [http] read_token_env for the pages)"
        )
    sock = _bind(host, port)
    app = build_app(routes=routes, open_routes=open_routes, read_token=read_token)
    config = uvicorn.Config(
        app,
        http=read_deadline_protocol(read_timeout_s),
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = uvicorn.Server(config)
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(_run(server, sock, lifespans, started), name="http_server")
    try:
        await asyncio.shield(started)
    except BaseException:
        server.should_exit = True
        sock.close()
        raise
    bound = sock.getsockname()
    log.info("http_listening", host=bound[0], port=bound[1])
    return HttpServer(server, task, bound[0], bound[1])


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port`, or `OperatorError`."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it, each small response on a kept-alive
        # connection waits for the client's delayed ACK (about 40 ms per MCP call on loopback).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _cannot_listen(host, port, exc) from exc
    return sock


def _cannot_listen(host: str, port: int, exc: OSError) -> OperatorError:
    return OperatorError(
        f"[http] listen = {host}:{port}: cannot listen there ({exc.strerror or exc}); "
        "stop what holds it, or choose another address with --listen HOST:PORT (or [http] "
        "listen; port 0 picks a free one)"
    )


async def _run(
    server: uvicorn.Server,
    sock: socket.socket,
    lifespans: Sequence[Lifespan],
    started: asyncio.Future[None],
) -> None:
    """Enter the lifespans, serve until `server.should_exit`, shut down, exit the lifespans; all
    in this one task (an anyio task group must be exited by the task that entered it)."""
    try:
        async with AsyncExitStack() as stack:
            for lifespan in lifespans:
                await stack.enter_async_context(lifespan())
            server.config.load()
            server.lifespan = server.config.lifespan_class(server.config)
            await server.startup(sockets=[sock])
            started.set_result(None)
            await server.main_loop()
            await server.shutdown(sockets=[sock])
    except Exception as exc:
        if started.done():
            raise
        started.set_exception(exc)
    finally:
        if not started.done():  # cancelled while starting
            started.cancel()
