"""The replay driver: history run through the live cycle runner on a simulated clock.

This module owns `run_replay`, which runs a `ReplayPlan` (`plan.py`). It opens one account per
(agent, market) with the market's initial cash (idempotently) and builds the markets' desks, as the
live daemon does but reading the recorded bars directly (`plan.build_desks`), merges the markets'
replay slots (the starts of the dataset's bars of the cadence's interval, inside sessions; or the
configured slot times) and their session closes into one stream in time order, and walks it with a
`SimulatedClock`: at a slot, `CycleRunner.run_slot` (which first applies the corporate actions going
ex, for a market of raw bars that has them); after a session's last slot, the `close` NAV snapshots
at the session close. The replay writes through a `ReplayLedger`, which works its accounts in
memory and collects the rows of many slots: the walk writes them in one transaction every
`ReplayPlan.batch_slots` slots or `BATCH_S` of wall time, always between two events, and at the
end checks each account's working copy against the ledger (a plan with outside agents is not
batched: they reach the ledger through `/mcp`). When the next slot (past any session closes
before it) runs its cycles concurrently (LLM agents, which wait on their models), the batch is
sealed instead and written in a worker thread once each of that slot's cycles has run to its
first wait: the write no longer holds up the agents' first requests, and the ledger still moves
from one event boundary to the next, in order (`ReplayLedger.seal`). Otherwise, on a SQLite
file on Linux, a forked child writes the batch while the next slots run
(`ReplayLedger.flush_forked`). A ledger that already has
cycles of these accounts
in (or after) the window is refused unless `resume` is set; with it, the cycles the last written
batch holds are not run again (and cycles an unbatched run left `claimed` are taken over and
completed), so the final ledger is the one an uninterrupted run leaves. A replay is its accounts'
only writer while it runs (`locks.py`): on SQLite it holds the ledger's file lock, which also
keeps a daemon off the file; on Postgres an advisory lock per account. A second replay of the same
accounts is refused before it writes anything, and the window check runs under that claim. Replay
never touches the network: every price comes from the plan's `ReplaySource`s. A plan with outside
agents serves `/mcp` on loopback (`ReplayPlan.mcp_listen`) for the replay's length; their cycles'
deadlines are wall-clock (each cycle's wall budget). While it runs, Python's cyclic garbage
collector leaves alone the objects that were alive when it started (imports, the plan: `gc.freeze`),
and again those alive after the first slot (which loads the data the replay reads), and collects
the young generation every `GC_YOUNG_THRESHOLD` allocations instead of 700
(`_collector_for_replay`): scanning those objects again and again was up to a fifth of a daily
replay's CPU time, and with 100 LLM agents on the US hourly data each full collection (about
0.13 s) stalled every agent of the slot. Both are restored when it ends; a process that had frozen
objects itself keeps its own freeze and the walk freezes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

import structlog

from openbell.agents.protocol import Agent
from openbell.daemon.clock import SimulatedClock
from openbell.daemon.locks import AccountLocks, DaemonLock
from openbell.daemon.plan import (
    CADENCE_INTERVALS,
    MarketPlan,
    ReplayPlan,
    build_desks,
    outside_hub,
)
from openbell.daemon.runner import CycleRunner, SlotReport
from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.errors import AccountsPaused, OperatorError
from openbell.markets.member_coverage import MemberCoverage
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import replay_slots, slots_between
from openbell.store.db import check_schema, make_engine
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell.store.replay_ledger import ReplayLedger

log = structlog.stdlib.get_logger(__name__)

#: How long a replay claim holds, in simulated time (a resumed replay takes claims over anyway).
REPLAY_LEASE: Final = timedelta(minutes=15)
#: The longest a batch of the replay's ledger writes collects before it is written (wall time).
BATCH_S: Final = 1.0

#: How many allocations (net of frees) the young generation collects after during a replay
#: (Python's default is 700): the cycles it reclaims wait a little longer, a few MB at most.
GC_YOUNG_THRESHOLD: Final = 50_000

Progress = Callable[[int, int], None]


@contextlib.contextmanager
def _collector_for_replay(*, frozen: bool = False) -> Iterator[bool]:
    """The garbage collector tuned for a replay (see the module docstring), restored after;
    yields whether it froze (the walk then freezes again after the first slot). The objects frozen
    are unfrozen at the end (so those that became garbage are collected then); a process that
    froze objects itself keeps its own freeze. `frozen` says the caller did (`run_replay`), else
    the frozen objects are counted: CPython counts them one by one, about 14 ms after the command
    line's imports (180,000 objects)."""
    thresholds = gc.get_threshold()
    freezing = not frozen and gc.get_freeze_count() == 0
    if freezing:
        gc.freeze()
    gc.set_threshold(max(GC_YOUNG_THRESHOLD, thresholds[0]), *thresholds[1:])
    try:
        yield freezing
    finally:
        gc.set_threshold(*thresholds)
        if freezing:
            gc.unfreeze()


