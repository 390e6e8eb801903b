"""Orders: how one is written to the ledger (the order row, its fill, the cash and the position),
and how a cycle's orders are read back.

Internal to `openbell.store`: `Ledger` is made of `Orders` (with `Accounts` and `Cycles`), which
exposes `record_order`, `cycle_orders` and `recent_orders`. Each order is one transaction under an
idempotency key (`"{cycle_id}:{seq}"`, `idempotency_key`) that makes a retried call return the
stored outcome and change nothing; the write locks the account row first, so writers of one account
run one at a time and fill ids grow in commit order. The writes run inside that transaction (they
take its open `Session`); every read of stored orders goes through `read_orders` on a Core
`Connection` and turns the rows back into domain values, so a retried order returns exactly the
outcome recorded the first time. `cycle_orders` is the one read of a cycle's orders: the broker
replays a cycle run again from it, and the live daemon counts its rejections from what the run
placed.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import ColumnElement, Connection, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import (
    Fill,
    Order,
    Rejection,
    RejectReason,
    Side,
    check_utc,
    moved_position,
)
from openbell.markets.errors import LedgerBreach
from openbell.store.core_tables import FILL_TABLE, ORDER_TABLE
from openbell.store.records import OrderStatus, RecordedOrder
from openbell.store.rows import LedgerTables, get_account, row_id

if TYPE_CHECKING:
    from sqlmodel import Session

    from openbell.store.tables import AccountRow


def idempotency_key(cycle_id: int, seq: int) -> str:
    """The key that makes recording order `seq` of cycle `cycle_id` happen at most once."""
    return f"{cycle_id}:{seq}"


class Orders(LedgerTables):
    """The orders of the ledger: recorded once each, with their outcomes, and read back."""

    def record_order(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        outcome: Fill | Rejection,
        target_weight: Decimal | None = None,
    ) -> RecordedOrder:
        """Record order `seq` of a cycle with its outcome, in one transaction.

        A fill also moves the account's cash by `fill.cash_delta` and updates the position
        (quantity, average cost). If the idempotency key `"{cycle_id}:{seq}"` exists, the stored
        outcome is returned (`created=False`) and nothing changes. Raises `ValueError` when the
        outcome does not belong to the order or account, `LedgerBreach` when a fill would
        make cash or a holding negative, and `ClaimLost` when this ledger claimed the cycle for a
        run that no longer holds it (`LedgerTables._check_fences`).
        """
        from openbell.store.tables import CycleRow  # the ORM, where a row object is needed

        key = idempotency_key(cycle_id, seq)
        try:
            with self._write() as session:
                cycle = session.get(CycleRow, cycle_id)
                if cycle is None:
                    raise ValueError(f"no cycle {cycle_id}")
                account = get_account(session, cycle.account_id, lock=True)
                self._check_fences(session.connection(), [cycle_id])
                stored = stored_order(session.connection(), key)
                if stored is not None:
                    return stored
                check_outcome(row_id(account.id), account.market, account.currency, order, outcome)
                return insert_order(
                    session, account, cycle_id, seq, key, order, outcome, target_weight
                )
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_order(connection, key)
            if stored is None:
                raise
            return stored

    def cycle_orders(self, cycle_id: int) -> list[RecordedOrder]:
        """Every order recorded in cycle `cycle_id`, with its outcome (`created=False`), in `seq`
        order."""
        with self._engine.connect() as connection:
            return read_orders(connection, ORDER_TABLE.c.cycle_id == cycle_id)

    def recent_orders(self, account_id: int, before: datetime, limit: int) -> list[RecordedOrder]:
        """The account's latest `limit` orders placed before `before`, newest first, with their
        outcomes (point-in-time: an order placed at `before` or later is not among them)."""
        check_utc("before", before)
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        placed_before = (ORDER_TABLE.c.account_id == account_id) & (
            ORDER_TABLE.c.placed_at < before
        )
        with self._engine.connect() as connection:
            return read_orders(connection, placed_before, newest_first=True, limit=limit)


def check_outcome(
    account_id: int, market: str, currency: str, order: Order, outcome: Fill | Rejection
) -> None:
    """`ValueError` when `outcome` does not belong to `order`, or `order` to the account (of
    `market`, holding `currency`)."""
    if order.instrument.market != market:
        raise ValueError(
            f"order for {order.instrument.symbol} ({order.instrument.market}) "
            f"on account {account_id} in market {market}"
        )
    if not isinstance(outcome, Fill):
        return
    if (outcome.symbol, outcome.side) != (order.instrument.symbol, order.side):
        raise ValueError(
            f"fill {outcome.side} {outcome.symbol} does not match order "
            f"{order.side} {order.instrument.symbol}"
        )
    if outcome.quantity > order.quantity:
        raise ValueError(f"fill quantity {outcome.quantity} exceeds order {order.quantity}")
    if outcome.currency != currency:
        raise ValueError(f"fill in {outcome.currency} on a {currency} account")


def insert_order(
    session: Session,
    account: AccountRow,
    cycle_id: int,
    seq: int,
    key: str,
    order: Order,
    outcome: Fill | Rejection,
    target_weight: Decimal | None,
) -> RecordedOrder:
    from openbell.store.tables import FillRow, OrderRow

    account_id = row_id(account.id)
    rejected = isinstance(outcome, Rejection)
    row = OrderRow(
        cycle_id=cycle_id,
        account_id=account_id,
        seq=seq,
        idempotency_key=key,
        symbol=order.instrument.symbol,
        side=order.side.value,
        quantity=order.quantity,
        target_weight=target_weight,
        reason=order.reason,
        confidence=order.confidence,
        placed_at=order.placed_at,
        status=(OrderStatus.REJECTED if rejected else OrderStatus.FILLED).value,
        reject_reason=outcome.reason.value if isinstance(outcome, Rejection) else None,
        reject_message=outcome.message if isinstance(outcome, Rejection) else None,
        rejected_at=outcome.at if isinstance(outcome, Rejection) else None,
    )
    session.add(row)
    session.flush()
    order_id = row_id(row.id)
    facts = _order_facts(row)
    if isinstance(outcome, Rejection):
        return RecordedOrder(
            order_id=order_id, idempotency_key=key, outcome=outcome, created=True, **facts
        )
    cash = account.cash + outcome.cash_delta
    if cash < 0:
        raise LedgerBreach(
            f"account {account_id}: fill {key} would leave cash at {cash} {account.currency}"
        )
    account.cash = cash
    apply_to_position(session, account_id, outcome)
    fill_row = FillRow(
        order_id=order_id,
        account_id=account_id,
        idempotency_key=key,
        symbol=outcome.symbol,
        side=outcome.side.value,
        quantity=outcome.quantity,
        price=outcome.price,
        notional=outcome.notional,
        fees=outcome.fees,
        currency=outcome.currency,
        filled_at=outcome.filled_at,
        price_source=outcome.price_source,
    )
    session.add(fill_row)
    session.flush()
    return RecordedOrder(
        order_id=order_id,
        idempotency_key=key,
        outcome=outcome,
        created=True,
        fill_id=row_id(fill_row.id),
        **facts,
    )


class _OrderFacts(TypedDict):
    seq: int
    symbol: str
    side: Side
    quantity: Decimal
    target_weight: Decimal | None
    placed_at: datetime


def _order_facts(row: Any) -> _OrderFacts:
    return _OrderFacts(
        seq=row.seq,
        symbol=row.symbol,
        side=Side(row.side),
        quantity=row.quantity,
        target_weight=row.target_weight,
        placed_at=row.placed_at,
    )


def apply_to_position(session: Session, account_id: int, fill: Fill) -> None:
    """Move the account's `position` row by `fill` (`moved_position`): long or short, deleted when
    it reaches zero; `LedgerBreach` for a fill that would cross zero."""
    from openbell.store.tables import PositionRow

    position = session.get(PositionRow, (account_id, fill.symbol), with_for_update=True)
    held = position.quantity if position is not None else Decimal(0)
    cost = position.cost if position is not None else Decimal(0)
    try:
        quantity, cost = moved_position(held, cost, fill)
    except ValueError as exc:
        raise LedgerBreach(f"account {account_id}: {exc}") from None
    if quantity == 0:
        if position is not None:
            session.delete(position)
        return
    if position is None:
        position = PositionRow(
            account_id=account_id,
            symbol=fill.symbol,
            quantity=quantity,
            cost=cost,
            updated_at=fill.filled_at,
        )
        session.add(position)
        return
    position.quantity = quantity
    position.cost = cost
    position.updated_at = fill.filled_at


def stored_order(connection: Connection, key: str) -> RecordedOrder | None:
    """The order stored under idempotency `key`, with its outcome; None if there is none."""
    found = read_orders(connection, ORDER_TABLE.c.idempotency_key == key)
    return found[0] if found else None


def read_orders(
    connection: Connection,
    where: ColumnElement[bool],
    *,
    newest_first: bool = False,
    limit: int | None = None,
) -> list[RecordedOrder]:
    """The orders matching `where`, with their outcomes, as `RecordedOrder(created=False)`: in
    `seq` order, or (`newest_first`) latest placed first; at most `limit`.

    Two Core queries (the orders, then the first fill of each filled one), not an ORM round trip
    per order: cycles read their orders back on the hot path.
    """
    order_by = (
        (ORDER_TABLE.c.placed_at.desc(), ORDER_TABLE.c.id.desc())
        if newest_first
        else (ORDER_TABLE.c.seq, ORDER_TABLE.c.id)
    )
    query = select(ORDER_TABLE).where(where).order_by(*order_by)
    if limit is not None:
        query = query.limit(limit)
    orders = connection.execute(query).all()
    if not orders:
        return []
    fills: dict[int, Any] = {}
    ids = [order.id for order in orders if order.status != OrderStatus.REJECTED.value]
    if ids:
        for fill in connection.execute(
            select(FILL_TABLE).where(FILL_TABLE.c.order_id.in_(ids)).order_by(FILL_TABLE.c.id)
        ):
            fills.setdefault(fill.order_id, fill)
    return [_recorded(order, fills.get(order.id)) for order in orders]


def _recorded(row: Any, fill: Any | None) -> RecordedOrder:
    key = row.idempotency_key
    order_id = row_id(row.id)
    facts = _order_facts(row)
    if row.status == OrderStatus.REJECTED.value:
        if row.reject_reason is None:
            raise LedgerBreach(f"order {order_id} ({key}) is rejected without a reason")
        rejection = Rejection(
            reason=RejectReason(row.reject_reason),
            message=row.reject_message or "",
            at=row.rejected_at or row.placed_at,
        )
        return RecordedOrder(
            order_id=order_id, idempotency_key=key, outcome=rejection, created=False, **facts
        )
    if fill is None:
        raise LedgerBreach(f"order {order_id} ({key}) is marked filled but has no fill")
    return RecordedOrder(
        order_id=order_id,
        idempotency_key=key,
        outcome=to_fill(fill),
        created=False,
        fill_id=fill.id,
        **facts,
    )


def to_fill(row: Any) -> Fill:
    """The fill of a `fill` row (an ORM row or a Core one)."""
    return Fill(
        symbol=row.symbol,
        side=Side(row.side),
        quantity=row.quantity,
        price=row.price,
        notional=row.notional,
        fees=row.fees,
        currency=row.currency,
        filled_at=row.filled_at,
        price_source=row.price_source,
    )
