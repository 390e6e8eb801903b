"""How much of a universe a replay's data covers: the members (and the benchmark) with bars across
the replay window.

This module owns `MemberCoverage`, `SymbolCoverage` and `member_coverage`. The window's sessions
are those the replay rings in: the market's calendar sessions in the window holding a bar start
of the cadence's interval (of any symbol: the replay's slots). A session in which no symbol has a
bar does not ring, so it is counted against nobody. Against those sessions each member is

- *covered* when its bars of the cadence's interval start by the `SLACK_SESSIONS`-th session
  after the window's first session and end no more than `SLACK_SESSIONS` sessions before its
  last one (a listing a session or two into the window, or a last session or two missing, is
  within the slack);
- *partial* when they start later or stop earlier than that (the SSE-50 index's bundled bars end
  on 2025-11-07, eight sessions before the A-share stocks' last);
- *missing* when it has no bar in them at all.

A dated member is held to the sessions on which it is a member (one joining in the window is not
late for the sessions before it joined); a member on no session of the window is not asked for.
Only the two ends of a member's bars are checked: a gap inside them (a suspension) passes. The
universe's benchmark, when it is not a member (QQQ, 000016.SH: what `buy_and_hold` trades, and
what the benchmark row and excess returns stand for), is held to the same rule over its bars of
any interval (a replay prices it from any: the index has only daily bars). A replay states the
coverage of each universe (`summary_line`: `covered/members`) and, when it is not complete,
refuses or (allowed) proceeds with a warning naming who lacks data and where partial bars begin
and end (`describe`), so a universe of 20 stocks is never traded as 5 in silence.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final, Literal

from openbell.markets.bar_series import BarSeries
from openbell.markets.calendars import TradingCalendar
from openbell.markets.replay_source import ReplaySource, micros
from openbell.markets.universes import Universe

#: How many of the window's sessions a member's bars may miss at its start and, separately, at its
#: end and still count as covered.
SLACK_SESSIONS: Final = 2
#: How many members of each kind (missing, partial) a sentence names before it says "and N more".
_NAMED: Final = 10

State = Literal["covered", "partial", "missing"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SymbolCoverage:
    """How `symbol`'s bars cover the window: `first_day` and `last_day` are the sessions of its
    first and last bar in it (None when it has none)."""

    symbol: str
    state: State
    first_day: date | None = None
    last_day: date | None = None

    def span(self) -> str:
        """Its bars' sessions, e.g. `bars 2025-01-02..2025-11-07` (`no bars` without any)."""
        if self.first_day is None or self.last_day is None:
            return "no bars"
        return f"bars {self.first_day.isoformat()}..{self.last_day.isoformat()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberCoverage:
    """The coverage of universe `universe` of market `market` by a replay's data over `sessions`
    (the sessions the replay rings in, oldest first): each member's, in the universe's order, and
    its benchmark's (None when it has none apart from its members)."""

    market: str
    universe: str
    sessions: tuple[date, ...]
    symbols: tuple[SymbolCoverage, ...]
    benchmark: SymbolCoverage | None = None

    @property
    def members(self) -> tuple[str, ...]:
        """The members asked for: those that are members on a session of the window."""
        return tuple(found.symbol for found in self.symbols)

    @property
    def missing(self) -> tuple[str, ...]:
        """The members without a bar in the window."""
        return tuple(found.symbol for found in self.symbols if found.state == "missing")

    @property
    def partial(self) -> tuple[SymbolCoverage, ...]:
        """The members whose bars start late in the window or stop early in it."""
        return tuple(found for found in self.symbols if found.state == "partial")

    @property
    def covered(self) -> int:
        """How many members have bars across the window."""
        return sum(found.state == "covered" for found in self.symbols)

    @property
    def complete(self) -> bool:
        """Whether every member, and the benchmark, has bars across the window."""
        benchmark = self.benchmark is None or self.benchmark.state == "covered"
        return benchmark and self.covered == len(self.symbols)

    def _window(self, between: str = ", ") -> str:
        if not self.sessions:
            return "0 sessions"
        first, last = self.sessions[0].isoformat(), self.sessions[-1].isoformat()
        count = len(self.sessions)
        return f"{count} session{'s' if count != 1 else ''}{between}{first}..{last}"

    def summary_line(self) -> str:
        """One line for a replay's summary, e.g. `coverage: markets.cn sse50 50/50 members,
        benchmark 000016.SH partial, 212 sessions 2025-01-03..2025-11-19`."""
        kinds = [
            f"{count} {kind}"
            for count, kind in (
                (len(self.partial), "partial"),
                (len(self.missing), "without data"),
            )
            if count
        ]
        line = f"coverage: markets.{self.market} {self.universe} {self.covered}/"
        line += f"{len(self.symbols)} members"
        if kinds:
            line += f" ({', '.join(kinds)})"
        if self.benchmark is not None:
            state = {"covered": "covered", "partial": "partial", "missing": "without data"}
            line += f", benchmark {self.benchmark.symbol} {state[self.benchmark.state]}"
        return f"{line}, {self._window(' ')}"

    def describe(self) -> str:
        """One sentence, e.g. `markets.us: universe djia20 has data for 5 of its 20 members
        (25.0%) in this replay's window (3 sessions, 2025-07-01..2025-07-03); no data for GS, ...;
        partial data for ... (bars 2025-07-01..2025-07-02)`, then what its benchmark lacks."""
        share = 100.0 * self.covered / len(self.symbols) if self.symbols else 0.0
        line = (
            f"markets.{self.market}: universe {self.universe} has data for {self.covered} of its "
            f"{len(self.symbols)} members ({share:.1f}%) in this replay's window ({self._window()})"
        )
        if self.missing:
            line += f"; no data for {_named(self.missing)}"
        if self.partial:
            line += "; partial data for "
            line += _named([f"{found.symbol} ({found.span()})" for found in self.partial])
        benchmark = self.benchmark
        if benchmark is not None and benchmark.state == "partial":
            line += f"; partial data for its benchmark {benchmark.symbol} ({benchmark.span()})"
        elif benchmark is not None and benchmark.state == "missing":
            line += f"; no data for its benchmark {benchmark.symbol}"
        return line


