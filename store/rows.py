"""Generic row helpers the store shares: assigned ids, the account row, the ledger's engine.

Internal to `openbell.store`. `row_id` and `inserted_id` read the id the database gave a row,
`get_account` loads (and locks, for a write) an account row. `LedgerTables` holds the engine and
its `BEGIN IMMEDIATE` writer with their transactions: the base of the parts `Ledger` is made of
(`accounts.py`, `cycles.py`, `orders.py`), so that each part opens its own transactions the same
way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import CursorResult, Engine
from sqlmodel import Session

from openbell.store.db import SQLITE_IMMEDIATE
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


def get_account(session: Session, account_id: int, *, lock: bool = False) -> AccountRow:
    """The account row (locked for update with `lock`); `ValueError` when there is none."""
    account = session.get(AccountRow, account_id, with_for_update=lock)
    if account is None:
        raise ValueError(f"no account {account_id}")
    return account


class LedgerTables:
    """The ledger's tables on one engine (SQLite or Postgres), at the migrations' head."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self._engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session
