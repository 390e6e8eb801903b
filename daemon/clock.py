"""Clocks: the one place openbell reads the wall clock, and the simulated clock replays run on.

Everything below the daemon takes `now` as an argument; the daemon asks its `Clock`. `SystemClock`
is the only wall-clock read in the codebase (ruff's banned-api exempts this file alone),
`SimulatedClock` is set or advanced by a replay driver or a test, and `ScaledClock` (for tests of
the live daemon only) starts at a given instant and runs at a given speed. All return aware UTC.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


class ScaledClock:
    """A fake clock for tests and demonstrations: starts at `start_at` and runs `speed` times
    faster than the machine's monotonic clock (`openbell run --fake-clock START[:SPEED]`)."""

    def __init__(
        self,
        start_at: datetime,
        speed: float = 1.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"clock speed must be positive, got {speed}")
        self._start_at = to_utc(start_at)
        self._speed = speed
        self._monotonic = monotonic
        self._started_s = monotonic()

    @property
    def speed(self) -> float:
        """Clock seconds per real second."""
        return self._speed

    def now(self) -> datetime:
        elapsed_s = (self._monotonic() - self._started_s) * self._speed
        return self._start_at + timedelta(seconds=elapsed_s)


def parse_fake_clock(text: str) -> ScaledClock:
    """`START` or `START:SPEED` (START an ISO instant with a zone, e.g. `2025-11-03T13:55Z:60`)
    as a `ScaledClock`; ValueError naming the expected form otherwise."""
    form = "expected START[:SPEED], e.g. 2025-11-03T13:55:00Z:60"
    start_text, speed = text, 1.0
    try:
        start_at = datetime.fromisoformat(start_text)
    except ValueError:
        start_text, _, speed_text = text.rpartition(":")
        try:
            start_at = datetime.fromisoformat(start_text)
            speed = float(speed_text)
        except ValueError:
            raise ValueError(f"fake clock {text!r}: {form}") from None
    if start_at.tzinfo is None:
        raise ValueError(f"fake clock {text!r}: the start needs a zone (Z or +HH:MM); {form}")
    return ScaledClock(start_at, speed)
