"""The baseline agents over a few slots of bundled data (and a constructed series for the SMA).

Buy-and-hold holds QQQ, the SSE-50 index fund and the CD5 basket at its weights (only the part of
the basket offered when it buys: coins without data yet are not bought); equal weight
holds every priced symbol; the SMA crossover buys on a cross up and sells on a cross down; cash
never trades; random is reproducible from its seed; every baseline finishes its cycle.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.baselines import BASELINE_KINDS, CD5_WEIGHTS, build_agent
from openbell.agents.protocol import Agent
from openbell.agents.toolbox import Toolbox
from openbell.markets.domain import Fill, utc
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.agents import (
    CN_OPEN,
    CRYPTO_DAY,
    DAY,
    US_OPEN,
    Arena,
    daily_bars,
    make_arena,
    small_universe,
)
from openbell_testkit.store import dump_tables

D = Decimal


pytestmark = pytest.mark.sqlite_only


def run(arena: Arena, agent: Agent, slots: list[datetime]) -> list[Toolbox]:
    async def scenario() -> list[Toolbox]:
        return [await arena.run(agent, now) for now in slots]

    return asyncio.run(scenario())


def weights(arena: Arena, now: datetime) -> dict[str, Decimal]:
    """Symbol -> fraction of NAV held, marked at the replay quotes at `now`."""
    holdings = arena.holdings(now)
    values = {}
    for symbol, quantity in holdings.items():
        quote = arena.source.quote_at(symbol, now)
        assert quote is not None
        values[symbol] = quantity * quote.price
    nav = arena.cash(now) + sum(values.values(), D(0))
    return {symbol: value / nav for symbol, value in values.items()}


def test_buy_and_hold_buys_qqq_once_and_holds_it(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    slots = [US_OPEN + n * DAY for n in range(3)]
    cycles = run(arena, build_agent("buy_and_hold", "bh", market="us"), slots)
    assert [len(tools.placed) for tools in cycles] == [1, 0, 0]
    assert list(arena.holdings(slots[-1])) == ["QQQ"]
    fill = cycles[0].placed[0].outcome
    assert isinstance(fill, Fill)
    assert fill.filled_at == US_OPEN
    # all in: the cash left cannot buy one more share
    assert D(0) <= arena.cash(slots[-1]) < fill.price
    assert all(tools.finished and tools.summary for tools in cycles)


def test_buy_and_hold_of_a_shares_holds_the_sse50_index_fund(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    slots = [CN_OPEN, utc(2025, 10, 13, 1, 30)]
    cycles = run(arena, build_agent("buy_and_hold", "bh", market="cn"), slots)
    assert [len(tools.placed) for tools in cycles] == [1, 0]
    (units,) = arena.holdings(slots[-1]).values()
    assert list(arena.holdings(slots[-1])) == ["000016.SH"]
    assert units % 1 != 0  # fractional units of the synthetic fund
    assert D(0) <= arena.cash(slots[-1]) < D(1)


def test_buy_and_hold_of_crypto_holds_the_cd5_basket_at_its_weights(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    slots = [CRYPTO_DAY, CRYPTO_DAY + DAY]
    cycles = run(arena, build_agent("buy_and_hold", "bh", market="crypto"), slots)
    assert [len(tools.placed) for tools in cycles] == [5, 0]
    held = weights(arena, CRYPTO_DAY)
    total = sum(CD5_WEIGHTS.values(), D(0))
    assert set(held) == set(CD5_WEIGHTS)
    for symbol, target in CD5_WEIGHTS.items():
        # within a quantity step, slippage and fees (0.15% of NAV in all) of the target
        assert abs(held[symbol] - target / total) < D("0.002"), symbol


def test_buy_and_hold_buys_only_the_part_of_its_basket_offered_then(ledger: Ledger) -> None:
    # On 2017-06-01 neither SOL (first bar 2020-04-09) nor ADA (2017-10-02) had data: buy and
    # hold buys BTC, ETH and XRP at their CD5 weights, keeps the rest in cash, and then holds.
    arena = make_arena(ledger, "crypto")
    early = utc(2017, 6, 1)
    slots = [early, early + DAY]
    cycles = run(arena, build_agent("buy_and_hold", "bh", market="crypto"), slots)
    assert [sorted(o.symbol or "" for o in tools.placed) for tools in cycles] == [
        ["BTC/USDT", "ETH/USDT", "XRP/USDT"],
        [],
    ]
    assert all(isinstance(o.outcome, Fill) for o in cycles[0].placed)
    held = weights(arena, early)
    total = sum(CD5_WEIGHTS.values(), D(0))
    for symbol in held:
        assert abs(held[symbol] - CD5_WEIGHTS[symbol] / total) < D("0.002"), symbol


def test_buy_and_hold_takes_configured_weights(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    agent = build_agent(
        "buy_and_hold", "bh", market="crypto", weights={"ETH/USDT": D("0.3"), "SOL/USDT": D("0.2")}
    )
    run(arena, agent, [CRYPTO_DAY])
    held = weights(arena, CRYPTO_DAY)
    assert set(held) == {"ETH/USDT", "SOL/USDT"}
    assert abs(held["ETH/USDT"] - D("0.3")) < D("0.002")
    assert abs(held["SOL/USDT"] - D("0.2")) < D("0.002")


def test_equal_weight_holds_every_symbol_and_then_only_holds(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    slots = [CRYPTO_DAY, CRYPTO_DAY + DAY]
    cycles = run(arena, build_agent("equal_weight", "ew", market="crypto"), slots)
    assert [len(tools.placed) for tools in cycles] == [10, 0]
    held = weights(arena, CRYPTO_DAY)
    assert set(held) == set(arena.universe.symbols)
    assert all(abs(weight - D("0.1")) < D("0.002") for weight in held.values()), held


def test_equal_weight_skips_symbols_without_a_quote(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    early = utc(2021, 1, 1)
    run(arena, build_agent("equal_weight", "ew", market="crypto"), [early])
    quoted = {s for s in arena.universe.symbols if arena.source.quote_at(s, early) is not None}
    assert 0 < len(quoted) < len(arena.universe.symbols)
    held = weights(arena, early)
    assert set(held) == quoted
    assert all(abs(weight - 1 / D(len(quoted))) < D("0.002") for weight in held.values())


def _sma_signal(closes: list[Decimal], day: int) -> bool | None:
    """SMA50 > SMA200 of the closes known at the open of `day` (those of days before it)."""
    if day < 200:
        return None
    known = closes[:day]
    return sum(known[-50:], D(0)) / 50 > sum(known[-200:], D(0)) / 200


def test_sma_crossover_buys_on_a_cross_up_and_sells_on_a_cross_down(ledger: Ledger) -> None:
    first = utc(2024, 1, 1)
    # BTC falls, rises well above where it was, then falls away; ETH only ever falls
    btc = (
        [D(300 - n) for n in range(220)]
        + [D(80 + 3 * n) for n in range(120)]
        + [D(440 - 2 * n) for n in range(200)]
    )
    eth = [D(1000 - n) for n in range(len(btc))]
    bars = {"1d": daily_bars("BTC/USDT", btc, first) + daily_bars("ETH/USDT", eth, first)}
    universe = small_universe("crypto", "BTC/USDT", "ETH/USDT")
    arena = make_arena(ledger, "crypto", universe=universe, bars=bars)
    signals = {day: _sma_signal(btc, day) for day in range(200, len(btc))}
    up = min(day for day, long in signals.items() if long)
    down = min(day for day, long in signals.items() if day > up and not long)
    assert signals[up - 1] is False  # a real cross, not a start above
    agent = build_agent("sma_crossover", "sma", market="crypto")
    days = [up - 1, up, up + 5, down - 1, down, down + 1]
    cycles = run(arena, agent, [first + day * DAY for day in days])
    orders = [[(o.symbol, o.side.value if o.side else None) for o in t.placed] for t in cycles]
    assert orders == [[], [("BTC/USDT", "buy")], [], [], [("BTC/USDT", "sell")], []]
    fill = cycles[1].placed[0].outcome
    assert isinstance(fill, Fill)
    assert abs(fill.notional / D(10000) - D("0.5")) < D("0.002")  # 1/N of NAV, N = 2
    assert arena.holdings(first + down * DAY) == {}


def test_cash_only_finishes(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    (tools,) = run(arena, build_agent("cash", "cash", market="us"), [US_OPEN])
    assert (tools.placed, tools.finished, tools.summary) == ([], True, "Holding cash.")
    assert arena.cash(US_OPEN) == D(10000)


def test_random_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    slots = [CRYPTO_DAY + n * DAY for n in range(5)]
    dumps = {}
    for variant, seed in (("a", 7), ("b", 7), ("c", 8)):
        url = f"sqlite:///{tmp_path / variant}.db"
        upgrade(url)
        engine = make_engine(url)
        try:
            arena = make_arena(Ledger(engine), "crypto")
            run(arena, build_agent("random", "rnd", market="crypto", seed=seed), slots)
            dumps[variant] = dump_tables(engine)
        finally:
            engine.dispose()
    assert len(dumps["a"]["order"]) >= 2
    assert dumps["a"] == dumps["b"]
    assert dumps["a"]["order"] != dumps["c"]["order"]


@pytest.mark.parametrize("kind", BASELINE_KINDS)
def test_every_baseline_finishes_its_cycle(ledger: Ledger, kind: str) -> None:
    arena = make_arena(ledger, "crypto")
    (tools,) = run(arena, build_agent(kind, kind, market="crypto", seed=1), [CRYPTO_DAY])
    assert tools.finished
    assert tools.summary


@pytest.mark.parametrize("kind", BASELINE_KINDS)
def test_every_baseline_finishes_a_cycle_where_nothing_is_offered(
    ledger: Ledger, kind: str
) -> None:
    # 2010-07-17 00:00 is the start of BTC's first bar: it is priced at that open, but no bar has
    # ended, so nothing is offered yet; the next day BTC alone is.
    arena = make_arena(ledger, "crypto")
    first = utc(2010, 7, 17)
    agent = build_agent(kind, kind, market="crypto", seed=1)
    empty, only_btc = run(arena, agent, [first, first + DAY])
    assert empty.universe.symbols == ()
    assert empty.finished
    assert empty.summary
    assert empty.placed == []
    assert only_btc.universe.symbols == ("BTC/USDT",)
    assert only_btc.finished


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        pytest.param("momentum", {}, "unknown baseline kind", id="unknown-kind"),
        pytest.param("cash", {"weights": {"BTC/USDT": D(1)}}, "weights", id="weights-not-bh"),
        pytest.param("buy_and_hold", {"weights": {"BTC/USDT": D(0)}}, "positive", id="zero-weight"),
    ],
)
def test_build_agent_refuses_bad_configurations(
    kind: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_agent(kind, "x", market="crypto", **options)  # type: ignore[arg-type]
