"""Clocks: the one place openbell reads the wall clock, and the simulated clock replays run on.

Everything below the daemon takes `now` as an argument; the daemon asks its `Clock`. `SystemClock`
is the only wall-clock read in the codebase (ruff's banned-api exempts this file alone), and
`SimulatedClock` is set or advanced by a replay driver or a test. Both return timezone-aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from openbell.markets.domain import to_utc


class Clock(Protocol):
    """A source of the current instant."""

    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    """The wall clock of the machine."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class SimulatedClock:
    """A clock that moves only when told to, and never backwards."""

    def __init__(self, start_at: datetime) -> None:
        self._now = to_utc(start_at)

    def now(self) -> datetime:
        return self._now

    def set(self, at: datetime) -> datetime:
        """Move to `at` (aware; converted to UTC). Refuses to go back in time."""
        moved = to_utc(at)
        if moved < self._now:
            raise ValueError(
                f"simulated clock cannot go back from {self._now.isoformat()} "
                f"to {moved.isoformat()}"
            )
        self._now = moved
        return moved

    def advance(self, delta: timedelta) -> datetime:
        """Move forward by `delta` (not negative) and return the new instant."""
        if delta < timedelta(0):
            raise ValueError(f"simulated clock cannot advance by a negative {delta}")
        self._now += delta
        return self._now
