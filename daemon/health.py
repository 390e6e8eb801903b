"""What the daemon knows of its own health: last good cycles, overdue markets, Prometheus metrics.

This module owns `HealthBoard`. The daemon reports every slot's outcome to it; it keeps the last
successful (`done`) cycle per market and agent, the last slot rung per market and counts of skips
by reason, and feeds a per-daemon Prometheus registry: `openbell_cycles_total{market,status}`,
`openbell_fills_total{market}`, `openbell_rejections_total{market}`, `openbell_data_errors_total
{market}` and the histogram `openbell_cycle_latency_seconds{market}` (one slot's cycles, wall
time). A market is overdue at `now` when one of its slots ended its grace window within the last
`cadence + grace`, after a daemon first rang the market on this ledger (`MarketWatch.since`: a
slot whose grace had closed before was never a daemon's to ring), and the market has had no
successful cycle at or after it: the health endpoint then answers 503. Its body also says each
market's next bell, and the agents that run untrusted code without their jail
(`unsandboxed_agents`: the operator's `[sandbox] allow_unsandboxed` let them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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

    def slot_finished(self, report: SlotReport, *, rejections: int, latency_s: float) -> None:
        """Record what one slot's cycles came to."""
        market = report.market
        self._last_slot[market] = max(report.slot_at, self._last_slot.get(market, report.slot_at))
        for outcome in report.outcomes:
            if outcome.status is None:
                continue
            self._cycles.labels(market, outcome.status.value).inc()
            if outcome.status is CycleStatus.DONE:
                key = (market, outcome.agent)
                self._last_done[key] = max(report.slot_at, self._last_done.get(key, report.slot_at))
        if report.count(CycleStatus.SKIPPED):
            self._data_errors.labels(market).inc()
            self._skips[(market, "data_unavailable")] = self._skips.get(
                (market, "data_unavailable"), 0
            ) + report.count(CycleStatus.SKIPPED)
        self._fills.labels(market).inc(report.fills)
        self._rejections.labels(market).inc(rejections)
        self._latency.labels(market).observe(latency_s)

    def cycles_marked(self, market: str, status: CycleStatus, count: int = 1) -> None:
        """Count cycles finished outside a slot run (missed, interrupted)."""
        self._cycles.labels(market, status.value).inc(count)

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
        body: dict[str, Any] = {
            "status": "overdue" if overdue else "ok",
            "now": now.isoformat(),
            "overdue": {market: at.isoformat() for market, at in sorted(overdue.items())},
            "unsandboxed_agents": list(self._unsandboxed),
            "markets": {
                market: {
                    "next_bell": _iso(self._next_slot(market, now)),
                    "watched_since": _iso(watch.since),
                    "last_slot": _iso(self._last_slot.get(market)),
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


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
