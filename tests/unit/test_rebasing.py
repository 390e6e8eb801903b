"""Price rebasing: every amount of money a masked model sees is in its account's secret unit (a
real amount divided by the unit's factor), the same factor for prices, cash, values and fees, so
`cash / price` is still the shares it can afford; quantities, volumes and weights stay real, and no
rebased amount equals the real one."""

from __future__ import annotations

import random
import re
from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.agents.rebasing import MoneyUnit, rebase
from openbell.agents.tools import (
    BarsOut,
    OrderOut,
    OrderStatusOut,
    PortfolioOut,
    PositionOut,
    QuoteOut,
    QuotesOut,
)
from openbell.markets.domain import Bar, RejectReason, utc

D = Decimal
AT = utc(2025, 10, 1, 13, 30)


def unit(factor: str = "1.6") -> MoneyUnit:
    return MoneyUnit(factor=D(factor))


def test_the_factor_is_drawn_at_least_a_quarter_and_at_most_twice_off() -> None:
    factors = [MoneyUnit.draw(random.Random(seed)).factor for seed in range(400)]
    assert all(D("0.5") <= f <= D("0.8") or D("1.25") <= f <= D(2) for f in factors)
    assert any(f < 1 for f in factors)
    assert any(f > 1 for f in factors)
    assert len(set(factors)) > 300
    assert MoneyUnit.draw(random.Random(7)) == MoneyUnit.draw(random.Random(7))


@pytest.mark.parametrize("factor", ["1", "0", "-2", "0.9", "1.2", "2.5", "0.4"])
def test_a_factor_near_one_or_out_of_range_is_refused(factor: str) -> None:
    with pytest.raises(ValueError, match="factor"):
        MoneyUnit(factor=D(factor))


@pytest.mark.parametrize(
    ("real", "shown"),
    [
        ("189.95", "118.71875"),
        ("10000", "6250.0000"),
        ("0.00001234", "0.0000077125000"),
        ("104250.5", "65156.562"),
        ("0", "0"),
    ],
)
def test_amounts_are_divided_and_keep_eight_significant_digits(real: str, shown: str) -> None:
    assert str(unit().show(D(real))) == shown


def bar(start_hours: int, o: str, h: str, lo: str, c: str) -> Bar:
    start = AT + timedelta(hours=start_hours)
    return Bar(
        symbol="AAPL",
        start_at=start,
        end_at=start + timedelta(hours=1),
        open=D(o),
        high=D(h),
        low=D(lo),
        close=D(c),
        volume=D(1234567),
    )


def test_bars_are_rebased_and_keep_their_returns_and_volumes() -> None:
    real = BarsOut.of(
        as_of=AT,
        symbol="AAPL",
        interval="1h",
        bars=(bar(0, "189.95", "190.5", "189.1", "190.02"), bar(1, "190.02", "191", "190", "190")),
    )
    found = rebase(real, unit())
    assert isinstance(found, BarsOut)
    for before, after in zip(real.bars, found.bars, strict=True):
        assert after.start_at == before.start_at
        assert after.volume == before.volume
        for field in ("open", "high", "low", "close"):
            assert getattr(after, field) != getattr(before, field)
            assert abs(getattr(after, field) * D("1.6") - getattr(before, field)) < D("1e-5")
    ratio = found.bars[1].close / found.bars[0].close
    assert abs(ratio - real.bars[1].close / real.bars[0].close) < D("1e-7")


def test_a_portfolio_is_rebased_with_real_quantities_and_weights() -> None:
    real = PortfolioOut(
        as_of=AT,
        currency="USD",
        cash=D("5000.00"),
        positions=[
            PositionOut(
                symbol="AAPL", quantity=D(20), mark=D("250"), value=D("5000.00"), weight=D("0.5")
            )
        ],
        positions_value=D("5000.00"),
        nav=D("10000.00"),
    )
    found = rebase(real, unit())
    assert isinstance(found, PortfolioOut)
    assert found.cash == D("3125.0000")
    assert found.nav == D("6250.0000") == found.cash + found.positions_value
    position = found.positions[0]
    assert (position.quantity, position.weight) == (D(20), D("0.5"))
    assert position.mark == D("156.25000")
    assert position.value == position.quantity * position.mark
    # the agent's arithmetic holds: cash / price is the shares it can afford, as in real terms
    assert found.cash / position.mark == real.cash / real.positions[0].mark