@dataclass(frozen=True, slots=True, kw_only=True)
class FailingAgent:
    """An agent of a market whose cycles this replay ran failed, none ending `done`: how many
    failed and were skipped, and the `cause` of the first failure (the error's class and
    message)."""

    market: str
    agent: str
    failed: int
    skipped: int
    cause: str

    def line(self) -> str:
        """E.g. `FAILED: agent llm in crypto: 0 of 4 cycles done (4 failed); first: LlmUnava...`."""
        ran = self.failed + self.skipped
        parts = [f"{self.failed} failed"] if self.failed else []
        parts += [f"{self.skipped} skipped"] if self.skipped else []
        return (
            f"FAILED: agent {self.agent} in {self.market}: 0 of {ran} cycles done "
            f"({', '.join(parts)}); first: {self.cause}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """What a replay did. `cycles_already` were finished by an earlier run (a resumed replay).
    `coverage` is how the replay's data covered each market's universe, as the caller checked it
    (`markets.member_coverage`), and `warnings` what the caller found doubtful about the replay
    itself (a universe used outside the dates its file vouches for, members without data), both
    repeated under the summary. `failing` are the agents none of whose cycles run by this replay
    succeeded (a replay that did nothing for an agent is no success: the CLI exits non-zero)."""

    slots: int
    cycles_done: int
    cycles_failed: int
    cycles_skipped: int
    cycles_already: int
    fills: int
    close_snapshots: int
    wall_s: float
    coverage: tuple[MemberCoverage, ...] = ()
    warnings: tuple[str, ...] = ()
    failing: tuple[FailingAgent, ...] = ()

    @property
    def slots_per_s(self) -> float:
        """Replay speed: slots per second of wall time."""
        return self.slots / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> str:
        """One line, e.g. `replayed 20 slots in 1.2 s (16.7 slots/s): 100 cycles done, ...`, then
        one `coverage: markets.NAME ...` line per market checked, one `WARNING: ...` line per
        warning and one `FAILED: agent ...` line per failing agent."""
        line = (
            f"replayed {self.slots} slots in {self.wall_s:.1f} s ({self.slots_per_s:.1f} slots/s): "
            f"{self.cycles_done} cycles done, {self.cycles_failed} failed, "
            f"{self.cycles_skipped} skipped, {self.cycles_already} already finished; "
            f"{self.fills} fills"
        )
        return "\n".join(
            [
                line,
                *(found.summary_line() for found in self.coverage),
                *(f"WARNING: {warning}" for warning in self.warnings),
                *(failing.line() for failing in self.failing),
            ]
        )


class _Kind(enum.IntEnum):
    CLOSE = 0  # a session's close sorts before a slot at the same instant (crypto's midnight)
    SLOT = 1


@dataclass(frozen=True, slots=True, order=True)
class _Event:
    at: datetime
    kind: _Kind
    position: int  # the market's place in the plan


def plan_events(plan: ReplayPlan) -> list[_Event]:
    """Every slot and session close of the plan's markets, in the order the replay runs them."""
    events: list[_Event] = []
    for position, market in enumerate(plan.markets):
        calendar = calendar_for(market.market_rules.calendar_id)
        slots = _slots(market, calendar, plan.start_at, plan.end_at)
        events.extend(_Event(at, _Kind.SLOT, position) for at in slots)
        sessions = dict.fromkeys(calendar.session_of(at) for at in slots)
        events.extend(
            _Event(calendar.session_close(day), _Kind.CLOSE, position)
            for day in sessions
            if day is not None
        )
    return sorted(events)


def _slots(
    market: MarketPlan, calendar: TradingCalendar, start_at: datetime, end_at: datetime
) -> list[datetime]:
    source = market.source
    if not isinstance(source, ReplaySource):  # `ReplayPlan` refuses any other
        raise TypeError(f"replay of {market.market} given a live source")
    interval = CADENCE_INTERVALS[market.cadence]
    if market.slot_times is None:
        return replay_slots(source, market.market, interval, start_at, end_at)
    # Configured times ring only where the dataset has bars of the cadence's interval.
    starts = source.bar_starts(interval, start_at, end_at)
    if not starts:
        return []
    zone = ZoneInfo(calendar.timezone)
    days = {start.astimezone(zone).date() for start in starts}
    return [
        at
        for at in slots_between(
            market.market, market.cadence, start_at, end_at, slot_times=market.slot_times
        )
        if at.astimezone(zone).date() in days
    ]


def run_replay(
    plan: ReplayPlan, *, progress: Progress | None = None, frozen: bool = False
) -> ReplayReport:
    """Replay `plan` into its ledger; see the module docstring. `progress(done, total)` is called
    with the number of slots run so far; `frozen` says the process has frozen objects itself
    (`gc.freeze`; the command line does after its imports). Raises `OperatorError` when another
    process writes the SQLite ledger or another replay runs on one of these Postgres accounts, for
    a ledger that is not at the schema head, and for one that already has cycles in the window
    without `resume`."""
    started = time.perf_counter()
    with _collector_for_replay(frozen=frozen) as freeze:
        engine = make_engine(plan.store_url, redactor=plan.redactor)
        file_lock = DaemonLock(plan.store_url, role="replay")
        account_locks = AccountLocks(
            engine,
            [(market.market, agent.name) for market in plan.markets for agent in market.agents],
        )
        try:
            file_lock.acquire()
            account_locks.acquire()
            if plan.migrate:
                upgrade(plan.store_url)
            check_schema(engine)
            ledger = ReplayLedger(engine, start_at=plan.start_at)
            try:
                counts = asyncio.run(_replay(plan, ledger, progress, freeze=freeze))
            finally:  # a batch still being written behind ends before the locks are released
                ledger.close()
        finally:
            account_locks.release()
            file_lock.release()
            engine.dispose()
    return ReplayReport(
        slots=counts.slots,
        cycles_done=counts.done,
        cycles_failed=counts.failed,
        cycles_skipped=counts.skipped,
        cycles_already=counts.already,
        fills=counts.fills,
        close_snapshots=counts.close_snapshots,
        wall_s=time.perf_counter() - started,
        failing=counts.failing(),
    )


@dataclass(slots=True)
class _AgentTally:
    """One (market, agent)'s cycles run by this replay, and the cause of its first failure."""

    done: int = 0
    failed: int = 0
    skipped: int = 0
    first_cause: str | None = None


@dataclass(slots=True)
class _Counts:
    slots: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    already: int = 0
    fills: int = 0
    close_snapshots: int = 0
    agents: dict[tuple[str, str], _AgentTally] = field(default_factory=dict)

    def add(self, slot: SlotReport) -> None:
        """Count the slot's outcomes (one pass over them: a replay adds one per slot)."""
        self.slots += 1
        for outcome in slot.outcomes:
            self.fills += outcome.fills
            status = outcome.status
            if status is None:
                self.already += 1
                continue
            key = (slot.market, outcome.agent)
            tally = self.agents.get(key)
            if tally is None:
                tally = self.agents[key] = _AgentTally()
            if status is CycleStatus.DONE:
                self.done += 1
                tally.done += 1
            elif status is CycleStatus.SKIPPED:
                self.skipped += 1
                tally.skipped += 1
            elif status is CycleStatus.FAILED:
                self.failed += 1
                tally.failed += 1
                if tally.first_cause is None:
                    tally.first_cause = outcome.cause or "failed"

    def failing(self) -> tuple[FailingAgent, ...]:
        """The agents whose cycles here failed, none `done` (skipped ones alone, for data the
        replay does not have, are not failures of the agent)."""
        return tuple(
            FailingAgent(
                market=market,
                agent=agent,
                failed=tally.failed,
                skipped=tally.skipped,
                cause=tally.first_cause or "not done",
            )
            for (market, agent), tally in self.agents.items()
            if tally.done == 0 and tally.failed > 0
        )


def _check_window(plan: ReplayPlan, ledger: ReplayLedger, account_ids: Sequence[int]) -> None:
    shown = plan.store_url.rpartition("@")[2]  # never show a password
    later = ledger.count_cycles(account_ids, start_at=plan.end_at)
    if later:
        raise OperatorError(
            f"ledger {shown} already has {later} cycles of these accounts after "
            f"{plan.end_at.isoformat()}: a replay cannot go back in time; use a fresh database"
        )
    inside = ledger.count_cycles(account_ids, start_at=plan.start_at, end_at=plan.end_at)
    if inside and not plan.resume:
        raise OperatorError(
            f"ledger {shown} already has {inside} cycles of these accounts in the replay window "
            f"{plan.start_at.isoformat()} .. {plan.end_at.isoformat()}: "
            "use --resume or a fresh database"
        )


async def _replay(
    plan: ReplayPlan, ledger: ReplayLedger, progress: Progress | None, *, freeze: bool
) -> _Counts:
    desks, accounts = build_desks(plan.markets, ledger, plan.start_at)
    account_ids = [account_id for opened in accounts.values() for account_id, _ in opened]
    _check_window(plan, ledger, account_ids)
    hub = outside_hub(plan.markets)
    if hub is None:  # outside agents work the ledger through `/mcp`: their replay is unbatched
        ledger.own(account_ids)
    runner = CycleRunner(
        ledger=ledger,
        desks=desks,
        run_id=plan.run_id,
        lease=REPLAY_LEASE,
        take_over_claimed=plan.resume,
        inline_cycles=True,  # a replay's claims are never renewed nor lost
        on_split=lambda split: ledger.own([split.successor_id]),  # worked in memory too
    )
    events = plan_events(plan)
    total = sum(1 for event in events if event.kind is _Kind.SLOT)
    log.info(
        "replay_started",
        markets=[market.market for market in plan.markets],
        start_at=plan.start_at,
        end_at=plan.end_at,
        slots=total,
        resume=plan.resume,
    )
    if progress is not None:
        progress(0, total)
    counts = _Counts()
    async with contextlib.AsyncExitStack() as serving:
        if hub is not None:  # the MCP SDK is imported only by a replay that serves it
            from openbell.daemon.mcp_http import serve_mcp

            host, port = plan.mcp_listen
            url = await serving.enter_async_context(
                serve_mcp(
                    hub,
                    ledger,
                    host=host,
                    port=port,
                    allow_remote=plan.mcp_allow_remote,
                    limits=plan.mcp_limits,
                    read_timeout_s=plan.mcp_read_timeout_s,
                )
            )
            log.info("mcp_listening", url=url)
        await _walk(plan, runner, ledger, accounts, events, counts, progress, freeze=freeze)
    ledger.check()
    log.info(
        "replay_finished",
        **{key: value for key, value in asdict(counts).items() if key != "agents"},
        failing=[f"{failing.market}/{failing.agent}" for failing in counts.failing()],
    )
    if runner.paused:  # the other accounts are finished; an operator must fix these
        paused = runner.paused.values()
        raise AccountsPaused(
            f"the replay paused {len(paused)} account(s): "
            + "; ".join(account.describe() for account in paused)
            + "; fix the cause and run again with --resume",
            account_ids=[account.account_id for account in paused],
        )
    return counts


async def _walk(
    plan: ReplayPlan,
    runner: CycleRunner,
    ledger: ReplayLedger,
    accounts: Mapping[str, Sequence[tuple[int, Agent]]],
    events: Sequence[_Event],
    counts: _Counts,
    progress: Progress | None,
    *,
    freeze: bool = False,
) -> None:
    """Run the plan's slots and session closes in order, adding them to `counts`, and end the
    ledger's batch after every `plan.batch_slots` slots or `BATCH_S` of wall time, whichever
    comes first, always between two events: when the next slot runs its cycles concurrently, it
    is sealed and written while they wait, else written by a forked child while the next slots
    run (where the ledger allows: `ReplayLedger.flush_forked`) or at once (a batch that fails or
    is cut off is not written). With `freeze`, freeze the heap again after the first slot (see
    the module docstring)."""
    total = sum(1 for event in events if event.kind is _Kind.SLOT)
    clock = SimulatedClock(plan.start_at)
    batch_slots, batch_started = 0, time.perf_counter()
    for index, event in enumerate(events):
        now = clock.set(event.at)
        market = plan.markets[event.position].market
        opened = runner.current(accounts[market])
        if event.kind is _Kind.CLOSE:
            paused = runner.paused
            ids = [account_id for account_id, _ in opened if account_id not in paused]
            counts.close_snapshots += await runner.write_close_snapshots(market, now, ids)
        else:
            slot = await runner.run_slot(market, event.at, opened, now, waiting=ledger.write_behind)
            counts.add(slot)
            batch_slots += 1
            if freeze and counts.slots == 1:
                gc.freeze()
            if progress is not None:
                progress(counts.slots, total)
        if batch_slots >= plan.batch_slots or time.perf_counter() - batch_started >= BATCH_S:
            if _next_slot_waits(events, index, plan, runner, accounts):
                ledger.seal()  # written while the next slot's agents wait on their models
            else:
                ledger.flush_forked()  # written by a child process while the next slots run
            batch_slots, batch_started = 0, time.perf_counter()
    ledger.flush()


def _next_slot_waits(
    events: Sequence[_Event],
    index: int,
    plan: ReplayPlan,
    runner: CycleRunner,
    accounts: Mapping[str, Sequence[tuple[int, Agent]]],
) -> bool:
    """Whether the first slot after `events[index]` (past the session closes before it) runs
    its cycles concurrently, and so waits on something, such as their models."""
    for following in range(index + 1, len(events)):
        event = events[following]
        if event.kind is _Kind.SLOT:
            opened = accounts[plan.markets[event.position].market]
            agents = [agent for account_id, agent in opened if account_id not in runner.paused]
            return runner.concurrent(agents)
    return False
