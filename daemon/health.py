"""What the daemon knows of its own health: last good cycles, overdue markets, Prometheus metrics.

This module owns `HealthBoard`. The daemon reports every slot's outcome to it; it keeps the last
successful (`done`) cycle per market and agent, the last slot rung per market and counts of skips
by reason, and per market its last bell (`LastBell`): the slot in progress, or how the last one
ended (`done`, `failed`, `data_unavailable` with the vendor's cause, `not_run` with what became of
the decisions it did not run, `interrupted` by a stop, `slot_failed`). It feeds a per-daemon
Prometheus registry: `openbell_cycles_total{market,status}`, `openbell_fills_total{market}`,
`openbell_rejections_total{market}`, `openbell_data_errors_total{market}`,
`openbell_slot_in_progress{market}`, `openbell_slots_total{market,outcome}`,
`openbell_decisions_not_run_total{market,reason}`, `openbell_last_slot_timestamp_seconds{market}`
and the histogram `openbell_cycle_latency_seconds{market}` (one slot's cycles, wall time). A
market is overdue at `now` when one of its slots ended its grace window within the last `cadence +
grace`, after a daemon first rang the market on this ledger (`MarketWatch.since`: a
slot whose grace had closed before was never a daemon's to ring), and the market has had no
successful cycle at or after it: the health endpoint then answers 503. Its body also says each
market's next bell, and the agents that run untrusted code without their jail
(`unsandboxed_agents`: the operator's `[sandbox] allow_unsandboxed` let them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from openbell.daemon.runner import SlotReport
from openbell.store.records import CycleStatus

#: A slot of a market relative to an instant: the latest at or before it, or the next after it
#: (None: none within a week or two).
SlotFinder = Callable[[str, datetime], datetime | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketWatch:
    """How often a market rings, how late a slot may run, and since when a daemon has rung it on
    this ledger (None: count every recent slot)."""

    cadence: timedelta
    grace: timedelta
    since: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LastBell:
    """A market's last slot as this daemon saw it: `state` is `running` while its cycles run,
    else how it ended: `done` (every decision ran), `failed` (a cycle failed), `data_unavailable`
    (the market's data could not be had: `cause` and `message` say why), `not_run` (decisions
    it did not run: `not_run` counts them by what became of them, such as `interrupted` by the
    stop of an earlier run), `interrupted` (this daemon stopped during it) or `slot_failed` (the
    slot itself failed: `cause`). `counts` are its cycles by status."""

    slot_at: datetime
    state: str
    started_at: datetime | None = None
    cause: str | None = None
    message: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    not_run: Mapping[str, int] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON of `/healthz`'s `last_bell`."""
        return {
            "slot_at": self.slot_at.isoformat(),
            "state": self.state,
            "started_at": _iso(self.started_at),
            "cause": self.cause,
            "message": self.message,
            "cycles": dict(sorted(self.counts.items())),
            "not_run": dict(sorted(self.not_run.items())),
        }


#: What a decision this daemon did not run may be in the ledger when a peer daemon (sharing a
#: Postgres ledger) ran it or runs it now: not a decision lost.
RUN_ELSEWHERE = frozenset({"done", "failed", "skipped", "claimed"})

#: The states of a last bell that are no success (each counted in `skipped` and notified).
TROUBLE_STATES = frozenset({"failed", "data_unavailable", "not_run", "interrupted", "slot_failed"})


