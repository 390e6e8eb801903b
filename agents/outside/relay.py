"""The stdio relay of `openbell mcp`: MCP over stdin and stdout, passed to the daemon's `/mcp`.

This module owns `relay_stdio`: an MCP server on the process's stdin and stdout (the official
SDK's low-level `Server` on its stdio transport) that answers every request by making the same
request to the running daemon's MCP endpoint over streamable HTTP (the SDK's `Client`), with the
token as its bearer. Tools, their schemas and results, resources and errors are the daemon's, as
they are: the relay only carries them, so point-in-time, rules, budgets, masking and traces stay
the daemon's, and a SQLite ledger keeps its one writer (the relay never opens the ledger).

Each side negotiates its own protocol version with the SDK, so any stdio client the SDK serves
can reach a daemon the SDK's client can. `connect` refuses, with `RelayError` in one line, a
daemon that cannot be reached or that refuses the token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from openbell.markets.errors import OperatorError

RELAY_NAME: Final = "openbell"
#: How long a request to the daemon may wait for its answer: `wait_for_cycle` long-polls.
READ_TIMEOUT_S: Final = 3600.0
CONNECT_TIMEOUT_S: Final = 10.0


class RelayError(OperatorError):
    """The daemon's MCP endpoint cannot be reached, or it refused the token."""


@asynccontextmanager
async def connect(url: str, token: str, *, account: str) -> AsyncIterator[Client]:
    """An SDK client session with the daemon's MCP endpoint at `url`, as `account` with `token`.

    Raises `RelayError` when the daemon cannot be reached or refuses the token.
    """
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
    info = types.Implementation(name=f"openbell-mcp-relay:{account}", version="1")
    refused: list[int] = []  # the SDK reports an HTTP 401 as a bare JSON-RPC error: keep it here

    async def note_refusal(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=headers, timeout=timeout, event_hooks={"response": [note_refusal]}
            )
        )
        # No response cache: the daemon's answers (the account, the cycle) change by the call.
        client = Client(streamable_http_client(url, http_client=http), client_info=info, cache=None)
        try:
            await stack.enter_async_context(client)
        except Exception as exc:  # noqa: BLE001  (any failure to connect is said in one line)
            raise RelayError(_why_not(url, exc, refused)) from None
        yield client


def _why_not(url: str, exc: BaseException, refused: Sequence[int]) -> str:
    """One line saying why the daemon at `url` could not be reached (`refused`: the 401 or 403
    statuses it answered)."""
    if refused:
        return (
            f"the openbell daemon at {url} refused the token (HTTP {refused[-1]}): is "
            "OPENBELL_MCP_TOKEN the agent's current token?"
        )
    chain = list(_chain(exc))
    for found in chain:
        if isinstance(found, httpx2.TransportError):
            return f"cannot reach the openbell daemon at {url}: is it running? ({found})"
    text = " ".join(str(chain[-1]).split()) or type(chain[-1]).__name__
    return f"cannot talk MCP with the openbell daemon at {url}: {text}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then the first exception of each group and the cause or context of each, in turn."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        yield found
        if isinstance(found, BaseExceptionGroup) and found.exceptions:
            found = found.exceptions[0]
        else:
            found = found.__cause__ or found.__context__


def relay_server(upstream: Client) -> Server[Any]:
    """The stdio-side server: each request handled by the same request to `upstream`."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await upstream.list_tools(cursor=_cursor(params))

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await upstream.call_tool(params.name, params.arguments)

    async def list_resources(
        _ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await upstream.list_resources(cursor=_cursor(params))

    async def list_resource_templates(
        _ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await upstream.list_resource_templates(cursor=_cursor(params))

    async def read_resource(
        _ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await upstream.read_resource(params.uri)

    return Server(
        RELAY_NAME,
        instructions=upstream.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return None if params is None else params.cursor


async def relay_stdio(
    url: str,
    token: str,
    *,
    account: str,
    stdin: anyio.AsyncFile[str] | None = None,
    stdout: anyio.AsyncFile[str] | None = None,
) -> None:
    """Serve MCP on stdin and stdout (or the given streams), relayed to the daemon at `url`,
    until stdin closes. Raises `RelayError` (before serving) when the daemon cannot be reached."""
    async with (
        connect(url, token, account=account) as upstream,
        stdio_server(stdin, stdout) as (read_stream, write_stream),
    ):
        server = relay_server(upstream)
        await server.run(read_stream, write_stream, server.create_initialization_options())
