"""How a NAV snapshot is written: cash plus every holding valued at its mark, with the marks.

Internal to `openbell.store`: these functions run inside the `Ledger`'s transaction, as prebuilt
Core statements on its connection (every cycle and every session close writes a snapshot, so this
is on the replay's hot path), and turn the stored rows back into `NavSnapshot` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Connection, Table, bindparam, func, select

from openbell.markets.domain import check_decimal
from openbell.store.postings import row_id
from openbell.store.records import NavMark, NavSnapshot, SnapshotKind
from openbell.store.tables import AccountRow, FillRow, NavMarkRow, NavSnapshotRow, PositionRow


def locked_cash(connection: Connection, account_id: int) -> Decimal:
    """The account's cash, its row locked (on Postgres) for the rest of the transaction."""
    cash = connection.execute(_CASH, {"account": account_id}).scalar_one_or_none()
    if cash is None:
        raise ValueError(f"no account {account_id}")
    return Decimal(cash)


def insert_snapshot(
    connection: Connection,
    account_id: int,
    cash: Decimal,
    at: datetime,
    kind: SnapshotKind,
    marks: Mapping[str, Decimal],
) -> NavSnapshot:
    """Write the snapshot of (account, `at`, `kind`) with `cash` and the held positions at
    `marks` (which must price every holding)."""
    valued: dict[str, NavMark] = {}
    for position in connection.execute(_POSITIONS, {"account": account_id}):
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
            value=position.quantity * price,
        )
    positions_value = sum((mark.value for mark in valued.values()), Decimal(0))
    last_fill_id = connection.execute(_LAST_FILL, {"account": account_id}).scalar_one()
    values = {
        "account_id": account_id,
        "at": at,
        "kind": kind.value,
        "cash": cash,
        "positions_value": positions_value,
        "nav": cash + positions_value,
        "last_fill_id": last_fill_id,
    }
    inserted = connection.execute(_SNAPSHOT.insert(), values).inserted_primary_key
    snapshot_id = row_id(None if inserted is None else inserted[0])
    if valued:
        connection.execute(
            _MARK.insert(),
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
        marks=dict(marks),
    )


_ACCOUNT: Final[Table] = AccountRow.__table__  # type: ignore[attr-defined]  # set by SQLModel
_POSITION: Final[Table] = PositionRow.__table__  # type: ignore[attr-defined]
_FILL: Final[Table] = FillRow.__table__  # type: ignore[attr-defined]
_SNAPSHOT: Final[Table] = NavSnapshotRow.__table__  # type: ignore[attr-defined]
_MARK: Final[Table] = NavMarkRow.__table__  # type: ignore[attr-defined]
_CASH: Final = (
    select(_ACCOUNT.c.cash).where(_ACCOUNT.c.id == bindparam("account")).with_for_update()
)
_POSITIONS: Final = (
    select(_POSITION.c.symbol, _POSITION.c.quantity)
    .where(_POSITION.c.account_id == bindparam("account"))
    .order_by(_POSITION.c.symbol)
)
_LAST_FILL: Final = select(func.max(_FILL.c.id)).where(_FILL.c.account_id == bindparam("account"))
_FIND: Final = select(_SNAPSHOT).where(
    _SNAPSHOT.c.account_id == bindparam("account"),
    _SNAPSHOT.c.at == bindparam("at"),
    _SNAPSHOT.c.kind == bindparam("kind"),
)
_MARKS: Final = select(_MARK.c.symbol, _MARK.c.quantity, _MARK.c.price, _MARK.c.value).where(
    _MARK.c.snapshot_id == bindparam("snapshot")
)
