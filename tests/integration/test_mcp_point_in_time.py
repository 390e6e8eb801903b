"""Point-in-time over MCP: an outside client asking for bars at a random slot gets none stamped
after it, and every bar ended by then that it asked for (the built-in toolbox's property, through
the SDK's client, real uvicorn and a cycle token); KTD-Fin's research tools, called by name, too."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.daemon.mcp_http import serve_mcp
from openbell.markets.domain import utc
from openbell.store.ledger import Ledger
from openbell_testkit.agents import make_arena
from openbell_testkit.mcp import call, connect

SYMBOLS = ("AAPL", "MSFT", "NVDA", "QQQ")
FIRST = utc(2025, 6, 2)
HOURS = 24 * 140  # into October 2025, inside the bundled US bars


class NoAgentTokens:
    def agent_for_token(self, token: str) -> str | None:
        return None


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    hours=st.integers(min_value=0, max_value=HOURS),
    minute=st.sampled_from([0, 30, 47]),
    symbol=st.sampled_from(SYMBOLS),
    interval=st.sampled_from(["1d", "1h"]),
    lookback=st.integers(min_value=1, max_value=60),
)
def test_bars_over_mcp_never_show_the_future(
    ledger: Ledger, hours: int, minute: int, symbol: str, interval: str, lookback: int
) -> None:
    now = FIRST + timedelta(hours=hours, minutes=minute)
    arena = make_arena(ledger, "us", agent="pit")
    hub = CycleHub()

    async def scenario() -> tuple[dict[str, Any], bool]:
        tools = await arena.toolbox(now)
        ctx = DecisionContext(
            now=now,
            market="us",
            agent_name="pit",
            account_id=arena.account_id,
            cycle_id=arena.claim(now),
            universe=tools.universe,
            rules=arena.rules,
            tools=tools,
            journal=ledger,
            roster=arena.universe,
        )
        async with (
            serve_mcp(hub, NoAgentTokens(), host="127.0.0.1", port=0) as url,
            hub.open(ctx, budgets=OutsideBudgets(max_wall_s=30)) as cycle,
            connect(url, cycle.token) as session,
        ):
            return await call(
                session, "get_bars", symbol=symbol, interval=interval, lookback=lookback
            )

    found, is_error = asyncio.run(scenario())
    every = arena.source.bars_between([symbol], interval, utc(2024, 1, 1), now).get(symbol, [])
    ended = sorted(bar.end_at for bar in every if bar.end_at <= now)
    if is_error:  # only when nothing had ended (or the symbol is not offered at `now`)
        assert found["code"] in ("data_unavailable", "unknown_symbol")
        assert not ended or found["code"] == "unknown_symbol"
        return
    shown = [datetime.fromisoformat(bar["end_at"]) for bar in found["bars"]]
    assert all(end <= now for end in shown)
    assert shown == ended[-lookback:]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    hours=st.integers(min_value=0, max_value=HOURS),
    minute=st.sampled_from([0, 30, 47]),
    symbol=st.sampled_from(SYMBOLS),
    lookback=st.integers(min_value=1, max_value=60),
)
def test_ktd_research_tools_over_mcp_never_show_the_future(
    ledger: Ledger, hours: int, minute: int, symbol: str, lookback: int
) -> None:
    # KTD-Fin's research tools are served (not listed) to an outside client too: its snapshot
    # of a stock is the daily bars ended by the slot, and the market's data cutoff is theirs.
    now = FIRST + timedelta(hours=hours, minutes=minute)
    arena = make_arena(ledger, "us", agent="pit")
    hub = CycleHub()

    async def scenario() -> list[tuple[dict[str, Any], bool]]:
        tools = await arena.toolbox(now)
        ctx = DecisionContext(
            now=now,
            market="us",
            agent_name="pit",
            account_id=arena.account_id,
            cycle_id=arena.claim(now),
            universe=tools.universe,
            rules=arena.rules,
            tools=tools,
            journal=ledger,
            roster=arena.universe,
        )
        async with (
            serve_mcp(hub, NoAgentTokens(), host="127.0.0.1", port=0) as url,
            hub.open(ctx, budgets=OutsideBudgets(max_wall_s=30)) as cycle,
            connect(url, cycle.token) as session,
        ):
            return [
                await call(session, "get_stock_snapshot", stock_id=symbol, lookback=lookback),
                await call(session, "get_market_context"),
            ]

    (snapshot, snapshot_error), (context, context_error) = asyncio.run(scenario())
    every = arena.source.bars_between([symbol], "1d", utc(2024, 1, 1), now).get(symbol, [])
    ended = [bar for bar in every if bar.end_at <= now]
    assert not context_error
    if snapshot_error:  # only when nothing had ended (or the symbol is not offered at `now`)
        assert snapshot["code"] in ("data_unavailable", "unknown_symbol")
        assert not ended or snapshot["code"] == "unknown_symbol"
        return
    local = ZoneInfo(arena.rules.timezone)
    dates = [bar.start_at.astimezone(local).date().isoformat() for bar in ended]
    assert [bar["date"] for bar in snapshot["bars"]] == dates[-lookback:]
    assert [Decimal(bar["close"]) for bar in snapshot["bars"]] == [
        b.close for b in ended[-lookback:]
    ]
    assert snapshot["data_cutoff"] == dates[-1]
    assert (
        context["data_cutoff"] is None
        or context["data_cutoff"] <= now.astimezone(local).date().isoformat()
    )
