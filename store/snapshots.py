"""How a NAV snapshot is written: cash plus every holding valued at its mark, with the marks.

A holding's value is `quantity * mark` by the money rule (`round_money`: the currency's minor unit,
ties half-up), the same value the agent's `Book` shows, so the NAV an agent is shown at a slot is
the NAV stored for it; the positions value is the sum of those values and is not rounded again.

Internal to `openbell.store`: these functions run inside the `Ledger`'s transaction, as prebuilt
Core statements on its connection (every cycle and every session close writes a snapshot, so this
is on the replay's hot path), and turn the stored rows back into `NavSnapshot` records.
`POSITIONS`, the read of an account's holdings, is also the ledger's in `account_state`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Connection, bindparam, func, select

from openbell.markets.domain import Money, check_decimal, round_money
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    CORPORATE_ACTION_TABLE,
    FILL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    POSITION_TABLE,
)
from openbell.store.records import NavMark, NavSnapshot, SnapshotKind
from openbell.store.rows import inserted_id


def locked_cash(connection: Connection, account_id: int) -> Money:
    """The account's cash, its row locked (on Postgres) for the rest of the transaction."""
    row = connection.execute(_CASH, {"account": account_id}).one_or_none()
    if row is None:
        raise ValueError(f"no account {account_id}")
    return Money(amount=Decimal(row.cash), currency=row.currency)


def insert_snapshot(
    connection: Connection,
    account_id: int,
    cash: Money,
    at: datetime,
    kind: SnapshotKind,
    marks: Mapping[str, Decimal],
) -> NavSnapshot:
    """Write the snapshot of (account, `at`, `kind`) with `cash` and the held positions at
    `marks` (which must price every holding), each valued by the money rule."""
    valued: dict[str, NavMark] = {}
    for position in connection.execute(POSITIONS, {"account": account_id}):
        if position.quantity == 0:
            continue
        price = marks.get(position.symbol)
        if price is None:
            raise ValueError(f"account {account_id}: no mark for held {position.symbol} at {at}")
        check_decimal(f"mark of {position.symbol}", price, positive=True)
        valued[position.symbol] = NavMark(
            symbol=position.symbol,
            quantity=position.quantity,
            price=price,
            value=round_money(position.quantity * price, cash.currency),
        )
    positions_value = sum((mark.value for mark in valued.values()), Decimal(0))
    last_fill_id = connection.execute(_LAST_FILL, {"account": account_id}).scalar_one()
    last_action_id = connection.execute(_LAST_ACTION, {"account": account_id}).scalar_one()
    values = {
        "account_id": account_id,
        "at": at,
        "kind": kind.value,
        "cash": cash.amount,
        "positions_value": positions_value,
        "nav": cash.amount + positions_value,
        "last_fill_id": last_fill_id,
        "last_action_id": last_action_id,
    }
    snapshot_id = inserted_id(connection.execute(NAV_SNAPSHOT_TABLE.insert(), values))
    if valued:
        connection.execute(
            NAV_MARK_TABLE.insert(),
            [
                {
                    "snapshot_id": snapshot_id,
                    "symbol": mark.symbol,
                    "quantity": mark.quantity,
                    "price": mark.price,
                    "value": mark.value,
                }
                for mark in valued.values()
            ],
        )
    return _to_snapshot(snapshot_id, values, valued)


def stored_snapshot(
    connection: Connection, account_id: int, at: datetime, kind: SnapshotKind
) -> NavSnapshot | None:
    """The snapshot of (account, `at`, `kind`) with its marks, if one was written."""
    row = connection.execute(
        _FIND, {"account": account_id, "at": at, "kind": kind.value}
    ).one_or_none()
    if row is None:
        return None
    marks = {
        mark.symbol: NavMark(
            symbol=mark.symbol, quantity=mark.quantity, price=mark.price, value=mark.value
        )
        for mark in connection.execute(_MARKS, {"snapshot": row.id})
    }
    return _to_snapshot(row.id, row._mapping, marks)


def _to_snapshot(
    snapshot_id: int, row: Mapping[Any, Any], marks: Mapping[str, NavMark]
) -> NavSnapshot:
    return NavSnapshot(
        snapshot_id=snapshot_id,
        account_id=row["account_id"],
        at=row["at"],
        kind=SnapshotKind(row["kind"]),
        cash=row["cash"],
        positions_value=row["positions_value"],
        nav=row["nav"],
        last_fill_id=row["last_fill_id"],
        last_action_id=row["last_action_id"],
        marks=dict(marks),
    )


_CASH: Final = (
    select(ACCOUNT_TABLE.c.cash, ACCOUNT_TABLE.c.currency)
    .where(ACCOUNT_TABLE.c.id == bindparam("account"))
    .with_for_update()
)
#: An account's positions (symbol, quantity, cost) by symbol; binds `account`.
POSITIONS: Final = (
    select(POSITION_TABLE.c.symbol, POSITION_TABLE.c.quantity, POSITION_TABLE.c.cost)
    .where(POSITION_TABLE.c.account_id == bindparam("account"))
    .order_by(POSITION_TABLE.c.symbol)
)
_LAST_FILL: Final = select(func.max(FILL_TABLE.c.id)).where(
    FILL_TABLE.c.account_id == bindparam("account")
)
_LAST_ACTION: Final = select(func.max(CORPORATE_ACTION_TABLE.c.id)).where(
    CORPORATE_ACTION_TABLE.c.account_id == bindparam("account")
)
_FIND: Final = select(NAV_SNAPSHOT_TABLE).where(
    NAV_SNAPSHOT_TABLE.c.account_id == bindparam("account"),
    NAV_SNAPSHOT_TABLE.c.at == bindparam("at"),
    NAV_SNAPSHOT_TABLE.c.kind == bindparam("kind"),
)
_MARKS: Final = select(
    NAV_MARK_TABLE.c.symbol,
    NAV_MARK_TABLE.c.quantity,
    NAV_MARK_TABLE.c.price,
    NAV_MARK_TABLE.c.value,
).where(NAV_MARK_TABLE.c.snapshot_id == bindparam("snapshot"))
