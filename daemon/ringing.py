"""Ringing a slot live: run it, and run it again while its grace lasts if the store is away.

This module owns `SlotRinger`, through which every live slot runs (a bell, a catch-up at start-up,
a claim the sweep completes): it runs `CycleRunner.run_slot` for the market's unpaused accounts
and logs `slot_finished` (with `late_s`, how long after the slot it started). One failing slot
never stops the daemon: a slot that fails is logged `slot_failed` with its cause and noted in the
run's `Causes`. When the cause is an unavailable store (`store_unavailable`: Postgres gone or
restarting, a SQLite file full, locked or refusing writes), its claims may never have been
written, so no sweep could find them: the slot is run again in a task of its own, after `Backoff`
waits (one clock second, doubling up to 30), until it runs (`slot_ran_late`, with `late_s` and
the attempts) or its grace ends (`slot_not_run`; the hole sweep then records each account's cycle
`missed`, `store_unavailable`, as soon as the store takes it). Claims written before a failure
are released by the runner and completed by the claim sweep, or taken over by the next attempt.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import structlog

from openbell.agents.protocol import Agent
from openbell.daemon.clock import Clock
from openbell.daemon.error_policy import store_unavailable
from openbell.daemon.events import DaemonEvent, EventSink, emit
from openbell.daemon.health import HealthBoard
from openbell.daemon.holes import Causes, MissedCause
from openbell.daemon.plan import MarketPlan
from openbell.daemon.runner import CycleRunner, SlotReport, claim_order
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus

log = structlog.stdlib.get_logger(__name__)

#: A slot that met an unavailable store is run again after this many clock seconds, doubling up
#: to `RETRY_MAX_S`, while its grace lasts; never sooner than `MIN_RETRY_S` real seconds apart.
RETRY_FIRST_S: Final = 1.0
RETRY_MAX_S: Final = 30.0
MIN_RETRY_S: Final = 0.05


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a database error's runs on over many)."""
    return str(exc).strip().partition("\n")[0]


class Backoff:
    """The waits between tries, in real seconds under a clock running `speed` times faster:
    `RETRY_FIRST_S` clock seconds, doubling up to `RETRY_MAX_S`, never under `MIN_RETRY_S`."""

    def __init__(self, speed: float) -> None:
        self._speed = speed
        self._delay_s = RETRY_FIRST_S

    def wait_s(self, left_s: float | None = None) -> float:
        """The next wait, no longer than `left_s` clock seconds when given."""
        delay_s = self._delay_s if left_s is None else min(self._delay_s, left_s)
        self._delay_s = min(2 * self._delay_s, RETRY_MAX_S)
        return max(delay_s / self._speed, MIN_RETRY_S)


