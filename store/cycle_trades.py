"""The orders one cycle placed, each with its fills or its rejection, as `openbell trace` shows.

This module owns that read: every order row of the cycle in `seq` order, with the agent's stated
reason and confidence, its status and rejection, and the fills it got. A baseline writes no trace
rows, so these are what its cycle did; an LLM agent's orders are shown beside its trace. Reads
only; money and quantities stay `Decimal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Engine, select
from sqlmodel import col

from openbell.store.rows import row_id
from openbell.store.tables import FillRow, OrderRow


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
    with engine.connect() as connection:
        orders = connection.execute(
            select(OrderRow).where(col(OrderRow.cycle_id) == cycle_id).order_by(col(OrderRow.seq))
        ).all()
        ids = [row_id(order.id) for order in orders]
        fills = connection.execute(
            select(FillRow).where(col(FillRow.order_id).in_(ids)).order_by(col(FillRow.id))
        ).all()
    by_order: dict[int, list[TradeFill]] = {}
    for fill in fills:
        by_order.setdefault(fill.order_id, []).append(
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
    return [
        CycleOrder(
            order_id=row_id(order.id),
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
            fills=tuple(by_order.get(row_id(order.id), ())),
        )
        for order in orders
    ]
