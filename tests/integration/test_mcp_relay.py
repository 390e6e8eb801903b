"""The stdio relay's connection to the daemon's `/mcp` (served by uvicorn on a real loopback port):
a token the server does not know is refused in one line naming the cause, and a good one (an open
cycle's token) gets the daemon's own tools and answers through the relay's server, in process. And
an `mcp` agent (the one that connects, with its agent token) trades a replay's cycles over stdio:
the SDK's stdio client runs `openbell mcp --account NAME` as a subprocess, which relays to the
replay's `/mcp`."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from sqlalchemy import text

from openbell.agents.baselines import build_agent
from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.outside.relay import RelayError, connect, relay_server
from openbell.daemon.clock import ScaledClock
from openbell.daemon.mcp_http import serve_mcp
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import ReplayReport, run_replay
from openbell.markets.domain import utc
from openbell.ops.reports.market_reports import leaderboard
from openbell.ops.wiring.outside_agents import openbell_relay
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import make_arena
from openbell_testkit.live import START_AT, crypto_plan, cycles, running
from openbell_testkit.replay import crypto_daily

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


def steps(interval: str) -> list[tuple[str, dict[str, Any]]]:
    """A cycle's calls: wait, read three bars of `interval`, buy 0.01 BTC, finish."""
    return [
        ("wait_for_cycle", {"timeout_s": 60}),
        ("get_bars", {"symbol": "BTC/USDT", "interval": interval, "lookback": 3}),
        ("place_order", {"symbol": "BTC/USDT", "side": "buy", "shares": "0.01"}),
        ("finish", {"summary": "bought over stdio"}),
    ]


STEPS = steps("1d")


async def _trade_over_stdio(
    url: str, token: str, cycles: int, calls: list[tuple[str, dict[str, Any]]] = STEPS
) -> list[list[dict[str, Any]]]:
    """`cycles` cycles through `openbell mcp` (the SDK's stdio client runs it): their answers."""
    relay = openbell_relay()
    server = StdioServerParameters(
        command=relay[0],
        args=[*relay[1:], "--account", "stdio-agent", "--url", url],
        env={**os.environ, "OPENBELL_MCP_TOKEN": token},
    )
    done = []
    async with Client(server) as client:
        for _ in range(cycles):
            answers = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                found = json.loads(result.content[0].text)  # type: ignore[union-attr]
                assert not result.is_error, (name, found)
                answers.append(found)
            done.append(answers)
    return done


def test_an_mcp_agent_trades_a_replay_over_stdio_with_its_agent_token(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    start = utc(2025, 1, 6)
    engine = make_engine(sqlite_url)
    ledger = Ledger(engine)
    ledger.ensure_agent("stdio-agent", "mcp", start - timedelta(days=30))
    token = ledger.issue_agent_token("stdio-agent", start - timedelta(days=30))
    agent = McpAgent(name="stdio-agent", hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=60))
    plan = ReplayPlan(
        store_url=sqlite_url,
        start_at=start,
        end_at=start + timedelta(days=2),
        markets=(crypto_daily(agent),),
    )
    reports: list[ReplayReport] = []
    replaying = threading.Thread(target=lambda: reports.append(run_replay(plan)), daemon=True)
    replaying.start()
    deadline = time.monotonic() + 30
    while agent.hub.mcp_url is None:
        assert time.monotonic() < deadline, "the replay did not serve /mcp"
        time.sleep(0.05)
    done = asyncio.run(_trade_over_stdio(agent.hub.mcp_url, token, 2))
    replaying.join(timeout=60)
    [report] = reports
    assert (report.slots, report.cycles_done, report.fills) == (2, 2, 2)
    assert [answers[0]["slot_at"] for answers in done] == [
        start.isoformat(),
        (start + timedelta(days=1)).isoformat(),
    ]
    for _waited, _bars, order, finished in done:
        assert (order["status"], Decimal(order["filled_shares"])) == ("filled", Decimal("0.01"))
        assert finished["orders_placed"] == 1
    for cycle_id in (1, 2):
        assert [t.tool for t in ledger.traces(cycle_id)] == [name for name, _ in STEPS]
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
    # The leaderboard ranks the outside agent like any other, from its ledger.
    board = leaderboard(engine, "crypto")
    [row] = [row for row in board.rows if row.agent == "stdio-agent"]
    [(last_nav,)] = engine.connect().execute(
        text("SELECT nav FROM nav_snapshot WHERE kind = 'slot' ORDER BY at DESC LIMIT 1")
    )
    assert (row.rank, row.final_nav) == (1, Decimal(last_nav))
    assert row.behaviour is not None
    assert row.behaviour.trades == 2


def test_an_mcp_agent_trades_a_live_cycle_over_stdio(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    ledger = Ledger(engine)
    ledger.ensure_agent("stdio-agent", "mcp", START_AT - timedelta(days=30))
    token = ledger.issue_agent_token("stdio-agent", START_AT - timedelta(days=30))
    agent = McpAgent(name="stdio-agent", hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=30))
    plan = replace(crypto_plan(sqlite_url, agents=(agent,)), http_listen=("127.0.0.1", 0))
    with running(plan, ScaledClock(START_AT - timedelta(seconds=3), speed=1.0)):
        deadline = time.monotonic() + 30
        while agent.hub.mcp_url is None:
            assert time.monotonic() < deadline, "the daemon did not serve /mcp"
            time.sleep(0.05)
        [answers] = asyncio.run(_trade_over_stdio(agent.hub.mcp_url, token, 1, steps("1h")))
        while not any(row.status == "done" for row in cycles(sqlite_url)):
            assert time.monotonic() < deadline + 30, "the cycle did not finish"
            time.sleep(0.1)
    waited, bars, order, finished = answers
    assert waited["slot_at"] == START_AT.isoformat()
    assert all(datetime.fromisoformat(bar["end_at"]) <= START_AT for bar in bars["bars"])
    assert (order["status"], Decimal(order["filled_shares"])) == ("filled", Decimal("0.01"))
    assert finished["orders_placed"] == 1
    [(cycle_id,)] = engine.connect().execute(text("SELECT id FROM cycle WHERE status = 'done'"))
    assert [t.tool for t in ledger.traces(cycle_id)] == [name for name, _ in steps("1h")]
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
