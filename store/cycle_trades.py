"""The orders one cycle placed, each with its fills or its rejection, as `openbell trace` shows.

This module owns that read: every order row of the cycle in `seq` order, with the agent's stated
reason and confidence, its status and rejection, and the fills it got. A baseline writes no trace
rows, so these are what its cycle did; an LLM agent's orders are shown beside its trace. Reads
only; money and quantities stay `Decimal`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, select

from openbell.store.core_tables import FILL_TABLE, ORDER_TABLE
from openbell.store.rows import row_id

Ord = TypeVar("Ord", bound="CycleOrder")


@dataclass(frozen=True, slots=True, kw_only=True)
class TradeFill:
    """One fill of an order."""

    fill_id: int
    quantity: Decimal
    price: Decimal
    notional: Decimal
    fees: Decimal
    currency: str
    filled_at: datetime
    price_source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleOrder:
    """One order of a cycle: what was asked, why, and what came of it."""

    order_id: int
    seq: int
    symbol: str
    side: str
    quantity: Decimal
    target_weight: Decimal | None
    confidence: Decimal | None
    reason: str
    placed_at: datetime
    status: str
    reject_reason: str | None
    reject_message: str | None
    fills: tuple[TradeFill, ...]


def orders_of_cycle(engine: Engine, cycle_id: int) -> list[CycleOrder]:
    """Every order of cycle `cycle_id`, in `seq` order, with its fills."""
    query = (
        select(ORDER_TABLE).where(ORDER_TABLE.c.cycle_id == cycle_id).order_by(ORDER_TABLE.c.seq)
    )
    with engine.connect() as connection:
        orders = connection.execute(query).all()
        fills = fills_by_order(connection, [row_id(order.id) for order in orders])
    return [order_with_fills(CycleOrder, order, fills) for order in orders]


def fills_by_order(
    connection: Connection, order_ids: Sequence[int]
) -> dict[int, tuple[TradeFill, ...]]:
    """The fills of the orders `order_ids`, by order, each order's in id order (one query)."""
    rows = connection.execute(
        select(FILL_TABLE).where(FILL_TABLE.c.order_id.in_(order_ids)).order_by(FILL_TABLE.c.id)
    ).all()
    found: dict[int, list[TradeFill]] = {}
    for fill in rows:
        found.setdefault(fill.order_id, []).append(
            TradeFill(
                fill_id=row_id(fill.id),
                quantity=fill.quantity,
                price=fill.price,
                notional=fill.notional,
                fees=fill.fees,
                currency=fill.currency,
                filled_at=fill.filled_at,
                price_source=fill.price_source,
            )
        )
    return {order_id: tuple(fills) for order_id, fills in found.items()}


def order_with_fills(
    kind: type[Ord],
    order: Any,
    fills: Mapping[int, tuple[TradeFill, ...]],
    **more: Any,
) -> Ord:
    """Order row `order` as a `kind` (a `CycleOrder`), with its fills from `fills` and the
    fields of `kind` beyond `CycleOrder`'s in `more`."""
    order_id = row_id(order.id)
    return kind(
        order_id=order_id,
        seq=order.seq,
        symbol=order.symbol,
        side=order.side,
        quantity=order.quantity,
        target_weight=order.target_weight,
        confidence=order.confidence,
        reason=order.reason,
        placed_at=order.placed_at,
        status=order.status,
        reject_reason=order.reject_reason,
        reject_message=order.reject_message,
        fills=fills.get(order_id, ()),
        **more,
    )
