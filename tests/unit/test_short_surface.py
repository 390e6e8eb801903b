"""The shorting surface of the tools: `place_order` offers `short` and `cover` only to accounts
allowed to short (a long-only account's schema is byte for byte what it was), target weights size
shorts and covers against NAV and the initial margin, and `get_portfolio` shows exposures, margin
and borrow fees only to shorting accounts (a long-only portfolio's JSON keeps its keys)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from pydantic import ValidationError

from openbell.agents.book import Book, Holding, shares_for_target, shortable_value, unwind
from openbell.agents.rebasing import MoneyUnit, rebase
from openbell.agents.tools import (
    ARGUMENTS,
    DESCRIPTIONS,
    SHORTING_ARGUMENTS,
    SHORTING_DESCRIPTIONS,
    SHORTING_FIELDS,
    PlaceOrderArgs,
    PortfolioOut,
    ShortablePlaceOrderArgs,
    ShortingView,
    _parameters_text,
)
from openbell.markets.domain import AccountState, Fill, Instrument, Money, Position, Side
from openbell.markets.rules import CRYPTO, US, US_SHORTING

NOW = datetime(2026, 3, 2, 15, 0, tzinfo=UTC)
AAPL = Instrument(symbol="AAPL", market="us", currency="USD")

#: The long-only `place_order` parameters as a model was shown them before shorting existed.
LONG_ONLY_PLACE_ORDER = (
    '{"properties":{"symbol":{"type":"string"},"side":{"enum":["buy","sell"],"type":"string"},'
    '"shares":{"exclusiveMinimum":0,"type":"number","description":"Rounded down to lots and '
    'steps."},"target_weight":{"maximum":1,"minimum":0,"type":"number","description":"Fraction '
    'of NAV to hold in the symbol (0 sells all); side must move to it."},"reason":{"default":"",'
    '"description":"Why, briefly.","type":"string"},"confidence":{"maximum":1,"minimum":0,'
    '"type":"number"}},"required":["symbol","side"],"type":"object"}'
)


def test_long_only_schema_is_unchanged_and_refuses_short() -> None:
    assert _parameters_text(PlaceOrderArgs) == LONG_ONLY_PLACE_ORDER
    assert ARGUMENTS["place_order"] is PlaceOrderArgs
    assert "short" not in DESCRIPTIONS["place_order"]
    for side in ("short", "cover"):
        with pytest.raises(ValidationError):
            PlaceOrderArgs.model_validate({"symbol": "AAPL", "side": side, "shares": 1})


def test_shorting_schema_offers_short_and_cover() -> None:
    shown = json.loads(_parameters_text(ShortablePlaceOrderArgs))
    assert shown["properties"]["side"]["enum"] == ["buy", "sell", "short", "cover"]
    assert "short" in shown["properties"]["target_weight"]["description"]
    assert SHORTING_ARGUMENTS["place_order"] is ShortablePlaceOrderArgs
    assert set(SHORTING_ARGUMENTS) == set(ARGUMENTS) == set(SHORTING_DESCRIPTIONS)
    assert "cover" in SHORTING_DESCRIPTIONS["place_order"]
    args = ShortablePlaceOrderArgs.model_validate(
        {"symbol": "AAPL", "side": "cover", "target_weight": "0"}
    )
    assert (args.side, args.target_weight) == ("cover", Decimal(0))
    with pytest.raises(ValidationError):
        ShortablePlaceOrderArgs.model_validate({"symbol": "AAPL", "side": "borrow", "shares": 1})


def _book(cash: str, **held: tuple[str, str]) -> Book:
    holdings = {}
    for symbol, (quantity, mark) in held.items():
        q, m = Decimal(quantity), Decimal(mark)
        holdings[symbol] = Holding(symbol=symbol, quantity=q, mark=m, value=q * m)
    return Book(currency="USD", cash=Decimal(cash), holdings=holdings)


def test_long_only_portfolio_json_has_no_shorting_keys() -> None:
    shown = json.loads(PortfolioOut.of(_book("500", AAPL=("5", "100")), NOW).model_dump_json())
    assert set(shown) == {"as_of", "currency", "cash", "positions", "positions_value", "nav"}
    assert not set(SHORTING_FIELDS) & set(shown)


def test_shorting_portfolio_shows_exposures_margin_and_fees() -> None:
    # 20,000 cash after shorting 50 MSFT at 200 (10,000 proceeds) with 10,000 of own cash, then
    # buying 40 AAPL at 100 (4,000): cash 16,000; long 4,000, short 10,000; NAV 10,000.
    book = _book("16000", AAPL=("40", "100"), MSFT=("-50", "200"))
    view = ShortingView(rules=US_SHORTING, borrow_fees_paid=Decimal("1.25"))
    out = PortfolioOut.of(book, NOW, view)
    assert out.nav == Decimal(10000)
    assert (out.long_value, out.short_value) == (Decimal(4000), Decimal(10000))
    assert out.gross_exposure == Decimal("1.4")
    assert out.net_exposure == Decimal("-0.6")
    assert out.margin_requirement == Decimal(9000)  # 4,000 + 0.5 x 10,000
    assert out.maintenance_requirement == Decimal(7000)  # 4,000 + 0.3 x 10,000
    assert out.borrow_fees_paid == Decimal("1.25")
    weights = {p.symbol: p.weight for p in out.positions}
    assert weights == {"AAPL": Decimal("0.4"), "MSFT": Decimal(-1)}
    again = PortfolioOut.model_validate_json(out.model_dump_json())
    assert again == out
    rebased = rebase(out, MoneyUnit(factor=Decimal(2)))
    assert isinstance(rebased, PortfolioOut)
    assert rebased.short_value == Decimal(5000)
    assert rebased.margin_requirement == Decimal(4500)
    assert rebased.borrow_fees_paid == Decimal("0.625")
    assert rebased.gross_exposure == out.gross_exposure


def test_short_target_weight_sizes_against_nav_and_margin() -> None:
    book = _book("10000")
    quantity, why = shares_for_target(
        book=book,
        instrument=AAPL,
        side=Side.SHORT,
        target_weight=Decimal("0.5"),
        price=Decimal(100),
        rules=US,
    )
    assert (quantity, why) == (Decimal(50), "")
    # Full room: NAV 10,000 at 0.5 initial margin allows 20,000 short, 98 % of it used.
    assert shortable_value(book, US_SHORTING) == Decimal(19600)
    capped, _ = shares_for_target(
        book=book,
        instrument=AAPL,
        side=Side.SHORT,
        target_weight=Decimal(1),
        price=Decimal(100),
        rules=US,
    )
    assert capped == Decimal(100)  # the weight asks 10,000: within the room
    shorted = _book("15000", AAPL=("-50", "100"))
    cover, _ = shares_for_target(
        book=shorted,
        instrument=AAPL,
        side=Side.COVER,
        target_weight=Decimal("0.2"),
        price=Decimal(100),
        rules=US,
    )
    assert cover == Decimal(30)  # from 5,000 short to 2,000 of NAV 10,000
    closed, _ = shares_for_target(
        book=shorted,
        instrument=AAPL,
        side=Side.COVER,
        target_weight=Decimal(0),
        price=Decimal(100),
        rules=US,
    )
    assert closed == Decimal(50)
    more, _ = shares_for_target(
        book=shorted,
        instrument=AAPL,
        side=Side.SHORT,
        target_weight=Decimal("0.3"),
        price=Decimal(100),
        rules=US,
    )
    assert more == Decimal(0)  # already 0.5 short
    buy, why = shares_for_target(
        book=shorted,
        instrument=AAPL,
        side=Side.BUY,
        target_weight=Decimal("0.3"),
        price=Decimal(100),
        rules=US,
    )
    assert buy == 0
    assert "cover it" in why


def test_short_target_is_capped_by_the_initial_margin() -> None:
    # Long 9,000 of NAV 10,000: the requirement leaves 1,000 of equity, 2,000 of short at 0.5.
    book = _book("1000", BTC=("1", "9000"))
    coin = Instrument(symbol="ETH/USDT", market="crypto", currency="USDT")
    quantity, _ = shares_for_target(
        book=book,
        instrument=coin,
        side=Side.SHORT,
        target_weight=Decimal("0.5"),
        price=Decimal(100),
        rules=CRYPTO,
    )
    assert quantity == Decimal("19.6")


def test_unwind_takes_short_and_cover_fills_back_out() -> None:
    state = AccountState(
        market="us",
        cash=Money(amount=Decimal(14990), currency="USD"),
        positions={"AAPL": Position(symbol="AAPL", quantity=Decimal(-50), cost=Decimal(5000))},
        allow_short=True,
    )
    short = Fill(
        symbol="AAPL",
        side=Side.SHORT,
        quantity=Decimal(50),
        price=Decimal(100),
        notional=Decimal(5000),
        fees=Decimal(10),
        currency="USD",
        filled_at=NOW,
        price_source="test",
    )
    before = unwind(state, [short])
    assert before.cash.amount == Decimal(10000)
    assert before.positions == {}
    assert before.allow_short
    cover = Fill(
        symbol="AAPL",
        side=Side.COVER,
        quantity=Decimal(20),
        price=Decimal(100),
        notional=Decimal(2000),
        fees=Decimal(5),
        currency="USD",
        filled_at=NOW,
        price_source="test",
    )
    restored = unwind(state, [cover])
    assert restored.positions["AAPL"].quantity == Decimal(-70)
    assert restored.cash.amount == Decimal(16995)
