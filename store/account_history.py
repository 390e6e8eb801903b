"""An account's orders, fills and cycles, newest first, one page at a time, and each market's last
slot: the reads behind the web API's history endpoints.

This module owns those reads. A page is at most `limit` rows strictly older than a cursor: an
order's or a fill's id (`before_id`; ids grow with time within an account), a cycle's `slot_at`
(`before_at`; unique per account). Each page costs one indexed query (plus one for the fills of a
page of orders), never one per row: `order.account_id`, `fill (account_id, filled_at)` and
`cycle (account_id, slot_at)` are indexed. Reads only; money and quantities stay `Decimal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, Engine, case, func, select

from openbell.markets.domain import check_utc
from openbell.store.core_tables import ACCOUNT_TABLE, CYCLE_TABLE, FILL_TABLE, ORDER_TABLE
from openbell.store.cycle_trades import CycleOrder, fills_by_order, order_with_fills
from openbell.store.records import CycleStatus, CycleUsage, OrderStatus
from openbell.store.traces import usage_of


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountOrder(CycleOrder):
    """One order of an account: its cycle, what was asked and why, and what came of it."""

    cycle_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountFill:
    """One fill of an account, with its order's cycle, reason and confidence."""

    fill_id: int
    order_id: int
    cycle_id: int
    symbol: str
    side: str
    quantity: Decimal
    price: Decimal
    notional: Decimal
    fees: Decimal
    currency: str
    filled_at: datetime
    price_source: str
    reason: str
    confidence: Decimal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountCycle:
    """One cycle of an account: its slot, status, error, the orders it placed, rejected and
    filled, and its LLM usage (None for an agent without a model)."""

    cycle_id: int
    slot_at: datetime
    status: CycleStatus
    started_at: datetime
    finished_at: datetime | None
    error_class: str | None
    error_message: str | None
    reason: str | None
    orders: int
    rejections: int
    fills: int
    usage: CycleUsage | None


_NONE = (0, 0, 0)


def orders_page(
    engine: Engine, account_id: int, *, limit: int, before_id: int | None = None
) -> list[AccountOrder]:
    """The account's `limit` newest orders with an id below `before_id`, with their fills."""
    query = select(ORDER_TABLE).where(ORDER_TABLE.c.account_id == account_id)
    if before_id is not None:
        query = query.where(ORDER_TABLE.c.id < before_id)
    query = query.order_by(ORDER_TABLE.c.id.desc()).limit(limit)
    with engine.connect() as connection:
        orders = connection.execute(query).all()
        fills = fills_by_order(connection, [order.id for order in orders])
    return [
        order_with_fills(AccountOrder, order, fills, cycle_id=order.cycle_id) for order in orders
    ]


def fills_page(
    engine: Engine, account_id: int, *, limit: int, before_id: int | None = None
) -> list[AccountFill]:
    """The account's `limit` newest fills with an id below `before_id`."""
    query = (
        select(FILL_TABLE, ORDER_TABLE.c.cycle_id, ORDER_TABLE.c.reason, ORDER_TABLE.c.confidence)
        .join(ORDER_TABLE, ORDER_TABLE.c.id == FILL_TABLE.c.order_id)
        .where(FILL_TABLE.c.account_id == account_id)
    )
    if before_id is not None:
        query = query.where(FILL_TABLE.c.id < before_id)
    query = query.order_by(FILL_TABLE.c.id.desc()).limit(limit)
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    return [
        AccountFill(
            fill_id=row.id,
            order_id=row.order_id,
            cycle_id=row.cycle_id,
            symbol=row.symbol,
            side=row.side,
            quantity=row.quantity,
            price=row.price,
            notional=row.notional,
            fees=row.fees,
            currency=row.currency,
            filled_at=row.filled_at,
            price_source=row.price_source,
            reason=row.reason,
            confidence=row.confidence,
        )
        for row in rows
    ]


def cycles_page(
    engine: Engine, account_id: int, *, limit: int, before_at: datetime | None = None
) -> list[AccountCycle]:
    """The account's `limit` latest cycles with a slot before `before_at`, with their counts."""
    query = select(CYCLE_TABLE).where(CYCLE_TABLE.c.account_id == account_id)
    if before_at is not None:
        check_utc("before_at", before_at)
        query = query.where(CYCLE_TABLE.c.slot_at < before_at)
    query = query.order_by(CYCLE_TABLE.c.slot_at.desc()).limit(limit)
    with engine.connect() as connection:
        cycles = connection.execute(query).all()
        ids = [cycle.id for cycle in cycles]
        counts = _order_counts(connection, ids) if ids else {}
    return [
        AccountCycle(
            cycle_id=cycle.id,
            slot_at=cycle.slot_at,
            status=CycleStatus(cycle.status),
            started_at=cycle.started_at,
            finished_at=cycle.finished_at,
            error_class=cycle.error_class,
            error_message=cycle.error_message,
            reason=cycle.reason,
            orders=counts.get(cycle.id, _NONE)[0],
            rejections=counts.get(cycle.id, _NONE)[1],
            fills=counts.get(cycle.id, _NONE)[2],
            usage=usage_of(cycle) if cycle.tokens_in is not None else None,
        )
        for cycle in cycles
    ]


def _order_counts(connection: Connection, cycle_ids: list[int]) -> dict[int, tuple[int, int, int]]:
    """(orders, rejections, fills) of each of `cycle_ids` that placed an order."""
    rejected = case((ORDER_TABLE.c.status == OrderStatus.REJECTED.value, 1), else_=0)
    orders = connection.execute(
        select(ORDER_TABLE.c.cycle_id, func.count(), func.sum(rejected))
        .where(ORDER_TABLE.c.cycle_id.in_(cycle_ids))
        .group_by(ORDER_TABLE.c.cycle_id)
    ).all()
    fills: dict[int, int] = dict(
        connection.execute(
            select(ORDER_TABLE.c.cycle_id, func.count())
            .join(FILL_TABLE, FILL_TABLE.c.order_id == ORDER_TABLE.c.id)
            .where(ORDER_TABLE.c.cycle_id.in_(cycle_ids))
            .group_by(ORDER_TABLE.c.cycle_id)
        ).all()
    )
    return {
        cycle_id: (int(placed), int(rejections or 0), int(fills.get(cycle_id, 0)))
        for cycle_id, placed, rejections in orders
    }


def last_slots(engine: Engine) -> dict[str, datetime]:
    """The latest cycle slot of each market that has one (an index seek per account)."""
    latest = (
        select(func.max(CYCLE_TABLE.c.slot_at))
        .where(CYCLE_TABLE.c.account_id == ACCOUNT_TABLE.c.id)
        .scalar_subquery()
    )
    with engine.connect() as connection:
        rows = connection.execute(select(ACCOUNT_TABLE.c.market, latest)).all()
    out: dict[str, datetime] = {}
    for market, at in rows:
        if at is not None and (market not in out or at > out[market]):
            out[market] = at
    return out
