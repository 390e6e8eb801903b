"""Holes in the watched history: the slots an enrolled account has no cycle row at, recorded
`missed` with their cause.

This module owns `HoleSweep`, `Causes` and the causes a `missed` cycle records (`MissedCause`, in
its `reason`). A market's watched history starts when a daemon first rang it on this ledger (its
first `daemon_run`), an account's at the later of that and the account's opening; every slot of
it whose grace has ended has a cycle row for every account of the market, paused ones included,
once the sweep has run: a slot nobody ran becomes a `missed` cycle. The sweep keeps per market the
instant it has checked up to (its mark). The first sweep of a run, at start-up, checks the whole
watched history, each later one only the slots whose grace has ended since; a row that vanishes
behind the mark (deleted by hand) is found by the deep check, run every half hour or so. Each
counts the accounts' rows over its span in one indexed query (`cycles_per_account`) and reads the
rows of an account only when their count is not the number of its slots there, so a sweep costs a
count whatever the history's length (15 accounts, 27,000 cycles: see docs/design.md). An account
split by the run (`on_model_change = "split"`) is watched up to its split's slot, and its
successor from that slot on (`split`).
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from openbell.daemon.splitting import AccountSplit
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.slots import slots_between
from openbell.store.ledger import Ledger
from openbell.store.records import MissedSlot

log = structlog.stdlib.get_logger(__name__)

#: The smallest step of time: an account closed at a slot is watched up to and including it.
_INSTANT = timedelta(microseconds=1)


class MissedCause(enum.StrEnum):
    """Why a slot of an account has no cycle but a `missed` one (stored as its reason).

    - `store_unavailable`: this run rang it, and the store refused its claims (a Postgres gone, a
      SQLite file full or locked) until its grace ended;
    - `slot_failed`: this run rang it, and it failed otherwise (`slot_failed` in the log);
    - `daemon_down`: its grace ended before this run rang; no daemon rang it;
    - `account_paused`: the account is paused (its ledger failed verification, or an operator
      error paused it for the run), so it is not run;
    - `daemon_stalled`: this run was ringing, and the bell did not ring in its grace: the daemon
      was frozen (SIGSTOP, a paused VM, a swap storm) or still busy with the slot before;
    - `record_lost`: its row was there when a sweep looked, and is gone.
    """

    STORE_UNAVAILABLE = "store_unavailable"
    SLOT_FAILED = "slot_failed"
    DAEMON_DOWN = "daemon_down"
    ACCOUNT_PAUSED = "account_paused"
    DAEMON_STALLED = "daemon_stalled"
    RECORD_LOST = "record_lost"


#: What a hole at (market, slot) of an account, paused or not, is put down to.
CauseOf = Callable[[str, datetime, bool], MissedCause]


class Causes:
    """What this run puts a hole down to: the slots it rang and could not run, and from when it
    answers for a market's bells (from `started`, less the market's grace: it catches up the
    slots whose grace is still open when it starts ringing)."""

    def __init__(self, grace: Mapping[str, timedelta]) -> None:
        self._grace = dict(grace)
        self._ringing_from: dict[str, datetime] = {}
        self._failed: dict[tuple[str, datetime], MissedCause] = {}

    def started(self, at: datetime) -> None:
        """This run started ringing at `at`."""
        self._ringing_from = {market: at - grace for market, grace in self._grace.items()}

    def failed(self, market: str, slot_at: datetime, cause: MissedCause) -> None:
        """The slot was rung and could not be run, because of `cause`."""
        self._failed[(market, slot_at)] = cause

    def ran(self, market: str, slot_at: datetime) -> None:
        """The slot was run."""
        self._failed.pop((market, slot_at), None)

    def of(self, market: str, slot_at: datetime, paused: bool) -> MissedCause:
        """The cause of a hole at `slot_at` of an account (`paused` or not) of `market`."""
        failed = self._failed.get((market, slot_at))
        if failed is not None:
            return failed
        ringing_from = self._ringing_from.get(market)
        if ringing_from is None or slot_at < ringing_from:
            return MissedCause.DAEMON_DOWN
        return MissedCause.ACCOUNT_PAUSED if paused else MissedCause.DAEMON_STALLED


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedMarket:
    """A market's bells and its accounts, each with the instant its watched history starts."""

    market: str
    cadence: str
    grace: timedelta
    accounts: Mapping[int, datetime]
    slot_times: tuple[str, ...] | None = None

    def slots(self, start_at: datetime, end_at: datetime) -> list[datetime]:
        """The market's slots in `[start_at, end_at)`."""
        return slots_between(
            self.market, self.cadence, start_at, end_at, slot_times=self.slot_times
        )


