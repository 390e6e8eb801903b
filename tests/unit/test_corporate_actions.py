"""Corporate actions as domain values: validation, the arithmetic of applying one to a holding, the
ex-date reference price, and the recorded source."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal

import pytest

from openbell.markets.corporate_actions import (
    ActionKind,
    CorporateAction,
    RecordedActions,
    action_effect,
    ex_reference_price,
    in_apply_order,
)
from openbell.markets.domain import utc

EX_AT = utc(2020, 8, 31, 13, 30)


def split(ratio: str, symbol: str = "AAPL") -> CorporateAction:
    return CorporateAction(
        symbol=symbol,
        kind=ActionKind.SPLIT,
        ex_date=date(2020, 8, 31),
        ex_at=EX_AT,
        currency="USD",
        source="test",
        ratio=Decimal(ratio),
    )


def dividend(cash: str, symbol: str = "AAPL", currency: str = "USD") -> CorporateAction:
    return CorporateAction(
        symbol=symbol,
        kind=ActionKind.CASH_DIVIDEND,
        ex_date=date(2020, 8, 31),
        ex_at=EX_AT,
        currency=currency,
        source="test",
        cash=Decimal(cash),
    )


@pytest.mark.parametrize(
    ("ratio", "held", "price", "delta", "cash", "fraction"),
    [
        ("4", "10", None, "30", "0", "0"),  # AAPL 2020: 4-for-1
        ("10", "3", None, "27", "0", "0"),  # NVDA 2024: 10-for-1
        ("1.4", "100", None, "40", "0", "0"),  # A-share 10 送 4
        ("1.5", "3", "20.00", "1", "10.00", "0.5"),  # 3-for-2 on 3 shares: half a share in cash
        ("0.1", "25", "80.00", "-23", "40.00", "0.5"),  # 1-for-10 reverse split
        ("0.3333333333333333", "300", None, "-200", "0", "0"),  # yfinance's float of 1/3
    ],
)
def test_a_split_keeps_whole_shares_and_pays_the_fraction_in_cash(
    ratio: str, held: str, price: str | None, delta: str, cash: str, fraction: str
) -> None:
    effect = action_effect(
        split(ratio), Decimal(held), price=None if price is None else Decimal(price)
    )
    assert (effect.quantity_delta, effect.cash_delta, effect.fraction) == (
        Decimal(delta),
        Decimal(cash),
        Decimal(fraction),
    )


def test_a_fraction_without_a_price_is_refused() -> None:
    with pytest.raises(ValueError, match="cash in lieu needs the ex-date's price"):
        action_effect(split("1.5"), Decimal(3))


def test_a_dividend_pays_per_share_held_rounded_to_the_currency() -> None:
    effect = action_effect(dividend("0.205"), Decimal(33))
    assert (effect.quantity_delta, effect.cash_delta) == (Decimal(0), Decimal("6.77"))
    moutai = action_effect(dividend("27.673", "600519.SH", "CNY"), Decimal(100))
    assert moutai.cash_delta == Decimal("2767.30")


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": ActionKind.SPLIT, "ratio": Decimal(1)},
        {"kind": ActionKind.SPLIT, "ratio": Decimal(2), "cash": Decimal(1)},
        {"kind": ActionKind.CASH_DIVIDEND, "cash": Decimal(0)},
        {"kind": ActionKind.CASH_DIVIDEND, "cash": Decimal(1), "ratio": Decimal(2)},
        {"kind": ActionKind.SPLIT, "ratio": Decimal(-2)},
    ],
)
def test_an_inconsistent_action_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"AAPL|ratio"):
        CorporateAction(
            symbol="AAPL",
            ex_date=date(2020, 8, 31),
            ex_at=EX_AT,
            currency="USD",
            source="test",
            **bad,  # type: ignore[arg-type]
        )


def test_a_naive_ex_at_is_refused() -> None:
    with pytest.raises(ValueError, match="ex_at"):
        CorporateAction(
            symbol="AAPL",
            kind=ActionKind.SPLIT,
            ex_date=date(2020, 8, 31),
            ex_at=EX_AT.replace(tzinfo=None),
            currency="USD",
            source="test",
            ratio=Decimal(4),
        )


def test_dividends_apply_before_a_split_of_the_same_day() -> None:
    ordered = in_apply_order([split("1.3", "600000.SH"), dividend("0.5", "600000.SH", "CNY")])
    assert [action.kind for action in ordered] == [ActionKind.CASH_DIVIDEND, ActionKind.SPLIT]


def test_the_ex_reference_price_takes_off_the_dividend_then_divides_by_the_ratio() -> None:
    # 10 派 5 元 送 3 股 on a 10.00 close: (10.00 - 0.50) / 1.3 = 7.3077 -> 7.31
    actions = [split("1.3", "600000.SH"), dividend("0.5", "600000.SH", "CNY")]
    assert ex_reference_price(Decimal("10.00"), actions, Decimal("0.01")) == Decimal("7.31")
    assert ex_reference_price(
        Decimal("1435.86"), [dividend("27.6", "600519.SH", "CNY")], Decimal("0.01")
    ) == Decimal("1408.26")


def test_recorded_actions_answer_by_symbol_and_ex_date() -> None:
    source = RecordedActions(
        market="us", actions=[split("4"), dividend("0.82", "MSFT")], name="test"
    )
    found = asyncio.run(source.actions(["AAPL"], date(2020, 8, 1), date(2020, 8, 31)))
    assert [action.symbol for action in found] == ["AAPL"]
    assert asyncio.run(source.actions(["AAPL"], date(2020, 9, 1), date(2020, 9, 30))) == []
    with pytest.raises(ValueError, match="listed twice"):
        RecordedActions(market="us", actions=[split("4"), split("4")], name="twice")
