"""What a bar cache knows completely: covered spans, their union, and what is left to ask.

This module owns the arithmetic of the bar cache's coverage (`cache.py`), as pure functions. A
`TimeSpan` is a half-open range `[start_at, end_at)` of bar starts. A fetch of one symbol covers
the window asked of the vendor from its start up to the end of the last bar returned that was
final when fetched (`end_at <= fetched_at`, stopping at the first one that was not), and never
past the window: every bar starting in that span is known and final, and a gap inside it (a
holiday, a suspension) is the vendor's answer too. Nothing past the last final bar is claimed,
since a vendor may not have published a bar that has only just ended; and a fetch that returned
no final bar covers nothing (an empty answer may be a symbol the vendor failed on).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from openbell.markets.domain import Bar, check_utc


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeSpan:
    """The instants `[start_at, end_at)`, aware UTC and not empty."""

    start_at: datetime
    end_at: datetime

    def __post_init__(self) -> None:
        check_utc("start_at", self.start_at)
        check_utc("end_at", self.end_at)
        if self.end_at <= self.start_at:
            raise ValueError(f"empty span: {self.start_at} to {self.end_at}")

    def contains(self, at: datetime) -> bool:
        """Whether `at` lies in the span."""
        return self.start_at <= at < self.end_at


def fetched_span(asked: TimeSpan, bars: Iterable[Bar], fetched_at: datetime) -> TimeSpan | None:
    """What one symbol's `bars`, fetched for `asked` at `fetched_at`, cover (None: nothing)."""
    covered_until = asked.start_at
    for bar in sorted((bar for bar in bars if asked.contains(bar.start_at)), key=_start):
        if bar.end_at > fetched_at:
            break
        covered_until = max(covered_until, bar.end_at)
    end_at = min(covered_until, asked.end_at)
    return TimeSpan(start_at=asked.start_at, end_at=end_at) if end_at > asked.start_at else None


def merge_spans(spans: Iterable[TimeSpan]) -> tuple[TimeSpan, ...]:
    """The union of `spans` as disjoint spans, oldest first; spans that touch are joined."""
    merged: list[TimeSpan] = []
    for span in sorted(spans, key=lambda span: (span.start_at, span.end_at)):
        if merged and span.start_at <= merged[-1].end_at:
            if span.end_at > merged[-1].end_at:
                merged[-1] = TimeSpan(start_at=merged[-1].start_at, end_at=span.end_at)
        else:
            merged.append(span)
    return tuple(merged)


def uncovered_hull(window: TimeSpan, covered: Iterable[TimeSpan]) -> TimeSpan | None:
    """The smallest span holding every part of `window` outside `covered` (None: all covered).

    One span, not the list of holes: one vendor read of it costs less than one read per hole.
    Typically the tail of the window, past the newest bar already cached.
    """
    start_at, end_at = window.start_at, window.end_at
    merged = merge_spans(covered)
    for span in merged:  # disjoint and not touching: at most one holds each end of the window
        if span.contains(start_at):
            start_at = span.end_at
        if span.start_at < end_at <= span.end_at:
            end_at = span.start_at
    return TimeSpan(start_at=start_at, end_at=end_at) if start_at < end_at else None


def _start(bar: Bar) -> datetime:
    return bar.start_at
