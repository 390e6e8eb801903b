"""What the ledger recorded inside a season's window, counted for its methods card.

This module owns the card's ledger reads (`ops.seasons.card` words them): each account's cycles
by status and by reason (a skip's `reason`, a failure's error class), its fills, each market's
slots, whether a replay or a live daemon ran the cycles, and the replay warnings that overlap
the window. Each is one grouped query over the cycles whose slot falls inside `[start, end)`
(`end` None: no end). The chain heads of a
hash-chained record (`chain_heads`) are the hook a chain adds to: this ledger keeps none yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, func, select

from openbell.store import archive
from openbell.store.core_tables import CYCLE_TABLE, FILL_TABLE, ORDER_TABLE, REPLAY_WARNING_TABLE

#: The statuses whose `reason` (or error class) the card lists.
UNSUCCESSFUL = ("failed", "skipped", "missed", "interrupted")


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleOutcome:
    """How many of an account's cycles in the window ended in `status` for `reason` (a skip's
    reason, a failure's error class; None when the cycle gave none)."""

    account_id: int
    status: str
    reason: str | None
    cycles: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotSpan:
    """A market's slots in the window: how many distinct slots rang for any of its accounts,
    the first and the last."""

    market: str
    slots: int
    first_slot_at: datetime
    last_slot_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowWarning:
    """A replay warning recorded for a market over dates that overlap the window."""

    market: str
    message: str


def _inside(start: datetime, end: datetime | None) -> list[object]:
    column = CYCLE_TABLE.c.slot_at
    return [column >= start] if end is None else [column >= start, column < end]


def cycle_outcomes(engine: Engine, start: datetime, end: datetime | None) -> list[CycleOutcome]:
    """Every account's cycles in the window counted by status and reason (a failed cycle's
    error class stands in for its reason), ordered by account, status and reason."""
    reason = func.coalesce(CYCLE_TABLE.c.reason, CYCLE_TABLE.c.error_class)
    query = (
        select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.status, reason, func.count())
        .where(*_inside(start, end))  # type: ignore[arg-type]
        .group_by(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.status, reason)
    )
    with engine.connect() as connection:
        rows = [
            CycleOutcome(account_id=account_id, status=status, reason=why, cycles=int(count))
            for account_id, status, why, count in connection.execute(query)
        ]
    return sorted(rows, key=lambda row: (row.account_id, row.status, row.reason or ""))


def runs_by_kind(engine: Engine, start: datetime, end: datetime | None) -> dict[str, int]:
    """How many of the window's cycles a replay claimed (`claimed_by` starts `replay`) and how
    many a live daemon did (any other claimant)."""
    query = (
        select(CYCLE_TABLE.c.claimed_by, func.count())
        .where(*_inside(start, end))  # type: ignore[arg-type]
        .group_by(CYCLE_TABLE.c.claimed_by)
    )
    found: dict[str, int] = {}
    with engine.connect() as connection:
        for claimed_by, count in connection.execute(query):
            kind = "replay" if str(claimed_by).startswith("replay") else "live"
            found[kind] = found.get(kind, 0) + int(count)
    return found


def fills_per_account(engine: Engine, start: datetime, end: datetime | None) -> dict[int, int]:
    """How many fills each account made in the window's cycles (accounts with none left out)."""
    query = (
        select(CYCLE_TABLE.c.account_id, func.count(FILL_TABLE.c.id))
        .select_from(FILL_TABLE)
        .join(ORDER_TABLE, ORDER_TABLE.c.id == FILL_TABLE.c.order_id)
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == ORDER_TABLE.c.cycle_id)
        .where(*_inside(start, end))  # type: ignore[arg-type]
        .group_by(CYCLE_TABLE.c.account_id)
    )
    with engine.connect() as connection:
        return {account_id: int(count) for account_id, count in connection.execute(query)}


def slot_spans(
    engine: Engine, account_markets: dict[int, str], start: datetime, end: datetime | None
) -> list[SlotSpan]:
    """Each market's distinct slots in the window (`account_markets`: each account's market)."""
    query = (
        select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at)
        .where(*_inside(start, end))  # type: ignore[arg-type]
        .distinct()
    )
    slots: dict[str, set[datetime]] = {}
    with engine.connect() as connection:
        for account_id, slot_at in connection.execute(query):
            market = account_markets.get(account_id)
            if market is not None:
                slots.setdefault(market, set()).add(slot_at)
    return [
        SlotSpan(market=market, slots=len(found), first_slot_at=min(found), last_slot_at=max(found))
        for market, found in sorted(slots.items())
    ]


def window_warnings(engine: Engine, start: datetime, end: datetime | None) -> list[WindowWarning]:
    """The replay warnings recorded over dates that overlap the window, in the order written."""
    query = select(REPLAY_WARNING_TABLE.c.market, REPLAY_WARNING_TABLE.c.message).where(
        REPLAY_WARNING_TABLE.c.end_at >= start
    )
    if end is not None:
        query = query.where(REPLAY_WARNING_TABLE.c.start_at < end)
    with engine.connect() as connection:
        rows = connection.execute(query.order_by(REPLAY_WARNING_TABLE.c.id)).all()
    return [WindowWarning(market=market, message=message) for market, message in rows]


def chain_heads(engine: Engine, labels: Mapping[int, str]) -> dict[str, str] | None:
    """The heads of the hash-chained record (`store/chain.py`) of the accounts `labels` names
    (account id -> its label on the card): each account's last digest and its link's number, which
    the methods card lists among the artifacts; None when none of them has a link (cycles ended
    before revision 0025)."""
    heads = archive.chain_heads(engine, list(labels))
    if not heads:
        return None
    return {labels[account]: f"{digest} (link {seq})" for account, (seq, digest) in heads.items()}
