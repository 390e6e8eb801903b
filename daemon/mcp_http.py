"""The MCP endpoint of outside agents served on its own: uvicorn in the daemon's loop, `/mcp` only.

This module owns `serve_mcp`: an async context that serves `agents/outside/server.py`'s endpoint
at `/mcp` with uvicorn on the caller's event loop (signals left to the daemon), for the length of a
run, and sets `CycleHub.mcp_url` while it serves. It binds to loopback unless the caller allowed
another address. The daemon's HTTP server (Starlette on uvicorn) mounts the same endpoint with
`mount_mcp` instead, where it runs; this module serves it where no such server runs (a replay, a
live daemon before the HTTP server serves it).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from openbell.agents.outside.hub import CycleHub
from openbell.agents.outside.server import AgentTokens, mcp_endpoint
from openbell.daemon.health import HealthBoard
from openbell.daemon.http import is_loopback, route
from openbell.markets.errors import ConfigError, OperatorError

MCP_PATH: Final = "/mcp"
_START_POLL_S: Final = 0.01


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the daemon owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


def health_routes(board: HealthBoard, now: Callable[[], datetime]) -> list[BaseRoute]:
    """`/healthz` and `/metrics` as `http.py` answers them, for the live daemon's MCP server (until
    the daemon's one HTTP server serves everything)."""

    async def endpoint(request: Request) -> Response:
        status, content_type, body = route(request.method, request.url.path, board, now())
        return Response(body, status_code=status, media_type=content_type)

    return [Route(path, endpoint, methods=["GET", "HEAD"]) for path in ("/healthz", "/metrics")]


def mount_mcp(
    hub: CycleHub, tokens: AgentTokens, *, loopback: bool
) -> tuple[Route, AbstractAsyncContextManager[None]]:
    """The `/mcp` route and the context to run in the HTTP server's lifespan, for a Starlette app
    that serves other routes too."""
    app, running = mcp_endpoint(hub, tokens, loopback=loopback)
    return Route(MCP_PATH, endpoint=app), running()


@contextlib.asynccontextmanager
async def serve_mcp(
    hub: CycleHub,
    tokens: AgentTokens,
    *,
    host: str,
    port: int,
    allow_remote: bool = False,
    extra_routes: Sequence[BaseRoute] = (),
) -> AsyncIterator[str]:
    """Serve `/mcp` (and `extra_routes`) on `host:port` (0: any free port) until the block exits;
    yields the URL of `/mcp`."""
    loopback = is_loopback(host)
    if not loopback and not allow_remote:
        raise ConfigError(
            f"the MCP endpoint would listen on {host}, not loopback; set [http] allow_remote = "
            "true to allow it"
        )
    mcp_route, running = mount_mcp(hub, tokens, loopback=loopback)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with running:
            yield

    app: ASGIApp = Starlette(routes=[mcp_route, *extra_routes], lifespan=lifespan)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="on"
    )
    server = _Server(config)
    listening = _bind(host, port)
    bound = listening.getsockname()[1]
    task = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        while not server.started:
            if task.done():  # the app's start-up failed (uvicorn logged why)
                raise OperatorError(f"the MCP endpoint on {host}:{bound} did not start")
            await asyncio.sleep(_START_POLL_S)
        url = f"http://{host}:{bound}{MCP_PATH}"
        hub.mcp_url = url
        yield url
    finally:
        hub.mcp_url = None
        server.should_exit = True
        with contextlib.suppress(SystemExit):  # uvicorn exits on a failed start-up
            await task
        listening.close()


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port`, for uvicorn to listen on; `OperatorError` when it cannot be
    (a port in use, an address not this machine's), rather than uvicorn's exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise OperatorError(
            f"[http] listen = {host}:{port}: cannot listen there ({exc.strerror or exc}); "
            "stop what holds it or choose another port (0 picks a free one)"
        ) from exc
    return listening
