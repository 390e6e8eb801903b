"""What every importer shares: exchange sessions, checked bar building, merging and the report.

This module owns the vendor-independent half of an import: mapping a session date to its UTC
open/close (and lunch break) with `exchange_calendars`, turning vendor strings into a valid `Bar` or
a counted drop reason (never via float, never crashing on one bad row), removing duplicates,
merging overlapping sources (the earlier source wins) and the `ImportReport` an import returns.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Final

import exchange_calendars as xcals
import pandas as pd

from openbell.markets.domain import Bar

# Reasons a vendor row is dropped, as they appear in an `ImportReport`.
UNPARSEABLE: Final = "unparseable"
NON_POSITIVE_PRICE: Final = "non_positive_price"
NEGATIVE_VOLUME: Final = "negative_volume"
OHLC_INCONSISTENT: Final = "ohlc_inconsistent"
DUPLICATE: Final = "duplicate"
NOT_A_SESSION: Final = "not_a_session"
OUTSIDE_SESSION: Final = "outside_session"
PARTIAL_LAST_BAR: Final = "partial_last_bar"
IN_EARLIER_FILE: Final = "already_in_earlier_file"

# The calendars are built for a fixed range, never "from today": imports must be reproducible.
_CALENDAR_START: Final = "2015-01-01"
_CALENDAR_END: Final = "2026-12-31"


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """One trading session in UTC, with its lunch break when the exchange has one."""

    open_at: datetime
    close_at: datetime
    break_start_at: datetime | None = None
    break_end_at: datetime | None = None

    def holds(self, start_at: datetime, end_at: datetime) -> bool:
        """Whether `[start_at, end_at)` lies inside the session and does not span its break."""
        if start_at < self.open_at or end_at > self.close_at:
            return False
        if self.break_start_at is None or self.break_end_at is None:
            return True
        return not (start_at < self.break_end_at and end_at > self.break_start_at)


@cache
def sessions(calendar: str) -> Mapping[date, Session]:
    """The sessions of an `exchange_calendars` calendar (for example "XNYS", "XSHG") by date."""
    with warnings.catch_warnings():
        # exchange_calendars reads tz-aware `Series.values`, which pandas 3.1 deprecates (the
        # values are still UTC, so the sessions are right); the warning is not ours to fix.
        warnings.filterwarnings(
            "ignore", message=r"Series\.values returning", category=DeprecationWarning
        )
        schedule = xcals.get_calendar(calendar, start=_CALENDAR_START, end=_CALENDAR_END).schedule
    out: dict[date, Session] = {}
    for row in schedule.itertuples():
        has_break = not (pd.isna(row.break_start) or pd.isna(row.break_end))
        out[row.Index.date()] = Session(
            open_at=_utc(row.open),
            close_at=_utc(row.close),
            break_start_at=_utc(row.break_start) if has_break else None,
            break_end_at=_utc(row.break_end) if has_break else None,
        )
    return out


def _utc(value: pd.Timestamp) -> datetime:
    return value.to_pydatetime().astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Parsed:
    """The bars of one vendor file (sorted, no duplicates) and the rows dropped, by reason."""

    bars: tuple[Bar, ...]
    dropped: Mapping[str, int]


@dataclass(slots=True)
class BarCollector:
    """Collects the bars of one file; a row that cannot be a valid `Bar` is counted, not raised."""

    bars: list[Bar] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def drop(self, reason: str, count: int = 1) -> None:
        """Count `count` rows dropped for `reason`."""
        self.dropped[reason] += count

    def add(
        self,
        symbol: str,
        start_at: datetime,
        end_at: datetime,
        ohlcv: Sequence[str | int],
        *,
        volume_factor: int = 1,
    ) -> None:
        """Add a bar from vendor values (open, high, low, close, volume), or count why not."""
        try:
            open_, high, low, close, volume = (_decimal(value) for value in ohlcv)
        except (InvalidOperation, ValueError, TypeError):
            self.drop(UNPARSEABLE)
            return
        if min(open_, high, low, close) <= 0:
            self.drop(NON_POSITIVE_PRICE)
        elif volume < 0:
            self.drop(NEGATIVE_VOLUME)
        elif low > min(open_, close) or high < max(open_, close) or low > high:
            self.drop(OHLC_INCONSISTENT)
        else:
            self.bars.append(
                Bar(
                    symbol=symbol,
                    start_at=start_at,
                    end_at=end_at,
                    open=open_,
                    high=high,
                    low=low,
                    close=close,
                    volume=volume * volume_factor,
                )
            )

    def result(self, *, last_bar_partial: bool = False) -> Parsed:
        """The sorted bars without duplicates; `last_bar_partial` drops each symbol's last bar."""
        kept = dedupe(self.bars, self.dropped)
        if last_bar_partial:
            last: dict[str, int] = {bar.symbol: i for i, bar in enumerate(kept)}
            self.drop(PARTIAL_LAST_BAR, len(last))
            drop_rows = set(last.values())
            kept = [bar for i, bar in enumerate(kept) if i not in drop_rows]
        dropped = {reason: n for reason, n in sorted(self.dropped.items()) if n}
        return Parsed(bars=tuple(kept), dropped=dropped)


def _decimal(value: str | int) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(f"expected a decimal string or int, got {type(value).__name__}")
    result = Decimal(value.strip() if isinstance(value, str) else value)
    if not result.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return result


def dedupe(bars: Iterable[Bar], dropped: Counter[str]) -> list[Bar]:
    """Sort by (symbol, start_at) and keep the first bar of each key, counting the others."""
    out: list[Bar] = []
    for bar in sorted(bars, key=lambda b: (b.symbol, b.start_at)):
        if out and out[-1].symbol == bar.symbol and out[-1].start_at == bar.start_at:
            dropped[DUPLICATE] += 1
        else:
            out.append(bar)
    return out


def merge(parts: Sequence[Iterable[Bar]], dropped: Counter[str]) -> list[Bar]:
    """Merge bar sources in priority order: a later source only adds keys not seen before."""
    seen: set[tuple[str, datetime]] = set()
    out: list[Bar] = []
    for part in parts:
        fresh = []
        for bar in part:
            key = (bar.symbol, bar.start_at)
            if key in seen:
                dropped[IN_EARLIER_FILE] += 1
            else:
                fresh.append(bar)
        seen.update((bar.symbol, bar.start_at) for bar in fresh)
        out.extend(fresh)
    return sorted(out, key=lambda b: (b.symbol, b.start_at))


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportReport:
    """What an import did: the files it read, bars written per output and bars dropped by reason."""

    files_read: tuple[str, ...]
    bars_written: Mapping[str, int]
    bars_dropped: Mapping[str, Mapping[str, int]]

    def summary(self) -> str:
        """A few human-readable lines, one per output."""
        lines = [f"read {len(self.files_read)} files"]
        for output, count in self.bars_written.items():
            dropped = self.bars_dropped.get(output, {})
            detail = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items()) if n)
            lines.append(f"{output}: {count} bars" + (f"; dropped {detail}" if detail else ""))
        return "\n".join(lines)
