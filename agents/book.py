"""The account as an agent sees it during one cycle, and how a target weight becomes shares.

This module owns three pure pieces the toolbox builds on. `unwind` takes fills back out of an
account state: a cycle that is run again after an interruption is shown the account as it was at
the start of the cycle plus what it has re-placed so far, so a deterministic agent decides exactly
as it did the first time. `Book` is that account marked at the slot's quotes (cash, holdings,
NAV). `shares_for_target` turns "hold this fraction of NAV" into a quantity the market's lots and
steps allow, a buy capped at what the cash affords with fees. It also owns `benchmark_instrument`,
the tradable stand-in for a market's benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final

from openbell.markets.domain import (
    AccountState,
    Fill,
    Instrument,
    Money,
    Position,
    Side,
    round_money,
)
from openbell.markets.execution import affordable_quantity, slipped_price, tradable_quantity
from openbell.markets.margin import Exposure
from openbell.markets.rules import MarketRules, ShortRules
from openbell.markets.universes import MARKET_CURRENCY, Universe

#: Units of a synthetic index fund: fine enough that 100,000 CNY tracks an index near 3,000.
INDEX_FUND_UNIT = Decimal("0.0001")


def benchmark_instrument(universe: Universe, rules: MarketRules) -> Instrument | None:
    """The instrument a buy-and-hold of the market's benchmark trades, or None without one.

    The benchmark is the universe's (`benchmark` in its file: QQQ, 000016.SH), else the rules'
    when that is not a basket name. A-share benchmarks are indices, which cannot be bought: they
    stand for a synthetic index fund that tracks the index 1:1 in price, traded in units of
    `INDEX_FUND_UNIT` (its own lot) so that a small account can hold it, under the main board's
    price limits and the market's fees. Crypto's benchmark (CD5) is a basket, bought by weights.
    """
    symbol = universe.benchmark
    if symbol is None:
        return None
    if symbol in universe:
        return universe.instrument(symbol)
    currency = MARKET_CURRENCY[rules.market]
    if rules.market == "cn":
        return Instrument(
            symbol=symbol,
            market="cn",
            currency=currency,
            name=f"{symbol} index fund (synthetic, tracks the index 1:1)",
            quantity_step=INDEX_FUND_UNIT,
            lot_size=INDEX_FUND_UNIT,
        )
    return Instrument(symbol=symbol, market=rules.market, currency=currency)


def unwind(state: AccountState, fills: Iterable[Fill]) -> AccountState:
    """`state` with `fills` taken back out: their cash returned or repaid, their quantities
    removed or restored (a short's as well as a long's). Average costs and settlement lots are
    left as they are (the agent's view shows neither)."""
    cash = state.cash.amount
    held = {symbol: position.quantity for symbol, position in state.positions.items()}
    for fill in fills:
        cash -= fill.cash_delta
        held[fill.symbol] = held.get(fill.symbol, Decimal(0)) - fill.signed_quantity
    if cash < 0 or (not state.allow_short and any(quantity < 0 for quantity in held.values())):
        raise ValueError(f"unwinding fills leaves cash {cash} and holdings {held}")
    positions: dict[str, Position] = {}
    for symbol, quantity in sorted(held.items()):
        if quantity != 0:
            before = state.positions.get(symbol)
            keeps = before is not None and (before.quantity > 0) == (quantity > 0)
            positions[symbol] = Position(
                symbol=symbol,
                quantity=quantity,
                cost=before.cost if before is not None and keeps else Decimal(0),
                recent_buys=before.recent_buys if before is not None and quantity > 0 else (),
            )
    return AccountState(
        market=state.market,
        cash=Money(amount=cash, currency=state.cash.currency),
        positions=positions,
        allow_short=state.allow_short,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Holding:
    """A position marked at a price: `value = quantity * mark` by the money rule (`round_money`),
    as the ledger's NAV snapshot values it."""

    symbol: str
    quantity: Decimal
    mark: Decimal
    value: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class Book:
    """An account marked at the slot: cash, holdings (a short with negative quantity and value)
    and `nav = cash + positions_value`."""

    currency: str
    cash: Decimal
    holdings: Mapping[str, Holding] = field(default_factory=dict)

    @classmethod
    def mark(cls, state: AccountState, marks: Mapping[str, Decimal], currency: str) -> Book:
        """`state` valued at `marks`; a holding without a mark is valued at its average cost (a
        short at its average proceeds). A short's value is negative: `nav = cash + signed q x
        mark`."""
        holdings: dict[str, Holding] = {}
        for symbol, position in state.positions.items():
            price = marks.get(symbol)
            if price is None:  # a short's cost is its open proceeds, also >= 0
                price = position.cost / abs(position.quantity)
            value = round_money(position.quantity * price, currency)
            holdings[symbol] = Holding(
                symbol=symbol, quantity=position.quantity, mark=price, value=value
            )
        return cls(currency=currency, cash=state.cash.amount, holdings=holdings)

    @property
    def positions_value(self) -> Decimal:
        """The summed value of the holdings."""
        return sum((holding.value for holding in self.holdings.values()), Decimal(0))

    @property
    def nav(self) -> Decimal:
        """Cash plus the value of the holdings."""
        return self.cash + self.positions_value

    def exposure(self) -> Exposure:
        """The cash and the long and short market values of the holdings (`markets/margin.py`)."""
        return Exposure(
            cash=self.cash,
            long_value=sum((h.value for h in self.holdings.values() if h.value > 0), Decimal(0)),
            short_value=-sum((h.value for h in self.holdings.values() if h.value < 0), Decimal(0)),
        )

    def quantity(self, symbol: str) -> Decimal:
        """The quantity held of `symbol` (zero when none)."""
        holding = self.holdings.get(symbol)
        return holding.quantity if holding is not None else Decimal(0)

    def weight(self, symbol: str) -> Decimal:
        """The signed fraction of NAV held in `symbol` (negative for a short; zero when none, or
        when NAV is zero)."""
        holding = self.holdings.get(symbol)
        nav = self.nav
        if holding is None or nav <= 0:
            return Decimal(0)
        return holding.value / nav


def shares_for_target(
    *,
    book: Book,
    instrument: Instrument,
    side: Side,
    target_weight: Decimal,
    price: Decimal,
    rules: MarketRules,
) -> tuple[Decimal, str]:
    """The quantity that moves `instrument` towards `target_weight` of NAV at `price`, and why
    when it is zero.

    For `buy` and `sell` the target is a long holding, for `short` and `cover` a short one (the
    fraction of NAV to hold short). Target value = weight * NAV; the difference from the value
    held on that side, divided by `price` and rounded down to the market's lots and steps
    (`tradable_quantity`), is the quantity. A buy is capped by `affordable_quantity` at the price
    after slippage, so that notional and fees fit in the cash; a short is capped by
    `shortable_value`, so that the account's equity still covers the initial margin; a sell or a
    cover never exceeds the holding, and a target of zero closes all of it.
    """
    if side in (Side.SHORT, Side.COVER):
        return _short_target(
            book=book,
            instrument=instrument,
            side=side,
            target_weight=target_weight,
            price=price,
            rules=rules,
        )
    symbol = instrument.symbol
    held = book.quantity(symbol)
    if held < 0:
        return Decimal(0), f"{symbol} is held short; cover it before buying or selling."
    delta = target_weight * book.nav - held * price
    if side is Side.BUY:
        if delta <= 0:
            return Decimal(0), (
                f"{symbol} is already at or above {target_weight} of NAV; sell to reduce it."
            )
        wanted = tradable_quantity(
            instrument=instrument, side=side, quantity=delta / price, held=held, rules=rules
        )
        affordable = affordable_quantity(
            instrument=instrument,
            price=slipped_price(instrument=instrument, side=side, price=price, rules=rules),
            cash=book.cash,
            rules=rules,
        )
        quantity = min(wanted, affordable)
        if quantity <= 0:
            why = "the cash affords none" if wanted > 0 else "it rounds down to zero lots"
            return Decimal(0), (
                f"Buying {delta / price:.6f} {symbol} to reach {target_weight} of NAV: {why}."
            )
        return quantity, ""
    if delta >= 0:
        return Decimal(0), (
            f"{symbol} is already at or below {target_weight} of NAV; buy to increase it."
        )
    wanted = held if target_weight == 0 else -delta / price
    quantity = tradable_quantity(
        instrument=instrument, side=side, quantity=wanted, held=held, rules=rules
    )
    if quantity <= 0:
        return Decimal(0), (
            f"Selling {wanted:.6f} {symbol} to reach {target_weight} of NAV rounds down to zero."
        )
    return quantity, ""


#: The share of the margin room a target-weight short may use: the rest is left for its fees,
#: its slippage and the marks moving between sizing and the margin check.
SHORT_ROOM_USED: Final = Decimal("0.98")


def shortable_value(book: Book, shorting: ShortRules) -> Decimal:
    """The most short market value an account may add and still have its equity (NAV) cover
    its initial requirement, `long + initial_margin x short` (`SHORT_ROOM_USED` of the room; zero
    when there is none)."""
    exposure = book.exposure()
    room = (exposure.equity - exposure.initial_requirement(shorting)) / shorting.initial_margin
    return max(room * SHORT_ROOM_USED, Decimal(0))


def _short_target(
    *,
    book: Book,
    instrument: Instrument,
    side: Side,
    target_weight: Decimal,
    price: Decimal,
    rules: MarketRules,
) -> tuple[Decimal, str]:
    """`shares_for_target` for `short` and `cover`: the target is the fraction of NAV held short."""
    symbol = instrument.symbol
    held = book.quantity(symbol)
    if held > 0:
        return Decimal(0), f"{symbol} is held long; sell it before shorting or covering."
    short_held = -held
    delta = target_weight * book.nav - short_held * price
    if side is Side.SHORT:
        if delta <= 0:
            return Decimal(0), (
                f"{symbol} is already short at or above {target_weight} of NAV; cover to reduce it."
            )
        if rules.shorting is None:
            return Decimal(0), f"The {rules.market} market cannot be shorted."
        room = shortable_value(book, rules.shorting)
        wanted = min(delta, room) / price
        quantity = tradable_quantity(
            instrument=instrument, side=side, quantity=wanted, held=held, rules=rules
        )
        if quantity <= 0:
            why = "the margin allows none" if room < delta else "it rounds down to zero lots"
            return Decimal(0), (
                f"Shorting {delta / price:.6f} {symbol} to reach {target_weight} of NAV: {why}."
            )
        return quantity, ""
    if delta >= 0:
        return Decimal(0), (
            f"{symbol} is already short at or below {target_weight} of NAV; short to increase it."
        )
    wanted = short_held if target_weight == 0 else min(-delta / price, short_held)
    quantity = tradable_quantity(
        instrument=instrument, side=side, quantity=wanted, held=held, rules=rules
    )
    if quantity <= 0:
        return Decimal(0), (
            f"Covering {wanted:.6f} {symbol} to reach {target_weight} of NAV rounds down to zero."
        )
    return quantity, ""
