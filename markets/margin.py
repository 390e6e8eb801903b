"""Margin and borrow for shorting accounts (design §4), as pure functions of an account's
positions, marks and the market's `ShortRules`.

- `exposure`: long value, short value, equity (= NAV = cash + long - short), gross and net, each
  holding valued `|q| x mark` by the money rule (as a NAV snapshot values it, so the equity here
  is the NAV stored for the same marks).
- Requirements: longs are paid in full and shorts are margined:
  `initial = long + initial_margin x short`, `maintenance = long + maintenance_margin x short`.
- `margin_rejection`: the check an order must pass: a `short`, or a `buy` while a short is open,
  is refused (`INSUFFICIENT_MARGIN`) when the account after its fill would have equity below its
  initial requirement. It is the one initial margin rule: `initial_margin_check` binds it as
  `markets.execution.execute`'s `margin` hook (the broker at the slot's quotes, `execute` itself
  at the order's price when no hook is given).
- `next_margin_cover`: during a margin call (equity below maintenance), the short to cover next:
  the largest short market value first, whole position, until the requirement holds.
- `borrow_fee`: the fee of one short position for one calendar day,
  `|q| x close x bps / 10000 / day_count` by the money rule.

A margin figure is never stored by itself: the daemon computes it at a NAV snapshot's marks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from openbell.markets.domain import (
    AccountState,
    Fill,
    Position,
    Rejection,
    RejectReason,
    Side,
    check_decimal,
    round_money,
)
from openbell.markets.rules import BPS, ShortRules

#: The reason of every order a margin call places begins with this.
MARGIN_CALL: Final = "margin call"


@dataclass(frozen=True, slots=True, kw_only=True)
class Exposure:
    """An account's cash and the market value of its longs and shorts (both >= 0)."""

    cash: Decimal
    long_value: Decimal
    short_value: Decimal

    @property
    def equity(self) -> Decimal:
        """Cash plus longs minus shorts: the account's NAV."""
        return self.cash + self.long_value - self.short_value

    @property
    def gross(self) -> Decimal:
        """Longs plus shorts."""
        return self.long_value + self.short_value

    @property
    def net(self) -> Decimal:
        """Longs minus shorts."""
        return self.long_value - self.short_value

    def initial_requirement(self, rules: ShortRules) -> Decimal:
        """Longs paid in full plus `initial_margin` of the shorts."""
        return self.long_value + rules.initial_margin * self.short_value

    def maintenance_requirement(self, rules: ShortRules) -> Decimal:
        """Longs paid in full plus `maintenance_margin` of the shorts."""
        return self.long_value + rules.maintenance_margin * self.short_value

    def in_margin_call(self, rules: ShortRules) -> bool:
        """True when shorts are open and equity is below the maintenance requirement."""
        return self.short_value > 0 and self.equity < self.maintenance_requirement(rules)


def position_value(quantity: Decimal, mark: Decimal, currency: str) -> Decimal:
    """`|quantity| x mark` by the money rule: a holding's market value, long or short."""
    return round_money(abs(quantity) * mark, currency)


def exposure(
    cash: Decimal,
    positions: Mapping[str, Decimal],
    marks: Mapping[str, Decimal],
    currency: str,
) -> Exposure:
    """The exposure of signed `positions` (symbol -> quantity) at `marks`; `KeyError` naming a
    held symbol without a mark."""
    long_value = Decimal(0)
    short_value = Decimal(0)
    for symbol, quantity in positions.items():
        if quantity == 0:
            continue
        if symbol not in marks:
            raise KeyError(f"no mark for held {symbol}")
        value = position_value(quantity, marks[symbol], currency)
        if quantity > 0:
            long_value += value
        else:
            short_value += value
    return Exposure(cash=cash, long_value=long_value, short_value=short_value)


def account_exposure(account: AccountState, marks: Mapping[str, Decimal]) -> Exposure:
    """The exposure of `account` at `marks` (see `exposure`)."""
    return exposure(
        account.cash.amount,
        {symbol: position.quantity for symbol, position in account.positions.items()},
        marks,
        account.cash.currency,
    )


def _mark_of(position: Position, marks: Mapping[str, Decimal]) -> Decimal:
    """A position's mark: the given one, else its average price (cost / |quantity|: a long's
    average cost, a short's average proceeds), so that an order is always decided, never
    raised on."""
    mark = marks.get(position.symbol)
    if mark is not None:
        return mark
    if position.quantity == 0:
        return Decimal(0)
    return position.cost / abs(position.quantity)


