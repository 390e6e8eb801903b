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
from openbell.markets.errors import ConfigError

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
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # raises what stopped it (a port in use)
                raise ConfigError(f"the MCP endpoint could not listen on {host}:{port}")
            await asyncio.sleep(_START_POLL_S)
        bound = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://{host}:{bound}{MCP_PATH}"
        hub.mcp_url = url
        yield url
    finally:
        hub.mcp_url = None
        server.should_exit = True
        await task
