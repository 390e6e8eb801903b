"""The live daemon: the replay's cycle runner driven by the wall clock and APScheduler's bells.

This module owns `run_live`. It checks the schema, takes the SQLite lock (one daemon per file;
Postgres daemons share the work through the cycle claim), opens an account per enrolled agent,
verifies the database and the ledger since its checkpoints and pauses accounts that fail
(`verifying.py`, in a worker thread, extending systemd's start timeout meanwhile), recovers
(`recovery.py`: abandoned claims, catch-up slots; `holes.py`: missed slots), refuses markets whose
calendar ends within `HORIZON` (exit 2 when none can ring), and then rings (`scheduler.Bells`). Each
bell runs its slot through `SlotRinger` (`ringing.py`: `CycleRunner.run_slot` for the market's
unpaused accounts, run again while its grace lasts when the store is away); every source is wrapped
to retry within the slot's grace and, live, to record the bars and news it reads in the store's
cache and to remember the prices orders fill at. Claims are leased for the plan's `lease_s` (a
minute) and renewed three times a lease while their cycles run; a sweep every half lease repeats the
claim recovery, so that a peer completes the cycles of a daemon that died or froze, and this daemon
those of its own slots that failed (which release their claims), while their grace lasts, and
records `missed`, with their cause, the slots of the watched history that have no cycle once their
grace has ended (a store away past the grace, a daemon frozen across bells or down; start-up's sweep
looks at the whole watched history, later ones at what is new, and every half hour a deep check
behind); every `full_verify_every_s` the whole ledger is verified in a worker thread. A store that
is away at start-up delays the start-up recovery, which is tried again, and does not stop the
daemon. Systemd hears EXTEND_TIMEOUT_USEC while start-up verifies, READY, a WATCHDOG ping only while
the loop ticks, and STOPPING. The HTTP server (`daemon.http`, on loopback by default) serves
`/healthz` and `/metrics`, the routes the plan's `web` factory builds (API, pages) and `/mcp` for
its outside agents (`mcp_http.py`; on a free loopback port when the plan has no `[http]`); it closes
after the cycles have stopped. The daemon does not touch signals: its caller records SIGINT and
SIGTERM in the `StopRequest` it passes (`daemon.stopping`). A stop requested before the daemon rings
ends start-up at the next checkpoint (`StartupStopped`); once it rings (start-up recovery included),
it stops ringing, ends the sources' retries at once (a slot whose vendor is away finishes its
cycles `skipped`), lets running cycles finish for `stop_grace_s`, cancels the rest (and the slots
waiting to be run again) and marks this run's unfinished claims `interrupted`, each on the health
board and told to the plan's event sink (`daemon.events`: start, stop, each slot's end, missed
cycles, a health tick every heartbeat)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta

import structlog
from sqlalchemy import Engine
from starlette.routing import BaseRoute

from openbell.daemon.clock import Clock
from openbell.daemon.error_policy import Action, Stage, action_for, store_unavailable
from openbell.daemon.events import DaemonEvent, emit
from openbell.daemon.health import HealthBoard
from openbell.daemon.holes import Causes, HoleSweep, MissedCause, WatchedMarket
from openbell.daemon.http import HttpServer, WebParts, health_routes, is_loopback, serve_http
from openbell.daemon.locks import DaemonLock
from openbell.daemon.mcp_http import MCP_PATH, mcp_parts
from openbell.daemon.plan import LivePlan, MarketPlan, build_desks, outside_hub
from openbell.daemon.recovery import (
    catch_up_slots,
    interrupt_abandoned,
    split_abandoned,
)
from openbell.daemon.retrying import short_message
from openbell.daemon.ringing import Backoff, SlotRinger, first_line
from openbell.daemon.runner import CycleRunner
from openbell.daemon.scheduler import Bells, report_horizon
from openbell.daemon.sdnotify import Notifier
from openbell.daemon.stopping import REQUESTED, StopRequest
from openbell.daemon.verifying import full_verifications, verify_at_startup
from openbell.markets.adapters.failures import failure_cause
from openbell.markets.errors import OperatorError
from openbell.store.cache import SqlBarCache
from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import check_schema, make_engine, parse_url
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus

log = structlog.stdlib.get_logger(__name__)

SWEEP_S = 300.0
#: Under a fast test clock, sweeps (real seconds apart) are no closer than this.
MIN_SWEEP_S = 0.5
TICK_S = 1.0
#: How often (clock seconds) the sweep also looks behind its mark for rows gone (`holes.py`).
DEEP_SWEEP_S = 1800.0
#: How often the loop looks at the stop request, in seconds.
POLL_S = 0.1
#: A slot's cycles give the event loop its turn (HTTP requests, leases, sweeps) whenever they
#: have held it this long (`CycleRunner`'s `yield_every_s`): between claims, between cycles and
#: between a cycle's steps (decision, NAV snapshot, finish).
YIELD_EVERY_S: float | None = 0.0


def new_run_id() -> str:
    """`host:pid:uuid`, stored as the holder of every claim this run makes."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def run_live(
    plan: LivePlan,
    clock: Clock,
    *,
    stop: StopRequest | None = None,
    notifier: Notifier | None = None,
) -> int:
    """Run the daemon until `stop` is set; 0 after an orderly stop.

    Raises `StartupStopped` when `stop` is set before the daemon rings, and `OperatorError`
    (exit 2) for a schema not at head, a SQLite ledger held by another daemon, a non-loopback HTTP
    address, or when no market's calendar covers the coming week.
    """
    stop = stop if stop is not None else StopRequest()
    engine = make_engine(plan.store_url, redactor=plan.redactor)
    lock = DaemonLock(plan.store_url)
    try:
        revision = check_schema(engine)
        stop.checkpoint("schema check")
        lock.acquire()
        daemon = _Daemon(plan, clock, engine, lock, notifier or Notifier())
        return asyncio.run(daemon.serve(stop, revision))
    finally:
        lock.release()
        engine.dispose()


