"""Trading calendars: which instants a market is open and which dates are its sessions.

This module owns the `TradingCalendar` protocol and its two implementations: `SessionCalendar`, a
table of sessions (open, optional lunch break, close; all UTC) loaded once from
`exchange_calendars` for XNYS and XSHG, and `AlwaysOpenCalendar` for 24/7 crypto (one session per
UTC day). Every method takes explicit datetimes or dates and never reads the clock. A calendar
knows its sessions only up to `last_known_session` (XSHG's holiday list ends 2026-12-31); asking
beyond it raises `CalendarOutOfRange` rather than guessing.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol

from openbell.markets.domain import check_utc
from openbell.markets.errors import CalendarOutOfRange

#: Sessions loaded from exchange_calendars start here (replay datasets do not go further back).
FIRST_LOADED_SESSION = date(2000, 1, 1)
#: XNYS holidays are rule-based, so any end works; this one is fixed so that results never depend
#: on the day the process started (exchange_calendars' default window is today + 1 year).
XNYS_LAST_LOADED_SESSION = date(2030, 12, 31)

CALENDAR_IDS: frozenset[str] = frozenset({"XNYS", "XSHG", "24/7"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """One trading session: open on `[open_at, close_at)` except during the optional break."""

    day: date
    open_at: datetime
    close_at: datetime
    break_start_at: datetime | None = None
    break_end_at: datetime | None = None

    def __post_init__(self) -> None:
        check_utc("open_at", self.open_at)
        check_utc("close_at", self.close_at)
        if self.close_at <= self.open_at:
            raise ValueError(f"session {self.day} closes at {self.close_at} before it opens")
        if (self.break_start_at is None) != (self.break_end_at is None):
            raise ValueError(f"session {self.day}: a break needs both a start and an end")
        if self.break_start_at is not None and self.break_end_at is not None:
            check_utc("break_start_at", self.break_start_at)
            check_utc("break_end_at", self.break_end_at)
            if not self.open_at < self.break_start_at < self.break_end_at < self.close_at:
                raise ValueError(f"session {self.day}: break must lie inside the session")

    def contains(self, at: datetime) -> bool:
        """Whether `at` is within `[open_at, close_at)`, the break included."""
        return self.open_at <= at < self.close_at

    def is_open(self, at: datetime) -> bool:
        """Whether the market trades at `at`: within the session and not in its break."""
        if not self.contains(at):
            return False
        if self.break_start_at is not None and self.break_end_at is not None:
            return not self.break_start_at <= at < self.break_end_at
        return True


class TradingCalendar(Protocol):
    """What the rest of openbell asks of a market calendar. All datetimes are aware UTC."""

    @property
    def calendar_id(self) -> str:
        """The calendar's code: "XNYS", "XSHG" or "24/7"."""
        ...

    @property
    def timezone(self) -> str:
        """The IANA time zone of the market's local time ("Asia/Shanghai")."""
        ...

    @property
    def first_known_session(self) -> date:
        """The earliest session this calendar knows."""
        ...

    @property
    def last_known_session(self) -> date:
        """The latest session this calendar knows; later dates raise `CalendarOutOfRange`."""
        ...

    def is_open(self, at: datetime) -> bool:
        """Whether the market trades at `at` (open inclusive, close and lunch break excluded)."""
        ...

    def session_of(self, at: datetime) -> date | None:
        """The session whose `[open, close)` contains `at` (a lunch break included), else None."""
        ...

    def session_at_or_before(self, at: datetime) -> date:
        """The session containing `at`, else the last one that opened before it."""
        ...

    def is_session(self, day: date) -> bool:
        """Whether `day` is a trading session."""
        ...

    def next_session(self, day: date) -> date:
        """The first session strictly after `day` (`day` need not be a session)."""
        ...

    def previous_session(self, day: date) -> date:
        """The last session strictly before `day` (`day` need not be a session)."""
        ...

    def session(self, day: date) -> Session:
        """The session on `day`; `ValueError` when `day` is not a session."""
        ...

    def session_open(self, day: date) -> datetime:
        """When the session on `day` opens (UTC)."""
        ...

    def session_close(self, day: date) -> datetime:
        """When the session on `day` closes (UTC)."""
        ...

    def session_break(self, day: date) -> tuple[datetime, datetime] | None:
        """The (start, end) of the session's lunch break, None when it has none."""
        ...

    def sessions_between(self, start: date, end: date) -> tuple[date, ...]:
        """The sessions from `start` to `end`, both inclusive."""
        ...


