"""The decision cycle of DESIGN §3 for one slot of one market: claim, observe, decide, snapshot.

This module owns `CycleRunner`, the one cycle runner: the replay driver calls it slot by slot on a
simulated clock, and the live daemon calls it at each bell. For a slot it claims each account's
cycle (the unique insert wins; a cycle already finished is left alone; with `take_over_claimed` a
cycle still `claimed` by a dead run is taken over and completed), fetches the market snapshot once
for all the slot's agents, applies the corporate actions that went ex (`corporate_actions.py`),
covers the shorts of an account in a margin call before its agent's turn (`broker.MarginCall`,
where the market allows shorting), runs each agent on a `Toolbox` bound to its account and cycle,
writes
the account's NAV snapshot for the slot (`valuation.py`) and finishes the cycle: `done`, `failed`,
or `skipped` with its reason when the agent did not take it (`CycleSkipped`, such as an outside
agent no client came to: the account exists at the slot, so its NAV snapshot is written all the
same). It also writes the
NAV snapshots at a session's close. What an exception does to a cycle (skip it, fail only it,
pause its account, or stop the slot) is decided by `error_policy.action_for` alone. The runner
keeps the accounts it paused (`paused`) and leaves them out of its later slots, for replay and
live alike.

Claims are leased: the runner knows the claims it is running (`held`), and the live daemon renews
their lease while they run (`renew_leases`). A claim another run has taken meanwhile (its lease
had run out) is lost: its cycle is cancelled here and never finished by this run, and the
ledger's fences refuse its writes (`ClaimLost`) from the moment the claim passed, before the
renewal notices. A runner with a clock (live) runs a cycle only once its account has no earlier
cycle still claimed (it waits, or marks it `interrupted` once its lease has ended), so an
account's cycles never overlap. A slot that stops (`Action.STOP`, such as a dropped database
connection) ends the lease of the claims it had not finished, so that any run may complete them
while the slot's grace lasts.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, NamedTuple

import structlog
from sqlalchemy.exc import SQLAlchemyError

from openbell.agents.baselines import RULE_BASELINES
from openbell.agents.broker import MarginCall, PaperBroker, in_margin_call
from openbell.agents.kinds import BASELINE_KINDS
from openbell.agents.protocol import Agent, DecisionContext
from openbell.agents.toolbox import Toolbox
from openbell.daemon.error_policy import Action, Stage, action_for
from openbell.daemon.ex_dates import ActionApplier
from openbell.daemon.retrying import short_message
from openbell.daemon.splitting import AccountSplit, open_successor
from openbell.daemon.valuation import (
    check_marks,
    last_closes,
    write_close_snapshots,
    write_slot_snapshot,
)
from openbell.markets.adapters.failures import failure_cause
from openbell.markets.domain import Fill, Instrument, Rejection
from openbell.markets.errors import CycleSkipped, DataUnavailable, ModelSplit
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.gateway import MarketSnapshot, PointInTimeGateway
from openbell.markets.rules import MarketRules
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, RecordedOrder, SnapshotKind

log = structlog.stdlib.get_logger(__name__)
#: The standard logger behind `log`, whose level decides which of its lines are written.
_STDLIB_LOG: Final = logging.getLogger(__name__)

#: The reason stored on a cycle skipped because its market's data could not be had for the slot.
DATA_UNAVAILABLE: Final = "data_unavailable"
#: The wall-time budget of one agent's decision (DESIGN §3 step 3).
DECIDE_TIMEOUT_S: Final = 600.0
#: How many turns of the event loop a yielding slot gives at each of its yields (`_yield`): a
#: request takes several turns to be answered (read, route, respond), each turn also running one
#: step of the slot's cycles, so a few turns a yield answer it in fewer of those steps.
YIELD_TURNS: Final = 4
#: Stored error messages are cut to this many characters.
MAX_ERROR_CHARS: Final = 2000
#: The `kind` a slot's NAV snapshot is logged with (an enum member's `value` is a lookup per read).
_SLOT_KIND: Final = SnapshotKind.SLOT.value


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketDesk:
    """What a cycle of one market needs: its point-in-time data, broker, universe and rules.

    `benchmarks` are priced in each slot's snapshot along with the universe and its benchmark.
    `fundamentals` serves the `get_fundamentals` tool (None: the tool refuses, as in a replay of
    data without point-in-time fundamentals). `actions` applies the market's splits and dividends
    before each slot's cycles and each close's snapshots (None: the market has none to apply).
    """

    market: str
    gateway: PointInTimeGateway
    broker: PaperBroker
    universe: Universe
    rules: MarketRules
    benchmarks: tuple[str, ...] = ()
    fundamentals: FundamentalsSource | None = None
    actions: ActionApplier | None = None
    #: The symbols priced in each slot's snapshot: the universe, its benchmark, the others.
    snapshot_symbols: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, value in (
            ("gateway", self.gateway.market),
            ("universe", self.universe.market),
            ("rules", self.rules.market),
        ):
            if value != self.market:
                raise ValueError(f"the {self.market} desk has a {name} of market {value}")
        benchmark = () if self.universe.benchmark is None else (self.universe.benchmark,)
        symbols = tuple(dict.fromkeys((*self.universe.symbols, *benchmark, *self.benchmarks)))
        object.__setattr__(self, "snapshot_symbols", symbols)  # the desk is frozen


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleOutcome:
    """What became of one account's cycle at a slot.

    `status` is None when this runner did not run it: it had finished before, or another run
    holds it. `fills` counts the fills this run recorded (replayed orders are not counted);
    `rejections` the rejected orders the cycle placed, replayed ones included. `cause` says why
    a failed or skipped cycle did not trade: the error's class and message, or the skip's reason.
    """

    account_id: int
    agent: str
    cycle_id: int | None
    status: CycleStatus | None
    fills: int = 0
    rejections: int = 0
    taken_over: bool = False
    cause: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotReport:
    """The outcomes of every account's cycle at one slot of one market."""

    market: str
    slot_at: datetime
    outcomes: tuple[CycleOutcome, ...]
    #: Why the slot's data could not be had (`adapters.failures`: dns, connect, http_503, ...),
    #: and the first line of the error, when its cycles were skipped `data_unavailable`.
    unavailable_cause: str | None = None
    unavailable_message: str | None = None

    def count(self, status: CycleStatus | None) -> int:
        """How many cycles ended in `status` here (None: how many were not run here)."""
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    @property
    def fills(self) -> int:
        """Fills recorded at this slot by this run."""
        return sum(outcome.fills for outcome in self.outcomes)

    @property
    def rejections(self) -> int:
        """Rejected orders of the cycles this run ran at this slot."""
        return sum(outcome.rejections for outcome in self.outcomes)


