"""Price rebasing (KTD-Fin masking): the money a masked model sees, in its account's secret unit.

This module owns `MoneyUnit` and `rebase`. Prices give a masked series away: a model that remembers
where a stock traded can match the level. Under rebasing, every amount of money the model sees
(bar prices, quotes and their limit prices, fill prices, notionals and fees, cash, marks, values,
NAV, and the amounts a result lists through `HoldsMoney`: KTD-Fin's research results) is the real
amount divided by its account's factor, drawn once per account from [0.5, 0.8] or [1.25, 2] (never
near 1, so no price is shown near its real level) and shown to `SIGNIFICANT_DIGITS` significant
digits.
Quantities, weights and returns are not money and stay real (volumes are shown relative to their
series at every masked level: `relative_volume.py`). The rules' text names no amount of money to
a rebased model (`llm/hooks.describe_rules`): a known constant in the unit gives the unit away.

One factor for all the money of an account, not one per symbol: a fill moves real cash by real
quantity times real price, so with per-symbol factors either the cash would disagree with the
prices or the quantities would have to be scaled, which breaks lots and gives the factor away in
their rounding. With one unit the model's arithmetic is exact (cash / price is the shares it can
afford, quantity times mark is the value, NAV is cash plus values), lots and steps read as the
market's, and orders need no translating back (they name shares or a weight, never a price).
What stays visible is what the unit cannot hide: returns, the ratios of prices between stocks, and
what a model or program can work the unit out from: a fill charged a floor it knows (a minimum
commission), the minimum order value probed by rejected orders, the tick (real prices are whole
ticks, so shown prices differ by multiples of the tick over the factor), a round starting cash.

A rejection's wording that quotes money (insufficient cash, minimum order value, price limits, a
price below one tick) is replaced by `REWORDED`'s, without it; the others keep their words.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final, Protocol, runtime_checkable

from openbell.agents.tools import (
    BarsOut,
    OrderOut,
    OrderStatusOut,
    PortfolioOut,
    QuotesOut,
    ToolResult,
)
from openbell.markets.domain import Bar, RejectReason

SIGNIFICANT_DIGITS: Final = 8
_BELOW: Final = (Decimal("0.5"), Decimal("0.8"))
_ABOVE: Final = (Decimal("1.25"), Decimal(2))
_FACTOR_PLACES: Final = Decimal("0.000001")

#: How a rejection that quotes money reads in rebased terms (`shares`, `symbol` filled in).
REWORDED: Final = {
    RejectReason.INSUFFICIENT_CASH: (
        "Buying {shares} {symbol} costs more than the account's cash (cash_after), fees "
        "included; order fewer shares."
    ),
    RejectReason.MIN_NOTIONAL: (
        "{shares} {symbol} is worth less than the minimum order value; order a larger quantity."
    ),
    RejectReason.LIMIT_UP: (
        "{symbol} is at its daily limit-up price, so buy orders cannot fill; buy another symbol "
        "or wait."
    ),
    RejectReason.LIMIT_DOWN: (
        "{symbol} is at its daily limit-down price, so sell orders cannot fill; try again in a "
        "later session."
    ),
    RejectReason.NO_PRICE: (
        "There is no usable price for {symbol} now; the order was not placed, try again at a "
        "later slot."
    ),
}


@dataclass(frozen=True, slots=True)
class MoneyUnit:
    """An account's secret unit of money: a real amount `x` is shown as `x / factor`."""

    factor: Decimal

    def __post_init__(self) -> None:
        low, high = _BELOW[0] <= self.factor <= _BELOW[1], _ABOVE[0] <= self.factor <= _ABOVE[1]
        if not (low or high):
            raise ValueError(
                f"a money unit's factor must lie in [0.5, 0.8] or [1.25, 2], got {self.factor}"
            )

    @classmethod
    def draw(cls, rng: random.Random) -> MoneyUnit:
        """A factor from `rng`: uniform in [1.25, 2] to four places, inverted half the time."""
        up = Decimal(rng.randrange(12_500, 20_001)) / 10_000
        if rng.randrange(2):
            return cls((1 / up).quantize(_FACTOR_PLACES))
        return cls(up)

    def show(self, amount: Decimal) -> Decimal:
        """`amount` in this unit, to `SIGNIFICANT_DIGITS` significant digits."""
        if amount == 0:
            return amount
        shown = amount / self.factor
        exponent = shown.adjusted() - SIGNIFICANT_DIGITS + 1
        return shown.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_EVEN)


#: The amounts of money a shorting account's portfolio shows beside its cash and NAV (its
#: exposures are fractions of NAV, the same in any unit).
_SHORTING_MONEY: Final = (
    "long_value",
    "short_value",
    "margin_requirement",
    "maintenance_requirement",
    "borrow_fees_paid",
)


@runtime_checkable
class HoldsMoney(Protocol):
    """A result that lists its own amounts of money (KTD-Fin's research results): `in_unit` is
    it with each shown by `show`."""

    def in_unit(self, show: Callable[[Decimal], Decimal]) -> ToolResult:
        """This result with every amount of money shown by `show`."""
        ...


def rebase(result: ToolResult, unit: MoneyUnit) -> ToolResult:
    """`result` with every amount of money in `unit` (results that hold none are unchanged)."""
    if isinstance(result, HoldsMoney):
        return result.in_unit(unit.show)
    if isinstance(result, BarsOut):
        return result.model_copy(update={"bars": tuple(_bar(bar, unit) for bar in result.bars)})
    if isinstance(result, QuotesOut):
        quotes = [
            q.model_copy(
                update={
                    name: unit.show(amount)
                    for name in ("price", "limit_up", "limit_down")
                    if (amount := getattr(q, name)) is not None
                }
            )
            for q in result.quotes
        ]
        return result.model_copy(update={"quotes": quotes})
    if isinstance(result, PortfolioOut):
        positions = [
            p.model_copy(update={"mark": unit.show(p.mark), "value": unit.show(p.value)})
            for p in result.positions
        ]
        return result.model_copy(
            update={
                "cash": unit.show(result.cash),
                "positions": positions,
                "positions_value": unit.show(result.positions_value),
                "nav": unit.show(result.nav),
                **{
                    name: unit.show(amount)
                    for name in _SHORTING_MONEY
                    if (amount := getattr(result, name)) is not None
                },
            }
        )
    if isinstance(result, OrderOut):
        return _order(result, unit)
    return result


def _bar(bar: Bar, unit: MoneyUnit) -> Bar:
    return dataclasses.replace(
        bar,
        open=unit.show(bar.open),
        high=unit.show(bar.high),
        low=unit.show(bar.low),
        close=unit.show(bar.close),
    )


def _order(order: OrderOut, unit: MoneyUnit) -> OrderOut:
    update: dict[str, object] = {
        name: unit.show(value)
        for name in ("price", "notional", "fees", "cash_after")
        if (value := getattr(order, name)) is not None
    }
    if order.status is OrderStatusOut.FILLED and order.price is not None:
        update["message"] = f"Filled {order.filled_shares} {order.symbol} at {update['price']}."
    elif order.status is OrderStatusOut.REJECTED and order.reject_reason is not None:
        wording = REWORDED.get(RejectReason(order.reject_reason))
        if wording is not None:
            update["message"] = wording.format(shares=order.shares, symbol=order.symbol)
    return order.model_copy(update=update)
