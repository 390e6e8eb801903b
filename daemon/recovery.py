"""Recovery of the live daemon: abandoned claims, catch-up slots, and slots nobody ran.

This module owns the rules a starting (and, every few minutes, a running) daemon applies so that no
slot is ever silently absent (DESIGN §3):

- a cycle still `claimed` whose holder is gone (its lease ended; on SQLite, whose single daemon
  holds the lock, the daemon ends every other holder's lease first) is completed the replay way,
  by running its slot again, while the slot's grace window is open, and becomes `interrupted`
  once it is closed;
- a slot whose grace window is still open and that this daemon did not ring (it was starting) is
  rung now (`catch_up_slots`);
- a slot whose grace window closed without a cycle row, anywhere in the watched history (no
  daemon ran, the store was away, the daemon was frozen), becomes a `missed` cycle with its cause
  for every account enrolled then (`holes.py`, swept at start-up and every half lease);
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import structlog

from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.slots import slots_between
from openbell.store.ledger import Ledger
from openbell.store.records import CycleRecord

log = structlog.stdlib.get_logger(__name__)


def split_abandoned(
    claims: Iterable[CycleRecord], grace_of: dict[int, timedelta], now: datetime
) -> tuple[list[CycleRecord], list[CycleRecord]]:
    """Abandoned claims of the accounts in `grace_of`: (still in their slot's grace, past it)."""
    current: list[CycleRecord] = []
    past: list[CycleRecord] = []
    for claim in claims:
        grace = grace_of.get(claim.account_id)
        if grace is None:
            continue
        (current if now <= claim.slot_at + grace else past).append(claim)
    return current, past


def interrupt_abandoned(ledger: Ledger, claims: Sequence[CycleRecord], now: datetime) -> int:
    """Mark abandoned claims (lease ended) past their grace `interrupted`; how many were marked."""
    marked = 0
    for claim in claims:
        if ledger.interrupt_cycle(claim.cycle_id, now, expired_at=now):
            marked += 1
            log.warning(
                "cycle_interrupted",
                cycle_id=claim.cycle_id,
                account_id=claim.account_id,
                slot_at=claim.slot_at,
                claimed_by=claim.claimed_by,
                reason="abandoned_past_grace",
            )
    return marked


def catch_up_slots(
    market: str, cadence: str, slot_times: tuple[str, ...] | None, grace: timedelta, now: datetime
) -> list[datetime]:
    """The market's slots whose grace window is still open at `now`, oldest first."""
    try:
        return slots_between(
            market, cadence, now - grace, now + timedelta(microseconds=1), slot_times=slot_times
        )
    except CalendarOutOfRange:
        return []
