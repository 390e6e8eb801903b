"""KTD-Fin's `risk_check`: planned orders checked in sequence against the account, nothing placed.

This module owns `check_orders`, a pure estimate of what execution would make of a list of orders
(`markets/execution.py` decides for real at the next trade price): each order, in the order given,
against the account as the orders before it left it, all at the last closes (the data cutoff).
It reports the shares an order comes to (a target weight sized as `place_order` sizes it,
`book.shares_for_target`; shares rounded to lots and steps), its estimated price after slippage,
notional and fees, and what would refuse it (`issues`: not in today's universe, no close, nothing
or not enough sellable today under T+1, zero lots, under the minimum order value, more than the
cash left), with `warnings` for a stock that closed at its limit last session (a buy at a limit-up
open, or a sell at a limit-down one, is rejected). An order with issues leaves the account as it
was; the others move it, so the account after them is what the orders that pass would leave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal

from openbell.agents.book import Book, Holding, shares_for_target
from openbell.agents.ktd.contract import CheckRow, RiskOrder
from openbell.agents.ktd.features import rounded
from openbell.markets.domain import Instrument, Side, round_money
from openbell.markets.execution import fees_for, slipped_price, tradable_quantity
from openbell.markets.rules import MarketRules, min_notional_for

LIMIT_UP_WARNING = "closed at limit-up last session: a buy is rejected if it opens at limit-up"
LIMIT_DOWN_WARNING = (
    "closed at limit-down last session: a sell is rejected if it opens at limit-down"
)


def check_orders(
    orders: Sequence[RiskOrder],
    *,
    book: Book,
    served: Mapping[str, Instrument | None],
    buyable: frozenset[str],
    closes: Mapping[str, Decimal],
    available: Mapping[str, Decimal],
    hits: Mapping[str, str | None],
    rules: MarketRules,
) -> tuple[list[CheckRow], Book]:
    """Each of `orders` checked in sequence (see the module docstring), and the account after
    those that pass. `served` is the instrument of each order's stock (None: not served),
    `buyable` what may be bought today, `closes` the last closes, `available` the shares sellable
    today and `hits` the last session's limit hit ("up", "down" or None) of each stock."""
    rows = []
    for order in orders:
        row, book = _check(
            order,
            book=book,
            instrument=served.get(order.stock_id),
            buyable=order.stock_id in buyable,
            price=closes.get(order.stock_id),
            available=available.get(order.stock_id, Decimal(0)),
            hit=hits.get(order.stock_id),
            rules=rules,
        )
        rows.append(row)
    return rows, book


def concentration(book: Book) -> tuple[Decimal, Decimal, Decimal]:
    """The cash weight, the largest holding weight and the HHI (sum of squared holding weights)
    of `book`, to four places (all zero when its NAV is not positive)."""
    nav = book.nav
    if nav <= 0:
        return Decimal(0), Decimal(0), Decimal(0)
    weights = [holding.value / nav for holding in book.holdings.values()]
    return (
        rounded(book.cash / nav),
        rounded(max(weights, default=Decimal(0))),
        rounded(sum((w * w for w in weights), Decimal(0))),
    )


def _check(
    order: RiskOrder,
    *,
    book: Book,
    instrument: Instrument | None,
    buyable: bool,
    price: Decimal | None,
    available: Decimal,
    hit: str | None,
    rules: MarketRules,
) -> tuple[CheckRow, Book]:
    side = Side(order.side)
    warnings = []
    if hit == "up" and side is Side.BUY:
        warnings.append(LIMIT_UP_WARNING)
    if hit == "down" and side is Side.SELL:
        warnings.append(LIMIT_DOWN_WARNING)
    sized = _sized(order, side, book=book, instrument=instrument, buyable=buyable, price=price,
                   rules=rules)  # fmt: skip
    if isinstance(sized, str):
        return _row(order, side, issues=[sized], warnings=warnings), book
    shares, instrument, price = sized
    held = book.quantity(order.stock_id)
    fill_price = slipped_price(instrument=instrument, side=side, price=price, rules=rules)
    notional = round_money(shares * fill_price, rules.currency)
    fees = fees_for(rules, side, notional, rules.currency)
    issues = []
    if side is Side.SELL and shares > available:
        issues.append(
            f"only {available} of the {held} shares held are sellable today (T+1: shares bought "
            "today can be sold from the next session)"
        )
    if notional < min_notional_for(instrument, rules):
        issues.append("under the minimum order value")
    if side is Side.BUY and notional + fees > book.cash:
        issues.append("costs more than the cash left after the orders before it, fees included")
    row = _row(
        order,
        side,
        issues=issues,
        warnings=warnings,
        estimate=(shares, fill_price, notional, fees),
    )
    if issues:
        return row, book
    return row, _after(book, order.stock_id, side, shares, price, notional, fees, rules)


def _sized(
    order: RiskOrder,
    side: Side,
    *,
    book: Book,
    instrument: Instrument | None,
    buyable: bool,
    price: Decimal | None,
    rules: MarketRules,
) -> tuple[Decimal, Instrument, Decimal] | str:
    """The shares `order` comes to (with its instrument and close), or why it cannot be sized."""
    if instrument is None or (side is Side.BUY and not buyable):
        return "not in today's universe: buy only its members, sell only what you hold"
    if price is None:
        return "no close is known for it, so the order cannot be estimated"
    held = book.quantity(order.stock_id)
    if side is Side.SELL and held <= 0:
        return "nothing held to sell"
    if order.target_weight is not None:
        shares, why = shares_for_target(
            book=book,
            instrument=instrument,
            side=side,
            target_weight=order.target_weight,
            price=price,
            rules=rules,
        )
        return (shares, instrument, price) if shares > 0 else why
    wanted = order.shares if order.shares is not None else Decimal(0)
    shares = tradable_quantity(
        instrument=instrument, side=side, quantity=wanted, held=held, rules=rules
    )
    return (shares, instrument, price) if shares > 0 else "rounds down to zero lots"


def _row(
    order: RiskOrder,
    side: Side,
    *,
    issues: list[str],
    warnings: list[str],
    estimate: tuple[Decimal, Decimal, Decimal, Decimal] | None = None,
) -> CheckRow:
    shares, price, notional, fees = estimate or (Decimal(0), None, None, None)
    return CheckRow(
        stock_id=order.stock_id,
        side=side.value,
        ok=estimate is not None and not issues,
        est_shares=shares,
        est_price=price,
        est_notional=notional,
        est_fees=fees,
        issues=issues,
        warnings=warnings,
    )


def _after(
    book: Book,
    symbol: str,
    side: Side,
    shares: Decimal,
    mark: Decimal,
    notional: Decimal,
    fees: Decimal,
    rules: MarketRules,
) -> Book:
    """`book` after a fill of `shares` at `notional` and `fees`, the holding marked at `mark`."""
    cash = book.cash - notional - fees if side is Side.BUY else book.cash + notional - fees
    quantity = book.quantity(symbol) + (shares if side is Side.BUY else -shares)
    holdings = dict(book.holdings)
    if quantity == 0:
        holdings.pop(symbol, None)
    else:
        holdings[symbol] = Holding(
            symbol=symbol,
            quantity=quantity,
            mark=mark,
            value=round_money(quantity * mark, rules.currency),
        )
    return replace(book, cash=cash, holdings=holdings)
