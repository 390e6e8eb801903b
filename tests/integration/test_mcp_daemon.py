"""Outside agents in whole runs: the live daemon (fake clock; `/healthz` beside `/mcp`) and a replay
serve `/mcp`, and an outside client with the SDK's own client trades their cycles: `wait_for_cycle`,
research, an order filled under the market's rules, `finish`; the ledger verifies and every call is
a trace row."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx2

from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.daemon.clock import ScaledClock
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import ReplayReport, run_replay
from openbell.markets.domain import utc
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.records import TraceEntry
from openbell_testkit.live import (
    START_AT,
    crypto_plan,
    cycles,
    migrated,
    query,
    running,
    verifies,
)
from openbell_testkit.mcp import call, connect
from openbell_testkit.replay import crypto_daily

AGENT = "outside"
TOOLS = ["wait_for_cycle", "get_bars", "place_order", "finish"]


def issue_token(url: str) -> str:
    engine = make_engine(url)
    try:
        ledger = Ledger(engine)
        ledger.ensure_agent(AGENT, "mcp", START_AT - timedelta(days=30))
        return ledger.issue_agent_token(AGENT, START_AT - timedelta(days=30))
    finally:
        engine.dispose()


def traces(url: str) -> list[list[TraceEntry]]:
    """The trace of every cycle of the ledger, by cycle."""
    engine = make_engine(url)
    try:
        ledger = Ledger(engine)
        return [ledger.traces(cycle_id) for cycle_id in range(1, len(cycles(url)) + 1)]
    finally:
        engine.dispose()


def wait_for_url(hub: CycleHub, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while hub.mcp_url is None:
        assert time.monotonic() < deadline, "the MCP endpoint did not start"
        time.sleep(0.05)
    return hub.mcp_url


async def trade(
    url: str, token: str, cycles_wanted: int, interval: str
) -> list[list[dict[str, Any]]]:
    """Trade `cycles_wanted` cycles: wait, research, buy 0.01 BTC, finish; the answers."""
    done = []
    async with connect(url, token) as session:
        for _ in range(cycles_wanted):
            answers = []
            for name, arguments in (
                ("wait_for_cycle", {"timeout_s": 60}),
                ("get_bars", {"symbol": "BTC/USDT", "interval": interval, "lookback": 3}),
                ("place_order", {"symbol": "BTC/USDT", "side": "buy", "shares": "0.01"}),
                ("finish", {"summary": "bought"}),
            ):
                found, is_error = await call(session, name, **arguments)
                assert not is_error, (name, found)
                answers.append(found)
            done.append(answers)
    return done


def test_a_live_daemon_serves_its_cycle_to_an_outside_client(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    token = issue_token(url)
    agent = McpAgent(name=AGENT, hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=30))
    plan = replace(crypto_plan(url, agents=(agent,)), http_listen=("127.0.0.1", 0))
    clock = ScaledClock(START_AT - timedelta(seconds=3), speed=1.0)
    with running(plan, clock):
        mcp_url = wait_for_url(agent.hub)
        health = httpx2.get(mcp_url.removesuffix("/mcp") + "/healthz")
        [answers] = asyncio.run(trade(mcp_url, token, 1, "1h"))
        deadline = time.monotonic() + 20
        while not any(row.status == "done" for row in cycles(url)):
            assert time.monotonic() < deadline, "the cycle did not finish"
            time.sleep(0.1)
    # `/healthz` is served beside `/mcp`, on the same port.
    assert health.status_code == 200
    assert set(health.json()["markets"]) == {"crypto"}
    waited, bars, order, finished = answers
    assert waited["slot_at"] == START_AT.isoformat()
    assert all(datetime.fromisoformat(bar["end_at"]) <= START_AT for bar in bars["bars"])
    assert (order["status"], Decimal(order["filled_shares"])) == ("filled", Decimal("0.01"))
    assert finished["orders_placed"] == 1
    [row] = [row for row in cycles(url) if row.slot_at == START_AT]
    assert row.status == "done"
    [trace] = [entries for entries in traces(url) if entries]
    assert [entry.tool for entry in trace] == TOOLS
    assert verifies(url)


def test_a_replay_serves_each_cycle_to_an_outside_client(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    token = issue_token(url)
    agent = McpAgent(name=AGENT, hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=30))
    start = utc(2025, 1, 6)
    plan = ReplayPlan(
        store_url=url,
        start_at=start,
        end_at=start + timedelta(days=2),
        markets=(crypto_daily(agent),),
    )
    reports: list[ReplayReport] = []
    replaying = threading.Thread(target=lambda: reports.append(run_replay(plan)), daemon=True)
    replaying.start()
    done = asyncio.run(trade(wait_for_url(agent.hub), token, 2, "1d"))
    replaying.join(timeout=60)
    [report] = reports
    assert (report.slots, report.cycles_done, report.fills) == (2, 2, 2)
    assert [answers[0]["slot_at"] for answers in done] == [
        start.isoformat(),
        (start + timedelta(days=1)).isoformat(),
    ]
    assert [[entry.tool for entry in trace] for trace in traces(url)] == [TOOLS, TOOLS]
    assert agent.hub.mcp_url is None  # the endpoint is gone with the replay
    assert verifies(url)


def test_a_replay_cycle_no_client_came_to_is_skipped_agent_absent(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    agent = McpAgent(name=AGENT, hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=0.5))
    start = utc(2025, 1, 6)
    plan = ReplayPlan(
        store_url=url,
        start_at=start,
        end_at=start + timedelta(days=1),
        markets=(crypto_daily(agent),),
    )
    report = run_replay(plan)
    assert (report.slots, report.cycles_skipped, report.cycles_done) == (1, 1, 0)
    [(reason, snapshots)] = query(
        url,
        "SELECT c.reason, (SELECT count(*) FROM nav_snapshot s WHERE s.account_id = c.account_id"
        " AND s.at = c.slot_at) FROM cycle c",
    )
    assert (reason, snapshots) == ("agent_absent", 1)
    assert verifies(url)