class HoleSweep:
    """Finds the holes of the watched history and records them `missed` (module docstring)."""

    def __init__(self, ledger: Ledger, markets: Sequence[WatchedMarket]) -> None:
        self._ledger = ledger
        self._markets = {watched.market: watched for watched in markets if watched.accounts}
        # The slot each account split by this run was closed at.
        self._closed_at: dict[int, datetime] = {}
        self._marks = {
            market: min(watched.accounts.values()) for market, watched in self._markets.items()
        }
        # The slots behind each mark, for the deep check.
        self._slots: dict[str, list[datetime]] = {market: [] for market in self._markets}

    def sweep(self, now: datetime, cause_of: CauseOf, paused: Collection[int]) -> dict[str, int]:
        """Record the holes of the slots whose grace ended since the last sweep (at the first,
        in the whole watched history); how many were recorded, per market."""
        recorded: dict[str, int] = {}
        for market, watched in self._markets.items():
            mark = self._marks[market]
            end_at = now - watched.grace
            if end_at <= mark:
                continue
            try:
                slots = watched.slots(mark, end_at)
            except CalendarOutOfRange as exc:
                log.error("holes_not_checked", market=market, error_message=str(exc))
                continue
            holes = self._holes(watched, slots, mark, end_at, _causes(market, cause_of, paused))
            recorded[market] = self._record(market, holes, now)
            self._slots[market].extend(slots)
            self._marks[market] = end_at
        return recorded

    def split(self, split: AccountSplit) -> None:
        """Watch `split.account_id` up to the split's slot and its successor from that slot on."""
        self._closed_at[split.account_id] = split.at
        watched = self._markets.get(split.market)
        if watched is not None:
            accounts = {**watched.accounts, split.successor_id: split.at}
            self._markets[split.market] = replace(watched, accounts=accounts)

    def deep_check(self, now: datetime) -> dict[str, int]:
        """Record `record_lost` the holes behind each mark (rows gone since a sweep saw them);
        how many were recorded, per market."""
        recorded: dict[str, int] = {}
        for market, watched in self._markets.items():
            holes = self._holes(
                watched,
                self._slots[market],
                min(watched.accounts.values()),
                self._marks[market],
                lambda _slot_at, _account_id: MissedCause.RECORD_LOST,
            )
            if holes:
                recorded[market] = self._record(market, holes, now)
        return recorded

    def record_slot(
        self, market: str, slot_at: datetime, now: datetime, cause_of: CauseOf, paused: set[int]
    ) -> int:
        """Record `missed` the cycles of a slot that did not ring (APScheduler's missed bell) for
        every account that has no row there; how many were recorded."""
        watched = self._markets.get(market)
        if watched is None:
            return 0
        holes = [
            MissedSlot(
                account_id=account_id,
                slot_at=slot_at,
                reason=cause_of(market, slot_at, account_id in paused),
            )
            for account_id, from_at in watched.accounts.items()
            if slot_at >= from_at
        ]
        return self._record(market, holes, now)

    def _holes(
        self,
        watched: WatchedMarket,
        slots: Sequence[datetime],
        start_at: datetime,
        end_at: datetime,
        cause: Callable[[datetime, int], MissedCause],
    ) -> list[MissedSlot]:
        """The holes among `slots`, the market's slots in `[start_at, end_at)`: each account's
        rows there (from its watched start) are counted, one query per watched start, and read
        only when their count is not its number of slots. (A row at an instant that is no slot,
        left by a change of slot times, could hide a hole from the count.)"""
        if not slots:
            return []
        by_span: dict[tuple[datetime, datetime], list[int]] = {}
        for account_id, from_at in watched.accounts.items():
            closed_at = self._closed_at.get(account_id)
            until = end_at if closed_at is None else min(end_at, closed_at + _INSTANT)
            by_span.setdefault((max(start_at, from_at), until), []).append(account_id)
        holes: list[MissedSlot] = []
        for (from_at, until), account_ids in sorted(by_span.items()):
            own = slots[bisect_left(slots, from_at) : bisect_left(slots, until)]
            if not own:
                continue
            counted = self._ledger.cycles_per_account(account_ids, from_at, until)
            short = [
                account_id for account_id in account_ids if counted.get(account_id) != len(own)
            ]
            if not short:
                continue
            taken = self._ledger.slots_with_cycles(short, from_at, until)
            holes += [
                MissedSlot(
                    account_id=account_id, slot_at=slot_at, reason=cause(slot_at, account_id)
                )
                for slot_at in own
                for account_id in short
                if (account_id, slot_at) not in taken
            ]
        return holes

    def _record(self, market: str, holes: Sequence[MissedSlot], now: datetime) -> int:
        if not holes:
            return 0
        recorded = self._ledger.record_missed_many(holes, now)
        for reason, count in sorted(Counter(hole.reason for hole in holes).items()):
            slots = sorted({hole.slot_at for hole in holes if hole.reason == reason})
            log.warning(
                "cycles_missed",
                market=market,
                reason=reason,
                count=count,
                slots=len(slots),
                first_slot_at=slots[0],
                last_slot_at=slots[-1],
            )
        return recorded


def _causes(
    market: str, cause_of: CauseOf, paused: Collection[int]
) -> Callable[[datetime, int], MissedCause]:
    """`cause_of` for the holes of `market`: by slot and account."""
    return lambda slot_at, account_id: cause_of(market, slot_at, account_id in paused)
