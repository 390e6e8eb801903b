"""KTD-Fin's six research tools on a real toolbox over the bundled SSE-50 daily bars: they never
see the future (every answer is the same whether the bars after the decision time are the real ones
or wildly different), they show a stock's board and limit band as the A-share rules make them, the
account with the shares sellable today (T+1), and `risk_check` refuses what execution would
refuse. They are served by the toolbox under their names but not listed among its `specs`, so what
the other modes and MCP clients are offered is unchanged."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from openbell.agents.ktd.contract import KTD_TOOLS
from openbell.agents.tools import ARGUMENTS, ErrorCode, ToolError
from openbell.markets.domain import Bar, utc
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell_testkit.agents import CN_OPEN, Arena, bundled, make_arena

D = Decimal
DAY = timedelta(days=1)
CHEAP = "601398.SH"  # ICBC: a 100-share lot is cheap
STAR = "688981.SH"
BENCHMARK = "000016.SH"
#: Session opens of the bundled A-share bars (Beijing 09:30), the day before each a session too.
SLOTS = [utc(2025, 8, 14, 1, 30), utc(2025, 9, 23, 1, 30), CN_OPEN]

pytestmark = pytest.mark.sqlite_only


@functools.cache
def real_bars() -> tuple[Bar, ...]:
    """Every bundled daily bar of the SSE-50 members and the index, 2025."""
    source = bundled("cn")
    symbols = sorted(source.symbols("1d"))
    found = source.bars_between(symbols, "1d", utc(2024, 12, 1), utc(2026, 1, 1))
    return tuple(bar for bars in found.values() for bar in bars)


def changed_after(moment: datetime) -> list[Bar]:
    """The bundled bars with every bar ending after `moment` made unrecognisable."""
    return [
        dataclasses.replace(
            bar,
            open=bar.open * 3,
            high=bar.high * 3,
            low=bar.low * 3,
            close=bar.close * 3,
            volume=bar.volume * 7 + 1,
        )
        if bar.end_at > moment
        else bar
        for bar in real_bars()
    ]


def calls(symbols: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """A call of each tool, with every sort of the screen."""
    return [
        ("get_market_context", {}),
        *[
            ("screen_candidates", {"sort_by": key, "top_k": 50, "exclude_limit_up": False})
            for key in ("momentum_vol", "ret_20d", "ret_5d", "ret_1d", "vol_20d", "volume_ratio")
        ],
        ("screen_candidates", {"ascending": True}),
        ("get_stock_snapshot", {"stock_id": CHEAP, "lookback": 60}),
        ("get_stock_snapshot", {"stock_id": STAR}),
        ("get_stock_snapshot", {"stock_id": BENCHMARK, "lookback": 3}),
        ("compare_candidates", {"stock_ids": symbols[:10]}),
        ("get_portfolio_state", {}),
        (
            "risk_check",
            {
                "orders": [
                    {"stock_id": CHEAP, "side": "SELL", "target_weight": 0},
                    {"stock_id": STAR, "side": "buy", "target_weight": 0.2},
                    {"stock_id": symbols[3], "side": "Buy", "shares": 300},
                ]
            },
        ),
    ]


def answers(arena: Arena, now: datetime) -> list[str]:
    """Buy a lot of `CHEAP` at the session before `now`, then every tool's answer at `now`."""
    before = now - DAY if now.weekday() else now - 3 * DAY

    async def scenario() -> list[str]:
        tools = await arena.toolbox(before)
        await tools.place_order(CHEAP, "buy", shares=D(100))
        await tools.finish("bought")
        arena.ledger.finish_cycle(arena.claim(before), CycleStatus.DONE, before)
        tools = await arena.toolbox(now)
        symbols = list(tools.universe.symbols)
        return [(await tools.call(n, a)).model_dump_json() for n, a in calls(symbols)]

    return asyncio.run(scenario())


@pytest.mark.parametrize("now", SLOTS, ids=lambda now: now.date().isoformat())
def test_no_research_tool_sees_a_bar_that_ended_after_now(ledger: Ledger, now: datetime) -> None:
    real = make_arena(ledger, "cn", agent="real", bars={"1d": list(real_bars())})
    other = make_arena(ledger, "cn", agent="other", bars={"1d": changed_after(now)})
    seen, altered = answers(real, now), answers(other, now)
    assert seen == altered
    # the answers held something to compare, all of it from before `now`
    found = [json.loads(text) for text in seen]
    assert not [a for a in found if "code" in a]
    assert len(found[1]["candidates"]) >= 45
    snapshot = found[8]
    assert len(snapshot["bars"]) == 60
    assert all(bar["date"] < now.date().isoformat() for bar in snapshot["bars"])
    assert snapshot["data_cutoff"] < snapshot["as_of_date"] == now.date().isoformat()
    assert snapshot["held"]["shares"] == "100"
    # ...and the comparison can tell: a change to the last session before `now` shows
    earlier = make_arena(ledger, "cn", agent="earlier", bars={"1d": changed_after(now - 3 * DAY)})
    assert answers(earlier, now) != seen


