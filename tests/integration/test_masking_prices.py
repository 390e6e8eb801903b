"""Price rebasing on the real toolbox: a blinded model's bars match no public price of the stock
(yet keep its returns, its volumes are relative to the series, and the stored key turns its prices
back), orders it sizes from the rebased cash and prices it was shown fill exactly the real orders a
bright model's do, and the rules it is told name no amount of money that would give its unit away
(they read the same whatever its unit)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import Any

import pytest

from openbell.agents.masking import MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.agents.rebasing import MoneyUnit
from openbell.markets.domain import Fill
from openbell.store.ledger import Ledger
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import CN_OPEN, CRYPTO_DAY, US_OPEN, make_arena
from openbell_testkit.llm import finish, tool_turn
from openbell_testkit.modes import Cycle, run_llm

SEED = "prices-test"
PRICES = ("open", "high", "low", "close")


pytestmark = pytest.mark.sqlite_only


def blinded(arena: Any, at: datetime, script: list[Any]) -> Cycle:
    def prompt(ctx: object) -> Any:
        return prompt_for_mode("open-research", masking=MaskingLevel.BLINDED, masking_seed=SEED)

    return run_llm(arena, script, at, prompt=prompt, masker=masker_for("blinded", seed=SEED))


def test_a_blinded_series_matches_no_public_price(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    symbol = "NVDA"

    def research(body: dict[str, Any]) -> dict[str, Any]:
        key = ledger.masking_key(arena.account_id)
        assert key is not None
        alias = key.aliases[symbol]
        return tool_turn(
            ("get_bars", {"symbol": alias, "interval": "1d", "lookback": 30}),
            ("get_bars", {"symbol": alias, "interval": "1h", "lookback": 60}),
            ("get_quote", {"symbols": [alias]}),
        )

    ran = blinded(arena, US_OPEN + timedelta(days=14), [research, finish()])
    key = ledger.masking_key(arena.account_id)
    assert key is not None
    daily, hourly, quotes = ran.model.tool_results()
    public = {
        interval: arena.source.bars_between(
            [symbol], interval, US_OPEN - timedelta(days=400), US_OPEN + timedelta(days=60)
        )[symbol]
        for interval in ("1d", "1h")
    }
    public_prices = {
        getattr(b, field) for bars in public.values() for b in bars for field in PRICES
    }
    for shown, interval in ((daily, "1d"), (hourly, "1h")):
        real = [bar for bar in public[interval] if bar.end_at <= ran.tools.now]
        real = real[-len(shown["bars"]) :]
        assert len(shown["bars"]) == len(real) > 20
        for seen, bar in zip(shown["bars"], real, strict=True):
            for field in PRICES:
                value = Decimal(seen[field])
                assert value not in public_prices, (interval, field, value)
                # the stored key turns it back (to the shown precision)
                assert abs(value * key.money_unit - getattr(bar, field)) / getattr(bar, field) < (
                    Decimal("1e-7")
                )
        # volumes relative to the series: each over the median of the window's (4 digits)
        median = statistics.median(bar.volume for bar in real)
        for seen, bar in zip(shown["bars"], real, strict=True):
            assert abs(Decimal(seen["volume"]) - bar.volume / median) <= Decimal("5e-4") * max(
                bar.volume / median, 1
            )
        closes = [Decimal(seen["close"]) for seen in shown["bars"]]
        real_closes = [bar.close for bar in real]
        for i in range(1, len(closes)):
            shown_return = closes[i] / closes[i - 1]
            assert abs(shown_return - real_closes[i] / real_closes[i - 1]) < Decimal("1e-6")
    assert Decimal(quotes["quotes"][0]["price"]) not in public_prices


def sized_buyer(market: str, pick: Callable[[str], str], first: str, second: str) -> list[Any]:
    """A model that reads its cash and a quote, buys 30% of its cash of `first` by shares worked
    out from what it was shown (whole lots in the A-share market), and `second` to a 20% weight."""
    lot = Decimal(100) if market == "cn" else Decimal(1)

    def look(body: dict[str, Any]) -> dict[str, Any]:
        return tool_turn(("get_portfolio", {}), ("get_quote", {"symbols": [pick(first)]}))

    def buy(body: dict[str, Any]) -> dict[str, Any]:
        portfolio, quotes = [
            json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"
        ]
        cash = Decimal(portfolio["cash"])
        price = Decimal(quotes["quotes"][0]["price"])
        shares = (cash * Decimal("0.3") / price / lot).to_integral_value(ROUND_DOWN) * lot
        return tool_turn(
            ("place_order", {"symbol": pick(first), "side": "buy", "shares": str(shares)}),
            ("place_order", {"symbol": pick(second), "side": "buy", "target_weight": 0.2}),
        )

    return [look, buy, finish()]


@pytest.mark.parametrize(
    ("market", "at", "first", "second"),
    [("us", US_OPEN, "MSFT", "AAPL"), ("cn", CN_OPEN, "601398.SH", "600036.SH")],
)
def test_orders_sized_in_masked_terms_fill_the_real_orders_of_a_bright_model(
    ledger: Ledger, engine: Any, market: str, at: datetime, first: str, second: str
) -> None:
    bright_arena = make_arena(ledger, market, agent="bright")
    bright = run_llm(bright_arena, sized_buyer(market, lambda s: s, first, second), at)

    blind_arena = make_arena(ledger, market, agent="blind")

    def alias(symbol: str) -> str:
        key = ledger.masking_key(blind_arena.account_id)
        assert key is not None
        return key.aliases[symbol]

    blind = blinded(blind_arena, at, sized_buyer(market, alias, first, second))

    def fills(cycle: Cycle) -> list[tuple[object, ...]]:
        return [
            (o.symbol, o.outcome.side, o.outcome.quantity, o.outcome.price, o.outcome.notional)
            for o in cycle.orders
            if isinstance(o.outcome, Fill)
        ]

    assert len(fills(bright)) == 2
    assert fills(blind) == fills(bright)
    assert blind_arena.cash(at) == bright_arena.cash(at)
    # what the blinded model was shown was not the real cash or prices, yet the same shares
    shown_portfolio, shown_quotes, *shown_orders = blind.model.tool_results(2)
    real_portfolio, real_quotes, *real_orders = bright.model.tool_results(2)
    assert Decimal(shown_portfolio["cash"]) != Decimal(real_portfolio["cash"])
    assert shown_quotes["quotes"][0]["price"] != real_quotes["quotes"][0]["price"]
    assert [order["status"] for order in shown_orders] == ["filled", "filled"]
    for order, real in zip(shown_orders, real_orders, strict=True):
        assert order["filled_shares"] == real["filled_shares"]
        assert Decimal(order["price"]) != Decimal(real["price"])
    # the model is told its money is in a secret unit; the rules' minimums are not given in it
    system = blind.messages()[0]["content"]
    assert "secret unit" in system
    if market == "cn":
        key = ledger.masking_key(blind_arena.account_id)
        assert key is not None
        assert "(min 5 CNY)" in bright.messages()[0]["content"]
        assert "(with a minimum per fill)" in system
        assert str(MoneyUnit(key.money_unit).show(Decimal(5))) not in system
    assert verify_ledger(engine).ok


#: The money constants of each market a model may know, and the slot of a cycle there.
CONSTANTS = {
    "cn": (CN_OPEN, ["5", "0.01", "100"]),  # minimum commission, tick, lot
    "crypto": (CRYPTO_DAY, ["10", "0.00000001"]),  # minimum order value, tick
}


@pytest.mark.parametrize("market", list(CONSTANTS))
def test_the_rules_a_rebased_model_is_told_do_not_give_its_unit_away(
    ledger: Ledger, market: str
) -> None:
    at, constants = CONSTANTS[market]
    prompts, units = [], []
    for name in ("first", "second"):
        arena = make_arena(ledger, market, agent=name)
        ran = blinded(arena, at, [finish()])
        prompts.append(ran.messages()[0]["content"])
        key = ledger.masking_key(arena.account_id)
        assert key is not None
        units.append(MoneyUnit(key.money_unit))
    assert units[0] != units[1]
    # the same words whatever the unit: nothing in them depends on it
    assert prompts[0] == prompts[1]
    assert "secret unit" in prompts[0]
    for unit in units:  # and no public constant in the unit, written any way
        for constant in constants:
            shown = unit.show(Decimal(constant))
            for written in {str(shown), f"{shown:f}", f"{shown.normalize():f}"}:
                assert written not in prompts[0], (constant, written)
