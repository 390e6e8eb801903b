"""Decision slots: the instants at which a market's bell rings (DESIGN §2).

This module owns the slot rules. Live: `daily` rings at each session open (US 09:30 New York,
A-shares 09:30 Shanghai, crypto 00:00 UTC); `hourly` rings at the start of every 60-minute bar of a
session, restarting after a lunch break (US 09:30..15:30, A-shares 09:30, 10:30, 13:00, 14:00,
crypto every hour); explicit slot times are market-local "HH:MM". A candidate instant that is not
a trading instant of the market's calendar (a holiday, the lunch break, a weekend for stocks)
does not ring. Replay: the slots are the starts of the dataset's bars that fall inside a session.
It also counts slots per session, for annualising a series: the schedule's count in a regular
session, and the count a market actually rang (`observed_slots_per_session`).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from openbell.markets.barfile import BarSet
from openbell.markets.calendars import Session, TradingCalendar, calendar_for
from openbell.markets.domain import check_utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for

CADENCES: Final = frozenset({"daily", "hourly"})

_HOUR: Final = timedelta(hours=1)
_SLOT_TIME: Final = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
#: A regular full session per market, used to count slots per session.
_REFERENCE_SESSION: Final = {
    "us": date(2025, 10, 1),
    "cn": date(2025, 10, 9),
    "crypto": date(2025, 10, 1),
}


def parse_slot_times(slot_times: Sequence[str]) -> tuple[time, ...]:
    """Market-local "HH:MM" strings as sorted, distinct `time`s; anything else raises ValueError."""
    if isinstance(slot_times, str) or not slot_times:
        raise ValueError(f"slot times must be a non-empty list of 'HH:MM', got {slot_times!r}")
    parsed = set()
    for text in slot_times:
        match = _SLOT_TIME.match(text)
        if match is None:
            raise ValueError(f"slot time {text!r} is not a 24-hour 'HH:MM'")
        parsed.add(time(int(match.group(1)), int(match.group(2))))
    return tuple(sorted(parsed))


def _check_cadence(cadence: str) -> None:
    if cadence not in CADENCES:
        raise ValueError(f"unknown cadence {cadence!r}; known: {sorted(CADENCES)}")


def _session_slots(
    session: Session, zone: ZoneInfo, cadence: str, slot_times: tuple[time, ...] | None
) -> list[datetime]:
    """The slots of one session, in order."""
    if slot_times is not None:
        candidates = (
            datetime.combine(session.day, local, tzinfo=zone).astimezone(UTC)
            for local in slot_times
        )
        return [at for at in candidates if session.is_open(at)]
    if cadence == "daily":
        return [session.open_at]
    segments = [(session.open_at, session.close_at)]
    if session.break_start_at is not None and session.break_end_at is not None:
        segments = [
            (session.open_at, session.break_start_at),
            (session.break_end_at, session.close_at),
        ]
    slots = []
    for begin, end in segments:
        at = begin
        while at < end:
            slots.append(at)
            at += _HOUR
    return slots


def _calendar(market: str) -> TradingCalendar:
    return calendar_for(rules_for(market).calendar_id)


def slots_between(
    market: str,
    cadence: str,
    start_at: datetime,
    end_at: datetime,
    *,
    slot_times: Sequence[str] | None = None,
) -> list[datetime]:
    """The live slots of `market` in `[start_at, end_at)`, in order (aware UTC).

    `slot_times`, market-local "HH:MM", replace the cadence's default times. Raises
    `CalendarOutOfRange` when the range reaches past the sessions the calendar knows: a market
    whose holidays are unknown must not ring.
    """
    _check_cadence(cadence)
    check_utc("start_at", start_at)
    check_utc("end_at", end_at)
    if end_at <= start_at:
        return []
    times = parse_slot_times(slot_times) if slot_times is not None else None
    calendar = _calendar(market)
    zone = ZoneInfo(calendar.timezone)
    # Every session of these markets lies inside its local calendar date.
    first_day = start_at.astimezone(zone).date()
    last_day = (end_at - timedelta(microseconds=1)).astimezone(zone).date()
    return [
        at
        for day in calendar.sessions_between(first_day, last_day)
        for at in _session_slots(calendar.session(day), zone, cadence, times)
        if start_at <= at < end_at
    ]


def slots_per_session(market: str, cadence: str, *, slot_times: Sequence[str] | None = None) -> int:
    """How many slots a regular full session of `market` has (US hourly 7, A-shares 4, crypto 24).

    Used to annualise hourly series; half days and explicit times outside a session ring less.
    """
    _check_cadence(cadence)
    times = parse_slot_times(slot_times) if slot_times is not None else None
    calendar = _calendar(market)
    session = calendar.session(_REFERENCE_SESSION[market])
    return len(_session_slots(session, ZoneInfo(calendar.timezone), cadence, times))


def observed_slots_per_session(market: str, slot_times: Sequence[datetime]) -> int | None:
    """How many slots a session of `market` rang, from the instants it rang (`slot_times`).

    The instants are grouped by session (the market-local date: every session of these markets
    lies inside one) and the median of the per-session counts is taken, the upper middle on an
    even count of sessions. The median keeps a half day (US 10:00..12:00, three hourly slots)
    from pulling the figure down, and the upper middle keeps a window's first or last session, cut
    short by the window, from doing so when there are only two sessions. None without instants.
    """
    if not slot_times:
        return None
    for at in slot_times:
        check_utc("slot_times", at)
    zone = ZoneInfo(rules_for(market).timezone)  # the calendar's zone, without building it
    per_session = Counter(at.astimezone(zone).date() for at in set(slot_times))
    return statistics.median_high(per_session.values())


def replay_slots(
    data: BarSet | ReplaySource,
    market: str,
    interval: str,
    start_at: datetime,
    end_at: datetime,
) -> list[datetime]:
    """The replay slots in `[start_at, end_at)`: starts of the dataset's `interval` bars (of any
    symbol) at which the market trades. US hourly bars stamped 10:00..15:00 New York give those six
    slots per session; a bar starting on a holiday or in a lunch break gives none."""
    source = data if isinstance(data, ReplaySource) else ReplaySource(market=market, barsets=[data])
    if source.market != market:
        raise ValueError(f"replay data of market {source.market} asked for {market} slots")
    calendar = _calendar(market)
    return [at for at in source.bar_starts(interval, start_at, end_at) if calendar.is_open(at)]