class _SessionQueries:
    """The protocol's derived methods, written once over `session`/`is_session`."""

    def session(self, day: date) -> Session:
        raise NotImplementedError

    def session_open(self, day: date) -> datetime:
        """When the session on `day` opens (UTC)."""
        return self.session(day).open_at

    def session_close(self, day: date) -> datetime:
        """When the session on `day` closes (UTC)."""
        return self.session(day).close_at

    def session_break(self, day: date) -> tuple[datetime, datetime] | None:
        """The (start, end) of the session's lunch break, None when it has none."""
        found = self.session(day)
        if found.break_start_at is None or found.break_end_at is None:
            return None
        return found.break_start_at, found.break_end_at


class SessionCalendar(_SessionQueries):
    """A calendar over an explicit, sorted table of sessions (built by `calendar_for`).

    Lookups are a dict hit or a bisection over session opens, cheap enough to run per order.
    """

    def __init__(self, *, calendar_id: str, timezone: str, sessions: Iterable[Session]) -> None:
        self._calendar_id = calendar_id
        self._timezone = timezone
        table = sorted(sessions, key=lambda found: found.day)
        if not table:
            raise ValueError(f"calendar {calendar_id} has no sessions")
        for earlier, later in itertools.pairwise(table):
            if earlier.day == later.day or earlier.close_at > later.open_at:
                raise ValueError(f"calendar {calendar_id}: sessions {earlier.day} overlap")
        self._days = [found.day for found in table]
        self._opens = [found.open_at for found in table]
        self._by_day = {found.day: found for found in table}

    @property
    def calendar_id(self) -> str:
        return self._calendar_id

    @property
    def timezone(self) -> str:
        return self._timezone

    @property
    def first_known_session(self) -> date:
        return self._days[0]

    @property
    def last_known_session(self) -> date:
        return self._days[-1]

    def _check_day(self, day: date) -> None:
        if not self._days[0] <= day <= self._days[-1]:
            raise CalendarOutOfRange(
                f"{self._calendar_id} knows sessions from {self._days[0]} to {self._days[-1]} "
                f"only; asked about {day}"
            )

    def _index_at(self, at: datetime) -> int:
        """Index of the last session opening at or before `at`."""
        check_utc("at", at)
        last = self._by_day[self._days[-1]]
        if at < self._opens[0] or at >= last.close_at:
            raise CalendarOutOfRange(
                f"{self._calendar_id} knows trading times from {self._opens[0].isoformat()} to "
                f"{last.close_at.isoformat()} only; asked about {at.isoformat()}"
            )
        return bisect.bisect_right(self._opens, at) - 1

    def is_open(self, at: datetime) -> bool:
        return self._by_day[self._days[self._index_at(at)]].is_open(at)

    def session_of(self, at: datetime) -> date | None:
        found = self._by_day[self._days[self._index_at(at)]]
        return found.day if found.contains(at) else None

    def session_at_or_before(self, at: datetime) -> date:
        return self._days[self._index_at(at)]

    def is_session(self, day: date) -> bool:
        self._check_day(day)
        return day in self._by_day

    def next_session(self, day: date) -> date:
        self._check_day(day)
        index = bisect.bisect_right(self._days, day)
        if index == len(self._days):
            raise CalendarOutOfRange(
                f"{self._calendar_id} does not know the session after {day}; its sessions end on "
                f"{self._days[-1]}"
            )
        return self._days[index]

    def previous_session(self, day: date) -> date:
        self._check_day(day)
        index = bisect.bisect_left(self._days, day)
        if index == 0:
            raise CalendarOutOfRange(
                f"{self._calendar_id} does not know the session before {day}; its sessions start "
                f"on {self._days[0]}"
            )
        return self._days[index - 1]

    def session(self, day: date) -> Session:
        self._check_day(day)
        found = self._by_day.get(day)
        if found is None:
            raise ValueError(f"{day} is not a {self._calendar_id} session")
        return found

    def sessions_between(self, start: date, end: date) -> tuple[date, ...]:
        self._check_day(start)
        self._check_day(end)
        lo = bisect.bisect_left(self._days, start)
        hi = bisect.bisect_right(self._days, end)
        return tuple(self._days[lo:hi])


