"""One account verified from a checkpoint: every check, on the rows written after it.

A `Checkpoint` is where an account's verification stopped: the cash and holdings its entries
add up to, the newest entry in entry order, the newest fill and action it took in, the newest
instants of its events, fees and snapshots, and how many rows of each table it had. A full
verification is the same walk from `Checkpoint.empty` over every row; an incremental one starts
from a stored checkpoint and walks only the newer rows (`check_account`), which gives the full
verification's answer exactly when the newer rows all come after the checkpoint in every order a
check walks: their entries after its newest entry, their fills and actions after its newest
event (and after the days its missing-fee check covered), each newer snapshot taking in every
older fill, action and fee, each newer fee's and action's instant after its newest event, and no
older row added or removed since (`counts`). When any of these fails, `check_account` returns
None and the caller checks the account in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TypeVar

from openbell.store.margin_ledger import day_end, last_ended_day
from openbell.store.verify.breaches import Collector
from openbell.store.verify.entries import (
    EntryKey,
    Running,
    check_balances,
    check_snapshots,
    entry_key,
    walk_entries,
)
from openbell.store.verify.facts import (
    ACTION,
    FEE,
    FILL,
    MARGIN_CALL,
    ORDER,
    SNAPSHOT,
    Account,
    AccountFacts,
    Facts,
    Snapshot,
    Watermarks,
)
from openbell.store.verify.links import check_fills, check_margin_calls
from openbell.store.verify.timeline import (
    check_actions,
    check_fees,
    check_missing_fees,
    events_of,
)

#: The tables a checkpoint counts an account's rows of.
COUNTED = (FILL, ACTION, FEE, SNAPSHOT, ORDER, MARGIN_CALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """Where one account's verification stopped (see the module docstring)."""

    initial_cash: Decimal
    allow_short: bool
    cash: Decimal
    held: Mapping[str, Decimal] = field(default_factory=dict)
    entry: EntryKey | None = None
    fill_id: int | None = None
    action_id: int | None = None
    through_at: datetime | None = None
    fees_through: datetime | None = None
    latest_at: datetime | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def empty(cls, account: Account) -> Checkpoint:
        """Before the account's first row."""
        return cls(
            initial_cash=account.initial_cash,
            allow_short=account.allow_short,
            cash=account.initial_cash,
        )

    def count(self, table: str) -> int:
        return self.counts.get(table, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSet:
    """Where a verification stopped: the newest id of each table it read, and each account's
    checkpoint there (accounts with a breach have none). `at` is when it was stored."""

    watermarks: Watermarks
    accounts: dict[int, Checkpoint] = field(default_factory=dict)
    at: datetime | None = None


def check_account(
    account: Account,
    start: Checkpoint,
    facts: Facts,
    out: Collector,
    *,
    older_counts: Mapping[str, int] | None = None,
) -> Checkpoint | None:
    """Check `account`'s rows in `facts` from `start`; the checkpoint after them, or None (and
    nothing added to `out`) when they cannot be checked from `start` (see the module docstring).

    `older_counts` are the account's rows at or below the watermarks `facts` was read above (None
    for a full read, whose rows are all there is)."""
    rows = facts.of(account.id)
    if older_counts is not None and not _continues(account, start, rows, older_counts):
        return None
    base = Running(start.cash)
    base.held.update(start.held)
    end = walk_entries(account, base, rows.fills, rows.actions, rows.fees, out)
    counts = {table: start.count(table) for table in COUNTED}
    counts[FILL] += len(rows.fills)
    counts[ACTION] += len(rows.actions)
    counts[FEE] += len(rows.fees)
    counts[SNAPSHOT] += len(rows.snapshots)
    counts[MARGIN_CALL] += len(rows.margin_calls)
    counts[ORDER] += facts.new_order_counts.get(account.id, 0)
    check_balances(
        account,
        end,
        facts.positions.get(account.id, []),
        (counts[FILL], counts[ACTION], counts[FEE]),
        out,
    )
    check_fills(account, rows.fills, facts, out)
    events = events_of(rows.fills, rows.actions)
    check_actions(account, rows.actions, start.held, events, out)
    check_fees(account, rows.fees, start.held, events, out)
    latest_at = max(
        [snapshot.at for snapshot in rows.snapshots]
        + ([start.latest_at] if start.latest_at is not None else []),
        default=None,
    )
    if latest_at is not None:
        checked = None if start.latest_at is None else last_ended_day(start.latest_at)
        charged = {(fee.symbol, fee.day) for fee in rows.fees}
        charged |= {
            (fee.symbol, fee.day) for fee in facts.recent_fees if fee.account_id == account.id
        }
        check_missing_fees(
            account,
            start.held,
            None if checked is None else checked + _DAY,
            events,
            charged,
            latest_at,
            last_ended_day(latest_at),
            out,
        )
    check_margin_calls(account, rows.margin_calls, rows.fills, facts, out)
    check_snapshots(
        account,
        base,
        start.count(FEE),
        rows.fills,
        rows.actions,
        rows.fees,
        rows.snapshots,
        facts.marks,
        out,
    )
    keys = _entry_keys(rows)
    times = [event.at for event in events]
    return Checkpoint(
        initial_cash=account.initial_cash,
        allow_short=account.allow_short,
        cash=end.cash,
        held=end.nonzero(),
        entry=max([*keys, *([start.entry] if start.entry else [])], default=None),
        fill_id=_newest([fill.id for fill in rows.fills], start.fill_id),
        action_id=_newest([entry.id for entry in rows.actions], start.action_id),
        through_at=_newest(times, start.through_at),
        fees_through=_newest([fee.charged_at for fee in rows.fees], start.fees_through),
        latest_at=latest_at,
        counts=counts,
    )


_DAY = date(2000, 1, 2) - date(2000, 1, 1)


_T = TypeVar("_T", int, datetime)


def _newest(found: list[_T], before: _T | None) -> _T | None:
    newest = max(found) if found else None
    if before is None or (newest is not None and newest > before):
        return newest
    return before


def _entry_keys(rows: AccountFacts) -> list[EntryKey]:
    keys = [entry_key(fill) for fill in rows.fills]
    keys.extend(entry_key(entry) for entry in rows.actions)
    keys.extend(entry_key(fee) for fee in rows.fees)
    return keys


def _continues(
    account: Account, start: Checkpoint, rows: AccountFacts, older_counts: Mapping[str, int]
) -> bool:
    """Whether `rows`, written after `start`, can be checked from it alone."""
    if (start.initial_cash, start.allow_short) != (account.initial_cash, account.allow_short):
        return False
    if any(older_counts.get(table, 0) != start.count(table) for table in COUNTED):
        return False  # an older row was added (a late commit) or removed since
    keys = _entry_keys(rows)
    if start.entry is not None and keys and min(keys) <= start.entry:
        return False
    times = [fill.filled_at for fill in rows.fills] + [entry.ex_at for entry in rows.actions]
    times += [day_end(fee.day) for fee in rows.fees]
    if start.through_at is not None and times and min(times) <= start.through_at:
        return False
    if not _after_checked_days(start, rows):
        return False
    return all(_takes_in(start, snapshot) for snapshot in rows.snapshots)


def _after_checked_days(start: Checkpoint, rows: AccountFacts) -> bool:
    """Whether the missing-fee check can go on from the days `start` covered: they cover every
    event before, and `rows` move nothing before their end."""
    if start.latest_at is None:
        return start.through_at is None  # else events no snapshot covered: never checked
    checked = last_ended_day(start.latest_at)
    if start.through_at is not None and start.through_at >= day_end(checked + _DAY):
        return False
    times = [fill.filled_at for fill in rows.fills] + [entry.ex_at for entry in rows.actions]
    return not times or min(times) >= day_end(checked)


def _takes_in(start: Checkpoint, snapshot: Snapshot) -> bool:
    """Whether `snapshot` takes in every fill, action and fee `start` took in."""
    if start.fill_id is not None and (
        snapshot.last_fill_id is None or snapshot.last_fill_id < start.fill_id
    ):
        return False
    if start.action_id is not None and (
        snapshot.last_action_id is None or snapshot.last_action_id < start.action_id
    ):
        return False
    return start.fees_through is None or snapshot.at >= start.fees_through
