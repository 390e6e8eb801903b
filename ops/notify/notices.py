"""Which notices the daemon's events make: `Notifications`, the daemon's event sink.

This module owns `Notifications` and the notices of `[notify]` (`NotifyConfig.events`):
`daemon_started`, `daemon_stopped`; `slot_trouble` (a slot that ended `failed`, `data_unavailable`
with its cause, `not_run`, `interrupted` or `slot_failed`); `cycles_missed`; `drawdown` (an account
whose last slot NAV is `drawdown_pct` or more below its peak, once until it recovers);
`budget_exhausted` (an LLM cycle of the slot whose loop ended on a budget: `max_turns`,
`max_tool_calls`, `max_tokens`, `max_wall_s`); `model_change` (an LLM cycle of the slot whose
model answered as another model or build than before: its `model_changed` trace row, written by
`agents.llm.recorder`); `health_stale` (a market overdue, once until it is not); `digest` (each
market's board once a day at `digest_at` UTC, on the daemon's clock).

`take` is the sink: it only queues. Everything else (ledger reads, boards, sending) runs in the
`Outbox` worker thread, so a slow ledger read or a dead receiver never holds the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Final

import structlog
from sqlalchemy import Engine

from openbell.agents.kinds import BASELINE_KINDS
from openbell.daemon.events import DaemonEvent
from openbell.ops.notify.sender import Notice, Outbox, RateLimit, Send
from openbell.store import queries
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind, TraceEntry

log = structlog.stdlib.get_logger(__name__)

#: The stop reasons of an LLM cycle's loop that are a budget spent (`agents.llm.run.StopReason`).
BUDGET_STOPS: Final = frozenset({"max_turns", "max_tool_calls", "max_tokens", "max_wall_s"})
#: How many rows of each market's board the digest lists.
DIGEST_ROWS: Final = 10

#: The market boards of the digest, one text block per market (`ops.reports.market_reports` by
#: default).
Boards = Callable[[], list[str]]


#: The notices a cycle's trace row gives, by event: the title after the agent's name, and the
#: body before the row's content.
_TRACE_NOTICES: Final = {
    "budget_exhausted": (" ran out of budget", "The cycle of {name} at {slot_at} ended on "),
    "model_change": ("'s model changed", "In the cycle of {name} at {slot_at}, "),
}


class Notifications:
    """The daemon's event sink (`take`) and what it sends (module docstring)."""

    def __init__(
        self,
        send: Send,
        *,
        engine: Engine,
        events: Collection[str],
        drawdown_pct: float,
        digest_at: str,
        min_interval: timedelta,
        max_per_hour: int,
        boards: Boards | None = None,
    ) -> None:
        self._send = send
        self._engine = engine
        self._ledger = Ledger(engine)
        self._events = frozenset(events)
        self._drawdown = Decimal(str(drawdown_pct)) / 100
        self._digest_time = None if not digest_at else time.fromisoformat(digest_at)
        self._next_digest_at: datetime | None = None
        self._limit = RateLimit(min_interval, max_per_hour)
        self._boards = boards or (lambda: board_texts(engine))
        self._in_drawdown: set[int] = set()
        # Each account's peak slot NAV and newest one, read from `_read_from` on.
        self._peaks: dict[int, tuple[Decimal, Decimal]] = {}
        self._read_from: dict[int, datetime] = {}
        self._stale: set[str] = set()
        self.delivered = 0
        self.suppressed = 0
        self._outbox = Outbox(self._handle)

    def take(self, event: DaemonEvent) -> None:
        """The sink: queue `event` and return."""
        self._outbox.put(event)

    def close(self, timeout_s: float) -> bool:
        """Send what is queued, waiting at most `timeout_s`; whether all of it went."""
        return self._outbox.close(timeout_s)

    # -- the worker thread -----------------------------------------------------------------

    def _handle(self, item: object) -> None:
        if not isinstance(item, DaemonEvent):
            return
        for notice in self._notices(item):
            self._deliver(notice)
        digest = self._digest(item.at)
        if digest is not None:
            self._deliver(digest)

    def _deliver(self, notice: Notice) -> None:
        event = notice.key.partition(":")[0]
        if event not in self._events:
            return
        if not self._limit.allow(notice):
            self.suppressed += 1
            log.info("notice_suppressed", key=notice.key, at=notice.at)
            return
        try:
            delivered = self._send(notice)
        except Exception as exc:  # noqa: BLE001  (a receiver's failure is logged, never raised)
            log.warning("notice_not_sent", key=notice.key, error_class=type(exc).__name__)
            return
        if delivered:
            self.delivered += 1
        else:
            log.warning("notice_not_sent", key=notice.key)

    def _notices(self, event: DaemonEvent) -> list[Notice]:
        kind, at, market, fields = event.kind, event.at, event.market, event.fields
        if kind == "daemon_started":
            markets = ", ".join(fields.get("markets", ()))
            return [
                Notice(
                    key="daemon_started",
                    at=at,
                    title="openbell started",
                    body=f"Ringing {markets} at {at.isoformat()}.",
                    level="success",
                )
            ]
        if kind == "daemon_stopped":
            return [
                Notice(
                    key="daemon_stopped",
                    at=at,
                    title="openbell stopped",
                    body=f"Stopped ({fields.get('reason')}) at {at.isoformat()}; "
                    f"{fields.get('interrupted', 0)} cycles interrupted.",
                    level="warning",
                )
            ]
        if kind == "cycles_missed":
            return [
                Notice(
                    key=f"cycles_missed:{market}",
                    at=at,
                    title=f"openbell {market}: cycles missed",
                    body=f"{fields.get('count')} cycles recorded missed.",
                    level="warning",
                )
            ]
        if kind == "health":
            return self._health(at, dict(fields.get("overdue", {})))
        if kind == "slot_finished" and market is not None:
            return [*self._slot(event, market), *self._accounts(event, market)]
        return []

    def _slot(self, event: DaemonEvent, market: str) -> list[Notice]:
        fields = event.fields
        state = str(fields.get("state"))
        if state in ("done", "running"):
            return []
        cause = fields.get("cause")
        lines = [f"Slot {fields.get('slot_at')}: {state}" + (f" ({cause})" if cause else "")]
        if fields.get("message"):
            lines.append(str(fields["message"]))
        cycles = dict(fields.get("cycles", {}))
        if cycles:
            lines.append("cycles: " + ", ".join(f"{k} {v}" for k, v in sorted(cycles.items())))
        not_run = dict(fields.get("not_run", {}))
        if not_run:
            lines.append("not run: " + ", ".join(f"{k} {v}" for k, v in sorted(not_run.items())))
        return [
            Notice(
                key=f"slot_trouble:{market}",
                at=event.at,
                title=f"openbell {market}: slot {state}",
                body="\n".join(lines),
                level="failure" if state in ("failed", "slot_failed") else "warning",
            )
        ]

    def _accounts(self, event: DaemonEvent, market: str) -> list[Notice]:
        """Drawdowns past the threshold and spent budgets among the market's accounts."""
        ids = [int(account_id) for account_id in event.fields.get("account_ids", ())]
        if not ids:
            return []
        infos = {info.account_id: info for info in queries.accounts(self._engine)}
        names = {account_id: info.agent_name for account_id, info in infos.items()}
        notices: list[Notice] = []
        if self._drawdown > 0 and "drawdown" in self._events:
            for account_id, depth in self._depths(ids).items():
                if depth >= self._drawdown and account_id not in self._in_drawdown:
                    self._in_drawdown.add(account_id)
                    name = names.get(account_id, str(account_id))
                    notices.append(
                        Notice(
                            key=f"drawdown:{market}:{name}",
                            at=event.at,
                            title=f"openbell {market}: {name} in drawdown",
                            body=f"{name} is {depth * 100:.1f}% below its peak NAV "
                            f"(threshold {self._drawdown * 100:.1f}%).",
                            level="warning",
                        )
                    )
                elif depth < self._drawdown:
                    self._in_drawdown.discard(account_id)
        wanted = {"budget_exhausted", "model_change"} & self._events
        if wanted:
            slot_at = datetime.fromisoformat(str(event.fields.get("slot_at")))
            models = [i for i in ids if i in infos and infos[i].agent_kind not in BASELINE_KINDS]
            for account_id, entry in self._model_rows(models, slot_at):
                name = names.get(account_id, str(account_id))
                event_name = "budget_exhausted" if entry.role == "stop" else "model_change"
                if event_name not in wanted:
                    continue
                title, opening = _TRACE_NOTICES[event_name]
                notices.append(
                    Notice(
                        key=f"{event_name}:{market}:{name}",
                        at=event.at,
                        title=f"openbell {market}: {name}{title}",
                        body=f"{opening.format(name=name, slot_at=slot_at.isoformat())}"
                        f"{entry.content}.",
                        level="warning",
                    )
                )
        return notices

    def _depths(self, ids: Sequence[int]) -> dict[int, Decimal]:
        """Each account's drawdown at its newest slot NAV, reading only the snapshots since the
        last read (the peak is kept)."""
        reads = [self._read_from.get(account_id) for account_id in ids]
        since = None if None in reads else min(at for at in reads if at is not None)
        series = queries.nav_series_of(self._engine, ids, SnapshotKind.SLOT, start=since)
        depths: dict[int, Decimal] = {}
        for account_id, rows in series.items():
            fresh = [
                row
                for row in rows
                if account_id not in self._read_from or row.at > self._read_from[account_id]
            ]
            if fresh:
                peak, _last = self._peaks.get(account_id, (fresh[0].nav, fresh[0].nav))
                peak = max(peak, *(row.nav for row in fresh))
                self._peaks[account_id] = (peak, fresh[-1].nav)
                self._read_from[account_id] = fresh[-1].at
            if account_id in self._peaks:
                peak, last = self._peaks[account_id]
                depths[account_id] = drawdown([peak, last])
        return depths

    def _model_rows(self, ids: Sequence[int], slot_at: datetime) -> list[tuple[int, TraceEntry]]:
        """The trace rows of each account's cycle at `slot_at` that a notice is about: a loop
        stopped on a budget, and a model that answered as another."""
        found: list[tuple[int, TraceEntry]] = []
        for account_id in ids:
            cycle = self._ledger.find_cycle(account_id, slot_at)
            if cycle is None:
                continue
            for entry in self._ledger.traces(cycle.cycle_id):
                spent = entry.role == "stop" and entry.content in BUDGET_STOPS
                if spent or entry.role == "model_changed":
                    found.append((account_id, entry))
        return found

    def _health(self, at: datetime, overdue: dict[str, str]) -> list[Notice]:
        notices = [
            Notice(
                key=f"health_stale:{market}",
                at=at,
                title=f"openbell {market}: health stale",
                body=f"No successful cycle of {market} since the slot at {since}.",
                level="failure",
            )
            for market, since in sorted(overdue.items())
            if market not in self._stale
        ]
        self._stale = set(overdue)
        return notices

    def _digest(self, at: datetime) -> Notice | None:
        """The daily digest when the clock passed `digest_at` (the first event sets the day)."""
        if self._digest_time is None:
            return None
        if self._next_digest_at is None:
            first = datetime.combine(at.date(), self._digest_time, tzinfo=at.tzinfo)
            self._next_digest_at = first if first > at else first + timedelta(days=1)
            return None
        if at < self._next_digest_at:
            return None
        while self._next_digest_at <= at:
            self._next_digest_at += timedelta(days=1)
        try:
            blocks = self._boards()
        except Exception as exc:  # noqa: BLE001  (a board that fails is said, not raised)
            blocks = [f"The boards could not be read: {type(exc).__name__}"]
        return Notice(
            key="digest",
            at=at,
            title=f"openbell daily digest {at.date().isoformat()}",
            body="\n\n".join(blocks) or "No market has accounts yet.",
        )


def drawdown(navs: Sequence[Decimal]) -> Decimal:
    """How far the last of `navs` is below their peak, as a fraction (0 without a peak)."""
    if not navs:
        return Decimal(0)
    peak = max(navs)
    return Decimal(0) if peak <= 0 else (peak - navs[-1]) / peak


def board_texts(engine: Engine) -> list[str]:
    """Each market's board as a few lines: rank, name, final NAV, return and max drawdown."""
    from openbell.ops.reports.market_reports import leaderboards

    blocks = []
    for board in leaderboards(engine):
        lines = [f"{board.market} ({board.currency}, benchmark {board.benchmark})"]
        for row in board.rows[:DIGEST_ROWS]:
            rank = "-" if row.rank is None else str(row.rank)
            ret = row.panel.cumulative_return
            depth = row.panel.max_drawdown
            lines.append(
                f"{rank}. {row.name}: NAV {row.final_nav}, "
                f"return {'n/a' if ret is None else f'{ret * 100:.2f}%'}, "
                f"max DD {'n/a' if depth is None else f'{depth * 100:.2f}%'}"
            )
        blocks.append("\n".join(lines))
    return blocks