@dataclass(frozen=True, slots=True, kw_only=True)
class PausedAccount:
    """An account paused by this run (`Action.PAUSE`): its agent and market, and why: the class
    and message of the operator error its cycle at `slot_at` failed with."""

    account_id: int
    agent: str
    market: str
    slot_at: datetime
    error_class: str
    error_message: str

    def describe(self) -> str:
        """E.g. `account 3 (agent llm, market us): LlmAuthError: HTTP 401 ...`."""
        return (
            f"account {self.account_id} (agent {self.agent}, market {self.market}): "
            f"{self.error_class}: {self.error_message}"
        )


@dataclass(frozen=True, slots=True)
class _Claim:
    account_id: int
    agent: Agent
    cycle_id: int
    taken_over: bool


class CycleRunner:
    """Runs the decision cycles of a slot against one ledger, for the markets it has desks for.

    `run_id` is stored as each claim's holder and `lease` is how long past `now` a claim holds.
    With `take_over_claimed`, a cycle still `claimed` is taken over whatever its lease: only for
    a caller that knows no other run is alive (a resumed replay); a live daemon leaves it off and
    takes over a cycle only once its lease has ended. A slot's accounts are claimed in the order
    given; live daemons sharing a ledger give them in `claim_order`.

    `inline_cycles` is for a runner whose claims are never renewed nor lost (a replay, which owns
    its ledger's accounts): a slot's cycles then run in the slot's own task, one after the other,
    when there is one of them or every agent is a rule baseline (`BASELINE_KINDS`), which runs on
    the replay's local data without waiting on anything, and a baseline's decision goes without
    the timeout, which could never fire. Else each cycle of an agent that waits (LLM, outside) is a
    task of its own, started first, and the baselines' cycles run one after the other in one more
    task, concurrently with those.

    With `yield_every_s` (the live daemon), a slot gives the event loop `YIELD_TURNS` turns
    whenever it has held the loop that long: between its claims, between its cycles, between a
    cycle's steps (margin call, decision, NAV snapshot, finish) and before each tool an agent
    calls (`Toolbox`'s `pause`), so HTTP requests (`/healthz`, `/mcp`, the pages) and the
    daemon's own tasks are served while a slot runs instead of after it. None (a replay): it never
    yields on its own. Yielding changes when other tasks run, never what a cycle decides or writes.

    With a `clock` (live daemons sharing a ledger), a cycle runs only once its account has no
    earlier cycle still `claimed`: it waits for one whose lease runs (polling every `wait_s` real
    seconds, its own claim renewed meanwhile) and marks `interrupted` one whose lease has ended,
    so that an account's cycles never overlap. Without one (a replay, which runs its slots in
    order and owns its accounts) nothing is awaited.

    A cycle that ends with `ModelSplit` (an LLM agent under `on_model_change = "split"` whose model
    answered as another) closes its account: the runner opens the agent's next generation's
    account at that slot (`splitting.py`; `on_split` is told, so that a replay works the new
    account in memory and a live daemon's hole sweep watches it instead), runs its cycle in the
    same slot, and from then on runs it wherever the old account is given (`current`).
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        desks: Mapping[str, MarketDesk],
        run_id: str,
        lease: timedelta,
        take_over_claimed: bool = False,
        decide_timeout_s: float = DECIDE_TIMEOUT_S,
        inline_cycles: bool = False,
        clock: Callable[[], datetime] | None = None,
        wait_s: float = 1.0,
        on_split: Callable[[AccountSplit], None] | None = None,
        yield_every_s: float | None = None,
    ) -> None:
        if not run_id:
            raise ValueError("run_id must not be empty")
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, got {lease}")
        for market, desk in desks.items():
            if desk.market != market:
                raise ValueError(f"desk of {desk.market} filed under {market}")
        self._ledger = ledger
        self._desks = dict(desks)
        self._run_id = run_id
        self._lease = lease
        self._take_over_claimed = take_over_claimed
        self._decide_timeout_s = decide_timeout_s
        self._inline_cycles = inline_cycles
        self._clock = clock
        self._wait_s = wait_s
        self._yield_every_s = yield_every_s
        self._turn_s = time.monotonic()
        # The claims being run, each with its cycle's task once the agent runs.
        self._held: dict[int, asyncio.Task[CycleOutcome] | None] = {}
        self._paused: dict[int, PausedAccount] = {}
        self._on_split = on_split
        # A split account's successor (its account and agent), by the split account's id.
        self._successors: dict[int, tuple[int, Agent]] = {}

    @property
    def paused(self) -> Mapping[int, PausedAccount]:
        """The accounts this runner paused, by id; their later slots are not run."""
        return dict(self._paused)

    def current(self, accounts: Sequence[tuple[int, Agent]]) -> list[tuple[int, Agent]]:
        """`accounts` with each account split by this run replaced by its latest successor."""
        found = []
        for account_id, agent in accounts:
            while account_id in self._successors:
                account_id, agent = self._successors[account_id]
            found.append((account_id, agent))
        return found

    @property
    def held(self) -> frozenset[int]:
        """The ids of the cycles this runner has claimed and not finished yet."""
        return frozenset(self._held)

    def renew_leases(self, now: datetime) -> set[int]:
        """Extend the lease of every claim being run to `now` + the lease; the ids of the claims
        found lost (taken over by another run, or finished by one), whose cycles are cancelled."""
        held = set(self._held)
        if not held:
            return set()
        lost = held - self._ledger.renew_claims(held, self._run_id, now + self._lease)
        for cycle_id in sorted(lost):
            task = self._held.pop(cycle_id, None)
            if task is not None:
                task.cancel()
            log.warning("claim_lost", cycle_id=cycle_id, run_id=self._run_id)
        return lost

    def _desk(self, market: str) -> MarketDesk:
        desk = self._desks.get(market)
        if desk is None:
            raise ValueError(f"no desk for market {market!r}; have {sorted(self._desks)}")
        return desk

    async def run_slot(
        self,
        market: str,
        slot_at: datetime,
        accounts: Sequence[tuple[int, Agent]],
        now: datetime,
        *,
        waiting: Callable[[], None] | None = None,
    ) -> SlotReport:
        """Run the cycle of each (account, agent) of `market` at `slot_at`.

        Agents decide as of `slot_at` (the slot is the decision time); `now` stamps the claims,
        leases and finish times. Accounts this runner paused are left out (no outcome). Raises
        only for `Action.STOP`: every other failure is recorded on its cycle. `waiting` is
        called once the slot's cycles, run concurrently, have each run to its first wait (an LLM
        agent's first model request): a replay writes its last batch then, while they wait. It
        is not called when they run inline (`concurrent`), nor when none runs.
        """
        desk = self._desk(market)
        accounts = [
            (account_id, agent)
            for account_id, agent in self.current(accounts)
            if account_id not in self._paused
        ]
        outcomes: dict[int, CycleOutcome] = {}
        claims: list[_Claim] = []
        unavailable: list[Exception] = []
        try:
            yields = self._yield_every_s is not None
            for account_id, agent in accounts:
                if yields:
                    await self._yield()
                claim = self._claim(account_id, agent, slot_at, now)
                if claim is None:
                    outcomes[account_id] = CycleOutcome(
                        account_id=account_id, agent=agent.name, cycle_id=None, status=None
                    )
                else:
                    claims.append(claim)
                    self._held[claim.cycle_id] = None
            if claims:
                snapshot = await self._observe(desk, slot_at, claims, now, outcomes, unavailable)
                if snapshot is not None and desk.actions is not None:
                    ids = [claim.account_id for claim in claims]
                    snapshot = await desk.actions.at_slot(snapshot, ids)
                if snapshot is not None:
                    await self._decide_all(desk, snapshot, claims, slot_at, now, outcomes, waiting)
                    split = [
                        self._successors[c.account_id]
                        for c in claims
                        if c.account_id in self._successors
                    ]
                    if split:  # the successors of the accounts split in this slot take it
                        accounts += split
                        claims += await self._succeed(desk, snapshot, split, slot_at, now, outcomes)
        except Exception:
            self._release([claim.cycle_id for claim in claims], now)
            raise
        finally:
            for claim in claims:
                self._held.pop(claim.cycle_id, None)
        return SlotReport(
            market=market,
            slot_at=slot_at,
            outcomes=tuple(outcomes[account_id] for account_id, _agent in accounts),
            unavailable_cause=failure_cause(unavailable[0]) if unavailable else None,
            unavailable_message=short_message(unavailable[0]) if unavailable else None,
        )

    async def _succeed(
        self,
        desk: MarketDesk,
        snapshot: MarketSnapshot,
        successors: Sequence[tuple[int, Agent]],
        slot_at: datetime,
        now: datetime,
        outcomes: dict[int, CycleOutcome],
    ) -> list[_Claim]:
        """Claim and run the cycles of `successors` (accounts opened by a split) at the slot;
        their claims."""
        claims = []
        for account_id, agent in successors:
            claim = self._claim(account_id, agent, slot_at, now)
            if claim is None:
                outcomes[account_id] = CycleOutcome(
                    account_id=account_id, agent=agent.name, cycle_id=None, status=None
                )
                continue
            claims.append(claim)
            self._held[claim.cycle_id] = None
        await self._decide_all(desk, snapshot, claims, slot_at, now, outcomes, None)
        return claims

    def _split(
        self, desk: MarketDesk, claim: _Claim, slot_at: datetime, skip: CycleSkipped | None
    ) -> None:
        """After a cycle skipped by `ModelSplit`, close the claim's account: open its successor at
        the slot (`splitting.py`)."""
        if not isinstance(skip, ModelSplit):
            return
        successor = open_successor(
            self._ledger, claim.account_id, claim.agent, desk.market, desk.rules.currency, slot_at
        )
        self._successors[claim.account_id] = successor
        if self._on_split is not None:
            self._on_split(
                AccountSplit(
                    market=desk.market,
                    account_id=claim.account_id,
                    successor_id=successor[0],
                    successor=successor[1].name,
                    at=slot_at,
                )
            )
        self._bound(desk.market, claim, slot_at).warning(
            "account_split",
            account_id=claim.account_id,
            successor_account_id=successor[0],
            successor=successor[1].name,
        )

    async def _decide_all(
        self,
        desk: MarketDesk,
        snapshot: MarketSnapshot,
        claims: Sequence[_Claim],
        slot_at: datetime,
        now: datetime,
        outcomes: dict[int, CycleOutcome],
        waiting: Callable[[], None] | None,
    ) -> None:
        """Run the claims' cycles concurrently (an LLM agent mostly waits on its model; the
        baselines' one after the other in one task of their own), calling `waiting` once each
        task has run to its first wait; a STOP raised by one cancels the others, and is raised
        here. With `inline_cycles`, one cycle or baselines' cycles are run in order in this task
        instead (see the class docstring)."""
        if not self.concurrent([claim.agent for claim in claims]):
            await self._run_in_turn(desk, snapshot, claims, slot_at, now, outcomes)
            return
        # The agents that wait (LLM, outside) each in a task of their own, started first so that
        # they start waiting at once; the baselines, which never wait, one after the other in one
        # more task, giving the loop its turn between them (`_run_in_turn`): as tasks of their
        # own each would run to its end at its turn, and all of them in one turn of the loop.
        waiters = [claim for claim in claims if claim.agent.kind not in BASELINE_KINDS]
        lane = [claim for claim in claims if claim.agent.kind in BASELINE_KINDS]
        tasks: dict[int, asyncio.Task[CycleOutcome]] = {}
        try:
            async with asyncio.TaskGroup() as group:
                for claim in waiters:
                    if claim.cycle_id in self._held:  # not lost while observing
                        run = self._run_cycle(desk, snapshot, claim, slot_at, now)
                        tasks[claim.cycle_id] = self._held[claim.cycle_id] = group.create_task(run)
                if lane:
                    group.create_task(
                        self._run_in_turn(desk, snapshot, lane, slot_at, now, outcomes, timed=True)
                    )
                if waiting is not None and tasks:
                    await asyncio.sleep(0)  # each task runs to its first wait, in order
                    waiting()
        except BaseExceptionGroup as stopped:  # the first STOP is the run's reason to stop
            raise stopped.exceptions[0] from None
        for claim in waiters:
            task_or_none = tasks.get(claim.cycle_id)
            if task_or_none is None or task_or_none.cancelled():  # lost to another run
                outcomes[claim.account_id] = _not_run(claim)
            else:
                outcomes[claim.account_id] = task_or_none.result()

    async def _run_in_turn(
        self,
        desk: MarketDesk,
        snapshot: MarketSnapshot,
        claims: Sequence[_Claim],
        slot_at: datetime,
        now: datetime,
        outcomes: dict[int, CycleOutcome],
        *,
        timed: bool = False,
    ) -> None:
        """Run the claims' cycles one after the other in this task, in the order given, a
        baseline's without the timeout (unless `timed`); the event loop gets its turn between
        them (`_yield`). A claim lost meanwhile is not run."""
        yields = self._yield_every_s is not None
        for claim in claims:
            if yields:
                await self._yield()
            if claim.cycle_id not in self._held:  # lost while observing, or meanwhile
                outcomes[claim.account_id] = _not_run(claim)
                continue
            untimed = not timed and claim.agent.kind in BASELINE_KINDS
            outcomes[claim.account_id] = await self._run_cycle(
                desk, snapshot, claim, slot_at, now, timed=not untimed
            )

    async def _yield(self) -> None:
        """Give the event loop its turn (HTTP requests, the daemon's own tasks) if this task has
        held it for `yield_every_s` since its last turn; at once with `yield_every_s` 0."""
        if self._yield_every_s is None:
            return
        if time.monotonic() - self._turn_s >= self._yield_every_s:
            for _turn in range(YIELD_TURNS):
                await asyncio.sleep(0)
            self._turn_s = time.monotonic()

    def concurrent(self, agents: Collection[Agent]) -> bool:
        """Whether the cycles of `agents` at one slot run concurrently, each in a task of its own
        (else inline, in order: see the class docstring)."""
        return not self._inline_cycles or (
            len(agents) > 1 and any(agent.kind not in BASELINE_KINDS for agent in agents)
        )

    def _release(self, cycle_ids: Sequence[int], now: datetime) -> None:
        """End the lease of the claims of a stopped slot not finished yet (best effort: if the
        database is gone too, their lease runs out on its own, as they are no longer renewed)."""
        unfinished = [cycle_id for cycle_id in cycle_ids if cycle_id in self._held]
        if not unfinished:
            return
        try:
            released = self._ledger.release_claims(unfinished, self._run_id, now)
        except Exception as exc:  # noqa: BLE001  (the slot's own failure is what is raised)
            log.warning(
                "claims_not_released",
                cycle_ids=unfinished,
                error_class=type(exc).__name__,
                error_message=_message(exc),
            )
            return
        log.warning("claims_released", cycle_ids=sorted(released), run_id=self._run_id)

    def _finish(self, claim: _Claim, status: CycleStatus, now: datetime, **details: str) -> bool:
        """Finish the claim's cycle with `status` if this run still holds it; whether it did."""
        self._held.pop(claim.cycle_id, None)
        return self._ledger.finish_cycle(
            claim.cycle_id, status, now, held_by=self._run_id, **details
        )

    def _claim(
        self, account_id: int, agent: Agent, slot_at: datetime, now: datetime
    ) -> _Claim | None:
        lease_until = now + self._lease
        if self._take_over_claimed:
            found = self._ledger.find_cycle(account_id, slot_at)
            if found is not None:
                if found.status is CycleStatus.CLAIMED and self._ledger.take_over_cycle(
                    found.cycle_id, self._run_id, lease_until
                ):
                    return _Claim(account_id, agent, found.cycle_id, taken_over=True)
                return None
        cycle_id = self._ledger.claim_cycle(account_id, slot_at, self._run_id, lease_until, now)
        return None if cycle_id is None else _Claim(account_id, agent, cycle_id, taken_over=False)

    async def _observe(
        self,
        desk: MarketDesk,
        slot_at: datetime,
        claims: Sequence[_Claim],
        now: datetime,
        outcomes: dict[int, CycleOutcome],
        unavailable: list[Exception],
    ) -> MarketSnapshot | None:
        """The slot's snapshot, or None after skipping every claimed cycle when it cannot be had
        (its error then put in `unavailable`)."""
        try:
            snapshot = await desk.gateway.snapshot(desk.snapshot_symbols, slot_at)
            if not snapshot.quotes:
                raise DataUnavailable(f"no {desk.market} symbol has a price at {slot_at}")
        except Exception as exc:
            if action_for(Stage.OBSERVE, exc) is Action.STOP:
                raise
            unavailable.append(exc)
            for claim in claims:
                if not self._finish(claim, CycleStatus.SKIPPED, now, reason=DATA_UNAVAILABLE):
                    outcomes[claim.account_id] = _not_run(claim)
                    continue
                self._bound(desk.market, claim, slot_at).warning(
                    "cycle_skipped",
                    reason=DATA_UNAVAILABLE,
                    cause=failure_cause(exc),
                    error_class=type(exc).__name__,
                    error_message=short_message(exc),
                )
                outcomes[claim.account_id] = CycleOutcome(
                    account_id=claim.account_id,
                    agent=claim.agent.name,
                    cycle_id=claim.cycle_id,
                    status=CycleStatus.SKIPPED,
                    taken_over=claim.taken_over,
                    cause=f"{DATA_UNAVAILABLE}: {type(exc).__name__}: {_message(exc)}",
                )
            return None
        return snapshot

    def _bound(self, market: str, claim: _Claim, slot_at: datetime) -> _CycleLog:
        return _CycleLog(claim.agent.name, market, claim.cycle_id, slot_at)

    async def _decide(self, agent: Agent, context: DecisionContext, *, timed: bool) -> None:
        """The agent's turn, within the cycle's wall-time budget when `timed`."""
        if not timed:
            await agent.decide(context)
            return
        async with asyncio.timeout(self._decide_timeout_s):
            await agent.decide(context)

    async def _run_cycle(
        self,
        desk: MarketDesk,
        snapshot: MarketSnapshot,
        claim: _Claim,
        slot_at: datetime,
        now: datetime,
        *,
        timed: bool = True,
    ) -> CycleOutcome:
        bound = self._bound(desk.market, claim, slot_at)
        bound.info("cycle_claimed", account_id=claim.account_id, taken_over=claim.taken_over)
        if self._clock is not None:
            await self._after_earlier(claim, slot_at, bound)
        yields = self._yield_every_s is not None
        failure: Exception | None = None
        skip: CycleSkipped | None = None
        covered = 0
        if desk.rules.shorting is not None:  # no margin call where no short can be open
            try:
                covered = await self._margin_call(desk, snapshot, claim, slot_at)
            except Exception as exc:  # noqa: BLE001  (action_for decides; STOP re-raises)
                failure = self._failed(Stage.DECIDE, exc, desk, claim, slot_at, now)
        toolbox = Toolbox(
            ledger=self._ledger,
            broker=desk.broker,
            gateway=desk.gateway.at(slot_at),
            snapshot=snapshot,
            universe=desk.universe,
            rules=desk.rules,
            account_id=claim.account_id,
            cycle_id=claim.cycle_id,
            now=slot_at,
            fundamentals=desk.fundamentals,
            pause=self._yield if yields else None,
            trusted=type(claim.agent) in RULE_BASELINES,
        )
        context = DecisionContext(
            now=slot_at,
            market=desk.market,
            agent_name=claim.agent.name,
            account_id=claim.account_id,
            cycle_id=claim.cycle_id,
            universe=toolbox.universe,
            rules=desk.rules,
            tools=toolbox,
            journal=self._ledger,
            masking_keys=self._ledger,
            roster=desk.universe,
            spending=self._ledger,
        )
        if yields:
            await self._yield()
        try:
            if failure is None:
                await self._decide(claim.agent, context, timed=timed)
        except CycleSkipped as exc:
            skip = exc
        except Exception as exc:  # noqa: BLE001  (action_for decides; STOP re-raises)
            failure = self._failed(Stage.DECIDE, exc, desk, claim, slot_at, now)
        if yields:
            await self._yield()
        unvalued = await self._value(desk, snapshot, claim, slot_at, now, bound)
        if yields:
            await self._yield()
        failure = failure or unvalued
        return self._end(desk, claim, slot_at, now, bound, toolbox.placed, covered, failure, skip)

    async def _value(
        self,
        desk: MarketDesk,
        snapshot: MarketSnapshot,
        claim: _Claim,
        slot_at: datetime,
        now: datetime,
        bound: _CycleLog,
    ) -> Exception | None:
        """Write the account's NAV snapshot for the slot; the error that fails the cycle, if any
        (`Action.STOP` raises)."""
        shorting = desk.rules.shorting
        try:
            valued = await write_slot_snapshot(
                self._ledger,
                desk.gateway,
                snapshot,
                claim.account_id,
                shorting,
                cycle_id=claim.cycle_id,
            )
            bound.info("nav_snapshot_written", kind=_SLOT_KIND, nav=valued.nav)
            if shorting is not None and in_margin_call(valued, shorting, desk.rules.currency):
                bound.warning("margin_call_due", account_id=claim.account_id, nav=valued.nav)
        except Exception as exc:  # noqa: BLE001  (action_for decides; STOP re-raises)
            return self._failed(Stage.SNAPSHOT, exc, desk, claim, slot_at, now)
        return None

    def _end(
        self,
        desk: MarketDesk,
        claim: _Claim,
        slot_at: datetime,
        now: datetime,
        bound: _CycleLog,
        placed_orders: Sequence[RecordedOrder],
        covered: int,
        failure: Exception | None,
        skip: CycleSkipped | None,
    ) -> CycleOutcome:
        """Finish the claim's cycle (`failed` with `failure`, `skipped` by `skip`, else `done`)
        and log it; its outcome, counting the fills of `covered` covers and `placed_orders`."""
        skipped = None if skip is None else skip.reason
        fills, rejections = covered, 0
        for placed in placed_orders:
            if placed.created and placed.fill_id is not None:
                fills += 1
            if isinstance(placed.outcome, Rejection):
                rejections += 1
        if failure is not None:
            status = CycleStatus.FAILED
            finished = self._finish_failed(claim, failure, now)
        elif skipped is not None:
            status = CycleStatus.SKIPPED
            finished = self._finish(claim, status, now, reason=skipped)
        else:
            status = CycleStatus.DONE
            finished = self._finish(claim, status, now)
        if not finished:
            bound.warning("claim_lost", run_id=self._run_id, orders=len(placed_orders))
            return _not_run(claim)
        if skipped is not None and failure is None:
            bound.warning("cycle_skipped", reason=skipped)
            self._split(desk, claim, slot_at, skip)
        elif failure is None:
            bound.info("cycle_completed", orders=len(placed_orders), fills=fills)
        else:
            bound.warning(
                "cycle_failed",
                error_class=type(failure).__name__,
                error_message=_message(failure),
                orders=len(placed_orders),
                fills=fills,
            )
        return CycleOutcome(
            account_id=claim.account_id,
            agent=claim.agent.name,
            cycle_id=claim.cycle_id,
            status=status,
            fills=fills,
            rejections=rejections,
            taken_over=claim.taken_over,
            cause=(
                f"{type(failure).__name__}: {_message(failure)}" if failure is not None else skipped
            ),
        )

    async def _margin_call(
        self, desk: MarketDesk, snapshot: MarketSnapshot, claim: _Claim, slot_at: datetime
    ) -> int:
        """Cover the shorts of the claim's account if its newest NAV snapshot put it in a margin
        call (design §4), at the slot's marks, before its agent's turn; how many covers filled
        in this run."""
        shorting = desk.rules.shorting
        if shorting is None:
            return 0
        quantities = self._ledger.open_positions(claim.account_id)
        if not any(quantity < 0 for quantity in quantities.values()):
            return 0
        state = self._ledger.account_state(claim.account_id, slot_at)
        call = MarginCall(
            ledger=self._ledger,
            broker=desk.broker,
            rules=shorting,
            account_id=claim.account_id,
            cycle_id=claim.cycle_id,
            now=slot_at,
        )
        if not call.due(state.cash.currency):
            return 0
        held = tuple(state.positions)
        marks = {s: snapshot.quotes[s].price for s in held if s in snapshot.quotes}
        unpriced = [symbol for symbol in held if symbol not in marks]
        if unpriced:
            marks.update(await last_closes(desk.gateway, unpriced, slot_at))
        check_marks(claim.account_id, held, marks, slot_at)

        def instrument(symbol: str) -> Instrument:
            try:
                return desk.universe.instrument(symbol)
            except KeyError:  # left the universe since it was shorted
                return Instrument(symbol=symbol, market=desk.market, currency=desk.rules.currency)

        placed = call.cover(snapshot, marks, instrument)
        self._bound(desk.market, claim, slot_at).warning(
            "margin_call", covers=len(placed), account_id=claim.account_id
        )
        return sum(1 for r in placed if r.created and isinstance(r.outcome, Fill))

    async def _after_earlier(self, claim: _Claim, slot_at: datetime, bound: _CycleLog) -> None:
        """Wait until the claim's account has no earlier cycle still `claimed` (with a clock):
        one whose lease has ended is marked `interrupted`, one whose lease runs is waited for."""
        if self._clock is None:
            return
        waited = False
        while earlier := self._ledger.claims_before(claim.account_id, slot_at):
            now = self._clock()
            running = False
            for cycle in earlier:
                if cycle.lease_until >= now:
                    running = True
                elif self._ledger.interrupt_cycle(cycle.cycle_id, now, expired_at=now):
                    bound.warning(
                        "cycle_interrupted",
                        interrupted_cycle_id=cycle.cycle_id,
                        interrupted_slot_at=cycle.slot_at,
                        claimed_by=cycle.claimed_by,
                        reason="superseded",
                    )
            if running:
                if not waited:
                    bound.warning("cycle_waits_for_earlier", earlier=[c.cycle_id for c in earlier])
                    waited = True
                await asyncio.sleep(self._wait_s)

    def _failed(
        self,
        stage: Stage,
        exc: Exception,
        desk: MarketDesk,
        claim: _Claim,
        slot_at: datetime,
        now: datetime,
    ) -> Exception:
        """`exc` when it fails only its cycle (pausing its account first, for `Action.PAUSE`);
        else record the failure if possible, and raise."""
        action = action_for(stage, exc)
        if action is Action.PAUSE:
            self._pause(desk.market, claim, slot_at, exc)
            return exc
        if action is Action.FAIL:
            return exc
        if not isinstance(exc, SQLAlchemyError):
            try:
                self._finish_failed(claim, exc, now)
            except Exception as during:  # the ledger is broken too: report the first failure
                raise exc from during
        raise exc

    def _pause(self, market: str, claim: _Claim, slot_at: datetime, exc: Exception) -> None:
        """Pause the claim's account for the rest of this run, and say so once."""
        if claim.account_id in self._paused:
            return
        paused = PausedAccount(
            account_id=claim.account_id,
            agent=claim.agent.name,
            market=market,
            slot_at=slot_at,
            error_class=type(exc).__name__,
            error_message=_message(exc),
        )
        self._paused[claim.account_id] = paused
        log.error(
            "account_paused",
            account_id=paused.account_id,
            agent=paused.agent,
            market=market,
            slot_at=slot_at,
            reason=paused.error_class,
            error_message=paused.error_message,
        )

    def _finish_failed(self, claim: _Claim, exc: Exception, now: datetime) -> bool:
        return self._finish(
            claim,
            CycleStatus.FAILED,
            now,
            error_class=type(exc).__name__,
            error_message=_message(exc),
        )

    async def write_close_snapshots(
        self, market: str, close_at: datetime, account_ids: Collection[int]
    ) -> int:
        """Write each account's `close` NAV snapshot at a session's `close_at`; how many were new.

        Corporate actions that went ex in the session are applied first (`ActionApplier`); see
        `valuation.write_close_snapshots`.
        """
        desk = self._desk(market)
        if desk.actions is not None:
            await desk.actions.at_close(desk.gateway, close_at, list(account_ids))
        return await write_close_snapshots(
            self._ledger, desk.gateway, close_at, account_ids, desk.rules.shorting
        )


class _CycleLog(NamedTuple):
    """A cycle's log lines, each with the cycle's context first (its agent, market, cycle id and
    slot: what `log.bind` gives, without a bound logger made per cycle): an `info` line the level
    filters out is not even assembled (structlog's `filter_by_level` asks the same standard
    logger)."""

    agent: str
    market: str
    cycle_id: int
    slot_at: datetime

    def info(self, event: str, **fields: object) -> None:
        if _STDLIB_LOG.isEnabledFor(logging.INFO):
            log.info(event, **{**self._asdict(), **fields})

    def warning(self, event: str, **fields: object) -> None:
        log.warning(event, **{**self._asdict(), **fields})


def _not_run(claim: _Claim) -> CycleOutcome:
    """The outcome of a claim lost to another run: not run (to its end) here."""
    return CycleOutcome(
        account_id=claim.account_id,
        agent=claim.agent.name,
        cycle_id=claim.cycle_id,
        status=None,
        taken_over=claim.taken_over,
    )


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def claim_order(
    accounts: Sequence[tuple[int, Agent]], run_id: str, slot_at: datetime
) -> list[tuple[int, Agent]]:
    """`accounts` rotated by a stable hash of (`run_id`, `slot_at`): where several runs claim
    the same slot, each starts at its own account, so daemons ringing together split the slot's
    cycles instead of the first one taking them all. The claim still decides who runs a cycle."""
    if len(accounts) < 2:
        return list(accounts)
    digest = hashlib.sha256(f"{run_id}|{slot_at.isoformat()}".encode()).digest()
    start = int.from_bytes(digest[:8], "big") % len(accounts)
    return [*accounts[start:], *accounts[:start]]
