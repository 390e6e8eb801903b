"""The live daemon's bookkeeping of cycles and accounts beside the ledger's trading writes.

This module owns `CycleBook`: the questions and the few guarded updates a long-running daemon needs
to recover and to stop cleanly: which claims are stale (their lease ended) or held by one run,
turning such a claim into `interrupted` atomically (only while it is still `claimed`, and only if
its lease has ended or it is held by the caller, so two daemons never both act on one cycle),
which slots of an account already have a cycle, when an account last had one, and pausing an
account whose ledger fails verification. Orders, fills and cash stay the `Ledger`'s alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import Engine, func, update
from sqlmodel import Session, col, select

from openbell.markets.domain import check_utc
from openbell.store.cycles import cycle_record
from openbell.store.db import SQLITE_IMMEDIATE
from openbell.store.postings import row_id
from openbell.store.records import CycleRecord, CycleStatus
from openbell.store.tables import AccountRow, CycleRow

#: The reason stored on a cycle that a stopping or recovering daemon could not complete.
INTERRUPTED_REASON = "interrupted"


class CycleBook:
    """Claims, recovery and account pauses of the ledger on `engine` (SQLite or Postgres)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        bind = self._writer if write else self._engine
        with Session(bind, expire_on_commit=False) as session, session.begin():
            yield session

    def claims(
        self, *, expired_at: datetime | None = None, held_by: str | None = None
    ) -> list[CycleRecord]:
        """Cycles still `claimed`: with a lease ended before `expired_at`, and/or held by
        `held_by`; oldest slot first."""
        query = select(CycleRow).where(col(CycleRow.status) == CycleStatus.CLAIMED.value)
        if expired_at is not None:
            check_utc("expired_at", expired_at)
            query = query.where(col(CycleRow.lease_until) < expired_at)
        if held_by is not None:
            query = query.where(col(CycleRow.claimed_by) == held_by)
        with self._session() as session:
            rows = session.exec(query.order_by(col(CycleRow.slot_at), col(CycleRow.id))).all()
        return [cycle_record(row) for row in rows]

    def expire_claims(self, now: datetime, *, except_holder: str) -> int:
        """End the lease (at `now`) of every `claimed` cycle not held by `except_holder`; how many.

        For a daemon that knows every other holder is dead (the single daemon of a SQLite file),
        so that the ordinary claim takes their cycles over.
        """
        check_utc("now", now)
        with self._session(write=True) as session:
            ended = session.execute(
                update(CycleRow)
                .where(
                    col(CycleRow.status) == CycleStatus.CLAIMED.value,
                    col(CycleRow.claimed_by) != except_holder,
                    col(CycleRow.lease_until) >= now,
                )
                .values(lease_until=now - timedelta(microseconds=1))
                .returning(col(CycleRow.id))
            ).all()
        return len(ended)

    def interrupt(
        self,
        cycle_id: int,
        now: datetime,
        *,
        expired_at: datetime | None = None,
        held_by: str | None = None,
    ) -> bool:
        """Mark a cycle still `claimed` as `interrupted`; True if this call did it.

        Guarded: its lease must have ended before `expired_at`, or it must be held by `held_by`
        (one of the two is required), so a live holder's cycle is never taken from it.
        """
        check_utc("now", now)
        if expired_at is None and held_by is None:
            raise ValueError("interrupt needs expired_at or held_by")
        query = update(CycleRow).where(
            col(CycleRow.id) == cycle_id, col(CycleRow.status) == CycleStatus.CLAIMED.value
        )
        if expired_at is not None:
            check_utc("expired_at", expired_at)
            query = query.where(col(CycleRow.lease_until) < expired_at)
        if held_by is not None:
            query = query.where(col(CycleRow.claimed_by) == held_by)
        with self._session(write=True) as session:
            done = session.execute(
                query.values(
                    status=CycleStatus.INTERRUPTED.value,
                    finished_at=now,
                    reason=INTERRUPTED_REASON,
                ).returning(col(CycleRow.id))
            ).scalar_one_or_none()
        return done is not None

    def slots_with_cycles(
        self, account_ids: Collection[int], start_at: datetime, end_at: datetime
    ) -> set[tuple[int, datetime]]:
        """(account, slot) pairs in `[start_at, end_at)` that have a cycle row, in any state."""
        check_utc("start_at", start_at)
        check_utc("end_at", end_at)
        if not account_ids:
            return set()
        query = select(CycleRow.account_id, CycleRow.slot_at).where(
            col(CycleRow.account_id).in_(sorted(account_ids)),
            col(CycleRow.slot_at) >= start_at,
            col(CycleRow.slot_at) < end_at,
        )
        with self._session() as session:
            return {(account_id, slot_at) for account_id, slot_at in session.exec(query).all()}

    def last_slot(self, account_id: int, *, before: datetime | None = None) -> datetime | None:
        """The latest slot (before `before`, when given) of the account with a cycle row."""
        query = select(func.max(CycleRow.slot_at)).where(col(CycleRow.account_id) == account_id)
        if before is not None:
            check_utc("before", before)
            query = query.where(col(CycleRow.slot_at) < before)
        with self._session() as session:
            found: datetime | None = session.exec(query).one()
        return found

    def account_opened_at(self, account_id: int) -> datetime:
        """When the account was opened."""
        with self._session() as session:
            row = session.get(AccountRow, account_id)
        if row is None:
            raise ValueError(f"no account {account_id}")
        return row.created_at

    def set_paused(self, account_id: int, paused: bool) -> None:
        """Pause (no more cycles) or resume the account."""
        with self._session(write=True) as session:
            row = session.get(AccountRow, account_id, with_for_update=True)
            if row is None:
                raise ValueError(f"no account {account_id}")
            row.paused = paused

    def paused(self, account_ids: Collection[int]) -> set[int]:
        """Which of `account_ids` are paused."""
        if not account_ids:
            return set()
        query = select(AccountRow.id).where(
            col(AccountRow.id).in_(sorted(account_ids)), col(AccountRow.paused).is_(True)
        )
        with self._session() as session:
            return {row_id(found) for found in session.exec(query).all()}
