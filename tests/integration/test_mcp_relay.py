"""The stdio relay's connection to the daemon's `/mcp` (served by uvicorn on a real loopback port):
a token the server does not know is refused in one line naming the cause, and a good one (an open
cycle's token) gets the daemon's own tools and answers through the relay's server, in process."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from mcp import Client

from openbell.agents.baselines import build_agent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.outside.relay import RelayError, connect, relay_server
from openbell.daemon.mcp_http import serve_mcp
from openbell.markets.domain import utc
from openbell.store.ledger import Ledger
from openbell_testkit.agents import make_arena

SLOT = utc(2025, 9, 2, 1, 30)


class NoAgentTokens:
    """No agent token is known: only cycle tokens open anything."""

    def agent_for_token(self, token: str) -> str | None:
        return None


def test_a_token_the_daemon_does_not_know_is_refused_in_one_line() -> None:
    async def go() -> str:
        hub = CycleHub()
        async with serve_mcp(hub, NoAgentTokens(), host="127.0.0.1", port=0) as url:
            with pytest.raises(RelayError) as refused:
                async with connect(url, "obc_not-a-cycle-token-0123456789", account="x"):
                    pass
            return f"{url} {refused.value}"

    said = asyncio.run(go())
    url, message = said.split(" ", 1)
    assert message.startswith(f"the openbell daemon at {url} refused the token (HTTP 401)")
    assert "obc_not-a-cycle" not in message


def test_the_relay_serves_the_daemons_tools_and_answers(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn", agent="relayed")

    async def go() -> tuple[list[str], str, bool]:
        hub = CycleHub()
        tools = await arena.toolbox(SLOT)
        ctx = replace(
            arena.context(build_agent("cash", "relayed", market="cn"), tools), journal=ledger
        )
        async with (
            serve_mcp(hub, NoAgentTokens(), host="127.0.0.1", port=0) as url,
            hub.open(ctx, budgets=OutsideBudgets(max_wall_s=30)) as cycle,
            connect(url, cycle.token, account="relayed") as upstream,
            Client(relay_server(upstream)) as client,  # the relay's server, in process
        ):
            listed = [tool.name for tool in (await client.list_tools()).tools]
            called = await client.call_tool("get_portfolio", {})
            text = called.content[0].text  # type: ignore[union-attr]
            return listed, text, called.is_error

    listed, text, is_error = asyncio.run(go())
    for tool in ("wait_for_cycle", "get_bars", "get_portfolio", "place_order", "finish"):
        assert tool in listed
    assert not is_error
    assert '"cash"' in text
    traced = [t.tool for t in ledger.traces(arena.claim(SLOT)) if t.role == "tool"]
    assert traced == ["get_portfolio", "finish"]  # relayed, then openbell's finish at closing