def test_quotes_are_rebased() -> None:
    real = QuotesOut(as_of=AT, quotes=[QuoteOut(symbol="AAPL", price=D("189.95"), at=AT)])
    found = rebase(real, unit())
    assert isinstance(found, QuotesOut)
    assert found.quotes[0].price == D("118.71875")
    assert found.quotes[0].at == AT


def test_a_fill_is_rebased_and_its_message_quotes_the_rebased_price() -> None:
    real = OrderOut(
        as_of=AT,
        status=OrderStatusOut.FILLED,
        symbol="AAPL",
        side="buy",
        message="Filled 10 AAPL at 190.04.",
        seq=1,
        shares=D(10),
        filled_shares=D(10),
        price=D("190.04"),
        notional=D("1900.40"),
        fees=D("0.95"),
        cash_after=D("8098.65"),
        held_after=D(10),
    )
    found = rebase(real, unit())
    assert isinstance(found, OrderOut)
    assert (found.shares, found.filled_shares, found.held_after) == (D(10), D(10), D(10))
    assert found.price == D("118.77500")
    assert found.notional == D("1187.7500")
    assert found.fees == D("0.59375000")
    assert found.cash_after == D("5061.6562")
    assert found.message == "Filled 10 AAPL at 118.77500."


#: Rejections whose wording quotes money, as `markets/execution.py` words them.
MONEY_REJECTIONS = [
    (
        RejectReason.INSUFFICIENT_CASH,
        (
            "Buying 100 AAPL at 190.04 costs 19004.00 USD including 0 fees, but the account has "
            "10000.00 USD; at most 52 is affordable now."
        ),
    ),
    (
        RejectReason.MIN_NOTIONAL,
        (
            "0.0001 BTC/USDT at 104250.5 is worth 10.42 USDT, below the minimum order value of 10 "
            "USDT; order a larger quantity."
        ),
    ),
    (
        RejectReason.LIMIT_UP,
        (
            "600519.SH is at its limit-up price 1672.55 (+10% of the previous close 1520.50), so "
            "buy orders cannot fill; buy another symbol or wait."
        ),
    ),
    (
        RejectReason.LIMIT_DOWN,
        (
            "600519.SH is at its limit-down price 1368.45 (-10% of the previous close 1520.50), so "
            "sell orders cannot fill; try again in a later session."
        ),
    ),
    (
        RejectReason.NO_PRICE,
        "The price 0.004 of XYZ is below one tick (0.01) after slippage; it cannot be traded.",
    ),
]


@pytest.mark.parametrize(
    ("reason", "message"), MONEY_REJECTIONS, ids=[reason.value for reason, _ in MONEY_REJECTIONS]
)
def test_a_rejection_that_quotes_money_is_reworded_without_it(
    reason: RejectReason, message: str
) -> None:
    real = OrderOut(
        as_of=AT,
        status=OrderStatusOut.REJECTED,
        symbol="AAPL",
        side="buy",
        message=message,
        seq=1,
        shares=D(100),
        reject_reason=reason.value,
        cash_after=D("10000.00"),
        held_after=D(0),
    )
    found = rebase(real, unit())
    assert isinstance(found, OrderOut)
    assert found.reject_reason == reason.value
    assert found.cash_after == D("6250.0000")
    money = set(re.findall(r"\d+\.\d+|\d{3,}", message)) - {"100"}  # 100 shares is a quantity
    assert money
    assert not [amount for amount in money if amount in found.message], found.message
    assert found.message


def test_a_rejection_without_money_keeps_its_words() -> None:
    message = "Cannot sell 5 AAPL: the account holds 0; sell at most 0."
    real = OrderOut(
        as_of=AT,
        status=OrderStatusOut.REJECTED,
        symbol="AAPL",
        side="sell",
        message=message,
        reject_reason=RejectReason.INSUFFICIENT_POSITION.value,
    )
    found = rebase(real, unit())
    assert isinstance(found, OrderOut)
    assert found.message == message
