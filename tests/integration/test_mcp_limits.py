"""The MCP endpoint's limits, attacked through the real server: uvicorn on a loopback port, the
SDK's session manager, real agent tokens in a real ledger, raw HTTP and the SDK's own client.

One token cannot hold more than `max_sessions_per_token` sessions: a flood of `initialize`
requests, one after another or at once, churns its own oldest idle sessions (the count never
passes the cap) and leaves other tokens alone; a client past the cap with every session busy is
told why, in the error the SDK's client raises. Idle sessions end, busy ones (an open stream) do
not; a cycle token's sessions end when its cycle closes (an agent token's stay for its next
cycle). A body over the size limit is refused before it is read whole, and one sent a byte at a
time is cut off. Requests in flight per token are capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.outside.limits import McpLimits
from openbell.daemon.mcp_http import serve_mcp
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.mcp import connect
from openbell_testkit.offline import sync

AGENT = "outside"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
#: The ledger only holds the agents' tokens here: its SQLite run is enough.
pytestmark = pytest.mark.sqlite_only


def token_of(ledger: Ledger, agent: str) -> str:
    ledger.ensure_agent(agent, "mcp", US_OPEN)
    return ledger.issue_agent_token(agent, US_OPEN)


class Raw:
    """Raw MCP requests to `url` with one bearer token."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url

    async def post(self, body: object, **headers: str) -> httpx.Response:
        return await self.http.post(self.url, json=body, headers=headers)


@asynccontextmanager
async def raw(url: str, token: str) -> AsyncIterator[Raw]:
    """Raw requests to `url` with `token` as their bearer token."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        yield Raw(http, url)


async def opened(http: Raw) -> str:
    """A new session's id (a bare `initialize`)."""
    answer = await http.post(INITIALIZE)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


async def ping(http: Raw, session: str) -> int:
    """The HTTP status of a `ping` in `session` (200: alive; 404: ended)."""
    answer = await http.post(PING, **{"mcp-session-id": session})
    return answer.status_code


async def ready(http: Raw, session: str) -> None:
    """Send `notifications/initialized`, which tool calls need first."""
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    answer = await http.post(note, **{"mcp-session-id": session})
    assert answer.status_code == 202


async def call(http: Raw, session: str, call_id: int, name: str, **arguments: Any) -> int:
    """The HTTP status of tool call `name` (JSON-RPC id `call_id`) in `session`."""
    body = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = await http.post(body, **{"mcp-session-id": session})
    return answer.status_code