def _named(items: Sequence[str]) -> str:
    named = ", ".join(items[:_NAMED])
    more = len(items) - _NAMED
    return f"{named} and {more} more" if more > 0 else named


def member_coverage(
    source: ReplaySource,
    *,
    universe: Universe,
    calendar: TradingCalendar,
    interval: str,
    start_at: datetime,
    end_at: datetime,
) -> MemberCoverage:
    """The coverage of `universe`'s members by `source`'s `interval` bars in `[start_at, end_at)`,
    and of its benchmark by bars of any interval, over the sessions of `calendar` the replay rings
    in (see the module docstring). An interval the source does not serve rings no session and
    covers no member."""
    sessions = _ringing_sessions(source, calendar, interval, start_at, end_at)
    if sessions:
        members = [
            symbol
            for symbol in universe.symbols
            if any(universe.is_member_on(symbol, day) for day in sessions)
        ]
    else:  # nothing rings: every member of a day of the window lacks data
        days = [start_at.date() + timedelta(days=n) for n in range((end_at - start_at).days)]
        members = [
            symbol
            for symbol in universe.symbols
            if any(universe.is_member_on(symbol, day) for day in days)
        ]
    intervals = [interval] if interval in source.intervals else []
    found = tuple(
        _symbol_coverage(
            source,
            calendar,
            symbol,
            intervals,
            universe.days_member(symbol, sessions),
            start_at,
            end_at,
        )
        for symbol in members
    )
    benchmark = universe.benchmark
    return MemberCoverage(
        market=source.market,
        universe=universe.name,
        sessions=sessions,
        symbols=found,
        benchmark=None
        if benchmark is None or benchmark in universe
        else _symbol_coverage(
            source, calendar, benchmark, source.intervals, sessions, start_at, end_at
        ),
    )


def _ringing_sessions(
    source: ReplaySource,
    calendar: TradingCalendar,
    interval: str,
    start_at: datetime,
    end_at: datetime,
) -> tuple[date, ...]:
    """The sessions holding a start of `source`'s `interval` bars in the window (the replay's
    slots), oldest first."""
    if interval not in source.intervals:
        return ()
    days = {calendar.session_of(at) for at in source.bar_starts(interval, start_at, end_at)}
    return tuple(sorted(day for day in days if day is not None))


def _symbol_coverage(
    source: ReplaySource,
    calendar: TradingCalendar,
    symbol: str,
    intervals: Sequence[str],
    sessions: tuple[date, ...],
    start_at: datetime,
    end_at: datetime,
) -> SymbolCoverage:
    """`symbol`'s coverage of `sessions` (its own: those of the window on which it counts) by its
    bars of `intervals` starting in the window."""
    if not sessions:
        return SymbolCoverage(symbol=symbol, state="missing")
    lo = max(start_at, calendar.session_open(sessions[0]))
    hi = min(end_at, calendar.session_close(sessions[-1]))
    days: list[date] = []
    for interval in intervals:
        series = source.prepared_series(symbol, interval)
        if series is None:
            continue
        first = bisect.bisect_left(series.starts, micros(lo))
        last = bisect.bisect_left(series.starts, micros(hi)) - 1
        days.extend(_first_session(series, calendar, range(first, last + 1)))
        days.extend(_first_session(series, calendar, range(last, first - 1, -1)))
    if not days:
        return SymbolCoverage(symbol=symbol, state="missing")
    first_day, last_day = min(days), max(days)
    late = bisect.bisect_left(sessions, first_day)
    early = len(sessions) - bisect.bisect_right(sessions, last_day)
    state: State = "covered" if max(late, early) <= SLACK_SESSIONS else "partial"
    return SymbolCoverage(symbol=symbol, state=state, first_day=first_day, last_day=last_day)


def _first_session(series: BarSeries, calendar: TradingCalendar, indices: range) -> Iterator[date]:
    """The session of the first bar of `series` at `indices` that starts in one (a bar outside
    every session, none in the bundled files, is stepped over); nothing when none does."""
    for index in indices:
        day = calendar.session_of(series.start_at(index))
        if day is not None:
            yield day
            return
