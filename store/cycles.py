"""The cycle's state machine: claims under a lease, take-overs, renewals, releases, finishes, missed
slots, interrupts and expired leases, with the questions recovery asks of them.

Internal to `openbell.store`: `Ledger` is made of `Cycles` (with `Accounts` and `Orders`), each
method one transaction. A cycle row goes `claimed` -> `done` | `failed` | `skipped` (finished by its
holder) or `interrupted` (a stopping daemon's own claim, or an abandoned one past its grace); a slot
that never ran is recorded `missed` directly, with its cause as the reason (one at a time, or many
in one transaction, each only where the slot has no row). The unique (account, slot) key decides
which of two claimants wins; a claim still `claimed` after its lease is anyone's to take over, with
the same id, so the orders it recorded stay single under their idempotency keys. A holder keeps its
claims by renewing their lease while it runs them, and ends it at once when it gives them up;
finishing a cycle on behalf of a holder (`held_by`) does nothing once the claim has passed to
another run, and an interrupt is guarded the same way (an ended lease, or the caller's own claim),
so two daemons never both act on one cycle. A claim made here also fences the cycle's other writes
made through the same ledger (`LedgerTables._check_fences`): once the claim is lost they raise
`ClaimLost` and write nothing. An account's cycles never overlap: its claims lock its account row; a
new claim marks `interrupted` its earlier claims whose lease ended, an abandoned claim is not taken
over once a later slot of its account has a cycle, and `claims_before` tells a claim's runner which
earlier cycle to wait for. The hot-path statements (every slot of every account claims and finishes
a cycle) are prebuilt Core statements.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import Connection, Row, bindparam, exists, func, select, update
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import check_utc
from openbell.store.chain import seal_cycles
from openbell.store.core_tables import ACCOUNT_TABLE, CYCLE_TABLE
from openbell.store.records import CycleRecord, CycleStatus, MissedSlot
from openbell.store.rows import LedgerTables, dialect_insert, inserted_id, row_id

#: The reason stored on a cycle that a stopping or recovering daemon could not complete.
INTERRUPTED_REASON = "interrupted"


class Cycles(LedgerTables):
    """The cycles of the ledger and every change of their state."""

    def claim_cycle(
        self,
        account_id: int,
        slot_at: datetime,
        claimed_by: str,
        lease_until: datetime,
        now: datetime,
    ) -> int | None:
        """Claim the cycle of `account_id` at `slot_at`; its id, or None if someone else holds it.

        The insert under the unique (account, slot) constraint decides the winner. A cycle still
        `claimed` whose lease ended before `now` was abandoned: it is taken over (new holder and
        lease, same id) so the caller can complete it; idempotency keys keep its orders single.
        `ValueError` when the insert failed and the slot has no cycle at all: there is no such
        account.

        An account's cycles never overlap: both ways lock the account row first, so the claims of
        one account are made one at a time. A new claim marks `interrupted` the account's earlier
        cycles still `claimed` with an ended lease (their slot is no longer current), and an
        abandoned cycle is not taken over once a later slot of its account has a cycle that is
        not `missed`. An earlier cycle whose lease still runs is left to its holder: the caller
        waits for it before running this one (`claims_before`). A claim made here fences the
        cycle's writes made through this ledger (`LedgerTables._check_fences`).
        """
        for name, value in (("slot_at", slot_at), ("lease_until", lease_until), ("now", now)):
            check_utc(name, value)
        values = {
            "account": account_id,
            "slot": slot_at,
            "now": now,
            "claimed_by": claimed_by,
            "lease_until": lease_until,
        }
        row = {
            "account_id": account_id,
            "slot_at": slot_at,
            "status": _CLAIMED,
            "claimed_by": claimed_by,
            "lease_until": lease_until,
            "started_at": now,
        }
        try:
            with self._writer.begin() as connection:
                connection.execute(_LOCK_ACCOUNT, {"account": account_id})
                superseded = connection.execute(
                    _SUPERSEDE,
                    {
                        "account": account_id,
                        "slot": slot_at,
                        "now": now,
                        "reason": INTERRUPTED_REASON,
                    },
                ).scalars()
                seal_cycles(connection, sorted(superseded))
                cycle_id = inserted_id(connection.execute(CYCLE_TABLE.insert(), row))
        except IntegrityError:
            pass
        else:
            self._fences[cycle_id] = claimed_by
            return cycle_id
        with self._writer.begin() as connection:
            connection.execute(_LOCK_ACCOUNT, {"account": account_id})
            taken: int | None = connection.execute(_TAKE_EXPIRED, values).scalar_one_or_none()
            if taken is None and _find_cycle(connection, account_id, slot_at) is None:
                raise ValueError(f"cannot claim a cycle: no account {account_id}")
        if taken is not None:
            self._fences[taken] = claimed_by
        return taken

    def _insert(
        self, account_id: int, slot_at: datetime, status: CycleStatus, **values: Any
    ) -> int:
        """Insert the cycle of `account_id` at `slot_at` with `status` and the other `values`, in
        a transaction of its own; its id (an `IntegrityError` if the slot has one)."""
        row = {"account_id": account_id, "slot_at": slot_at, "status": status.value, **values}
        with self._writer.begin() as connection:
            cycle_id = inserted_id(connection.execute(CYCLE_TABLE.insert(), row))
            seal_cycles(connection, [cycle_id])
            return cycle_id

    def find_cycle(self, account_id: int, slot_at: datetime) -> CycleRecord | None:
        """The cycle of `account_id` at `slot_at`, or None when nobody has claimed it."""
        check_utc("slot_at", slot_at)
        with self._engine.connect() as connection:
            return _find_cycle(connection, account_id, slot_at)

    def cycle_account_id(self, cycle_id: int) -> int:
        """The account cycle `cycle_id` belongs to; `ValueError` when there is no such cycle."""
        query = select(CYCLE_TABLE.c.account_id).where(CYCLE_TABLE.c.id == cycle_id)
        with self._reading() as connection:
            account_id: int | None = connection.execute(query).scalar_one_or_none()
        if account_id is None:
            raise ValueError(f"no cycle {cycle_id}")
        return account_id

    def take_over_cycle(self, cycle_id: int, claimed_by: str, lease_until: datetime) -> bool:
        """Take the claim of a cycle still `claimed`, whatever its lease says; True if taken.

        For a caller that knows the holder is dead: a resumed replay, whose run owns its ledger.
        A live daemon instead waits for the lease to end and lets `claim_cycle` take it over. A
        cycle that has finished is left alone (False).
        """
        check_utc("lease_until", lease_until)
        with self._writer.begin() as connection:
            taken = connection.execute(
                _TAKE_OVER,
                {"cycle": cycle_id, "claimed_by": claimed_by, "lease_until": lease_until},
            ).scalar_one_or_none()
        if taken is not None:
            self._fences[cycle_id] = claimed_by
        return taken is not None

    def claims_before(self, account_id: int, slot_at: datetime) -> list[CycleRecord]:
        """The cycles of `account_id` still `claimed` at slots before `slot_at`, oldest first:
        what a claim at `slot_at` waits for before it runs (or marks `interrupted` once their
        lease has ended), so that an account's cycles never overlap."""
        check_utc("slot_at", slot_at)
        with self._engine.connect() as connection:
            rows = connection.execute(
                _CLAIMS_BEFORE, {"account": account_id, "slot": slot_at}
            ).all()
        return [_cycle_record(row) for row in rows]

    def renew_claims(
        self, cycle_ids: Collection[int], held_by: str, lease_until: datetime
    ) -> set[int]:
        """Extend to `lease_until` the lease of the cycles in `cycle_ids` still `claimed` by
        `held_by`; their ids (a missing id is a claim lost to another run, or finished)."""
        check_utc("lease_until", lease_until)
        with self._writer.begin() as connection:
            renewed = _set_lease(connection, cycle_ids, held_by, lease_until)
        self._unfence(set(cycle_ids) - renewed)
        return renewed

    def release_claims(self, cycle_ids: Collection[int], held_by: str, now: datetime) -> set[int]:
        """End at `now` the lease of the cycles in `cycle_ids` still `claimed` by `held_by`, so
        that any run may take them over; their ids."""
        check_utc("now", now)
        with self._writer.begin() as connection:
            released = _set_lease(connection, cycle_ids, held_by, now - timedelta(microseconds=1))
        self._unfence(cycle_ids)
        return released

    def _unfence(self, cycle_ids: Collection[int]) -> None:
        """Forget the fences of `cycle_ids`: this ledger writes nothing more for them."""
        for cycle_id in cycle_ids:
            self._fences.pop(cycle_id, None)

    def expire_claims(self, now: datetime, *, except_holder: str) -> int:
        """End the lease (at `now`) of every `claimed` cycle not held by `except_holder`; how many.

        For a daemon that knows every other holder is dead (the single daemon of a SQLite file),
        so that the ordinary claim takes their cycles over.
        """
        check_utc("now", now)
        with self._writing() as connection:
            ended = connection.execute(
                update(CYCLE_TABLE)
                .where(
                    CYCLE_TABLE.c.status == _CLAIMED,
                    CYCLE_TABLE.c.claimed_by != except_holder,
                    CYCLE_TABLE.c.lease_until >= now,
                )
                .values(lease_until=now - timedelta(microseconds=1))
                .returning(CYCLE_TABLE.c.id)
            ).all()
        return len(ended)

    def claims(
        self, *, expired_at: datetime | None = None, held_by: str | None = None
    ) -> list[CycleRecord]:
        """Cycles still `claimed`: with a lease ended before `expired_at`, and/or held by
        `held_by`; oldest slot first."""
        query = select(CYCLE_TABLE).where(CYCLE_TABLE.c.status == _CLAIMED)
        if expired_at is not None:
            check_utc("expired_at", expired_at)
            query = query.where(CYCLE_TABLE.c.lease_until < expired_at)
        if held_by is not None:
            query = query.where(CYCLE_TABLE.c.claimed_by == held_by)
        with self._reading() as connection:
            rows = connection.execute(query.order_by(CYCLE_TABLE.c.slot_at, CYCLE_TABLE.c.id)).all()
        return [_cycle_record(row) for row in rows]

    def record_missed(
        self, account_id: int, slot_at: datetime, now: datetime, *, reason: str = "daemon_down"
    ) -> int | None:
        """Record that the cycle of `account_id` at `slot_at` never ran; its id, or None when the
        cycle already has a row (claimed, finished or missed before): a slot is recorded once."""
        for name, value in (("slot_at", slot_at), ("now", now)):
            check_utc(name, value)
        try:
            return self._insert(
                account_id,
                slot_at,
                CycleStatus.MISSED,
                claimed_by="",
                lease_until=now,
                started_at=now,
                finished_at=now,
                reason=reason,
            )
        except IntegrityError:
            if self.find_cycle(account_id, slot_at) is None:
                raise
            return None

    def record_missed_many(self, missed: Sequence[MissedSlot], now: datetime) -> int:
        """Record `missed` cycles for the slots of `missed` that have no row yet, in one
        transaction; how many were recorded. A slot with a row (claimed, finished or missed
        before) keeps it: a slot is recorded once, whoever else records it meanwhile."""
        check_utc("now", now)
        rows = [
            {
                "account_id": slot.account_id,
                "slot_at": slot.slot_at,
                "status": CycleStatus.MISSED.value,
                "claimed_by": "",
                "lease_until": now,
                "started_at": now,
                "finished_at": now,
                "reason": slot.reason,
            }
            for slot in missed
        ]
        recorded = 0
        with self._writer.begin() as connection:
            for start in range(0, len(rows), _MISSED_CHUNK):
                insert = dialect_insert(connection, CYCLE_TABLE).values(
                    rows[start : start + _MISSED_CHUNK]
                )
                done = connection.execute(
                    insert.on_conflict_do_nothing(
                        index_elements=[CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at]
                    ).returning(CYCLE_TABLE.c.id)
                )
                ids = [row[0] for row in done.all()]
                seal_cycles(connection, ids)
                recorded += len(ids)
        return recorded

    def finish_cycle(
        self,
        cycle_id: int,
        status: CycleStatus,
        now: datetime,
        *,
        error_class: str | None = None,
        error_message: str | None = None,
        reason: str | None = None,
        held_by: str | None = None,
    ) -> bool:
        """Close a claimed cycle with a terminal `status` (and error or reason, when relevant).

        Finishing it again with the same status changes nothing; a different status raises. With
        `held_by`, a run finishes only a claim it still holds: False (and nothing done) once
        another run has taken it over or it was finished otherwise (a peer marked it
        `interrupted`). True when the cycle has `status` after the call.
        """
        check_utc("now", now)
        status = CycleStatus(status)
        if status is CycleStatus.CLAIMED:
            raise ValueError("finish_cycle needs a terminal status, not 'claimed'")
        self._unfence([cycle_id])
        with self._writer.begin() as connection:
            if connection.dialect.name == "postgresql":  # the account first, as every writer
                connection.execute(_LOCK_CYCLE_ACCOUNT, {"cycle": cycle_id})
            row = connection.execute(_STATUS, {"cycle": cycle_id}).one_or_none()
            if row is None:
                raise ValueError(f"no cycle {cycle_id}")
            stored, holder = row
            if held_by is not None and (
                holder != held_by or stored not in (_CLAIMED, status.value)
            ):
                return False
            if stored == status.value:
                return True
            if stored != _CLAIMED:
                raise ValueError(f"cycle {cycle_id} is already {stored}, not {status.value}")
            connection.execute(
                _FINISH,
                {
                    "cycle": cycle_id,
                    "status": status.value,
                    "finished_at": now,
                    "error_class": error_class,
                    "error_message": error_message,
                    "reason": reason,
                },
            )
            seal_cycles(connection, [cycle_id])
        return True

    def interrupt_cycle(
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
            raise ValueError("interrupt_cycle needs expired_at or held_by")
        query = update(CYCLE_TABLE).where(
            CYCLE_TABLE.c.id == cycle_id, CYCLE_TABLE.c.status == _CLAIMED
        )
        if expired_at is not None:
            check_utc("expired_at", expired_at)
            query = query.where(CYCLE_TABLE.c.lease_until < expired_at)
        if held_by is not None:
            query = query.where(CYCLE_TABLE.c.claimed_by == held_by)
        with self._writing() as connection:
            done = connection.execute(
                query.values(
                    status=CycleStatus.INTERRUPTED.value,
                    finished_at=now,
                    reason=INTERRUPTED_REASON,
                ).returning(CYCLE_TABLE.c.id)
            ).scalar_one_or_none()
            if done is not None:
                seal_cycles(connection, [done])
        if done is not None:
            self._unfence([cycle_id])
        return done is not None

    def count_cycles(
        self,
        account_ids: Collection[int],
        *,
        start_at: datetime,
        end_at: datetime | None = None,
    ) -> int:
        """How many cycles of `account_ids` have a slot in `[start_at, end_at)` (no end: ever)."""
        check_utc("start_at", start_at)
        if end_at is not None:
            check_utc("end_at", end_at)
        if not account_ids:
            return 0
        query = select(func.count()).where(
            CYCLE_TABLE.c.account_id.in_(sorted(account_ids)), CYCLE_TABLE.c.slot_at >= start_at
        )
        if end_at is not None:
            query = query.where(CYCLE_TABLE.c.slot_at < end_at)
        with self._engine.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def cycles_per_account(
        self, account_ids: Collection[int], start_at: datetime, end_at: datetime
    ) -> dict[int, int]:
        """How many cycles each of `account_ids` has with a slot in `[start_at, end_at)` (an
        account without any is left out): one indexed count, whatever the span."""
        check_utc("start_at", start_at)
        check_utc("end_at", end_at)
        if not account_ids:
            return {}
        query = (
            select(CYCLE_TABLE.c.account_id, func.count())
            .where(
                CYCLE_TABLE.c.account_id.in_(sorted(account_ids)),
                CYCLE_TABLE.c.slot_at >= start_at,
                CYCLE_TABLE.c.slot_at < end_at,
            )
            .group_by(CYCLE_TABLE.c.account_id)
        )
        with self._engine.connect() as connection:
            return {account_id: int(count) for account_id, count in connection.execute(query)}

    def slots_with_cycles(
        self, account_ids: Collection[int], start_at: datetime, end_at: datetime
    ) -> set[tuple[int, datetime]]:
        """(account, slot) pairs in `[start_at, end_at)` that have a cycle row, in any state."""
        check_utc("start_at", start_at)
        check_utc("end_at", end_at)
        if not account_ids:
            return set()
        query = select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at).where(
            CYCLE_TABLE.c.account_id.in_(sorted(account_ids)),
            CYCLE_TABLE.c.slot_at >= start_at,
            CYCLE_TABLE.c.slot_at < end_at,
        )
        with self._engine.connect() as connection:
            return {(account_id, slot_at) for account_id, slot_at in connection.execute(query)}

    def last_slot(self, account_id: int, *, before: datetime | None = None) -> datetime | None:
        """The latest slot (before `before`, when given) of the account with a cycle row."""
        query = select(func.max(CYCLE_TABLE.c.slot_at)).where(
            CYCLE_TABLE.c.account_id == account_id
        )
        if before is not None:
            check_utc("before", before)
            query = query.where(CYCLE_TABLE.c.slot_at < before)
        with self._reading() as connection:
            found: datetime | None = connection.execute(query).scalar_one()
        return found


