"""An account's slot snapshots over a window, each with the holdings it valued.

This module owns that read, for the factor attribution (`openbell.ops.evaluation.attribution`):
every `slot` NAV snapshot of one account with `start <= at < end` (a `None` side is open), oldest
first, with its marks (symbol, quantity, mark price, value) in symbol order, read in two queries.
Money stays `Decimal`; nothing here computes a statistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select

from openbell.markets.domain import check_utc
from openbell.store.core_tables import NAV_MARK_TABLE, NAV_SNAPSHOT_TABLE
from openbell.store.queries import HoldingValue, NavRow
from openbell.store.records import SnapshotKind


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotHoldings:
    """One slot snapshot of an account (NAV, cash, positions' value) and what it held."""

    snapshot: NavRow
    holdings: tuple[HoldingValue, ...]


def snapshot_holdings(
    engine: Engine,
    account_id: int,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[SnapshotHoldings]:
    """The account's slot snapshots in `[start, end)` with their holdings, oldest first."""
    clauses = [
        NAV_SNAPSHOT_TABLE.c.account_id == account_id,
        NAV_SNAPSHOT_TABLE.c.kind == SnapshotKind.SLOT.value,
    ]
    if start is not None:
        check_utc("start", start)
        clauses.append(NAV_SNAPSHOT_TABLE.c.at >= start)
    if end is not None:
        check_utc("end", end)
        clauses.append(NAV_SNAPSHOT_TABLE.c.at < end)
    snapshots = (
        select(
            NAV_SNAPSHOT_TABLE.c.id,
            NAV_SNAPSHOT_TABLE.c.at,
            NAV_SNAPSHOT_TABLE.c.nav,
            NAV_SNAPSHOT_TABLE.c.cash,
            NAV_SNAPSHOT_TABLE.c.positions_value,
        )
        .where(*clauses)
        .order_by(NAV_SNAPSHOT_TABLE.c.at)
    )
    with engine.connect() as connection:
        rows = connection.execute(snapshots).all()
        ids = [int(row[0] or 0) for row in rows]
        marks = connection.execute(
            select(
                NAV_MARK_TABLE.c.snapshot_id,
                NAV_MARK_TABLE.c.symbol,
                NAV_MARK_TABLE.c.quantity,
                NAV_MARK_TABLE.c.price,
                NAV_MARK_TABLE.c.value,
            )
            .join(NAV_SNAPSHOT_TABLE, NAV_SNAPSHOT_TABLE.c.id == NAV_MARK_TABLE.c.snapshot_id)
            .where(*clauses)
            .order_by(NAV_MARK_TABLE.c.snapshot_id, NAV_MARK_TABLE.c.symbol)
        ).all()
    held: dict[int, list[HoldingValue]] = {snapshot_id: [] for snapshot_id in ids}
    for snapshot_id, symbol, quantity, price, value in marks:
        held[snapshot_id].append(
            HoldingValue(symbol=symbol, quantity=quantity, price=price, value=value)
        )
    return [
        SnapshotHoldings(
            snapshot=NavRow(at=at, nav=nav, cash=cash, positions_value=positions_value),
            holdings=tuple(held[int(snapshot_id or 0)]),
        )
        for snapshot_id, at, nav, cash, positions_value in rows
    ]
