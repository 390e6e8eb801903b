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

from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
)
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
        NAV_SNAPSHOT_TABLE,
        (
            NAV_SNAPSHOT_TABLE.c.at,
            NAV_SNAPSHOT_TABLE.c.kind,
            NAV_SNAPSHOT_TABLE.c.cash,
            NAV_SNAPSHOT_TABLE.c.positions_value,
            NAV_SNAPSHOT_TABLE.c.nav,
        ),
        (NAV_SNAPSHOT_TABLE.c.at, NAV_SNAPSHOT_TABLE.c.kind),
    ),
    "orders": (
        ORDER_TABLE,
        (
            ORDER_TABLE.c.id,
            ORDER_TABLE.c.cycle_id,
            ORDER_TABLE.c.seq,
            ORDER_TABLE.c.symbol,
            ORDER_TABLE.c.side,
            ORDER_TABLE.c.quantity,
            ORDER_TABLE.c.target_weight,
            ORDER_TABLE.c.confidence,
            ORDER_TABLE.c.placed_at,
            ORDER_TABLE.c.status,
            ORDER_TABLE.c.reject_reason,
            ORDER_TABLE.c.reason,
        ),
        (ORDER_TABLE.c.id,),
    ),
    "fills": (
        FILL_TABLE,
        (
            FILL_TABLE.c.id,
            FILL_TABLE.c.order_id,
            FILL_TABLE.c.symbol,
            FILL_TABLE.c.side,
            FILL_TABLE.c.quantity,
            FILL_TABLE.c.price,
            FILL_TABLE.c.notional,
            FILL_TABLE.c.fees,
            FILL_TABLE.c.currency,
            FILL_TABLE.c.filled_at,
            FILL_TABLE.c.price_source,
        ),
        (FILL_TABLE.c.id,),
    ),
    "cycles": (
        CYCLE_TABLE,
        (
            CYCLE_TABLE.c.id,
            CYCLE_TABLE.c.slot_at,
            CYCLE_TABLE.c.status,
            CYCLE_TABLE.c.started_at,
            CYCLE_TABLE.c.finished_at,
            CYCLE_TABLE.c.error_class,
            CYCLE_TABLE.c.reason,
        ),
        (CYCLE_TABLE.c.slot_at,),
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
        select(ACCOUNT_TABLE.c.id, AGENT_TABLE.c.name, ACCOUNT_TABLE.c.market, *columns)
        .select_from(row_type)
        .join(ACCOUNT_TABLE, ACCOUNT_TABLE.c.id == row_type.c.account_id)
        .join(AGENT_TABLE, AGENT_TABLE.c.id == ACCOUNT_TABLE.c.agent_id)
    )
    filters: list[ColumnElement[bool]] = []
    if market is not None:
        filters.append(ACCOUNT_TABLE.c.market == market)
    if agent is not None:
        filters.append(AGENT_TABLE.c.name == agent)
    if filters:
        query = query.where(and_(*filters))
    query = query.order_by(ACCOUNT_TABLE.c.market, AGENT_TABLE.c.name, *ordering)
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
