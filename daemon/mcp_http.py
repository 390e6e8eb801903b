"""The MCP endpoint of outside agents, as part of the daemon's one HTTP server (`http.py`).

This module owns `mcp_parts`, the `/mcp` route of `agents/outside/server.py`'s endpoint with the
lifespan it needs (the SDK's session manager and its task group), which the live daemon adds to
the `WebParts` it serves, and `serve_mcp`: an async context that serves `/mcp` (and any other
routes) with `serve_http` where no HTTP server runs otherwise (a replay, a live daemon without
`[http]`, tests), and sets `CycleHub.mcp_url` while it serves. `/mcp` is an open route: it checks
its own bearer tokens, never the read token.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Final

from starlette.routing import BaseRoute, Route

from openbell.agents.outside.hub import CycleHub
from openbell.agents.outside.limits import McpLimits
from openbell.agents.outside.server import AgentTokens, mcp_endpoint
from openbell.daemon.http import WebParts, is_loopback, serve_http
from openbell.daemon.read_deadline import READ_TIMEOUT_S

MCP_PATH: Final = "/mcp"


def mcp_parts(
    hub: CycleHub, tokens: AgentTokens, *, loopback: bool, limits: McpLimits | None = None
) -> WebParts:
    """The `/mcp` route and its lifespan, to serve among a server's other parts. With `loopback`
    (a server bound to a loopback address), requests must name a loopback host and origin;
    `limits` bound each token's sessions and requests (default `McpLimits()`)."""
    app, running = mcp_endpoint(hub, tokens, loopback=loopback, limits=limits)
    return WebParts(open_routes=[Route(MCP_PATH, endpoint=app)], lifespans=[running])


@contextlib.asynccontextmanager
async def serve_mcp(
    hub: CycleHub,
    tokens: AgentTokens,
    *,
    host: str,
    port: int,
    allow_remote: bool = False,
    open_routes: Sequence[BaseRoute] = (),
    limits: McpLimits | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> AsyncIterator[str]:
    """Serve `/mcp` (and `open_routes`) on `host:port` (0: any free port) until the block exits;
    yields the URL of `/mcp`, which `hub.mcp_url` holds meanwhile. A non-loopback `host` is a
    `ConfigError` unless `allow_remote`; a port in use an `OperatorError`. `limits` and
    `read_timeout_s` are as for `mcp_parts` and `serve_http`."""
    parts = mcp_parts(hub, tokens, loopback=is_loopback(host), limits=limits)
    server = await serve_http(
        host,
        port,
        open_routes=[*open_routes, *parts.open_routes],
        lifespans=parts.lifespans,
        allow_remote=allow_remote,
        read_timeout_s=read_timeout_s,
    )
    hub.mcp_url = f"{server.url}{MCP_PATH}"
    try:
        yield hub.mcp_url
    finally:
        hub.mcp_url = None
        await server.close()