def margin_rejection(
    account: AccountState,
    fill: Fill,
    marks: Mapping[str, Decimal],
    rules: ShortRules,
) -> Rejection | None:
    """The `INSUFFICIENT_MARGIN` rejection of `fill` on `account`, or None when it may fill.

    Only a `short`, or a `buy` while a short is open (before or after the fill), is checked: the
    account after the fill must have `equity >= initial requirement`. Positions are valued at
    `marks` (the filled symbol without one at the fill price, another held symbol without one at
    its average price).
    """
    quantities = {symbol: p.quantity for symbol, p in account.positions.items()}
    after = dict(quantities)
    after[fill.symbol] = after.get(fill.symbol, Decimal(0)) + fill.signed_quantity
    shorts_open = any(q < 0 for q in quantities.values()) or any(q < 0 for q in after.values())
    if fill.side is Side.SHORT or (fill.side is Side.BUY and shorts_open):
        at = {symbol: _mark_of(position, marks) for symbol, position in account.positions.items()}
        at[fill.symbol] = marks.get(fill.symbol, fill.price)
        cash = account.cash.amount + fill.cash_delta
        valued = exposure(cash, after, at, fill.currency)
        required = valued.initial_requirement(rules)
        if valued.equity < required:
            currency = fill.currency
            return Rejection(
                reason=RejectReason.INSUFFICIENT_MARGIN,
                message=(
                    f"After this {fill.side.value} of {fill.quantity} {fill.symbol} the account's "
                    f"equity would be {valued.equity} {currency}, below its initial margin "
                    f"requirement of {round_money(required, currency)} {currency} (longs in full "
                    f"plus {rules.initial_margin} x the {valued.short_value} {currency} of "
                    f"shorts); order less, or cover or sell first."
                ),
                at=fill.filled_at,
            )
    return None


def initial_margin_check(
    marks: Mapping[str, Decimal], rules: ShortRules
) -> Callable[[AccountState, Fill], str | None]:
    """`margin_rejection` at `marks` as the `margin` hook of `markets.execution.execute`: the
    sentence refusing the fill, or None. The one initial margin rule: the broker binds the slot's
    quotes, and `execute` without a hook binds the order's own price (every other holding at its
    average price)."""

    def check(account: AccountState, fill: Fill) -> str | None:
        refused = margin_rejection(account, fill, marks, rules)
        return None if refused is None else refused.message

    return check


def next_margin_cover(
    account: AccountState, marks: Mapping[str, Decimal], rules: ShortRules
) -> str | None:
    """The short to cover next while `account` is in a margin call at `marks`: the one with the
    largest market value (ties: by symbol); None when the maintenance requirement holds (or no
    short is open)."""
    if not account_exposure(account, marks).in_margin_call(rules):
        return None
    shorts = [
        (position_value(p.quantity, marks[symbol], account.cash.currency), symbol)
        for symbol, p in account.positions.items()
        if p.quantity < 0
    ]
    if not shorts:
        return None
    shorts.sort(key=lambda pair: (-pair[0], pair[1]))
    return shorts[0][1]


def margin_call_reason(equity: Decimal, requirement: Decimal, currency: str) -> str:
    """The reason of a margin call's cover: `margin call: equity E below maintenance M`."""
    return (
        f"{MARGIN_CALL}: equity {round_money(equity, currency)} below maintenance "
        f"{round_money(requirement, currency)}"
    )


def borrow_fee(quantity: Decimal, price: Decimal, rules: ShortRules, currency: str) -> Decimal:
    """The borrow fee of a short of `quantity` (< 0) marked at `price` for one calendar day:
    `|quantity| x price x bps / 10000 / day_count`, by the money rule."""
    return borrow_fee_at(quantity, price, rules.borrow_fee_bps_per_year, rules.day_count, currency)


def borrow_fee_at(
    quantity: Decimal, price: Decimal, rate_bps: Decimal, day_count: int, currency: str
) -> Decimal:
    """`borrow_fee` at an explicit yearly rate and day count (as a `borrow_fee` row stores them)."""
    if quantity >= 0:
        raise ValueError(f"a borrow fee is charged on a short, got quantity {quantity}")
    check_decimal("price", price, positive=True)
    check_decimal("rate_bps", rate_bps)
    if day_count <= 0:
        raise ValueError(f"day_count must be positive, got {day_count}")
    return round_money(abs(quantity) * price * rate_bps * BPS / day_count, currency)
