"""The links between the ledger's rows: fills to their orders and cycles, orders to their cycles,
margin calls to their covers.

Every fill belongs to a filled order of its account, in a cycle of its account, on the order's
symbol and side and within its quantity, in the account's currency, with its notional by the
money rule; an order has one fill at most, and a filled order has one; every order names a cycle
of its account; every margin call has its cover (a filled `cover` order of the account, in the
cycle the row names, whose reason is the call's). The rows checked are those given (all, or those
written since a checkpoint); the rows they name come from `Facts`, older ones included.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal

from openbell.markets.domain import Side, round_money
from openbell.markets.margin import MARGIN_CALL
from openbell.store.records import OrderStatus
from openbell.store.verify.breaches import (
    FILL_CURRENCY,
    FILL_MATCHES_ORDER,
    FILL_NOTIONAL,
    FILL_ORDER_LINK,
    MARGIN_CALL_COVER,
    ONE_FILL_PER_ORDER,
    ORDER_CYCLE_LINK,
    Collector,
)
from openbell.store.verify.facts import Account, Facts, Fill, MarginCall, Order


def check_fills(account: Account, fills: Sequence[Fill], facts: Facts, out: Collector) -> None:
    """Each of `fills` (the account's) against its order and cycle; no order with two fills."""
    by_order: dict[int, list[int]] = defaultdict(list)
    for fill in fills:
        by_order[fill.order_id].append(fill.id)
        _check_fill_link(account.id, fill, facts, out)
        order = facts.orders.get(fill.order_id)
        if order is not None:
            _check_fill_matches(account.id, fill, order, out)
        expected = round_money(fill.quantity * fill.price, account.currency)
        if fill.notional != expected:
            out.add(
                account.id,
                FILL_NOTIONAL,
                expected,
                fill.notional,
                f"fill {fill.id}: {fill.quantity} x {fill.price} rounded to "
                f"{account.currency} places",
            )
        if fill.currency != account.currency:
            out.add(
                account.id,
                FILL_CURRENCY,
                None,
                None,
                f"fill {fill.id} is in {fill.currency} on a {account.currency} account",
            )
    for order_id, fill_ids in sorted(by_order.items()):
        older = [
            fill.id
            for fill in facts.older_fills_by_order.get(order_id, [])
            if fill.account_id == account.id
        ]
        if len(older) + len(fill_ids) > 1:
            out.add(
                account.id,
                ONE_FILL_PER_ORDER,
                Decimal(1),
                Decimal(len(older) + len(fill_ids)),
                f"order {order_id} has fills {', '.join(map(str, [*older, *fill_ids]))}",
            )


def _check_fill_link(account_id: int, fill: Fill, facts: Facts, out: Collector) -> None:
    order = facts.orders.get(fill.order_id)
    if order is None:
        problem = f"fill {fill.id} names order {fill.order_id}, which does not exist"
    elif order.account_id != account_id:
        problem = f"fill {fill.id} belongs to order {order.id} of account {order.account_id}"
    else:
        cycle_account = facts.cycle_accounts.get(order.cycle_id)
        if cycle_account is None:
            problem = f"fill {fill.id}: order {order.id} names missing cycle {order.cycle_id}"
        elif cycle_account != account_id:
            problem = (
                f"fill {fill.id}: order {order.id} belongs to cycle {order.cycle_id} "
                f"of account {cycle_account}"
            )
        else:
            return
    out.add(account_id, FILL_ORDER_LINK, None, None, problem)


def _check_fill_matches(account_id: int, fill: Fill, order: Order, out: Collector) -> None:
    if (fill.symbol, fill.side) != (order.symbol, order.side):
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            None,
            None,
            f"fill {fill.id} is {fill.side} {fill.symbol}, "
            f"order {order.id} is {order.side} {order.symbol}",
        )
    if fill.quantity > order.quantity:
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            order.quantity,
            fill.quantity,
            f"fill {fill.id} quantity exceeds order {order.id}",
        )
    if order.status != OrderStatus.FILLED.value:
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            None,
            None,
            f"fill {fill.id} belongs to order {order.id}, which is {order.status}",
        )


def check_orders(orders: Sequence[Order], facts: Facts, out: Collector) -> None:
    """Each of `orders` names a cycle of its account; a filled one has a fill."""
    filled_orders = {fill.order_id for part in facts.by_account.values() for fill in part.fills}
    filled_orders |= facts.older_fills_by_order.keys()
    for order in orders:
        cycle_account = facts.cycle_accounts.get(order.cycle_id)
        if cycle_account is None or cycle_account != order.account_id:
            owner = "missing" if cycle_account is None else f"of account {cycle_account}"
            out.add(
                order.account_id,
                ORDER_CYCLE_LINK,
                None,
                None,
                f"order {order.id} names cycle {order.cycle_id} ({owner})",
            )
        if order.status == OrderStatus.FILLED.value and order.id not in filled_orders:
            out.add(
                order.account_id,
                ONE_FILL_PER_ORDER,
                Decimal(1),
                Decimal(0),
                f"order {order.id} is marked filled but has no fill",
            )


def check_margin_calls(
    account: Account,
    calls: Sequence[MarginCall],
    fills: Sequence[Fill],
    facts: Facts,
    out: Collector,
) -> None:
    """Each margin call has its cover: a filled `cover` order of the account, in the cycle the
    row names, whose reason is the margin call's."""
    filled = {fill.order_id: fill for fill in fills}
    for order_id, older in facts.older_fills_by_order.items():
        if order_id not in filled:
            filled.update({fill.order_id: fill for fill in older if fill.account_id == account.id})
    for call in calls:
        where = f"margin call {call.id} (order {call.order_id})"
        order = facts.orders.get(call.order_id)
        fill = filled.get(call.order_id)
        problem = None
        if order is None or order.account_id != account.id:
            problem = "its order is missing or of another account"
        elif order.cycle_id != call.cycle_id:
            problem = f"its order is of cycle {order.cycle_id}, the row names {call.cycle_id}"
        elif order.side != Side.COVER.value:
            problem = f"its order is a {order.side}, not a cover"
        elif fill is None:
            problem = "its cover has no fill"
        elif not call.reason.startswith(MARGIN_CALL) or order.reason != call.reason:
            problem = f"the order's reason {order.reason!r} is not the call's {call.reason!r}"
        if problem is not None:
            out.add(account.id, MARGIN_CALL_COVER, None, None, f"{where}: {problem}")
