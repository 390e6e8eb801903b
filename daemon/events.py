"""What the live daemon tells an outside listener: its start and stop, each slot's end, the cycles
it recorded missed, and a tick with its health.

This module owns `DaemonEvent` and `EventSink`. The daemon calls the sink of its plan on its event
loop at each of these moments; the sink must only take the event (put it on a queue) and return:
anything slow (a notification sent over the network, a ledger read) happens in the listener's own
thread (`ops.notify`). A sink that raises is logged and ignored: an event never fails a slot.

Kinds (`kind`, with `fields`):
- `daemon_started`: `run_id`, `markets`;
- `daemon_stopped`: `reason`, `interrupted` (cycles the stop marked `interrupted`);
- `slot_finished`: `market`, `slot_at`, `state` (`LastBell.state`: `done`, `failed`,
  `data_unavailable`, `not_run`, `interrupted`, `slot_failed`), `cause`, `message`, `cycles`
  (by status), `not_run` (by what became of them), `account_ids` (the market's accounts);
- `cycles_missed`: `market`, `count`;
- `health`: `overdue` (market: the slot it has had no success since, ISO), sent every heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonEvent:
    """One thing the daemon tells its listener, at `at` on its clock."""

    kind: str
    at: datetime
    market: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)


#: Takes an event and returns at once (see the module docstring).
EventSink = Callable[[DaemonEvent], None]


def emit(sink: EventSink | None, event: DaemonEvent) -> None:
    """Hand `event` to `sink` (if any); a sink that raises is logged, never raised."""
    if sink is None:
        return
    try:
        sink(event)
    except Exception as exc:  # noqa: BLE001  (a listener never fails the daemon)
        log.warning("event_not_taken", kind=event.kind, error_class=type(exc).__name__)