def _cycle_record(row: Row[Any]) -> CycleRecord:
    """The `CycleRecord` of a `cycle` row."""
    return CycleRecord(
        cycle_id=row_id(row.id),
        account_id=row.account_id,
        slot_at=row.slot_at,
        status=CycleStatus(row.status),
        claimed_by=row.claimed_by,
        lease_until=row.lease_until,
    )


def _find_cycle(connection: Connection, account_id: int, slot_at: datetime) -> CycleRecord | None:
    """The cycle of `account_id` at `slot_at`, or None when it has no row."""
    row = connection.execute(_FIND, {"account": account_id, "slot": slot_at}).one_or_none()
    return None if row is None else _cycle_record(row)


def _set_lease(
    connection: Connection, cycle_ids: Collection[int], claimed_by: str, lease_until: datetime
) -> set[int]:
    """Set the lease of the cycles in `cycle_ids` still `claimed` by `claimed_by`; their ids."""
    if not cycle_ids:
        return set()
    found = connection.execute(
        update(CYCLE_TABLE)
        .where(
            CYCLE_TABLE.c.id.in_(sorted(cycle_ids)),
            CYCLE_TABLE.c.status == _CLAIMED,
            CYCLE_TABLE.c.claimed_by == claimed_by,
        )
        .values(lease_until=lease_until)
        .returning(CYCLE_TABLE.c.id)
    ).all()
    return {row_id(row.id) for row in found}


