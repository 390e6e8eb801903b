"""MCP clients for the outside-agent tests: the SDK's own streamable-HTTP client and session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def connect(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    """An initialised MCP session on `url`, sending `token` as its bearer token (none: no
    Authorization header)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[dict[str, Any], bool]:
    """Call tool `name`; its structured result (checked equal to its text) and `isError`."""
    result = await session.call_tool(name, arguments)
    [content] = result.content
    text = getattr(content, "text", None)
    assert isinstance(text, str)
    structured = result.structured_content
    assert isinstance(structured, dict)
    assert json.loads(text) == structured
    return structured, bool(result.is_error)


async def status_without_session(url: str, token: str | None) -> int:
    """The HTTP status of a bare `initialize` POST with `token` (none: no Authorization)."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    async with httpx2.AsyncClient() as http:
        response = await http.post(url, headers=headers, json=body)
    return response.status_code