async def status_line(url: str, request: bytes, drip: bytes = b"") -> bytes:
    """Send `request` to the server of `url` over a raw connection, then `drip` in 16 KiB pieces
    (never finishing it), and read the status line of the answer (empty when none came in 5 s)."""
    host, port = url.removeprefix("http://").partition("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        for start in range(0, len(drip), 16384):
            writer.write(drip[start : start + 16384])
            await writer.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                return await reader.readline()
        return b""
    finally:
        writer.close()


async def read_to_the_end(stream: httpx.Response) -> str:
    """Read an SSE stream until the server ends it (or cuts it)."""
    with contextlib.suppress(httpx.ReadError, httpx.RemoteProtocolError):
        async for _chunk in stream.aiter_bytes():
            pass
    return "ended by the server"


def post_head(url: str, token: str, *extra: str) -> bytes:
    port = url.removeprefix("http://").split("/")[0].split(":")[1]
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        "Accept: application/json, text/event-stream",
        "Content-Type: application/json",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@sync
async def test_a_flood_of_sessions_with_one_token_never_holds_more_than_the_cap(
    ledger: Ledger,
) -> None:
    token, other = token_of(ledger, AGENT), token_of(ledger, "other")
    limits = McpLimits(max_sessions_per_token=4)
    async with (
        serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url,
        raw(url, token) as http,
        raw(url, other) as other_http,
    ):
        kept = await opened(other_http)
        sessions: list[str] = []
        for index in range(200):
            sessions.append(await opened(http))
            if index >= 6 and index % 25 == 0:
                # Oldest first, so the pings keep the order of use: the cap, and no more.
                recent = [await ping(http, session) for session in sessions[-6:]]
                assert recent == [404, 404, 200, 200, 200, 200], index
        alive = [session for session in sessions if await ping(http, session) == 200]
        kept_alive = await ping(other_http, kept)
    assert alive == sessions[-4:]
    assert kept_alive == 200  # the cap is per token: another agent's session stayed


@sync
async def test_openings_at_once_never_pass_the_cap(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    limits = McpLimits(max_sessions_per_token=4)
    async with (
        serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url,
        raw(url, token) as http,
    ):
        answers = await asyncio.gather(*(http.post(INITIALIZE) for _ in range(40)))
        sessions = [a.headers["mcp-session-id"] for a in answers if a.status_code == 200]
        alive = [session for session in sessions if await ping(http, session) == 200]
    assert {answer.status_code for answer in answers} <= {200, 429}
    assert len(sessions) >= 4
    assert len(alive) == 4


@sync
async def test_a_client_past_the_cap_with_every_session_busy_is_told_why(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    limits = McpLimits(max_sessions_per_token=2)
    async with serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url:
        async with AsyncExitStack() as held:
            # The SDK's client keeps a GET stream open on its session: each is busy.
            clients = [await held.enter_async_context(connect(url, token)) for _ in range(2)]
            with pytest.raises(BaseExceptionGroup) as refused:
                async with connect(url, token):
                    pass
            async with raw(url, token) as http:
                answer = await http.post(INITIALIZE)
            listed = [len((await client.list_tools()).tools) for client in clients]
        async with connect(url, token) as later:  # the two ended: room again
            await later.send_ping()
    assert refused.group_contains(MCPError, match=r"Too many open MCP sessions for this token")
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "1"
    error = answer.json()["error"]
    assert "max_sessions_per_token" in error["message"]
    assert error["code"] == -32600
    assert all(count > 1 for count in listed)  # the sessions held were untouched


@sync
async def test_an_idle_session_ends_and_a_busy_one_does_not(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    limits = McpLimits(session_idle_s=0.5)
    async with (
        serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url,
        raw(url, token) as http,
        connect(url, token) as busy,
    ):
        idle = await opened(http)
        assert await ping(http, idle) == 200
        await asyncio.sleep(1.5)
        after = await ping(http, idle)
        await busy.send_ping()  # its GET stream held it open
        fresh = await opened(http)
        fresh_alive = await ping(http, fresh)
    assert after == 404
    assert fresh_alive == 200


@sync
async def test_a_cycle_tokens_sessions_end_when_its_cycle_closes(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = McpAgent(name=AGENT, hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=30))
    token = token_of(ledger, AGENT)
    ctx = replace(arena.context(agent, await arena.toolbox(US_OPEN)), journal=ledger)
    async with (
        serve_mcp(agent.hub, ledger, host="127.0.0.1", port=0) as url,
        raw(url, token) as agent_http,
    ):
        by_agent = await opened(agent_http)
        async with AsyncExitStack() as stack:  # the cycle's client and stream outlive the cycle
            async with agent.hub.open(ctx, budgets=agent.budgets) as cycle:
                http = await stack.enter_async_context(raw(url, cycle.token))
                session = await opened(http)
                stream_headers = {"mcp-session-id": session, "Accept": "text/event-stream"}
                stream = await stack.enter_async_context(
                    http.http.stream("GET", url, headers=stream_headers)
                )
                assert stream.status_code == 200
                reading = asyncio.create_task(read_to_the_end(stream))
                await asyncio.sleep(0.3)
                assert not reading.done()  # the stream stays open while the cycle is
            # The block closed the cycle: its session, and so its stream, ended.
            async with asyncio.timeout(5):
                ended = await reading
        agent_session = await ping(agent_http, by_agent)
    assert ended == "ended by the server"
    assert agent_session == 200  # an agent token's session waits for its next cycle


@sync
async def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    limits = McpLimits(max_request_bytes=65536)
    async with serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url:
        # Declared 100 MB, 1 KiB sent: answered at once, without waiting for the rest.
        declared = await status_line(
            url, post_head(url, token, "Content-Length: 100000000") + b"x" * 1024
        )
        # Chunked, no length: refused once past the limit, though the body never ends.
        chunk = b"4000\r\n" + b"y" * 16384 + b"\r\n"
        chunked = await status_line(
            url, post_head(url, token, "Transfer-Encoding: chunked"), drip=chunk * 8
        )
        async with raw(url, token) as http:  # an ordinary request still goes through
            fine = await http.post(INITIALIZE)
    assert declared.startswith(b"HTTP/1.1 413 ")
    assert chunked.startswith(b"HTTP/1.1 413 ")
    assert fine.status_code == 200


@sync
async def test_a_body_sent_a_byte_at_a_time_is_cut_off(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    async with serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, read_timeout_s=1.0) as url:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(post_head(url, token, "Content-Length: 1000"))
        closed_after = None
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(60):  # one byte every 0.1 s, for at most 6 s
            try:
                writer.write(b"{")
                await writer.drain()
            except ConnectionError:
                closed_after = loop.time() - started
                break
            try:
                async with asyncio.timeout(0.1):
                    if await reader.read(65536) == b"":
                        closed_after = loop.time() - started
                        break
            except TimeoutError:
                pass
        writer.close()
    assert closed_after is not None, "a client dripping its body to /mcp was kept connected"
    assert closed_after <= 3


@sync
async def test_requests_in_flight_are_capped_per_token(ledger: Ledger) -> None:
    token = token_of(ledger, AGENT)
    limits = McpLimits(max_requests_in_flight=2)
    async with (
        serve_mcp(CycleHub(), ledger, host="127.0.0.1", port=0, limits=limits) as url,
        raw(url, token) as http,
    ):
        session = await opened(http)
        await ready(http, session)
        waits = [
            asyncio.create_task(call(http, session, 10 + n, "wait_for_cycle", timeout_s=1.5))
            for n in range(2)
        ]
        await asyncio.sleep(0.5)  # both long polls are waiting: no cycle opens
        third = await http.post(PING, **{"mcp-session-id": session})
        waited = await asyncio.gather(*waits)
        after = await ping(http, session)
    assert waited == [200, 200]
    assert third.status_code == 429
    assert "max_requests_in_flight" in json.loads(third.text)["error"]["message"]
    assert after == 200