class AlwaysOpenCalendar(_SessionQueries):
    """A 24/7 market: every UTC day is a session from 00:00 to the next 00:00, with no break."""

    @property
    def calendar_id(self) -> str:
        return "24/7"

    @property
    def timezone(self) -> str:
        return "UTC"

    @property
    def first_known_session(self) -> date:
        return date.min

    @property
    def last_known_session(self) -> date:
        return date.max

    def is_open(self, at: datetime) -> bool:
        check_utc("at", at)
        return True

    def session_of(self, at: datetime) -> date | None:
        check_utc("at", at)
        return at.date()

    def session_at_or_before(self, at: datetime) -> date:
        check_utc("at", at)
        return at.date()

    def is_session(self, day: date) -> bool:
        return True

    def next_session(self, day: date) -> date:
        if day == date.max:
            raise CalendarOutOfRange(f"no session after {day}")
        return day + timedelta(days=1)

    def previous_session(self, day: date) -> date:
        if day == date.min:
            raise CalendarOutOfRange(f"no session before {day}")
        return day - timedelta(days=1)

    def session(self, day: date) -> Session:
        if day == date.max:
            raise CalendarOutOfRange(f"the session on {day} would close past the last date")
        open_at = datetime.combine(day, time(0), tzinfo=UTC)
        return Session(day=day, open_at=open_at, close_at=open_at + timedelta(days=1))

    def sessions_between(self, start: date, end: date) -> tuple[date, ...]:
        count = (end - start).days + 1
        return tuple(start + timedelta(days=offset) for offset in range(max(count, 0)))


def _utc(value: Any) -> datetime | None:
    """A pandas UTC timestamp (or NaT) as an aware `datetime` in `datetime.UTC`."""
    from pandas import isna

    if value is None or isna(value):
        return None
    converted: datetime = value.to_pydatetime().astimezone(UTC)
    return converted


def _load_exchange_calendar(calendar_id: str) -> SessionCalendar:
    """Build a `SessionCalendar` from exchange_calendars' schedule (imported only when needed)."""
    from exchange_calendars.exchange_calendar_xnys import XNYSExchangeCalendar
    from exchange_calendars.exchange_calendar_xshg import XSHGExchangeCalendar

    with warnings.catch_warnings():
        # exchange_calendars 4.13 reads `Series.values` on tz-aware data, which pandas 3 deprecates
        # (the values are still UTC, so the sessions are right); the warning is not ours to fix.
        warnings.filterwarnings(
            "ignore", message=r"Series\.values returning", category=DeprecationWarning
        )
        if calendar_id == "XNYS":
            source = XNYSExchangeCalendar(start=FIRST_LOADED_SESSION, end=XNYS_LAST_LOADED_SESSION)
        else:
            # The end is the last day of XSHG's recorded holidays (2026-12-31 in 4.13.2): a newer
            # exchange_calendars release with next year's holidays extends it with no code change.
            last = XSHGExchangeCalendar.bound_max().date()
            source = XSHGExchangeCalendar(start=FIRST_LOADED_SESSION, end=last)
        schedule = source.schedule
    sessions = []
    for label, open_at, break_start_at, break_end_at, close_at in zip(
        schedule.index,
        schedule["open"],
        schedule["break_start"],
        schedule["break_end"],
        schedule["close"],
        strict=True,
    ):
        opened = _utc(open_at)
        closed = _utc(close_at)
        if opened is None or closed is None:
            raise ValueError(f"{calendar_id} session {label} has no open or close")
        sessions.append(
            Session(
                day=label.date(),
                open_at=opened,
                close_at=closed,
                break_start_at=_utc(break_start_at),
                break_end_at=_utc(break_end_at),
            )
        )
    return SessionCalendar(calendar_id=calendar_id, timezone=str(source.tz), sessions=sessions)


@functools.cache
def calendar_for(calendar_id: str) -> TradingCalendar:
    """The calendar with code `calendar_id` ("XNYS", "XSHG" or "24/7"), built once per process."""
    if calendar_id not in CALENDAR_IDS:
        raise ValueError(f"unknown calendar {calendar_id!r}; known: {sorted(CALENDAR_IDS)}")
    if calendar_id == "24/7":
        return AlwaysOpenCalendar()
    return _load_exchange_calendar(calendar_id)
