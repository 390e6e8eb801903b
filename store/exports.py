"""Ledger tables as rows for export: NAV snapshots, orders, fills and cycles, in stable columns.

This module owns the export shapes of the ledger: each table's column names and order (a contract
for outside tools) and a streaming query that yields its rows as tuples, joined with the account's
agent name and market. Values stay exact (`Decimal`, aware UTC `datetime`; `decimal_columns`
names the decimal ones); writers in `ops` choose their text. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import ColumnElement, Engine, Select, and_, select
from sqlmodel import col

from openbell.store.tables import AccountRow, AgentRow, CycleRow, FillRow, NavSnapshotRow, OrderRow
from openbell.store.types import ExactDecimal

#: A cell of an exported row: exact decimals and aware datetimes are kept as such.
Cell = str | int | bool | Decimal | datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportTable:
    """An exportable ledger table: its name and its columns, in their stable order."""

    name: str
    columns: tuple[str, ...]


_ACCOUNT_COLUMNS: Final = ("account_id", "agent", "market")
EXPORTS: Final[dict[str, ExportTable]] = {
    "nav": ExportTable(
        name="nav",
        columns=(*_ACCOUNT_COLUMNS, "at", "kind", "cash", "positions_value", "nav"),
    ),
    "orders": ExportTable(
        name="orders",
        columns=(
            *_ACCOUNT_COLUMNS,
            "order_id",
            "cycle_id",
            "seq",
            "symbol",
            "side",
            "quantity",
            "target_weight",
            "confidence",
            "placed_at",
            "status",
            "reject_reason",
            "reason",
        ),
    ),
    "fills": ExportTable(
        name="fills",
        columns=(
            *_ACCOUNT_COLUMNS,
            "fill_id",
            "order_id",
            "symbol",
            "side",
            "quantity",
            "price",
            "notional",
            "fees",
            "currency",
            "filled_at",
            "price_source",
        ),
    ),
    "cycles": ExportTable(
        name="cycles",
        columns=(
            *_ACCOUNT_COLUMNS,
            "cycle_id",
            "slot_at",
            "status",
            "started_at",
            "finished_at",
            "error_class",
            "reason",
        ),
    ),
}

_EXPORT_SOURCES: Final[dict[str, tuple[Any, tuple[Any, ...], Any]]] = {
    "nav": (
        NavSnapshotRow,
        (
            NavSnapshotRow.at,
            NavSnapshotRow.kind,
            NavSnapshotRow.cash,
            NavSnapshotRow.positions_value,
            NavSnapshotRow.nav,
        ),
        (NavSnapshotRow.at, NavSnapshotRow.kind),
    ),
    "orders": (
        OrderRow,
        (
            OrderRow.id,
            OrderRow.cycle_id,
            OrderRow.seq,
            OrderRow.symbol,
            OrderRow.side,
            OrderRow.quantity,
            OrderRow.target_weight,
            OrderRow.confidence,
            OrderRow.placed_at,
            OrderRow.status,
            OrderRow.reject_reason,
            OrderRow.reason,
        ),
        (OrderRow.id,),
    ),
    "fills": (
        FillRow,
        (
            FillRow.id,
            FillRow.order_id,
            FillRow.symbol,
            FillRow.side,
            FillRow.quantity,
            FillRow.price,
            FillRow.notional,
            FillRow.fees,
            FillRow.currency,
            FillRow.filled_at,
            FillRow.price_source,
        ),
        (FillRow.id,),
    ),
    "cycles": (
        CycleRow,
        (
            CycleRow.id,
            CycleRow.slot_at,
            CycleRow.status,
            CycleRow.started_at,
            CycleRow.finished_at,
            CycleRow.error_class,
            CycleRow.reason,
        ),
        (CycleRow.slot_at,),
    ),
}


def export_rows(
    engine: Engine,
    table: str,
    *,
    market: str | None = None,
    agent: str | None = None,
    batch: int = 2000,
) -> Iterator[tuple[Cell, ...]]:
    """Stream the rows of export `table` ("nav", "orders", "fills", "cycles") in
    `EXPORTS[table].columns` order, ordered by market, agent, then time (or id).

    Decimals stay `Decimal` and instants aware UTC `datetime`s; the writer decides their text.
    """
    if table not in EXPORTS:
        raise ValueError(f"unknown export {table!r}; known: {', '.join(EXPORTS)}")
    row_type, columns, ordering = _EXPORT_SOURCES[table]
    query: Select[Any] = (
        select(col(AccountRow.id), col(AgentRow.name), col(AccountRow.market), *columns)
        .select_from(row_type)
        .join(AccountRow, col(AccountRow.id) == row_type.account_id)
        .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
    )
    filters: list[ColumnElement[bool]] = []
    if market is not None:
        filters.append(col(AccountRow.market) == market)
    if agent is not None:
        filters.append(col(AgentRow.name) == agent)
    if filters:
        query = query.where(and_(*filters))
    query = query.order_by(col(AccountRow.market), col(AgentRow.name), *ordering)
    with engine.connect() as connection:
        result = connection.execution_options(yield_per=batch).execute(query)
        for row in result:
            yield tuple(row)


def export_columns(table: str) -> Sequence[str]:
    """The stable column names of export `table`."""
    return EXPORTS[table].columns


def decimal_columns(table: str) -> frozenset[str]:
    """The columns of export `table` that hold exact decimals (money, quantities, prices, weights):
    those stored as `ExactDecimal`."""
    _row_type, sources, _ordering = _EXPORT_SOURCES[table]
    names = EXPORTS[table].columns[len(_ACCOUNT_COLUMNS) :]
    return frozenset(
        name
        for name, source in zip(names, sources, strict=True)
        if isinstance(source.type, ExactDecimal)
    )
