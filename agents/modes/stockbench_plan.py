"""Stockbench's stage 4: is a plan executable against the account at the slot's prices?

This module owns `check_plan`, a pure check of a `FinalAction` before any order is placed: a sell
needs a holding (and no more shares than held, and a target below the current weight), a buy needs
a price, whole lots where the market trades in lots, and a target above the current weight, and
the buys together must fit in the cash left after the sells (estimated at the slot's prices,
before fees and slippage, which the broker applies). Problems are worded with the model's own
stock ids, so they can be fed back as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from decimal import Decimal

from openbell.agents.modes.final_action import FinalAction, OrderIntent
from openbell.agents.tools import PortfolioOut
from openbell.markets.rules import MarketRules


def check_plan(
    action: FinalAction,
    *,
    symbols: Mapping[str, str],
    portfolio: PortfolioOut | None,
    prices: Mapping[str, Decimal],
    rules: MarketRules,
) -> list[str]:
    """The problems that keep `action` from executing (empty: executable).

    `symbols` maps each order's `stock_id` to the real symbol; `prices` are by real symbol.
    """
    problems: list[str] = []
    repeated = [sid for sid, n in Counter(o.stock_id for o in action.orders).items() if n > 1]
    if repeated:
        problems.append(f"one decision per stock: {', '.join(repeated)} appear more than once")
    if portfolio is None:
        return problems
    held = {p.symbol: p for p in portfolio.positions}
    nav = portfolio.nav
    cash = portfolio.cash
    spend = Decimal(0)
    for order in action.orders:
        symbol = symbols[order.stock_id]
        position = held.get(symbol)
        quantity = position.quantity if position is not None else Decimal(0)
        price = prices.get(symbol) or (position.mark if position is not None else None)
        weight = position.weight if position is not None else Decimal(0)
        if order.side == "sell":
            problem, value = _sell(order, quantity, weight, price, nav)
            cash += value
        else:
            problem, value = _buy(order, quantity, weight, price, nav, rules)
            spend += value
        if problem:
            problems.append(f"{order.stock_id}: {problem}")
    if spend > cash:
        problems.append(
            f"the increases cost about {spend:.2f} but the cash after the decreases is about "
            f"{cash:.2f} {portfolio.currency}; buy less"
        )
    return problems


def _sell(
    order: OrderIntent, quantity: Decimal, weight: Decimal, price: Decimal | None, nav: Decimal
) -> tuple[str, Decimal]:
    if quantity <= 0:
        return "decrease needs a holding, and you hold none", Decimal(0)
    if order.shares is not None:
        if order.shares > quantity:
            return f"you hold {quantity}, so you cannot sell {order.shares}", Decimal(0)
        return "", order.shares * (price or 0)
    target = order.target_weight or Decimal(0)
    if target >= weight:
        return f"a decrease needs a target_weight below the current {weight}", Decimal(0)
    return "", (weight - target) * nav


def _buy(
    order: OrderIntent,
    quantity: Decimal,
    weight: Decimal,
    price: Decimal | None,
    nav: Decimal,
    rules: MarketRules,
) -> tuple[str, Decimal]:
    if price is None:
        return "it has no price now, so it cannot be bought", Decimal(0)
    if order.shares is not None:
        lot = rules.lot_size
        if lot is not None and lot > 1 and order.shares % lot != 0:
            return f"buys are whole lots of {lot} shares", Decimal(0)
        return "", order.shares * price
    target = order.target_weight or Decimal(0)
    if target <= weight:
        return f"an increase needs a target_weight above the current {weight}", Decimal(0)
    return "", target * nav - quantity * price
