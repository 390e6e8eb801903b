"""Corporate actions: stock splits and cash dividends, what they do to a holding, and their port.

This module owns `CorporateAction` (one split or cash dividend of one symbol, effective from its
ex-date), `action_effect` (the pure arithmetic of applying one to a holding), `ex_reference_price`
(the exchange's reference price on an ex-date, against which A-share price limits are measured),
the `CorporateActionSource` port that the vendors' adapters (yfinance, akshare) and recorded files
implement, and `RecordedActions`, the in-memory source replays and tests use.

Conventions. The holding that counts is the one held before the ex-date's session opens (`ex_at`):
shares bought at or after it trade ex and get nothing. A split's `ratio` is the shares held after
per share held before (4 for a 4-for-1 split, 1.4 for an A-share "10 送 4" bonus issue, 0.1 for a
1-for-10 reverse split); the new holding is `held * ratio`, computed to `SHARE_PLACES` and cut to
whole quantity steps, and the fraction cut off is paid in cash at the ex-date's price (cash in
lieu). A cash dividend is `cash` per share held, pre-tax, in the market's currency, rounded once
to the currency's places. When one symbol has a dividend and a split on the same ex-date the
dividend comes first: both are per share held before the ex-date.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from typing import Final, Protocol

from openbell.markets.domain import (
    check_currency,
    check_decimal,
    check_market,
    check_utc,
    round_money,
)
from openbell.markets.sources import check_symbols

#: Quantities after a split are computed to this many places before whole steps are cut off: a
#: ratio such as 1/3 has no exact decimal, and 300 * 0.333... must still be 100 shares.
SHARE_PLACES: Final = Decimal("1e-9")


class ActionKind(enum.StrEnum):
    """What a corporate action does to a holding."""

    CASH_DIVIDEND = "cash_dividend"
    SPLIT = "split"


#: The order in which actions of one symbol with the same ex-date apply.
_APPLY_ORDER: Final = {ActionKind.CASH_DIVIDEND: 0, ActionKind.SPLIT: 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class CorporateAction:
    """A split or cash dividend of `symbol`, effective from the session of `ex_date`.

    `ex_date` is the exchange-local date of the first session the shares trade without it and
    `ex_at` that session's open (UTC): a holding before `ex_at` is entitled. `ratio` (splits only)
    is shares after per share before; `cash` (dividends only) is the pre-tax amount per share, in
    `currency`. `source` names where the action came from ("yfinance", "akshare", a file).
    """

    symbol: str
    kind: ActionKind
    ex_date: date
    ex_at: datetime
    currency: str
    source: str
    ratio: Decimal = Decimal(1)
    cash: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        if not self.symbol or self.symbol != self.symbol.strip():
            raise ValueError(f"action symbol must be non-empty and trimmed, got {self.symbol!r}")
        object.__setattr__(self, "kind", ActionKind(self.kind))
        check_utc("ex_at", self.ex_at)
        check_currency(self.currency)
        check_decimal("ratio", self.ratio, positive=True)
        check_decimal("cash", self.cash)
        if self.kind is ActionKind.SPLIT and (self.ratio == 1 or self.cash != 0):
            raise ValueError(
                f"split of {self.symbol} on {self.ex_date}: needs a ratio other than 1 and no "
                f"cash, got ratio {self.ratio} and cash {self.cash}"
            )
        if self.kind is ActionKind.CASH_DIVIDEND and (self.cash <= 0 or self.ratio != 1):
            raise ValueError(
                f"dividend of {self.symbol} on {self.ex_date}: needs a positive cash amount and "
                f"no ratio, got cash {self.cash} and ratio {self.ratio}"
            )

    @property
    def order_key(self) -> tuple[datetime, int, str]:
        """Sorts actions into the order they apply: by ex-date, dividends before splits."""
        return (self.ex_at, _APPLY_ORDER[self.kind], self.symbol)

    def describe(self) -> str:
        """A short human line, e.g. `AAPL split 4 (ex 2020-08-31)`."""
        if self.kind is ActionKind.SPLIT:
            what = f"split {self.ratio}"
        else:
            what = f"dividend {self.cash} {self.currency}"
        return f"{self.symbol} {what} (ex {self.ex_date})"


def in_apply_order(actions: Iterable[CorporateAction]) -> list[CorporateAction]:
    """`actions` sorted into the order they apply (ex-date, then dividends before splits)."""
    return sorted(actions, key=lambda action: action.order_key)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionEffect:
    """What applying one action to a holding does.

    `quantity_delta` is added to the position (negative for a reverse split), `cash_delta` to the
    cash (the dividend, or the cash paid in lieu of `fraction`, the part of a share cut off).
    """

    quantity_delta: Decimal
    cash_delta: Decimal
    fraction: Decimal = Decimal(0)


def split_quantity(held: Decimal, ratio: Decimal) -> Decimal:
    """`held * ratio` to `SHARE_PLACES`: the holding after a split, fractions included."""
    return (held * ratio).quantize(SHARE_PLACES, rounding=ROUND_HALF_EVEN)


def action_effect(
    action: CorporateAction,
    held: Decimal,
    *,
    price: Decimal | None = None,
    step: Decimal = Decimal(1),
) -> ActionEffect:
    """The effect of `action` on `held` shares (held before its `ex_at`; negative for a short).

    A split keeps whole multiples of `step` and pays the fraction cut off at `price` (the
    ex-date's price; a split leaving a fraction without a price raises `ValueError`). A dividend
    pays `held * cash`, rounded half-up to the currency's places. A short is the mirror image: a
    split scales its negative quantity (the whole part towards zero), the short pays the dividend
    and pays for the fraction of a share it is cut off (negative `cash_delta`s).
    """
    if not isinstance(held, Decimal) or not held.is_finite():
        raise ValueError(f"held must be a finite Decimal, got {held!r}")
    check_decimal("step", step, positive=True)
    if action.kind is ActionKind.CASH_DIVIDEND:
        return ActionEffect(
            quantity_delta=Decimal(0), cash_delta=round_money(held * action.cash, action.currency)
        )
    after = split_quantity(held, action.ratio)
    whole = (after / step).to_integral_value(rounding=ROUND_DOWN) * step
    fraction = after - whole
    cash = Decimal(0)
    if fraction:
        if price is None:
            raise ValueError(
                f"{action.describe()}: {held} shares leave {fraction} of a share, "
                "and cash in lieu needs the ex-date's price"
            )
        check_decimal("price", price, positive=True)
        cash = round_money(fraction * price, action.currency)
    return ActionEffect(quantity_delta=whole - held, cash_delta=cash, fraction=fraction)


def ex_reference_price(
    previous_close: Decimal, actions: Iterable[CorporateAction], tick: Decimal
) -> Decimal:
    """The ex-date reference price: `(previous_close - cash) / ratio` over `actions` (one symbol,
    one ex-date), rounded half-even to `tick`. A-share price limits on an ex-date are measured
    against it, not against the previous close."""
    check_decimal("previous_close", previous_close, positive=True)
    price = previous_close
    for action in in_apply_order(actions):
        price = price - action.cash if action.kind is ActionKind.CASH_DIVIDEND else price
        price = price / action.ratio if action.kind is ActionKind.SPLIT else price
    if price <= 0:
        raise ValueError(f"ex-date reference price {price} is not positive")
    return price.quantize(tick, rounding=ROUND_HALF_EVEN)


class CorporateActionSource(Protocol):
    """A source of corporate actions for one market. Every method is async.

    `actions` returns the actions of `symbols` whose `ex_date` lies in `[first, last]` (exchange-
    local dates), in apply order. A network failure or rate limit raises `DataUnavailable` (the
    daemon retries at its next slot); a symbol the vendor does not know has no actions.
    """

    @property
    def name(self) -> str:
        """A stable id for logs and the ledger ("yfinance", "akshare", "file:PATH")."""
        ...

    @property
    def market(self) -> str:
        """The market served."""
        ...

    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]:
        """Actions of `symbols` with an ex-date in `[first, last]`, in apply order."""
        ...


class RecordedActions:
    """A `CorporateActionSource` over a fixed list of actions (a recorded file, a test's list)."""

    def __init__(self, *, market: str, actions: Iterable[CorporateAction], name: str) -> None:
        check_market(market)
        self._market = market
        self._name = name
        ordered = in_apply_order(actions)
        seen: set[tuple[str, ActionKind, date]] = set()
        for action in ordered:
            key = (action.symbol, action.kind, action.ex_date)
            if key in seen:
                raise ValueError(f"{name}: {action.describe()} is listed twice")
            seen.add(key)
        self._actions = tuple(ordered)

    @property
    def name(self) -> str:
        return self._name

    @property
    def market(self) -> str:
        return self._market

    @property
    def all(self) -> tuple[CorporateAction, ...]:
        """Every recorded action, in apply order."""
        return self._actions

    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]:
        wanted = frozenset(check_symbols(symbols))
        return [
            action
            for action in self._actions
            if action.symbol in wanted and first <= action.ex_date <= last
        ]