class _Daemon:
    def __init__(
        self, plan: LivePlan, clock: Clock, engine: Engine, lock: DaemonLock, notifier: Notifier
    ) -> None:
        self.plan = plan
        self.clock = clock
        self.engine = engine
        self.lock = lock
        self.notifier = notifier
        self.ledger = Ledger(engine)
        self.run_id = plan.run_id or new_run_id()
        # Clock seconds per real second: leases are in clock time, waits in real time.
        self.speed = float(getattr(clock, "speed", 1.0))
        self.last_tick_s = time.monotonic()
        # Set when the stop begins: the sources' retries give up at once (`RetryingSource`).
        self.stopping = False

    # -- set-up ----------------------------------------------------------------------------

    def _ringable(self, now: datetime) -> list[MarketPlan]:
        ringable = [
            market
            for market in self.plan.markets
            if report_horizon(market.bell, now, scheduled=False)
        ]
        if not ringable:
            names = ", ".join(market.market for market in self.plan.markets)
            raise OperatorError(
                f"no market can ring: the calendars of {names} do not cover the coming week "
                "(calendar_horizon); upgrade exchange_calendars"
            )
        return ringable

    async def serve(self, stop: StopRequest, revision: str) -> int:
        now = self.clock.now()
        markets = self._ringable(now)
        desks, accounts = build_desks(
            markets,
            self.ledger,
            now,
            clock=self.clock,
            cache=SqlBarCache(self.engine),
            stopping=lambda: self.stopping,
        )
        stop.checkpoint("opening accounts")
        self.accounts = accounts
        self.grace = {m.market: m.bell.grace for m in markets}
        self.specs = {m.market: m for m in markets}
        self.runner = CycleRunner(
            ledger=self.ledger,
            desks=desks,
            run_id=self.run_id,
            lease=timedelta(seconds=self.plan.lease_s),
            decide_timeout_s=self.plan.decide_timeout_s,
            clock=self.clock.now,
            wait_s=max(self.plan.lease_s / 6 / self.speed, MIN_SWEEP_S / 5),
            on_split=lambda split: self.holes.split(split),
            yield_every_s=YIELD_EVERY_S,
        )
        if self.lock.held:  # the one daemon of this SQLite file: every other holder is dead
            ended = self.ledger.expire_claims(now, except_holder=self.run_id)
            if ended:
                log.warning("claims_expired", count=ended, reason="holder_dead")
        await verify_at_startup(self.engine, self.ledger, now, self.notifier)
        stop.checkpoint("ledger verify")
        # From here on a stop is an orderly one (the loop below sees it at once).
        since = DaemonRuns(self.engine).record_start(self.run_id, list(self.specs), now)
        self.holes = HoleSweep(
            self.ledger, [self._watched(market, since[market.market]) for market in markets]
        )
        self.board = HealthBoard(
            {m.market: replace(m.watch, since=since[m.market]) for m in markets},
            lambda name, at: self.specs[name].latest_slot(at),
            lambda name, at: self.specs[name].next_slot(at),
            unsandboxed=self.plan.unsandboxed_agents,
        )
        loop = asyncio.get_running_loop()
        server = None
        try:
            server = await self._serve_http()
            log.info(
                "daemon_started",
                run_id=self.run_id,
                store_url=parse_url(self.plan.store_url).render_as_string(hide_password=True),
                schema_revision=revision,
                markets=[m.market for m in self.plan.markets],
                ringing=[m.market for m in markets],
                agents=sorted({a.name for m in self.plan.markets for a in m.agents}),
                now_at=now,
            )
            self._emit(
                "daemon_started",
                now,
                run_id=self.run_id,
                markets=[m.market for m in markets],
            )
            self.causes = Causes({m.market: m.bell.grace for m in markets})
            self.ringer = SlotRinger(
                runner=self.runner,
                ledger=self.ledger,
                accounts=self.accounts,
                specs=self.specs,
                clock=self.clock,
                board=self.board,
                causes=self.causes,
                run_id=self.run_id,
                events=self.plan.events,
            )
            self.bells = Bells(
                clock=self.clock,
                bells=[m.bell for m in markets],
                on_slot=self.ringer.ring,
                on_close=self._on_close,
                on_missed=self._on_missed,
                on_horizon_check=self._check_horizons,
            )
            self.bells.start()
            for market in markets:
                log.info(
                    "next_bell",
                    market=market.market,
                    next_bell_at=market.next_slot(now),
                    watched_since=since[market.market],
                )
            # Recover after the bells run, so that no slot falls between the two: a slot before
            # `now` is caught up (or recorded missed) by this task, one after it rings. Its cycles
            # are cycles like any other: the daemon is ready, and a stop is an orderly one.
            ringing_at = self.clock.now()
            self.causes.started(ringing_at)
            self.recovering = loop.create_task(self._start_recovery(ringing_at))
            self.notifier.ready(f"ringing {', '.join(self.bells.markets)}")
            background = [
                loop.create_task(self._tick()),
                loop.create_task(self._heartbeat()),
                loop.create_task(self._renew_loop()),
                loop.create_task(self._sweep_loop()),
            ]
            if self.plan.full_verify_every_s:
                every_s = max(self.plan.full_verify_every_s / self.speed, MIN_SWEEP_S)
                background.append(
                    loop.create_task(
                        full_verifications(self.engine, self.ledger, every_s, self.clock.now)
                    )
                )
            while not stop.is_set():
                if self.recovering.done():
                    self.recovering.result()  # a failed start-up recovery stops the daemon
                await asyncio.sleep(POLL_S)
            await self._stop(stop.reason or REQUESTED, background)
            return 0
        finally:
            if server is not None:
                await server.close()

    async def _serve_http(self) -> HttpServer | None:
        """The HTTP server of the plan: health and metrics and what the ops layer mounts on
        `[http] listen`, and `/mcp` when the plan has outside agents (alone, on a free loopback
        port, when the plan has no `[http]`)."""
        hub = outside_hub(self.plan.markets)
        listen = self.plan.http_listen
        if listen is None and hub is None:
            return None
        host, port = listen if listen is not None else ("127.0.0.1", 0)
        web = WebParts()
        health: list[BaseRoute] = []
        if listen is not None:
            health = health_routes(self.board, self.clock.now)
            if self.plan.web is not None:
                web = self.plan.web(self.engine, lambda: self.board.status(self.clock.now())[1])
        mcp = (
            WebParts()
            if hub is None
            else mcp_parts(
                hub, self.ledger, loopback=is_loopback(host), limits=self.plan.mcp_limits
            )
        )
        server = await serve_http(
            host,
            port,
            routes=web.routes,
            open_routes=[*health, *web.open_routes, *mcp.open_routes],
            lifespans=[*web.lifespans, *mcp.lifespans],
            allow_remote=self.plan.http_allow_remote,
            read_token=self.plan.http_read_token,
            read_timeout_s=self.plan.http_read_timeout_s,
        )
        if hub is not None:
            hub.mcp_url = f"{server.url}{MCP_PATH}"
            log.info("mcp_listening", url=hub.mcp_url)
        return server

    def _watched(self, market: MarketPlan, since: datetime) -> WatchedMarket:
        """The market's watched history: each account's from the later of the market's first
        watch (`since`) and the account's opening."""
        return WatchedMarket(
            market=market.market,
            cadence=market.cadence,
            grace=market.bell.grace,
            slot_times=market.slot_times,
            accounts={
                account_id: max(since, self.ledger.account_opened_at(account_id))
                for account_id, _ in self.accounts[market.market]
            },
        )

    # -- ringing ---------------------------------------------------------------------------

    async def _on_close(self, market: str, close_at: datetime) -> None:
        ids = [account_id for account_id, _ in self.ringer.unpaused(market)]
        try:
            written = await self.runner.write_close_snapshots(market, close_at, ids)
            log.info("close_snapshots_written", market=market, close_at=close_at, count=written)
        except Exception as exc:
            if action_for(Stage.READ, exc) is not Action.RETRY:  # a bug: its traceback is wanted
                log.exception("close_snapshots_failed", market=market, close_at=close_at)
                return
            # The vendor is away (its reads logged `vendor_read_failed`): one short line.
            log.warning(
                "close_snapshots_failed",
                market=market,
                close_at=close_at,
                cause=failure_cause(exc),
                error_class=type(exc).__name__,
                error_message=short_message(exc),
            )

    async def _on_missed(self, market: str, slot_at: datetime) -> None:
        """A bell APScheduler did not ring in its grace: record each account's cycle `missed`."""
        recorded = self.holes.record_slot(
            market, slot_at, self.clock.now(), self.causes.of, self.ringer.paused_accounts()
        )
        self.board.cycles_marked(market, CycleStatus.MISSED, recorded)
        if recorded:
            self._emit("cycles_missed", self.clock.now(), market, count=recorded)

    def _check_horizons(self) -> None:
        now = self.clock.now()
        for market in self.plan.markets:
            report_horizon(market.bell, now, scheduled=market.market in self.specs)

    # -- recovery --------------------------------------------------------------------------

    async def _recover(self, now: datetime, *, startup: bool = True, deep: bool = False) -> None:
        """Recover abandoned claims (completed while their grace lasts, `interrupted` after),
        record `missed` the holes whose grace has ended (`deep`: also behind the sweep's mark),
        and, at start-up, ring the slots whose grace is still open."""
        grace_of = {
            account_id: self.grace[market]
            for market, opened in self.accounts.items()
            for account_id, _ in opened
        }
        # A claim of this run's still running is its own, whatever its lease says.
        running = self.runner.held
        stale = [c for c in self.ledger.claims(expired_at=now) if c.cycle_id not in running]
        current, past = split_abandoned(stale, grace_of, now)
        marked = interrupt_abandoned(self.ledger, past, now)
        if marked:
            markets_of = {
                account_id: market
                for market, opened in self.accounts.items()
                for account_id, _ in opened
            }
            by_market = Counter(markets_of.get(claim.account_id) for claim in past)
            for market, count in by_market.items():
                if market is not None:
                    self.board.cycles_marked(market, CycleStatus.INTERRUPTED, count)
        if marked or current:
            log.warning("claims_recovered", interrupted=marked, to_complete=len(current))
        due: list[tuple[str, datetime]] = []
        for market, spec in self.specs.items():
            ids = {account_id for account_id, _ in self.accounts[market]}
            slots = {claim.slot_at for claim in current if claim.account_id in ids}
            if startup:
                slots |= set(
                    catch_up_slots(market, spec.cadence, spec.slot_times, spec.bell.grace, now)
                )
            due += [(market, slot_at) for slot_at in sorted(slots) if spec.is_slot(slot_at)]
        self._sweep_holes(now, deep=deep)
        for market, slot_at in due:
            log.info("slot_recovered", market=market, slot_at=slot_at)
            await self.ringer.ring(market, slot_at)

    async def _start_recovery(self, now: datetime) -> None:
        """The start-up recovery (`_recover`). A store that is away delays it, and does not stop
        the daemon: it is tried again, backing off, and the slots it would have caught up are put
        down to the store if their grace ends meanwhile. Any other failure stops the daemon."""
        backoff = Backoff(self.speed)
        while True:
            try:
                await self._recover(now)
                return
            except Exception as exc:
                if not store_unavailable(exc):
                    raise
                log.warning(
                    "recovery_failed",
                    cause=MissedCause.STORE_UNAVAILABLE.value,
                    error_class=type(exc).__name__,
                    error_message=first_line(exc),
                )
            for market, spec in self.specs.items():
                for slot_at in catch_up_slots(
                    market, spec.cadence, spec.slot_times, spec.bell.grace, now
                ):
                    self.causes.failed(market, slot_at, MissedCause.STORE_UNAVAILABLE)
            await asyncio.sleep(backoff.wait_s())
            now = self.clock.now()

    def _sweep_holes(self, now: datetime, *, deep: bool) -> None:
        """Record `missed`, with their cause, the holes of the watched history (`holes.py`)."""
        recorded = Counter(self.holes.sweep(now, self.causes.of, self.ringer.paused_accounts()))
        if deep:
            recorded.update(self.holes.deep_check(now))
        for market, count in recorded.items():
            self.board.cycles_marked(market, CycleStatus.MISSED, count)
            if count:
                self._emit("cycles_missed", now, market, count=count)

    async def _sweep_loop(self) -> None:
        """Repeat the claim recovery every half lease (at most every `SWEEP_S`), so that a claim
        abandoned by a dead or stuck holder is completed soon after its lease ends."""
        every_s = max(min(SWEEP_S, self.plan.lease_s / 2) / self.speed, MIN_SWEEP_S)
        deep_every_s = max(DEEP_SWEEP_S / self.speed, 2 * MIN_SWEEP_S)
        deep_at_s = time.monotonic() + deep_every_s
        while True:
            await asyncio.sleep(every_s)
            deep = time.monotonic() >= deep_at_s
            try:
                await self._recover(self.clock.now(), startup=False, deep=deep)
            except Exception as exc:
                if store_unavailable(exc):  # the store is away: the next sweep tries again
                    log.warning(
                        "sweep_failed", error_class=type(exc).__name__, cause="store_unavailable"
                    )
                else:
                    log.exception("sweep_failed")
                continue
            if deep:
                deep_at_s = time.monotonic() + deep_every_s

    async def _renew_loop(self) -> None:
        """Renew the lease of the claims being run three times a lease; a renewal that fails
        (the database is away) is tried again at the next turn."""
        every_s = self.plan.lease_s / 3 / self.speed
        while True:
            await asyncio.sleep(every_s)
            try:
                self.runner.renew_leases(self.clock.now())
            except Exception:
                log.exception("lease_renewal_failed")

    # -- liveness --------------------------------------------------------------------------

    async def _tick(self) -> None:
        while True:
            self.last_tick_s = time.monotonic()
            await asyncio.sleep(TICK_S)

    async def _heartbeat(self) -> None:
        watchdog_s = self.notifier.watchdog_s
        every_s = min(
            self.plan.heartbeat_s, watchdog_s / 2 if watchdog_s else self.plan.heartbeat_s
        )
        beats = 0
        next_log_s = time.monotonic() + self.plan.heartbeat_s
        while True:
            await asyncio.sleep(every_s)
            # Ping only while the loop ticks: a stuck loop lets systemd's watchdog fire.
            if time.monotonic() - self.last_tick_s < max(3 * TICK_S, every_s):
                self.notifier.watchdog()
            now = self.clock.now()
            overdue = self.board.overdue(now)
            self._emit("health", now, overdue={m: at.isoformat() for m, at in overdue.items()})
            if time.monotonic() >= next_log_s:
                beats += 1
                next_log_s = time.monotonic() + self.plan.heartbeat_s
                log.info("daemon_heartbeat", beat=beats, now_at=self.clock.now())

    # -- stopping --------------------------------------------------------------------------

    async def _stop(self, reason: str, background: list[asyncio.Task[None]]) -> None:
        log.info("daemon_stopping", reason=reason, running=len(self.ringer.running))
        self.stopping = True
        self.notifier.stopping()
        self.bells.pause()
        self.ringer.stop()
        pending = set(self.ringer.running)
        if not self.recovering.done():
            pending.add(self.recovering)
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=self.plan.stop_grace_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        interrupted = 0
        now = self.clock.now()
        market_of = {
            account_id: market
            for market, opened in self.accounts.items()
            for account_id, _ in opened
        }
        cut: Counter[tuple[str, datetime]] = Counter()
        for claim in self.ledger.claims(held_by=self.run_id):
            if self.ledger.interrupt_cycle(claim.cycle_id, now, held_by=self.run_id):
                interrupted += 1
                cut[(market_of.get(claim.account_id, "?"), claim.slot_at)] += 1
                log.warning(
                    "cycle_interrupted",
                    cycle_id=claim.cycle_id,
                    account_id=claim.account_id,
                    slot_at=claim.slot_at,
                    reason="daemon_stopping",
                )
        self._report_interrupted(cut)
        for task in background:
            task.cancel()
        self.bells.shutdown()
        for market in self.plan.markets:
            close = getattr(market.source, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing a vendor session must not spoil the stop
                    log.exception("source_close_failed", market=market.market)
        await asyncio.sleep(0)  # let the scheduler's shutdown callback run before the last line
        log.info("daemon_stopped", reason=reason, interrupted=interrupted)
        self._emit("daemon_stopped", self.clock.now(), reason=reason, interrupted=interrupted)

    def _emit(self, kind: str, at: datetime, market: str | None = None, **fields: object) -> None:
        emit(self.plan.events, DaemonEvent(kind=kind, at=at, market=market, fields=fields))

    def _report_interrupted(self, cut: Counter[tuple[str, datetime]]) -> None:
        """Put the cycles the stop marked `interrupted` (by market and slot) and the slots still
        running on the health board."""
        for (market, slot_at), count in sorted(cut.items()):
            if market in self.specs:
                self.board.cycles_marked(market, CycleStatus.INTERRUPTED, count)
                self.board.slot_interrupted(market, slot_at, {"interrupted": count})
        for market in self.specs:
            bell = self.board.last_bell(market)
            if bell is not None and bell.state == "running":
                self.board.slot_interrupted(market, bell.slot_at, {})
        ended = {market for market, _ in cut} | {
            market
            for market in self.specs
            if (bell := self.board.last_bell(market)) is not None and bell.state == "interrupted"
        }
        for market in sorted(ended & set(self.specs)):
            bell = self.board.last_bell(market)
            if bell is not None:
                self._emit("slot_finished", self.clock.now(), market, **bell.record())
