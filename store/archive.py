"""The ledger's tables as an archive reads them: every column of every row that a season's record,
its chains and its figures need, in id order, for `openbell season export`.

Reads only. `ARCHIVE_TABLES` names the tables and their columns (the stored columns, in the
table's order); `archive_rows` streams one table's rows as tuples with their exact values
(`Decimal`, aware UTC `datetime`, `date`), restricted to some accounts when asked (a season's).
`column_kinds` says which columns are decimals, instants, dates, integers and booleans, for a
writer to choose its types. The chains' heads are `chain_heads`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Literal

from sqlalchemy import Boolean, Date, Engine, Integer, Select, Table, select

from openbell.store.chain import chain_heads as _chain_heads
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    BORROW_FEE_TABLE,
    CORPORATE_ACTION_TABLE,
    CYCLE_DIGEST_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    TRACE_TABLE,
)
from openbell.store.types import ExactDecimal, UtcDateTime

#: A stored value as an archive holds it.
Value = str | int | bool | Decimal | datetime | date | None
ColumnKind = Literal["decimal", "instant", "date", "integer", "boolean", "text"]

_TABLES: Final[dict[str, Table]] = {
    table.name: table
    for table in (
        AGENT_TABLE,
        ACCOUNT_TABLE,
        CYCLE_TABLE,
        ORDER_TABLE,
        FILL_TABLE,
        MARGIN_CALL_TABLE,
        TRACE_TABLE,
        NAV_SNAPSHOT_TABLE,
        NAV_MARK_TABLE,
        CORPORATE_ACTION_TABLE,
        BORROW_FEE_TABLE,
        CYCLE_DIGEST_TABLE,
    )
}
#: The archived tables, in the order they are written, each with its columns.
ARCHIVE_TABLES: Final[dict[str, tuple[str, ...]]] = {
    name: tuple(column.name for column in table.columns) for name, table in _TABLES.items()
}


def column_kinds(table: str) -> dict[str, ColumnKind]:
    """The kind of each column of `table`."""
    kinds: dict[str, ColumnKind] = {}
    for column in _TABLES[table].columns:
        kind = column.type
        if isinstance(kind, ExactDecimal):
            kinds[column.name] = "decimal"
        elif isinstance(kind, UtcDateTime):
            kinds[column.name] = "instant"
        elif isinstance(kind, Date):
            kinds[column.name] = "date"
        elif isinstance(kind, Boolean):
            kinds[column.name] = "boolean"
        elif isinstance(kind, Integer):
            kinds[column.name] = "integer"
        else:
            kinds[column.name] = "text"
    return kinds


def archive_rows(
    engine: Engine, table: str, account_ids: Collection[int] | None = None
) -> Iterator[tuple[Value, ...]]:
    """The rows of `table` (columns as `ARCHIVE_TABLES` lists them), in key order, of the
    accounts `account_ids` only when given (None: every row)."""
    with engine.connect() as connection:
        result = connection.execution_options(yield_per=5000).execute(_query(table, account_ids))
        for row in result:
            yield tuple(row)


def chain_heads(engine: Engine, account_ids: Collection[int]) -> dict[int, tuple[int, str]]:
    """Each account's last link `(seq, digest)` (accounts without one are left out)."""
    with engine.connect() as connection:
        return _chain_heads(connection, account_ids)


def ledger_accounts(engine: Engine) -> list[int]:
    """Every account's id, in order."""
    with engine.connect() as connection:
        return list(
            connection.execute(select(ACCOUNT_TABLE.c.id).order_by(ACCOUNT_TABLE.c.id)).scalars()
        )


def _query(name: str, account_ids: Collection[int] | None) -> Select[Any]:
    table = _TABLES[name]
    query = select(*table.columns).order_by(*table.primary_key.columns)
    if account_ids is None:
        return query
    ids = sorted(account_ids)
    if name == "agent":
        return query.where(
            table.c.id.in_(select(ACCOUNT_TABLE.c.agent_id).where(ACCOUNT_TABLE.c.id.in_(ids)))
        )
    if name == "account":
        return query.where(table.c.id.in_(ids))
    if name == "trace":
        return query.where(
            table.c.cycle_id.in_(select(CYCLE_TABLE.c.id).where(CYCLE_TABLE.c.account_id.in_(ids)))
        )
    if name == "nav_mark":
        return query.where(
            table.c.snapshot_id.in_(
                select(NAV_SNAPSHOT_TABLE.c.id).where(NAV_SNAPSHOT_TABLE.c.account_id.in_(ids))
            )
        )
    return query.where(table.c.account_id.in_(ids))
