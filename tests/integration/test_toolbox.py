"""The toolbox on a real SQLite ledger over the bundled replay data.

Bad arguments come back as structured errors, market data never shows anything stamped after
`now`, orders by shares and by target weight respect lots, steps and fees, every order attempt with
valid arguments is recorded (outside the universe as `not_in_universe`), an interrupted cycle run
again ends with exactly the ledger of an uninterrupted run, and the OpenAI schemas match the models.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import Agent
from openbell.agents.toolbox import _OWN_HANDLERS, Toolbox
from openbell.agents.tools import (
    ErrorCode,
    OrderOut,
    OrderStatusOut,
    PlaceOrderArgs,
    ToolError,
    openai_tools,
)
from openbell.markets.domain import Fill, Rejection, RejectReason, utc
from openbell.markets.universes import Period, load_universe
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell_testkit.agents import CN_OPEN, CRYPTO_DAY, DAY, US_OPEN, Arena, make_arena
from openbell_testkit.store import dump_tables

D = Decimal


pytestmark = pytest.mark.sqlite_only


def order(result: object) -> OrderOut:
    assert isinstance(result, OrderOut), result
    return result


# -- arguments ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "code", "mentions"),
    [
        pytest.param("buy_everything", {}, ErrorCode.UNKNOWN_TOOL, "place_order", id="unknown"),
        pytest.param("get_bars", {"symbol": "AAPL", "lookback": 0}, ErrorCode.INVALID_ARGUMENTS,
                     "lookback", id="lookback-0"),
        pytest.param("get_bars", {"symbol": "AAPL", "interval": "5m"},
                     ErrorCode.INVALID_ARGUMENTS, "interval", id="interval"),
        pytest.param("get_bars", {"symbol": "AAPL", "when": "tomorrow"},
                     ErrorCode.INVALID_ARGUMENTS, "when", id="extra-key"),
        pytest.param("get_bars", {"symbol": "AAPL; DROP"}, ErrorCode.INVALID_ARGUMENTS, "symbol",
                     id="bad-symbol"),
        pytest.param("get_bars", {"symbol": "IBM"}, ErrorCode.UNKNOWN_SYMBOL, "IBM",
                     id="outside-universe"),
        pytest.param("get_quote", {"symbols": []}, ErrorCode.INVALID_ARGUMENTS, "symbols",
                     id="no-symbols"),
        pytest.param("get_portfolio", {"account": 2}, ErrorCode.INVALID_ARGUMENTS, "account",
                     id="portfolio-extra"),
        pytest.param("place_order", {"symbol": "AAPL", "side": "buy"},
                     ErrorCode.INVALID_ARGUMENTS, "exactly one", id="no-size"),
        pytest.param("place_order",
                     {"symbol": "AAPL", "side": "buy", "shares": 1, "target_weight": "0.1"},
                     ErrorCode.INVALID_ARGUMENTS, "exactly one", id="two-sizes"),
        pytest.param("place_order", {"symbol": "AAPL", "side": "short", "shares": 1},
                     ErrorCode.INVALID_ARGUMENTS, "side", id="short"),
        pytest.param("place_order", {"symbol": "AAPL", "side": "buy", "shares": -3},
                     ErrorCode.INVALID_ARGUMENTS, "shares", id="negative-shares"),
        pytest.param("place_order", {"symbol": "AAPL", "side": "buy", "target_weight": "1.5"},
                     ErrorCode.INVALID_ARGUMENTS, "target_weight", id="weight-above-1"),
        pytest.param("place_order", {"symbol": "AAPL", "side": "buy", "shares": "NaN"},
                     ErrorCode.INVALID_ARGUMENTS, "shares", id="nan"),
        pytest.param("place_order",
                     {"symbol": "AAPL", "side": "buy", "shares": 1, "confidence": 2},
                     ErrorCode.INVALID_ARGUMENTS, "confidence", id="confidence"),
        pytest.param("finish", {"summary": ""}, ErrorCode.INVALID_ARGUMENTS, "summary",
                     id="empty-summary"),
    ],
)  # fmt: skip
def test_bad_calls_are_structured_errors(
    ledger: Ledger, name: str, arguments: dict[str, Any], code: ErrorCode, mentions: str
) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> object:
        tools = await arena.toolbox(US_OPEN)
        return await tools.call(name, arguments)

    result = asyncio.run(scenario())
    assert isinstance(result, ToolError), result
    assert result.code is code
    assert mentions in result.message + result.hint
    assert result.as_of == US_OPEN
    assert ledger.cycle_orders(arena.claim(US_OPEN)) == []


def test_no_tool_is_served_after_finish(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(US_OPEN)
        finished = await tools.finish("done")
        later = [await tools.get_portfolio(), await tools.place_order("AAPL", "buy", shares=D(1))]
        return [finished, *later, tools.finished, tools.summary]

    finished, portfolio, placed, flag, summary = asyncio.run(scenario())
    assert not isinstance(finished, ToolError)
    for late in (portfolio, placed):
        assert isinstance(late, ToolError)
        assert late.code is ErrorCode.ALREADY_FINISHED
    assert (flag, summary) == (True, "done")


# -- point in time ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "interval"),
    [
        pytest.param(utc(2025, 10, 20, 15), "1h", id="1h-on-a-bar-boundary"),
        pytest.param(utc(2025, 10, 20, 15, 47), "1h", id="1h-inside-a-bar"),
        pytest.param(utc(2025, 10, 2, 13, 30), "1d", id="1d-at-the-open"),
        pytest.param(utc(2025, 10, 2, 18, 0), "1d", id="1d-mid-session"),
    ],
)
def test_get_bars_never_shows_a_bar_ending_after_now(
    ledger: Ledger, now: datetime, interval: str
) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> object:
        tools = await arena.toolbox(now)
        return await tools.get_bars("AAPL", interval, 50)

    result = asyncio.run(scenario())
    assert not isinstance(result, ToolError), result
    assert result.as_of == now
    assert len(result.bars) == 50
    assert all(bar.end_at <= now for bar in result.bars)
    # ...and nothing that had ended is held back: the last bar is the newest one ended by `now`
    every = arena.source.bars_between(["AAPL"], interval, utc(2025, 1, 1), now)["AAPL"]
    assert result.bars[-1].end_at == max(bar.end_at for bar in every if bar.end_at <= now)


def test_moving_averages_are_the_means_of_the_closes_get_bars_shows(ledger: Ledger) -> None:
    # A Python agent's moving averages: the bars `get_bars` shows, their closes averaged as the
    # windowed sum does; refused as `get_bars` refuses, and not after finish.
    arena = make_arena(ledger, "crypto")
    now = CRYPTO_DAY + DAY // 3  # inside a daily bar: it has not ended and is not averaged

    async def scenario() -> tuple[object, ...]:
        tools = await arena.toolbox(now)
        found = await tools.moving_averages("BTC/USDT", "1d", (1, 50, 200))
        bars = await tools.get_bars("BTC/USDT", "1d", 200)
        refused = (
            await tools.moving_averages("IBM", "1d", (5,)),
            await tools.moving_averages("BTC/USDT", "5m", (5,)),
            await tools.moving_averages("BTC/USDT", "1d", (0, 5)),
            await tools.moving_averages("BTC/USDT", "1d", (1001,)),
            await tools.moving_averages("BTC/USDT", "1d", ()),
        )
        await tools.finish("done")
        late = await tools.moving_averages("BTC/USDT", "1d", (5,))
        return found, bars, refused, late

    found, bars, refused, late = asyncio.run(scenario())
    assert not isinstance(found, ToolError)
    assert not isinstance(bars, ToolError)
    closes = [bar.close for bar in bars.bars]
    assert len(closes) == 200
    assert dict(found.averages) == {n: sum(closes[-n:], D(0)) / n for n in (1, 50, 200)}
    assert found.averages[1] == closes[-1]
    assert found.ended_at == bars.bars[-1].end_at == CRYPTO_DAY
    assert found.as_of == now
    codes = [error.code for error in refused if isinstance(error, ToolError)]
    assert codes == [ErrorCode.UNKNOWN_SYMBOL, *[ErrorCode.INVALID_ARGUMENTS] * 4]
    assert isinstance(late, ToolError)
    assert late.code is ErrorCode.ALREADY_FINISHED


def test_quotes_are_the_slots_and_symbols_not_offered_are_unknown(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    early = utc(2020, 1, 1)  # SUI has no bars yet: not offered, told apart from no outsider

    async def scenario() -> tuple[object, object]:
        tools = await arena.toolbox(early)
        quotes = await tools.get_quote(["BTC/USDT", "SUI/USDT", "DOGE/USDT", "BTC/USDT"])
        sized = await tools.place_order("SUI/USDT", "buy", target_weight=D("0.1"))
        return quotes, sized

    quotes, sized = asyncio.run(scenario())
    assert not isinstance(quotes, ToolError)
    assert [quote.symbol for quote in quotes.quotes] == ["BTC/USDT"]
    assert all(quote.at <= early for quote in quotes.quotes)
    assert (quotes.missing, quotes.unknown) == ([], ["SUI/USDT", "DOGE/USDT"])
    assert isinstance(sized, OrderOut)
    assert (sized.status, sized.reject_reason) == (OrderStatusOut.REJECTED, "not_in_universe")


# -- orders -------------------------------------------------------------------------------------


def test_a_share_orders_by_shares_and_by_target_weight_respect_lots(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(CN_OPEN)
        return [
            await tools.place_order("601398.SH", "buy", shares=D(150), reason="odd lot"),
            await tools.place_order("600036.SH", "buy", target_weight=D("0.1")),
            await tools.place_order("600519.SH", "buy", target_weight=D("0.01")),
            await tools.get_portfolio(),
        ]

    by_shares, by_weight, too_small, portfolio = asyncio.run(scenario())
    assert order(by_shares).status is OrderStatusOut.FILLED
    assert (by_shares.seq, by_shares.filled_shares) == (1, D(100))
    weighted = order(by_weight)
    assert weighted.status is OrderStatusOut.FILLED
    assert weighted.seq == 2
    assert weighted.filled_shares is not None
    assert weighted.price is not None
    assert weighted.filled_shares % 100 == 0
    value = weighted.filled_shares * weighted.price
    assert D(10000) - 100 * weighted.price < value <= D(10000)
    # 1% of NAV is 1,000 CNY, less than one 100-share lot of Moutai: nothing recorded
    assert order(too_small).status is OrderStatusOut.NOTHING_TO_DO
    assert too_small.seq is None
    assert len(ledger.cycle_orders(arena.claim(CN_OPEN))) == 2
    assert not isinstance(portfolio, ToolError)
    assert {p.symbol: p.quantity for p in portfolio.positions} == {
        "601398.SH": D(100),
        "600036.SH": weighted.filled_shares,
    }
    assert portfolio.nav == portfolio.cash + portfolio.positions_value


def test_crypto_target_weight_uses_steps_and_leaves_room_for_fees(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(CRYPTO_DAY)
        return [
            await tools.place_order("BTC/USDT", "buy", target_weight=D("0.5")),
            await tools.place_order("ETH/USDT", "buy", target_weight=D(1)),
            await tools.get_portfolio(),
        ]

    half, rest, portfolio = asyncio.run(scenario())
    btc, eth = order(half), order(rest)
    assert btc.status is eth.status is OrderStatusOut.FILLED
    for placed in (btc, eth):
        assert placed.filled_shares is not None
        assert placed.filled_shares % D("0.00001") == 0
    assert btc.price is not None
    assert btc.notional is not None
    assert abs(btc.notional - D(5000)) <= D("0.00001") * btc.price + D(5)
    # the second buy spends what is left: less than one step plus fees remains
    assert eth.cash_after is not None
    assert eth.price is not None
    assert D(0) <= eth.cash_after < D("0.00001") * eth.price * D("1.002") + D("0.01")
    assert not isinstance(portfolio, ToolError)
    assert portfolio.cash == eth.cash_after


def test_sell_to_a_zero_weight_sells_everything_and_a_second_time_does_nothing(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(US_OPEN)
        return [
            await tools.place_order("AAPL", "buy", shares=D("7.9")),
            await tools.place_order("AAPL", "sell", target_weight=D(0)),
            await tools.place_order("AAPL", "sell", target_weight=D(0)),
        ]

    bought, sold, again = asyncio.run(scenario())
    assert order(bought).filled_shares == D(7)
    assert order(sold).filled_shares == D(7)
    assert sold.held_after == 0
    assert order(again).status is OrderStatusOut.NOTHING_TO_DO


def test_orders_outside_the_universe_are_recorded_as_rejections(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(US_OPEN)
        return [
            await tools.place_order("IBM", "buy", shares=D(3), reason="not ours"),
            await tools.place_order("IBM", "buy", target_weight=D("0.2")),
            await tools.place_order("AAPL", "buy", shares=D(1)),
        ]

    first, second, third = asyncio.run(scenario())
    for rejected in (order(first), order(second)):
        assert rejected.status is OrderStatusOut.REJECTED
        assert rejected.reject_reason == RejectReason.NOT_IN_UNIVERSE.value
        assert "universe" in rejected.message
    assert order(third).status is OrderStatusOut.FILLED
    stored = ledger.cycle_orders(arena.claim(US_OPEN))
    assert [(o.seq, o.symbol) for o in stored] == [(1, "IBM"), (2, "IBM"), (3, "AAPL")]
    assert isinstance(stored[0].outcome, Rejection)
    assert stored[0].outcome.reason is RejectReason.NOT_IN_UNIVERSE
    assert stored[1].target_weight == D("0.2")
    assert arena.holdings(US_OPEN) == {"AAPL": D(1)}


def test_a_member_that_left_is_sold_but_not_bought_and_not_offered(ledger: Ledger) -> None:
    # ETH/USDT leaves this universe on 2025-11-02: bought before, it may be looked up and sold
    # after, never bought again, and it is no longer part of the universe an agent is offered.
    crypto10 = load_universe("crypto10")
    leaving = replace(
        crypto10,
        memberships={"ETH/USDT": Period(until_date=date(2025, 11, 2), source="test")},
    )
    arena = make_arena(ledger, "crypto", universe=leaving)
    later = CRYPTO_DAY + 2 * DAY

    async def scenario() -> tuple[list[str], list[str], list[object]]:
        before = await arena.toolbox(CRYPTO_DAY)
        bought = await before.place_order("ETH/USDT", "buy", shares=D("0.5"))
        assert order(bought).status is OrderStatusOut.FILLED
        after = await arena.toolbox(later)
        quotes = await after.get_quote(["ETH/USDT"])
        assert not isinstance(quotes, ToolError)
        return (
            list(before.universe.symbols),
            list(after.universe.symbols),
            [
                [quote.symbol for quote in quotes.quotes],
                await after.get_bars("ETH/USDT", "1d", 2),
                await after.place_order("ETH/USDT", "buy", shares=D("0.1")),
                await after.place_order("ETH/USDT", "sell", shares=D("0.2")),
            ],
        )

    offered_before, offered_after, (quoted, bars, buy, sell) = asyncio.run(scenario())
    assert "ETH/USDT" in offered_before
    assert offered_after == [s for s in crypto10.symbols if s != "ETH/USDT"]
    assert quoted == ["ETH/USDT"]
    assert not isinstance(bars, ToolError)
    assert (order(buy).status, order(buy).reject_reason) == (
        OrderStatusOut.REJECTED,
        RejectReason.NOT_IN_UNIVERSE.value,
    )
    assert order(sell).status is OrderStatusOut.FILLED
    assert arena.holdings(later) == {"ETH/USDT": D("0.3")}


def test_rule_rejections_are_results_the_agent_can_read(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> object:
        tools = await arena.toolbox(US_OPEN)
        return await tools.place_order("AAPL", "buy", shares=D(1000))

    rejected = order(asyncio.run(scenario()))
    assert rejected.status is OrderStatusOut.REJECTED
    assert rejected.reject_reason == RejectReason.INSUFFICIENT_CASH.value
    assert "affordable" in rejected.message
    assert rejected.seq == 1
    assert rejected.cash_after == D(10000)


def test_the_a_share_benchmark_is_a_fractional_index_fund(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    async def scenario() -> tuple[str | None, object]:
        tools = await arena.toolbox(CN_OPEN)
        placed = await tools.place_order("000016.SH", "buy", target_weight=D(1))
        return tools.benchmark_symbol, placed

    symbol, placed = asyncio.run(scenario())
    assert symbol == "000016.SH"
    bought = order(placed)
    assert bought.status is OrderStatusOut.FILLED
    assert bought.filled_shares is not None
    assert bought.filled_shares % 1 != 0
    assert bought.cash_after is not None
    assert D(0) <= bought.cash_after < D(100)


# -- an interrupted cycle run again -------------------------------------------------------------


class Interrupted(BaseException):
    """Stands in for the process dying mid-cycle."""


def cut_after(orders: int) -> type[Toolbox]:
    class CutToolbox(Toolbox):
        async def call(self, name: str, arguments: Any) -> Any:
            if name == "place_order" and len(self.placed) >= orders:
                raise Interrupted
            return await super().call(name, arguments)

    return CutToolbox


def run_cycles(
    ledger: Ledger, agent: Agent, slots: list[datetime], cut: tuple[int, int] | None
) -> Arena:
    """Run `agent` over `slots`; with `cut = (slot index, k)` that slot's first run dies after
    `k` orders and the cycle is run again, from the start, by a fresh toolbox."""
    arena = make_arena(ledger, "crypto", agent=agent.name)

    async def scenario() -> None:
        for index, now in enumerate(slots):
            if cut is not None and cut[0] == index:
                tools = await arena.toolbox(now, kind=cut_after(cut[1]))
                with pytest.raises(Interrupted):
                    await agent.decide(arena.context(agent, tools))
                assert len(tools.placed) == cut[1]
            await arena.run(agent, now)

    asyncio.run(scenario())
    return arena


@pytest.mark.parametrize(
    ("kind", "seed", "cut"),
    [
        pytest.param("equal_weight", None, (0, 1), id="equal-weight-after-1"),
        pytest.param("equal_weight", None, (0, 6), id="equal-weight-after-6"),
        pytest.param("buy_and_hold", None, (0, 3), id="cd5-after-3"),
        pytest.param("random", 3, (1, 1), id="random-after-1"),
    ],
)
def test_an_interrupted_cycle_run_again_ends_as_an_uninterrupted_one(
    tmp_path: Path, kind: str, seed: int | None, cut: tuple[int, int]
) -> None:
    slots = [CRYPTO_DAY + n * DAY for n in range(3)]
    dumps = []
    for variant, where in (("whole", None), ("cut", cut)):
        url = f"sqlite:///{tmp_path / variant}.db"
        upgrade(url)
        engine = make_engine(url)
        try:
            agent = build_agent(kind, "agent", market="crypto", seed=seed)
            run_cycles(Ledger(engine), agent, slots, where)
            dumps.append(dump_tables(engine))
        finally:
            engine.dispose()
    whole, resumed = dumps
    assert whole["order"], "the scenario must place orders"
    assert resumed == whole


def test_a_replay_that_diverges_stops_taking_orders(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    before: dict[str, Any] = {}

    async def scenario() -> list[object]:
        first = await arena.toolbox(CRYPTO_DAY)
        await first.place_order("BTC/USDT", "buy", target_weight=D("0.1"))
        before.update(cash=arena.cash(CRYPTO_DAY), held=arena.holdings(CRYPTO_DAY))
        again = await arena.toolbox(CRYPTO_DAY)
        return [
            await again.get_portfolio(),
            await again.place_order("ETH/USDT", "buy", target_weight=D("0.1")),
            await again.place_order("BTC/USDT", "buy", target_weight=D("0.1")),
        ]

    portfolio, diverged, refused = asyncio.run(scenario())
    # the second run is shown the account as it was at the start of the cycle
    assert not isinstance(portfolio, ToolError)
    assert (portfolio.cash, portfolio.positions) == (D(10000), [])
    for error in (diverged, refused):
        assert isinstance(error, ToolError)
        assert error.code is ErrorCode.CYCLE_REPLAY_DIVERGED
    stored = ledger.cycle_orders(arena.claim(CRYPTO_DAY))
    assert [(o.seq, o.symbol, isinstance(o.outcome, Fill)) for o in stored] == [
        (1, "BTC/USDT", True)
    ]
    assert (arena.cash(CRYPTO_DAY), arena.holdings(CRYPTO_DAY)) == (before["cash"], before["held"])
    ledger.finish_cycle(arena.claim(CRYPTO_DAY), CycleStatus.DONE, CRYPTO_DAY)


# -- a trusted caller ---------------------------------------------------------------------------

#: Typed calls a rule baseline could make, in order, valid and not: shares, weights, a symbol
#: outside the universe (recorded as rejected), then each of what the models refuse (a symbol
#: with a newline, a side not offered, out of bounds, NaN, no size or two, a reason too long, a
#: confidence above 1, an empty or too long summary) and two they take though the trusted path
#: leaves them to the model (a float weight, a reason not ASCII), a finish, and an order after it.
TYPED_CALLS: list[tuple[str, tuple[object, ...], dict[str, object]]] = [
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("0.1"), "reason": "in"}),
    ("place_order", ("ETH/USDT", "buy"), {"shares": D("0.5")}),
    ("place_order", ("BTC/USDT", "sell"), {"target_weight": D(0), "confidence": D("0.5")}),
    ("place_order", ("IBM", "buy"), {"target_weight": D("0.1")}),
    ("place_order", ("BTC/USDT\n", "buy"), {"target_weight": D("0.1")}),
    ("place_order", ("BTC/USDT", "short"), {"target_weight": D("0.1")}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("1.5")}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("NaN")}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": 0.1}),
    ("place_order", ("BTC/USDT", "buy"), {"shares": D(0)}),
    ("place_order", ("BTC/USDT", "buy"), {}),
    ("place_order", ("BTC/USDT", "buy"), {"shares": D(1), "target_weight": D("0.1")}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("0.1"), "reason": "r" * 2001}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("0.1"), "reason": "caf\u00e9"}),
    ("place_order", ("BTC/USDT", "buy"), {"target_weight": D("0.1"), "confidence": D(2)}),
    ("finish", ("",), {}),
    ("finish", ("s" * 4001,), {}),
    ("finish", ("done",), {}),
    ("place_order", ("ETH/USDT", "buy"), {"target_weight": D("0.1")}),
]


def test_a_trusted_toolbox_answers_every_typed_call_as_an_untrusted_one(tmp_path: Path) -> None:
    answers: list[list[dict[str, Any]]] = []
    dumps = []
    for trusted in (False, True):
        url = f"sqlite:///{tmp_path / str(trusted)}.db"
        upgrade(url)
        engine = make_engine(url)
        try:
            arena = make_arena(Ledger(engine), "crypto")

            async def scenario(arena: Arena = arena, trusted: bool = trusted) -> list[object]:
                tools = await arena.toolbox(CRYPTO_DAY, trusted=trusted)
                found = []
                for name, args, kwargs in TYPED_CALLS:
                    found.append(await getattr(tools, name)(*args, **kwargs))
                return found

            found = asyncio.run(scenario())
            answers.append([answer.model_dump() for answer in found])  # type: ignore[attr-defined]
            dumps.append(dump_tables(engine))
        finally:
            engine.dispose()
    untrusted, trusted_answers = answers
    assert trusted_answers == untrusted
    assert dumps[1] == dumps[0]
    codes = [answer.get("code") for answer in untrusted]
    invalid = [n for n, code in enumerate(codes) if code is ErrorCode.INVALID_ARGUMENTS]
    assert invalid == [4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16]
    assert [answer.get("status") for answer in untrusted[:4]] == [
        OrderStatusOut.FILLED,
        OrderStatusOut.FILLED,
        OrderStatusOut.FILLED,
        OrderStatusOut.REJECTED,
    ]
    assert codes[-1] is ErrorCode.ALREADY_FINISHED


# -- schemas ------------------------------------------------------------------------------------


def test_openai_tools_match_the_argument_models(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    tools = asyncio.run(arena.toolbox(US_OPEN))
    schemas = openai_tools(tools.specs)
    names = [schema["function"]["name"] for schema in schemas]
    assert names == [
        "get_bars", "get_quote", "get_news", "get_fundamentals", "calculate",
        "get_portfolio", "place_order", "finish",
    ]  # fmt: skip
    by_name = {schema["function"]["name"]: schema for schema in schemas}
    for spec in tools.specs:
        function = by_name[spec.name]["function"]
        assert by_name[spec.name]["type"] == "function"
        assert function["description"] == spec.description
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert set(parameters.get("properties", {})) == set(spec.args.model_fields)
        # compacted for the prompt: unknown keys are still refused by the full model
        assert "additionalProperties" not in parameters
        assert spec.args.model_config.get("extra") == "forbid"
        assert "'title'" not in str(parameters)
    place = by_name["place_order"]["function"]["parameters"]
    assert set(place["required"]) == {"symbol", "side"}
    assert place["properties"]["side"]["enum"] == ["buy", "sell"]
    assert set(PlaceOrderArgs.model_fields) == {
        "symbol", "side", "shares", "target_weight", "reason", "confidence"
    }  # fmt: skip


def test_a_python_agents_calls_reach_the_handlers_the_specs_name(ledger: Ledger) -> None:
    # `call` finds the toolbox's own tools without building `specs`: the same model and handler.
    arena = make_arena(ledger, "us")
    tools = asyncio.run(arena.toolbox(US_OPEN))
    specs = {spec.name: spec for spec in tools.specs}
    assert set(_OWN_HANDLERS) < set(specs)
    for name, (model, method) in _OWN_HANDLERS.items():
        assert specs[name].args is model
        assert specs[name].handler == getattr(tools, method)


def test_holdings_are_the_weights_get_portfolio_shows(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(CRYPTO_DAY)
        empty = await tools.holdings()
        await tools.place_order("BTC/USDT", "buy", target_weight=D("0.3"))
        await tools.place_order("ETH/USDT", "buy", target_weight=D("0.2"))
        held, portfolio = await tools.holdings(), await tools.get_portfolio()
        await tools.finish("done")
        return [empty, held, portfolio, await tools.holdings()]

    empty, held, portfolio, late = asyncio.run(scenario())
    assert empty == {}
    assert not isinstance(portfolio, ToolError)
    assert held == {position.symbol: position.weight for position in portfolio.positions}
    assert set(held) == {"BTC/USDT", "ETH/USDT"}
    assert D("0.29") < held["BTC/USDT"] < D("0.31")  # filled at the next open, marked now
    assert isinstance(late, ToolError)
    assert late.code is ErrorCode.ALREADY_FINISHED


def test_positions_are_the_quantities_get_portfolio_shows(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(CRYPTO_DAY)
        empty = tools.positions()
        await tools.place_order("BTC/USDT", "buy", target_weight=D("0.3"))
        await tools.place_order("ETH/USDT", "buy", target_weight=D("0.2"))
        await tools.place_order("ETH/USDT", "sell", target_weight=D("0"))
        held, portfolio = tools.positions(), await tools.get_portfolio()
        await tools.finish("done")
        return [empty, held, portfolio, tools.positions()]

    empty, held, portfolio, late = asyncio.run(scenario())
    assert empty == {}
    assert not isinstance(portfolio, ToolError)
    assert held == {position.symbol: position.quantity for position in portfolio.positions}
    assert list(held) == ["BTC/USDT"]  # the ETH bought and sold again is no holding
    assert late == held  # served after `finish` too (the rules of a cycle's end)
