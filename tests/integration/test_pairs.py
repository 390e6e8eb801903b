"""Shorting through the toolbox, the pair rule and the pair-neutral baseline, on a real ledger over
the bundled US data: a shorting account is offered short and cover, sizes them by target weight
and sees its exposures; a cycle that ends a pair one-legged has the leg closed with the rule as the
order's reason; the pair-neutral baseline holds long the stronger and short the weaker leg by
20-session momentum, rebalances when the ranking flips, and the ledger verifies."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from openbell.agents.baselines import build_agent
from openbell.agents.pairs import PAIR_RULE, PairEnforced, enforce_pairs, momentum, pair_state
from openbell.agents.protocol import DecisionContext
from openbell.agents.toolbox import Toolbox
from openbell.agents.tools import OrderOut, OrderStatusOut, PortfolioOut, openai_tools
from openbell.daemon.valuation import write_slot_snapshot
from openbell.markets.domain import Fill, Side, utc
from openbell.ops.reports.market_reports import leaderboard
from openbell.store.ledger import Ledger
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import (
    DAY,
    US_OPEN,
    Arena,
    daily_bars,
    make_arena,
    small_universe,
)

D = Decimal
PAIRS = (("AAPL", "MSFT"), ("NVDA", "AMD"))


def filled(result: object) -> OrderOut:
    assert isinstance(result, OrderOut), result
    assert result.status is OrderStatusOut.FILLED, result.message
    return result


def test_a_shorting_account_is_offered_short_and_cover(ledger: Ledger, engine: Engine) -> None:
    shorting = make_arena(ledger, "us", allow_short=True)
    plain = make_arena(ledger, "us", agent="plain")

    async def scenario() -> tuple[list[str], list[str], PortfolioOut, PortfolioOut]:
        tools = await shorting.toolbox(US_OPEN)
        long_only = await plain.toolbox(US_OPEN)
        sides = [
            next(
                tool["function"]["parameters"]["properties"]["side"]["enum"]
                for tool in openai_tools(box.specs)
                if tool["function"]["name"] == "place_order"
            )
            for box in (tools, long_only)
        ]
        short = filled(
            await tools.place_order("MSFT", "short", target_weight=D("0.4"), reason="test")
        )
        assert short.held_after is not None
        assert short.held_after < 0
        filled(await tools.place_order("AAPL", "buy", target_weight=D("0.3"), reason="test"))
        portfolio = await tools.get_portfolio()
        assert isinstance(portfolio, PortfolioOut)
        plain_portfolio = await long_only.get_portfolio()
        assert isinstance(plain_portfolio, PortfolioOut)
        cover = filled(await tools.place_order("MSFT", "cover", target_weight=D(0)))
        assert cover.held_after == 0
        return sides[0], sides[1], portfolio, plain_portfolio

    offered, plain_sides, portfolio, plain_portfolio = asyncio.run(scenario())
    assert offered == ["buy", "sell", "short", "cover"]
    assert plain_sides == ["buy", "sell"]
    nav = portfolio.nav
    assert portfolio.short_value is not None
    assert portfolio.long_value is not None
    # Marked at the slot's quotes: 0.4 and 0.3 of NAV, less lots, fees and slippage.
    assert D("0.35") < portfolio.short_value / nav <= D("0.4")
    assert D("0.25") < portfolio.long_value / nav <= D("0.3")
    assert portfolio.gross_exposure == (
        (portfolio.long_value + portfolio.short_value) / nav
    ).quantize(D("0.0001"))
    assert portfolio.net_exposure == (
        (portfolio.long_value - portfolio.short_value) / nav
    ).quantize(D("0.0001"))
    assert portfolio.margin_requirement == portfolio.long_value + D("0.5") * portfolio.short_value
    assert portfolio.borrow_fees_paid is not None
    msft = next(p for p in portfolio.positions if p.symbol == "MSFT")
    assert msft.quantity < 0
    assert msft.weight < 0
    assert "short_value" not in json.loads(plain_portfolio.model_dump_json())
    report = verify_ledger(engine)
    assert report.ok, report.lines()


def test_a_pair_left_one_legged_is_closed_by_the_pair_rule(ledger: Ledger, engine: Engine) -> None:
    arena = make_arena(ledger, "us", allow_short=True)

    class OneLeg:
        name = "one-leg"
        kind = "llm"

        async def decide(self, ctx: DecisionContext) -> None:
            tools = ctx.tools
            await tools.place_order("AAPL", "buy", target_weight=D("0.2"))  # pair 1: one leg
            await tools.place_order("NVDA", "buy", target_weight=D("0.2"))  # pair 2: hedged
            await tools.place_order("AMD", "short", target_weight=D("0.2"))
            await tools.finish("done")

    agent = PairEnforced(agent=OneLeg(), pairs=PAIRS)

    async def cycle() -> Toolbox:
        tools = await arena.toolbox(US_OPEN)
        await agent.decide(replace(arena.context(agent, tools), journal=ledger))
        return tools

    tools = asyncio.run(cycle())
    (told,) = ledger.traces(arena.claim(US_OPEN))
    assert told.role == "system"
    assert told.content == "pair rule: closed AAPL (filled)"
    held = arena.holdings(US_OPEN + DAY)
    assert "AAPL" not in held
    assert held["NVDA"] > 0
    assert held["AMD"] < 0
    assert pair_state(held, PAIRS[0]) == "flat"
    assert pair_state(held, PAIRS[1]) == "hedged"
    with engine.connect() as connection:
        rows = connection.execute(
            text('SELECT seq, symbol, side, status, reason FROM "order" ORDER BY seq')
        ).all()
    closing = [row for row in rows if row.reason.startswith(PAIR_RULE)]
    assert [(row.symbol, row.side, row.status) for row in closing] == [("AAPL", "sell", "filled")]
    assert "AAPL vs MSFT ended the cycle with one leg alone" in closing[0].reason
    assert closing[0].seq == max(row.seq for row in rows)  # after the agent's own orders
    last = tools.placed[-1]
    assert isinstance(last.outcome, Fill)
    assert last.outcome.side is Side.SELL
    assert verify_ledger(engine).ok


def test_both_legs_on_one_side_are_closed(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", allow_short=True)

    async def scenario() -> list[str]:
        tools = await arena.toolbox(US_OPEN)
        filled(await tools.place_order("AAPL", "short", target_weight=D("0.2")))
        filled(await tools.place_order("MSFT", "short", target_weight=D("0.2")))
        await tools.finish("both short")
        return await enforce_pairs(tools, PAIRS)

    done = asyncio.run(scenario())
    assert done == ["closed AAPL (filled)", "closed MSFT (filled)"]
    assert arena.holdings(US_OPEN + DAY) == {}


def test_pair_neutral_longs_the_stronger_and_shorts_the_weaker(
    ledger: Ledger, engine: Engine
) -> None:
    arena = make_arena(ledger, "us", allow_short=True)
    agent = build_agent("pair_neutral", "pairs", market="us", pairs=PAIRS)
    traded: set[tuple[str, str]] = set()
    now = US_OPEN
    for _ in range(10):  # ten calendar days from 2025-10-01 (weekends find no new bars)
        tools = asyncio.run(arena.run(agent, now))
        assert tools.finished
        held = arena.holdings(now + DAY / 2)
        for pair in PAIRS:
            assert pair_state(held, pair) in ("hedged", "flat")
            if pair_state(held, pair) == "hedged":
                strong = pair[0] if held[pair[0]] > 0 else pair[1]
                assert strong == asyncio.run(_stronger(arena, pair, now))
                traded.add(pair)
        now += DAY
    assert traded == set(PAIRS)
    sides = {order.side for order in ledger.recent_orders(arena.account_id, now, 1000)}
    assert {Side.SHORT, Side.BUY} <= sides
    report = verify_ledger(engine)
    assert report.ok, report.lines()


async def _stronger(arena: Arena, pair: tuple[str, str], now: datetime) -> str:
    """The leg of `pair` with the higher 20-session momentum at `now`, from the gateway."""
    found = {}
    for symbol in pair:
        bars = await arena.gateway.at(now).bars(symbol, "1d", 21)
        value = momentum([bar.close for bar in bars.bars], 20)
        assert value is not None
        found[symbol] = value
    return max(pair, key=lambda symbol: found[symbol])


def test_pair_neutral_rebalances_when_the_ranking_flips(ledger: Ledger, engine: Engine) -> None:
    # AAA climbs 2 % a day for 15 days then falls 3 % a day; BBB drifts up 0.1 % a day.
    first = utc(2025, 1, 1)
    aaa = [D(100) * D("1.02") ** min(day, 15) * D("0.97") ** max(day - 15, 0) for day in range(40)]
    bbb = [D(50) * D("1.001") ** day for day in range(40)]
    bars = {
        "1d": [
            *daily_bars("AAA/USDT", [c.quantize(D("0.01")) for c in aaa], first),
            *daily_bars("BBB/USDT", [c.quantize(D("0.01")) for c in bbb], first),
        ]
    }
    arena = make_arena(
        ledger,
        "crypto",
        universe=small_universe("crypto", "AAA/USDT", "BBB/USDT"),
        bars=bars,
        allow_short=True,
    )
    pair = ("AAA/USDT", "BBB/USDT")
    agent = build_agent("pair_neutral", "pairs", market="crypto", pairs=(pair,), sessions=5)
    seen: list[str] = []
    for day in range(6, 38):
        now = first + day * DAY
        asyncio.run(arena.run(agent, now))
        held = arena.holdings(now + DAY / 2)
        assert pair_state(held, pair) == "hedged"
        strong = "AAA" if held["AAA/USDT"] > 0 else "BBB"
        if not seen or seen[-1] != strong:
            seen.append(strong)
    assert seen == ["AAA", "BBB"]  # long AAA while it climbs, short it once it falls
    orders = ledger.recent_orders(arena.account_id, first + 40 * DAY, 1000)
    assert {order.side for order in orders} == {Side.BUY, Side.SHORT, Side.SELL, Side.COVER}
    report = verify_ledger(engine)
    assert report.ok, report.lines()


def test_momentum_needs_its_window() -> None:
    closes = [D(100), D(90), D(110)]
    assert momentum(closes, 2) == D("0.1")
    assert momentum(closes, 3) is None


def test_build_agent_refuses_pairs_for_other_kinds() -> None:
    with pytest.raises(ValueError, match="pairs"):
        build_agent("cash", "c", market="us", pairs=PAIRS)
    with pytest.raises(ValueError, match="pairs"):
        build_agent("pair_neutral", "p", market="us")
    with pytest.raises(ValueError, match="two pairs"):
        build_agent("pair_neutral", "p", market="us", pairs=(("A", "B"), ("B", "C")))


def test_reports_give_a_shorting_account_its_long_short_metrics(
    ledger: Ledger, engine: Engine
) -> None:
    shorting = make_arena(ledger, "us", allow_short=True)
    plain = make_arena(ledger, "us", agent="plain")

    async def scenario() -> None:
        tools = await shorting.toolbox(US_OPEN)
        filled(await tools.place_order("MSFT", "short", target_weight=D("0.4")))
        filled(await tools.place_order("AAPL", "buy", target_weight=D("0.4")))
        await tools.finish("hedged")
        long_only = await plain.toolbox(US_OPEN)
        filled(await long_only.place_order("AAPL", "buy", target_weight=D("0.5")))
        await long_only.finish("long")
        symbols = ["AAPL", "MSFT"]
        for day in range(6):  # the open of 2025-10-01 and the five days after
            now = US_OPEN + day * DAY
            snapshot = await shorting.gateway.snapshot(symbols, now)
            for arena in (shorting, plain):
                await write_slot_snapshot(
                    ledger, arena.gateway, snapshot, arena.account_id, arena.rules.shorting
                )

    asyncio.run(scenario())
    fees = ledger.borrow_fees(shorting.account_id)
    assert fees  # a day's fee for each calendar day the short was held at its end
    assert ledger.borrow_fees(plain.account_id) == []
    board = leaderboard(engine, "us")
    rows = {row.agent: row for row in board.rows}
    found = rows["agent"].long_short
    assert found is not None
    assert found.borrow_fees == sum((fee.amount for fee in fees), D(0))
    assert found.borrow_cost == pytest.approx(float(found.borrow_fees / D(10000)))
    assert found.mean_gross_exposure is not None
    assert found.mean_net_exposure is not None
    assert 0.7 < found.mean_gross_exposure < 0.9
    assert abs(found.mean_net_exposure) < 0.1
    assert rows["plain"].long_short is None
    assert verify_ledger(engine).ok