class SlotRinger:
    """Runs the live daemon's slots (see the module docstring).

    `running` holds the tasks running a slot now (a stop waits for them); `stop` cancels the
    retries waiting for their next try.
    """

    def __init__(
        self,
        *,
        runner: CycleRunner,
        ledger: Ledger,
        accounts: Mapping[str, Sequence[tuple[int, Agent]]],
        specs: Mapping[str, MarketPlan],
        clock: Clock,
        board: HealthBoard,
        causes: Causes,
        run_id: str,
        events: EventSink | None = None,
    ) -> None:
        self._runner = runner
        self._ledger = ledger
        self._accounts = accounts
        self._specs = specs
        self._clock = clock
        self._board = board
        self._causes = causes
        self._run_id = run_id
        self._events = events
        # Clock seconds per real second: graces are in clock time, waits in real time.
        self._speed = float(getattr(clock, "speed", 1.0))
        self.running: set[asyncio.Task[Any]] = set()
        self._retrying: dict[tuple[str, datetime], asyncio.Task[None]] = {}
        self._stopping = False

    def unpaused(self, market: str) -> list[tuple[int, Agent]]:
        """The market's accounts not paused, with their agents."""
        opened = self._runner.current(self._accounts[market])
        # Paused in the ledger (its verification failed), or by this run (`Action.PAUSE`).
        paused = self._ledger.paused([account_id for account_id, _ in opened]) | set(
            self._runner.paused
        )
        return [(account_id, agent) for account_id, agent in opened if account_id not in paused]

    def paused_accounts(self) -> set[int]:
        """The accounts paused in the ledger or by this run."""
        ids = [account_id for opened in self._accounts.values() for account_id, _ in opened]
        return self._ledger.paused(ids) | set(self._runner.paused)

    async def ring(self, market: str, slot_at: datetime) -> None:
        """Run the slot; if the store is unavailable, run it again in a task of its own while
        its grace lasts. A stop that cancels the slot ends it here (see `run`)."""
        try:
            cause = await self.run(market, slot_at)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            # Our own stop cancelled the slot after its grace: what it left is checkpointed by
            # the stop (`interrupted`), so the bell ends quietly instead of as a job error with
            # a traceback.
            return
        if cause is not MissedCause.STORE_UNAVAILABLE:
            return
        key = (market, slot_at)
        if key not in self._retrying and not self._stopping:
            task = asyncio.get_running_loop().create_task(self._retry(market, slot_at))
            self._retrying[key] = task
            task.add_done_callback(lambda _task: self._retrying.pop(key, None))

    async def run(self, market: str, slot_at: datetime, *, attempt: int = 1) -> MissedCause | None:
        """Run the slot once; None when it ran, else the cause its cycles not run are put down
        to (noted in `Causes`)."""
        task = asyncio.current_task()
        if task is not None:
            self.running.add(task)
        started_s = time.monotonic()
        started_at = self._clock.now()
        self._board.slot_started(market, slot_at, started_at)
        try:
            accounts = claim_order(self.unpaused(market), self._run_id, slot_at)
            report = await self._runner.run_slot(market, slot_at, accounts, started_at)
        except asyncio.CancelledError:
            log.warning(
                "slot_cancelled",
                market=market,
                slot_at=slot_at,
                reason="daemon_stopping" if self._stopping else "cancelled",
            )
            raise
        except Exception as exc:
            cause = (
                MissedCause.STORE_UNAVAILABLE if store_unavailable(exc) else MissedCause.SLOT_FAILED
            )
            self._causes.failed(market, slot_at, cause)
            self._board.slot_failed(market, slot_at, cause.value, first_line(exc))
            self._ended(market, slot_at)
            fields = {
                "market": market,
                "slot_at": slot_at,
                "attempt": attempt,
                "cause": cause.value,
                "error_class": type(exc).__name__,
                "error_message": first_line(exc),
            }
            if cause is MissedCause.SLOT_FAILED:  # a bug of ours: its traceback is wanted
                log.exception("slot_failed", **fields)
            elif attempt == 1:
                log.error("slot_failed", **fields)
            else:
                log.warning("slot_failed_again", **fields)
            return cause
        finally:
            if task is not None:
                self.running.discard(task)
        self._causes.ran(market, slot_at)
        not_run = self._not_run(report)
        self._board.slot_finished(
            report,
            rejections=report.rejections,
            latency_s=time.monotonic() - started_s,
            not_run=not_run,
        )
        self._ended(market, slot_at)
        log.info(
            "slot_finished",
            market=market,
            slot_at=slot_at,
            late_s=round((started_at - slot_at).total_seconds(), 3),
            done=report.count(CycleStatus.DONE),
            failed=report.count(CycleStatus.FAILED),
            skipped=report.count(CycleStatus.SKIPPED),
            not_run=report.count(None),
            **({"not_run_as": not_run} if not_run else {}),
            **({"cause": report.unavailable_cause} if report.unavailable_cause is not None else {}),
            fills=report.fills,
            next_bell_at=self._specs[market].next_slot(self._clock.now()),
        )
        return None

    def _ended(self, market: str, slot_at: datetime) -> None:
        """Tell the listener how the slot ended (its last bell on the health board)."""
        bell = self._board.last_bell(market)
        if bell is None or bell.slot_at != slot_at:
            return
        fields = {
            **bell.record(),
            "account_ids": [account_id for account_id, _ in self._accounts[market]],
        }
        emit(
            self._events,
            DaemonEvent(kind="slot_finished", at=self._clock.now(), market=market, fields=fields),
        )

    def _not_run(self, report: SlotReport) -> dict[str, int]:
        """What became of the decisions of `report` this run did not run, by the status their
        cycle has in the ledger (`interrupted` by an earlier run's stop, `done` by a peer, still
        `claimed` by one, ...); none when it ran them all. A store that cannot say: `unknown`."""
        ids = [outcome.account_id for outcome in report.outcomes if outcome.status is None]
        if not ids:
            return {}
        found: Counter[str] = Counter()
        try:
            for account_id in ids:
                cycle = self._ledger.find_cycle(account_id, report.slot_at)
                found["no_cycle" if cycle is None else cycle.status.value] += 1
        except Exception:  # noqa: BLE001  (health is best effort; the slot already ran)
            return {"unknown": len(ids)}
        return dict(found)

    def stop(self) -> None:
        """Start no more retries, and cancel those waiting for their next try (one running the
        slot is in `running`, to be waited for)."""
        self._stopping = True
        for task in self._retrying.values():
            if task not in self.running:
                task.cancel()

    async def _retry(self, market: str, slot_at: datetime) -> None:
        """Run again a slot that met an unavailable store, until it runs or its grace ends."""
        deadline_at = slot_at + self._specs[market].bell.grace
        backoff = Backoff(self._speed)
        attempt = 1
        while (left_s := (deadline_at - self._clock.now()).total_seconds()) > 0:
            await asyncio.sleep(backoff.wait_s(left_s))
            started_at = self._clock.now()
            if started_at > deadline_at:
                break
            attempt += 1
            cause = await self.run(market, slot_at, attempt=attempt)
            if cause is None:
                log.warning(
                    "slot_ran_late",
                    market=market,
                    slot_at=slot_at,
                    late_s=round((started_at - slot_at).total_seconds(), 3),
                    attempts=attempt,
                    cause=MissedCause.STORE_UNAVAILABLE.value,
                )
                return
            if cause is not MissedCause.STORE_UNAVAILABLE or self._stopping:
                return
        log.error(
            "slot_not_run",
            market=market,
            slot_at=slot_at,
            attempts=attempt,
            cause=MissedCause.STORE_UNAVAILABLE.value,
        )
