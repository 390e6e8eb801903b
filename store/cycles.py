"""The cycle rows of the ledger: claims under a lease, take-overs, missed slots and finishes.

Internal to `openbell.store`: `Ledger` exposes these as `claim_cycle`, `find_cycle`,
`take_over_cycle`, `renew_claims`, `release_claims`, `record_missed`, `count_cycles` and
`finish_cycle`, each in its own transaction; they run on its connection as prebuilt Core
statements (every slot of every account claims and finishes a cycle, so this is on the replay's hot
path). The unique (account, slot) key decides which of two claimants wins; a claim still `claimed`
after its lease is anyone's to take over, with the same id, so the orders it recorded stay single
under their idempotency keys. A holder keeps its claims by renewing their lease while it runs them
(`set_lease`), and ends it at once when it gives them up; finishing a cycle on behalf of a holder
(`held_by`) does nothing once the claim has passed to another run.
`cycle_record` turns a cycle row (ORM or Core) into a `CycleRecord`, here and in `CycleBook`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Connection, Row, bindparam, func, select, update

from openbell.store.postings import inserted_id, row_id
from openbell.store.records import CycleRecord, CycleStatus
from openbell.store.tables import CYCLE_TABLE, CycleRow


def cycle_record(row: CycleRow | Row[Any]) -> CycleRecord:
    """The `CycleRecord` of a `cycle` row (an ORM row or a Core one)."""
    return CycleRecord(
        cycle_id=row_id(row.id),
        account_id=row.account_id,
        slot_at=row.slot_at,
        status=CycleStatus(row.status),
        claimed_by=row.claimed_by,
        lease_until=row.lease_until,
    )


def insert_cycle(connection: Connection, **values: Any) -> int:
    """Insert a cycle row with `values`; its id (an `IntegrityError` if the slot has one)."""
    return inserted_id(connection.execute(CYCLE_TABLE.insert(), values))


def take_over_expired(
    connection: Connection,
    account_id: int,
    slot_at: datetime,
    claimed_by: str,
    lease_until: datetime,
    now: datetime,
) -> int | None:
    """Take the claim of the (account, slot) cycle if it is still `claimed` with its lease ended
    before `now`; its id, or None (`ValueError` when the account has no such cycle at all, which
    means the account does not exist: the claim's insert failed for another reason)."""
    taken = connection.execute(
        _TAKE_EXPIRED,
        {
            "account": account_id,
            "slot": slot_at,
            "now": now,
            "claimed_by": claimed_by,
            "lease_until": lease_until,
        },
    ).scalar_one_or_none()
    if taken is None and find_cycle(connection, account_id, slot_at) is None:
        raise ValueError(f"cannot claim a cycle: no account {account_id}")
    return taken


def find_cycle(connection: Connection, account_id: int, slot_at: datetime) -> CycleRecord | None:
    """The cycle of `account_id` at `slot_at`, or None when it has no row."""
    row = connection.execute(_FIND, {"account": account_id, "slot": slot_at}).one_or_none()
    return None if row is None else cycle_record(row)


def take_over(
    connection: Connection, cycle_id: int, claimed_by: str, lease_until: datetime
) -> bool:
    """Take the claim of a cycle still `claimed`, whatever its lease; True if taken."""
    taken = connection.execute(
        _TAKE_OVER, {"cycle": cycle_id, "claimed_by": claimed_by, "lease_until": lease_until}
    ).scalar_one_or_none()
    return taken is not None


def set_lease(
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


def count_cycles(
    connection: Connection,
    account_ids: Collection[int],
    start_at: datetime,
    end_at: datetime | None,
) -> int:
    """How many cycles of `account_ids` have a slot in `[start_at, end_at)` (no end: ever)."""
    query = select(func.count()).where(
        CYCLE_TABLE.c.account_id.in_(sorted(account_ids)), CYCLE_TABLE.c.slot_at >= start_at
    )
    if end_at is not None:
        query = query.where(CYCLE_TABLE.c.slot_at < end_at)
    return int(connection.execute(query).scalar_one())


def finish_cycle(
    connection: Connection,
    cycle_id: int,
    status: CycleStatus,
    now: datetime,
    *,
    error_class: str | None,
    error_message: str | None,
    reason: str | None,
    held_by: str | None = None,
) -> bool:
    """Close a `claimed` cycle with `status`; nothing if it already has it, else `ValueError`.

    With `held_by`, only while that run holds the claim: False (and nothing done) once another run
    has taken it over or it was finished otherwise (a peer marked it `interrupted`). True when the
    cycle has `status` after the call.
    """
    row = connection.execute(_STATUS, {"cycle": cycle_id}).one_or_none()
    if row is None:
        raise ValueError(f"no cycle {cycle_id}")
    stored, holder = row
    if held_by is not None and (holder != held_by or stored not in (_CLAIMED, status.value)):
        return False
    if stored == status.value:
        return True
    if stored != CycleStatus.CLAIMED.value:
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
    return True


_CLAIMED: Final = CycleStatus.CLAIMED.value
_TAKE_EXPIRED: Final = (
    update(CYCLE_TABLE)
    .where(
        CYCLE_TABLE.c.account_id == bindparam("account"),
        CYCLE_TABLE.c.slot_at == bindparam("slot"),
        CYCLE_TABLE.c.status == _CLAIMED,
        CYCLE_TABLE.c.lease_until < bindparam("now"),
    )
    .returning(CYCLE_TABLE.c.id)
)
_TAKE_OVER: Final = (
    update(CYCLE_TABLE)
    .where(CYCLE_TABLE.c.id == bindparam("cycle"), CYCLE_TABLE.c.status == _CLAIMED)
    .returning(CYCLE_TABLE.c.id)
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