def test_the_snapshot_is_the_last_bars_and_the_limit_band_of_the_board(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    async def scenario() -> list[Any]:
        tools = await arena.toolbox(CN_OPEN)
        return [
            await tools.call("get_stock_snapshot", {"stock_id": STAR, "lookback": 21}),
            await tools.call("get_stock_snapshot", {"stock_id": CHEAP, "lookback": 1}),
        ]

    star, cheap = (json.loads(found.model_dump_json()) for found in asyncio.run(scenario()))
    for shown, symbol, board, pct in ((star, STAR, "star", "0.20"), (cheap, CHEAP, "main", "0.10")):
        bars = [
            bar
            for bar in bundled("cn").bars_between([symbol], "1d", utc(2025, 8, 1), CN_OPEN)[symbol]
            if bar.end_at <= CN_OPEN
        ]
        last = bars[-1].close
        row = shown["stock"]
        assert (row["board"], row["limit_pct"]) == (board, pct)
        assert D(row["last_close"]) == last
        tick = D("0.01")
        assert D(row["limit_up"]) == (last * (1 + D(pct))).quantize(tick, ROUND_HALF_UP)
        assert D(row["limit_down"]) == (last * (1 - D(pct))).quantize(tick, ROUND_HALF_UP)
        assert D(row["ret_1d"]) == (last / bars[-2].close - 1).quantize(D("0.0001"))
        assert D(row["ret_20d"]) == (last / bars[-21].close - 1).quantize(D("0.0001"))
        assert [D(bar["close"]) for bar in shown["bars"]] == [
            b.close for b in bars[-len(shown["bars"]) :]
        ]
    assert len(star["bars"]) == 21
    assert len(cheap["bars"]) == 1
    assert D(cheap["bars"][0]["volume_ratio"]) == 1  # relative to the bars shown: no real volume


def test_shares_bought_today_are_not_available_until_the_next_session(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    tomorrow = CN_OPEN + 3 * DAY  # Monday 2025-10-13
    sell = {"orders": [{"stock_id": CHEAP, "side": "sell", "shares": 100}]}

    async def scenario() -> list[Any]:
        tools = await arena.toolbox(CN_OPEN)
        await tools.place_order(CHEAP, "buy", shares=D(100))
        today = [
            await tools.call("get_portfolio_state", {}),
            await tools.call("risk_check", sell),
        ]
        await tools.finish("bought")
        arena.ledger.finish_cycle(arena.claim(CN_OPEN), CycleStatus.DONE, CN_OPEN)
        tools = await arena.toolbox(tomorrow)
        return [
            *today,
            await tools.call("get_portfolio_state", {}),
            await tools.call("risk_check", sell),
        ]

    held_today, check_today, held_next, check_next = (
        json.loads(found.model_dump_json()) for found in asyncio.run(scenario())
    )
    position = held_today["positions"][0]
    assert (position["stock_id"], position["shares"], position["shares_available"]) == (
        CHEAP,
        "100",
        "0",
    )
    (check,) = check_today["checks"]
    assert not check["ok"]
    assert any("sellable today" in issue for issue in check["issues"])
    assert held_next["positions"][0]["shares_available"] == "100"
    assert check_next["passed"]
    assert D(check_next["cash_after"]) > D(held_next["cash"])


def test_risk_check_refuses_what_execution_would_refuse_in_sequence(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    orders = [
        {"stock_id": CHEAP, "side": "buy", "shares": 50},  # under a lot
        {"stock_id": CHEAP, "side": "buy", "shares": 100},
        {"stock_id": CHEAP, "side": "sell", "shares": 100},  # bought by the check: T+1
        {"stock_id": "IBM", "side": "buy", "shares": 100},
        {"stock_id": "600519.SH", "side": "buy", "shares": 100},  # more than the cash
        {"stock_id": STAR, "side": "sell", "target_weight": 0},  # nothing held
    ]

    async def scenario() -> Any:
        tools = await arena.toolbox(CN_OPEN)
        return await tools.call("risk_check", {"orders": orders})

    found = json.loads(asyncio.run(scenario()).model_dump_json())
    assert not found["passed"]
    oks = [check["ok"] for check in found["checks"]]
    assert oks == [False, True, False, False, False, False]
    issues = [" ".join(check["issues"]) for check in found["checks"]]
    assert "zero lots" in issues[0]
    assert "sellable today" in issues[2]  # the lot the check bought settles next session
    assert "not in today's universe" in issues[3]
    assert "cash" in issues[4]
    assert "nothing held" in issues[5]
    bought = found["checks"][1]
    assert D(found["cash_after"]) == D(100000) - D(bought["est_notional"]) - D(bought["est_fees"])


def test_unknown_stocks_are_answered_as_every_tool_answers_them(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    async def scenario() -> list[Any]:
        tools = await arena.toolbox(CN_OPEN)
        return [
            await tools.call("get_stock_snapshot", {"stock_id": "IBM"}),
            await tools.call("compare_candidates", {"stock_ids": [CHEAP, "IBM"]}),
            await tools.call("screen_candidates", {"top_k": 0}),
            await tools.call("risk_check", {"orders": [{"stock_id": CHEAP, "side": "buy"}]}),
        ]

    snapshot, compared, screen, check = asyncio.run(scenario())
    assert isinstance(snapshot, ToolError)
    assert snapshot.code is ErrorCode.UNKNOWN_SYMBOL
    assert json.loads(compared.model_dump_json())["unknown"] == ["IBM"]
    for invalid in (screen, check):
        assert isinstance(invalid, ToolError)
        assert invalid.code is ErrorCode.INVALID_ARGUMENTS


def test_the_research_tools_are_served_but_not_listed(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    async def scenario() -> Any:
        return await arena.toolbox(CN_OPEN)

    tools = asyncio.run(scenario())
    assert [spec.name for spec in tools.specs] == list(ARGUMENTS)
    assert [spec.name for spec in tools.ktd_specs] == list(KTD_TOOLS)
    assert not set(KTD_TOOLS) & set(ARGUMENTS)
    for name in KTD_TOOLS:
        found = tools.spec_of(name)
        assert found is not None
        assert found.name == name