_CLAIMED: Final = CycleStatus.CLAIMED.value
#: Missed cycles per insert statement (8 parameters each, far below either database's limit).
_MISSED_CHUNK: Final = 500
_LATER: Final = CYCLE_TABLE.alias("later")
_TAKE_EXPIRED: Final = (
    update(CYCLE_TABLE)
    .where(
        CYCLE_TABLE.c.account_id == bindparam("account"),
        CYCLE_TABLE.c.slot_at == bindparam("slot"),
        CYCLE_TABLE.c.status == _CLAIMED,
        CYCLE_TABLE.c.lease_until < bindparam("now"),
        ~exists().where(
            _LATER.c.account_id == bindparam("account"),
            _LATER.c.slot_at > bindparam("slot"),
            _LATER.c.status != CycleStatus.MISSED.value,
        ),
    )
    .returning(CYCLE_TABLE.c.id)
)
_LOCK_ACCOUNT: Final = (
    select(ACCOUNT_TABLE.c.id).where(ACCOUNT_TABLE.c.id == bindparam("account")).with_for_update()
)
_SUPERSEDE: Final = (
    update(CYCLE_TABLE)
    .where(
        CYCLE_TABLE.c.account_id == bindparam("account"),
        CYCLE_TABLE.c.slot_at < bindparam("slot"),
        CYCLE_TABLE.c.status == _CLAIMED,
        CYCLE_TABLE.c.lease_until < bindparam("now"),
    )
    .values(
        status=CycleStatus.INTERRUPTED.value,
        finished_at=bindparam("now"),
        reason=bindparam("reason"),
    )
    .returning(CYCLE_TABLE.c.id)
)
_CLAIMS_BEFORE: Final = (
    select(CYCLE_TABLE)
    .where(
        CYCLE_TABLE.c.account_id == bindparam("account"),
        CYCLE_TABLE.c.slot_at < bindparam("slot"),
        CYCLE_TABLE.c.status == _CLAIMED,
    )
    .order_by(CYCLE_TABLE.c.slot_at)
)
_TAKE_OVER: Final = (
    update(CYCLE_TABLE)
    .where(CYCLE_TABLE.c.id == bindparam("cycle"), CYCLE_TABLE.c.status == _CLAIMED)
    .returning(CYCLE_TABLE.c.id)
)
_LOCK_CYCLE_ACCOUNT: Final = (
    select(ACCOUNT_TABLE.c.id)
    .where(
        ACCOUNT_TABLE.c.id
        == select(CYCLE_TABLE.c.account_id)
        .where(CYCLE_TABLE.c.id == bindparam("cycle"))
        .scalar_subquery()
    )
    .with_for_update()
)
_FIND: Final = select(CYCLE_TABLE).where(
    CYCLE_TABLE.c.account_id == bindparam("account"), CYCLE_TABLE.c.slot_at == bindparam("slot")
)
_STATUS: Final = (
    select(CYCLE_TABLE.c.status, CYCLE_TABLE.c.claimed_by)
    .where(CYCLE_TABLE.c.id == bindparam("cycle"))
    .with_for_update()
)
_FINISH: Final = update(CYCLE_TABLE).where(CYCLE_TABLE.c.id == bindparam("cycle"))
