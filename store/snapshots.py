"""How a NAV snapshot is written: cash plus every holding valued at its mark, with the marks.

Internal to `openbell.store`: these functions run inside the `Ledger`'s transaction and turn the
stored rows back into `NavSnapshot` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from sqlalchemy import func
from sqlmodel import Session, select

from openbell.markets.domain import check_decimal
from openbell.store.postings import row_id
from openbell.store.records import NavMark, NavSnapshot, SnapshotKind
from openbell.store.tables import AccountRow, FillRow, NavMarkRow, NavSnapshotRow, PositionRow


def insert_snapshot(
    session: Session,
    account: AccountRow,
    at: datetime,
    kind: SnapshotKind,
    marks: Mapping[str, Decimal],
) -> NavSnapshot:
    account_id = row_id(account.id)
    held = session.exec(select(PositionRow).where(PositionRow.account_id == account_id)).all()
    valued: dict[str, NavMark] = {}
    for position in sorted(held, key=lambda row: row.symbol):
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
    last_fill_id = session.exec(
        select(func.max(FillRow.id)).where(FillRow.account_id == account_id)
    ).one()
    row = NavSnapshotRow(
        account_id=account_id,
        at=at,
        kind=kind.value,
        cash=account.cash,
        positions_value=positions_value,
        nav=account.cash + positions_value,
        last_fill_id=last_fill_id,
    )
    session.add(row)
    session.flush()
    snapshot_id = row_id(row.id)
    for mark in valued.values():
        session.add(
            NavMarkRow(
                snapshot_id=snapshot_id,
                symbol=mark.symbol,
                quantity=mark.quantity,
                price=mark.price,
                value=mark.value,
            )
        )
    session.flush()
    return to_snapshot(row, valued)


def stored_snapshot(
    session: Session, account_id: int, at: datetime, kind: SnapshotKind
) -> NavSnapshot | None:
    row = session.exec(
        select(NavSnapshotRow).where(
            NavSnapshotRow.account_id == account_id,
            NavSnapshotRow.at == at,
            NavSnapshotRow.kind == kind.value,
        )
    ).first()
    if row is None:
        return None
    marks = session.exec(select(NavMarkRow).where(NavMarkRow.snapshot_id == row.id)).all()
    return to_snapshot(
        row,
        {
            mark.symbol: NavMark(
                symbol=mark.symbol, quantity=mark.quantity, price=mark.price, value=mark.value
            )
            for mark in marks
        },
    )


def to_snapshot(row: NavSnapshotRow, marks: Mapping[str, NavMark]) -> NavSnapshot:
    return NavSnapshot(
        snapshot_id=row_id(row.id),
        account_id=row.account_id,
        at=row.at,
        kind=SnapshotKind(row.kind),
        cash=row.cash,
        positions_value=row.positions_value,
        nav=row.nav,
        last_fill_id=row.last_fill_id,
        marks=dict(marks),
    )