class HealthBoard:
    """The daemon's health state and metrics; one per daemon (tests run several in-process)."""

    def __init__(
        self,
        watches: Mapping[str, MarketWatch],
        latest_slot: SlotFinder,
        next_slot: SlotFinder,
        *,
        unsandboxed: Sequence[str] = (),
    ) -> None:
        self._watches = dict(watches)
        self._unsandboxed = sorted(unsandboxed)
        self._latest_slot = latest_slot
        self._next_slot = next_slot
        self._last_done: dict[tuple[str, str], datetime] = {}
        self._last_slot: dict[str, datetime] = {}
        self._skips: dict[tuple[str, str], int] = {}
        self._bells: dict[str, LastBell] = {}
        self.registry = CollectorRegistry()
        self._cycles = Counter(
            "openbell_cycles",
            "Cycles run, by final status",
            ["market", "status"],
            registry=self.registry,
        )
        self._fills = Counter(
            "openbell_fills", "Fills recorded", ["market"], registry=self.registry
        )
        self._rejections = Counter(
            "openbell_rejections", "Orders rejected", ["market"], registry=self.registry
        )
        self._data_errors = Counter(
            "openbell_data_errors",
            "Slots whose market data could not be had",
            ["market"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "openbell_cycle_latency_seconds",
            "Wall time of one slot's cycles",
            ["market"],
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 600, 1800),
            registry=self.registry,
        )
        self._overdue = Gauge(
            "openbell_market_overdue",
            "1 when the market is overdue",
            ["market"],
            registry=self.registry,
        )

        self._in_progress = Gauge(
            "openbell_slot_in_progress",
            "1 while a slot of the market runs",
            ["market"],
            registry=self.registry,
        )
        self._slots = Counter(
            "openbell_slots",
            "Slots rung, by how they ended",
            ["market", "outcome"],
            registry=self.registry,
        )
        self._not_run = Counter(
            "openbell_decisions_not_run",
            "Decisions of a slot not run, by what became of them",
            ["market", "reason"],
            registry=self.registry,
        )
        self._last_slot_ts = Gauge(
            "openbell_last_slot_timestamp_seconds",
            "The last slot rung (Unix time)",
            ["market"],
            registry=self.registry,
        )
        for market in self._watches:
            self._in_progress.labels(market).set(0)

    def last_bell(self, market: str) -> LastBell | None:
        """The market's last bell as this daemon saw it (None: none rung yet)."""
        return self._bells.get(market)

    def slot_started(self, market: str, slot_at: datetime, started_at: datetime) -> None:
        """A slot of `market` starts running its cycles."""
        self._bells[market] = LastBell(slot_at=slot_at, state="running", started_at=started_at)
        self._in_progress.labels(market).set(1)

    def slot_failed(self, market: str, slot_at: datetime, cause: str, message: str) -> None:
        """The slot failed as a whole (`cause`: `store_unavailable`, `slot_failed`)."""
        self._end(
            LastBell(
                slot_at=slot_at,
                state="slot_failed",
                cause=cause,
                message=message,
                started_at=self._started(market, slot_at),
            ),
            market,
        )

    def slot_interrupted(self, market: str, slot_at: datetime, counts: Mapping[str, int]) -> None:
        """This daemon stopped during the slot; `counts` are its cycles by status, the ones
        marked `interrupted` by the stop included."""
        self._end(
            LastBell(
                slot_at=slot_at,
                state="interrupted",
                cause="daemon_stopping",
                counts=dict(counts),
                started_at=self._started(market, slot_at),
            ),
            market,
        )

    def slot_finished(
        self,
        report: SlotReport,
        *,
        rejections: int,
        latency_s: float,
        not_run: Mapping[str, int] | None = None,
    ) -> None:
        """Record what one slot's cycles came to; `not_run` says what became of the decisions
        this daemon did not run (by the status their cycle has in the ledger)."""
        market = report.market
        not_run = dict(not_run or {})
        if report.count(None) and not not_run:
            not_run = {"unknown": report.count(None)}
        # Decisions a peer daemon ran (or runs now) were run: only the others are trouble.
        missing = {reason: n for reason, n in not_run.items() if reason not in RUN_ELSEWHERE}
        self._end(_bell_of(report, not_run, missing, self._started(market, report.slot_at)), market)
        for reason, count in not_run.items():
            self._not_run.labels(market, reason).inc(count)
        for reason, count in missing.items():
            self._skip(market, f"not_run:{reason}", count)
        self._last_slot[market] = max(report.slot_at, self._last_slot.get(market, report.slot_at))
        for outcome in report.outcomes:
            if outcome.status is None:
                continue
            self._cycles.labels(market, outcome.status.value).inc()
            if outcome.status is CycleStatus.DONE:
                key = (market, outcome.agent)
                self._last_done[key] = max(report.slot_at, self._last_done.get(key, report.slot_at))
        if report.count(CycleStatus.SKIPPED):
            reason = "data_unavailable" if report.unavailable_cause is not None else "skipped"
            if report.unavailable_cause is not None:
                self._data_errors.labels(market).inc()
            self._skip(market, reason, report.count(CycleStatus.SKIPPED))
        self._fills.labels(market).inc(report.fills)
        self._rejections.labels(market).inc(rejections)
        self._latency.labels(market).observe(latency_s)

    def cycles_marked(
        self, market: str, status: CycleStatus, count: int = 1, reason: str | None = None
    ) -> None:
        """Count cycles finished outside a slot run (missed, interrupted), each a skip of its
        market (`missed:<reason>` or `interrupted`)."""
        if count <= 0:
            return
        self._cycles.labels(market, status.value).inc(count)
        self._skip(market, status.value if reason is None else f"{status.value}:{reason}", count)

    def _skip(self, market: str, reason: str, count: int) -> None:
        self._skips[(market, reason)] = self._skips.get((market, reason), 0) + count

    def _started(self, market: str, slot_at: datetime) -> datetime | None:
        bell = self._bells.get(market)
        return bell.started_at if bell is not None and bell.slot_at == slot_at else None

    def _end(self, bell: LastBell, market: str) -> None:
        """The market's slot ended as `bell` says."""
        self._bells[market] = bell
        self._in_progress.labels(market).set(0)
        self._slots.labels(market, bell.state).inc()
        self._last_slot[market] = max(bell.slot_at, self._last_slot.get(market, bell.slot_at))
        self._last_slot_ts.labels(market).set(self._last_slot[market].timestamp())

    def overdue(self, now: datetime) -> dict[str, datetime]:
        """Overdue markets, each with the slot it has had no successful cycle since."""
        found: dict[str, datetime] = {}
        for market, watch in self._watches.items():
            due = self._latest_slot(market, now - watch.grace)
            late = (
                due is not None
                and due >= now - watch.grace - watch.cadence
                and (watch.since is None or due + watch.grace >= watch.since)
            )
            last = max(
                (at for (name, _), at in self._last_done.items() if name == market), default=None
            )
            if late and due is not None and (last is None or last < due):
                found[market] = due
            self._overdue.labels(market).set(1 if market in found else 0)
        return found

    def status(self, now: datetime) -> tuple[bool, dict[str, Any]]:
        """(healthy, the JSON body of /healthz) at `now`."""
        overdue = self.overdue(now)
        troubled = sorted(
            market for market, bell in self._bells.items() if bell.state in TROUBLE_STATES
        )
        running = sorted(market for market, bell in self._bells.items() if bell.state == "running")
        body: dict[str, Any] = {
            "status": "overdue" if overdue else "degraded" if troubled else "ok",
            "running": running,
            "degraded": troubled,
            "now": now.isoformat(),
            "overdue": {market: at.isoformat() for market, at in sorted(overdue.items())},
            "unsandboxed_agents": list(self._unsandboxed),
            "markets": {
                market: {
                    "next_bell": _iso(self._next_slot(market, now)),
                    "watched_since": _iso(watch.since),
                    "last_slot": _iso(self._last_slot.get(market)),
                    "last_bell": (
                        None if market not in self._bells else self._bells[market].record()
                    ),
                    "skipped": {
                        reason: count
                        for (name, reason), count in sorted(self._skips.items())
                        if name == market
                    },
                    "last_success": {
                        agent: at.isoformat()
                        for (name, agent), at in sorted(self._last_done.items())
                        if name == market
                    },
                }
                for market, watch in self._watches.items()
            },
        }
        return not overdue, body

    def metrics(self) -> bytes:
        """The Prometheus text exposition of this daemon's metrics."""
        return generate_latest(self.registry)


def _bell_of(
    report: SlotReport,
    not_run: Mapping[str, int],
    missing: Mapping[str, int],
    started_at: datetime | None,
) -> LastBell:
    """The last bell `report` makes: `data_unavailable` (with its cause) before `failed` before
    `not_run` (decisions `missing`) before `done`."""
    counts = {status.value: report.count(status) for status in CycleStatus if report.count(status)}
    if report.count(None):
        counts["not_run"] = report.count(None)
    state = "done"
    cause = message = None
    if report.count(CycleStatus.SKIPPED) and report.unavailable_cause is not None:
        state, cause = "data_unavailable", report.unavailable_cause
        message = report.unavailable_message
    elif report.count(CycleStatus.FAILED):
        state = "failed"
    elif missing:
        state, cause = "not_run", ", ".join(sorted(missing))
    return LastBell(
        slot_at=report.slot_at,
        state=state,
        cause=cause,
        message=message,
        counts=counts,
        not_run=dict(not_run),
        started_at=started_at,
    )


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
