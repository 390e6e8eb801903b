"""Generic row helpers the store shares: assigned ids, the account row, the ledger's engine.

Internal to `openbell.store`. `row_id` and `inserted_id` read the id the database gave a row,
`get_account` loads (and locks, for a write) an account row, `dialect_insert` builds an insert that
can take `ON CONFLICT` clauses. `LedgerTables` holds the engine and its `BEGIN IMMEDIATE` writer
with their transactions, as Core connections (`_reading`, `_writing`) or an ORM session (`_write`;
the ORM and the row classes are imported where a row object is needed, so that a command whose
statements are all Core never loads them, `core_tables.py`): the base of the parts `Ledger` is made
of (`accounts.py`, `cycles.py`, `orders.py`), so that each part opens its own transactions the same
way. It also holds the ledger's fences: the cycles it claimed, each with the run it claimed it for
(`cycles.py` sets and clears them); a write of such a cycle (an order, trace rows, the slot
snapshot) checks in its transaction that the cycle is still `claimed` by that run (`_check_fences`,
`check_fenced`), or raises `ClaimLost` and writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, CursorResult, Engine, Table, bindparam, select
from sqlalchemy.dialects import sqlite

from openbell.markets.errors import ClaimLost
from openbell.store.core_tables import CYCLE_TABLE
from openbell.store.db import SQLITE_IMMEDIATE
from openbell.store.records import CycleStatus

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql
    from sqlmodel import Session

    from openbell.store.tables import AccountRow


def row_id(value: int | None) -> int:
    """`value`, the id of a stored row (a `RuntimeError` when the database assigned none)."""
    if value is None:
        raise RuntimeError("the database did not assign an id")
    return value


def inserted_id(result: CursorResult[Any]) -> int:
    """The id the database assigned to the row a Core single-row insert wrote."""
    inserted = result.inserted_primary_key
    return row_id(None if inserted is None else inserted[0])


def dialect_insert(connection: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    """An insert into `table` in the connection's dialect, which can take `ON CONFLICT` clauses
    (the store runs on SQLite and Postgres only)."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql  # not imported for a SQLite ledger

        return postgresql.insert(table)
    return sqlite.insert(table)


def get_account(session: Session, account_id: int, *, lock: bool = False) -> AccountRow:
    """The account row (locked for update with `lock`); `ValueError` when there is none."""
    from openbell.store.tables import AccountRow  # the ORM classes: where a row is needed

    account = session.get(AccountRow, account_id, with_for_update=lock)
    if account is None:
        raise ValueError(f"no account {account_id}")
    return account


class LedgerTables:
    """The ledger's tables on one engine (SQLite or Postgres), at the migrations' head."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})
        # The fences: cycle id -> the run that claimed it through this ledger (`Cycles`).
        self._fences: dict[int, str] = {}

    def _check_fences(self, connection: Connection, cycle_ids: Collection[int]) -> None:
        """Raise `ClaimLost` unless each of `cycle_ids` that this ledger claimed for a run is
        still `claimed` by that run, reading (and locking for update, on Postgres) the cycle rows
        inside the caller's write transaction: a peer's take-over waits for the write, or the
        write sees it. Cycles this ledger did not claim (a caller that owns its ledger) are not
        checked."""
        fences = self._fences_of(cycle_ids)
        if fences:
            rows = connection.execute(_FENCE, {"cycles": sorted(fences)}).all()
            check_fenced(fences, {row.id: row for row in rows})

    def _fences_of(self, cycle_ids: Collection[int]) -> dict[int, str]:
        """The fenced cycles among `cycle_ids`, with the run each was claimed for."""
        return {
            cycle_id: holder
            for cycle_id in cycle_ids
            if (holder := self._fences.get(cycle_id)) is not None
        }

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """An ORM session in a write transaction (`_writing` is the Core one)."""
        from sqlmodel import Session  # the ORM: only where a row object is needed

        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection in a read transaction, for Core statements."""
        with self._engine.begin() as connection:
            yield connection

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A connection in a write transaction (`BEGIN IMMEDIATE` on SQLite), for Core
        statements."""
        with self._writer.begin() as connection:
            yield connection


def check_fenced(fences: Mapping[int, str], rows: Mapping[int, Any]) -> None:
    """`ClaimLost` unless each cycle of `fences` has a row in `rows` (read, with its `status` and
    `claimed_by`, in the write's transaction) still `claimed` by the run its fence names."""
    for cycle_id, holder in sorted(fences.items()):
        row = rows.get(cycle_id)
        if row is None or row.status != _CLAIMED or row.claimed_by != holder:
            raise ClaimLost(cycle_id, holder)


_CLAIMED: Final = CycleStatus.CLAIMED.value
_FENCE: Final = (
    select(CYCLE_TABLE.c.id, CYCLE_TABLE.c.status, CYCLE_TABLE.c.claimed_by)
    .where(CYCLE_TABLE.c.id.in_(bindparam("cycles", expanding=True)))
    .order_by(CYCLE_TABLE.c.id)
    .with_for_update()
)
