"""The coverage arithmetic of the bar cache, and the read-through source over the in-memory cache:
whatever the reads, it answers exactly what the vendor answers at that moment."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openbell.markets.cache import CachingSource, MemoryBarCache
from openbell.markets.coverage import TimeSpan, fetched_span, merge_spans, uncovered_hull
from openbell.markets.domain import Bar, NewsItem, Quote, utc

T0 = utc(2025, 7, 8)
HOUR = timedelta(hours=1)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def span(start_h: float, end_h: float) -> TimeSpan:
    return TimeSpan(start_at=at(start_h), end_at=at(end_h))


def bar(hour: int, *, close: Decimal = Decimal(1), symbol: str = "BTC/USDT") -> Bar:
    return Bar(
        symbol=symbol,
        start_at=at(hour),
        end_at=at(hour + 1),
        open=Decimal(1),
        high=max(close, Decimal(1)),
        low=min(close, Decimal(1)),
        close=close,
        volume=Decimal(1),
    )


def test_a_span_is_aware_utc_and_not_empty() -> None:
    with pytest.raises(ValueError, match="empty span"):
        span(2, 2)
    with pytest.raises(ValueError, match="naive"):
        TimeSpan(start_at=datetime(2025, 7, 8), end_at=at(1))  # noqa: DTZ001
    assert span(1, 2).contains(at(1))
    assert not span(1, 2).contains(at(2))


@pytest.mark.parametrize(
    ("hours", "fetched_h", "asked", "covered"),
    [
        ([0, 1, 2], 3, (0, 3), (0, 3)),  # every bar final: the whole window
        ([0, 1, 2], 2.5, (0, 3), (0, 2)),  # the bar 2-3 had not ended: up to its start
        ([0, 1, 5], 9, (0, 9), (0, 6)),  # a gap inside is covered; nothing past the last bar
        ([2, 3], 9, (0, 9), (0, 4)),  # a gap at the start is covered (the vendor had none)
        ([], 9, (0, 9), None),  # an empty answer covers nothing
        ([0], 0.5, (0, 9), None),  # only an unfinished bar: nothing
        ([0, 1, 3], 3.5, (0, 9), (0, 2)),  # stops at the first unfinished bar
        ([0, 1, 2], 9, (0, 1.5), (0, 1.5)),  # a bar ending past the window: up to the window end
        ([0, 1, 7], 9, (0, 5), (0, 2)),  # bars outside the window are not the answer
    ],
)
def test_what_a_fetch_covers(
    hours: list[int],
    fetched_h: float,
    asked: tuple[float, float],
    covered: tuple[float, float] | None,
) -> None:
    found = fetched_span(span(*asked), [bar(hour) for hour in hours], at(fetched_h))
    assert found == (None if covered is None else span(*covered))


@pytest.mark.parametrize(
    ("spans", "merged"),
    [
        ([], []),
        ([(3, 4), (0, 1)], [(0, 1), (3, 4)]),
        ([(0, 2), (1, 3)], [(0, 3)]),
        ([(0, 2), (2, 3)], [(0, 3)]),  # touching spans are joined
        ([(0, 5), (1, 2), (6, 7)], [(0, 5), (6, 7)]),
    ],
)
def test_merging_spans(spans: list[tuple[int, int]], merged: list[tuple[int, int]]) -> None:
    assert merge_spans(span(*s) for s in spans) == tuple(span(*m) for m in merged)


@pytest.mark.parametrize(
    ("covered", "window", "hull"),
    [
        ([], (0, 9), (0, 9)),
        ([(0, 6)], (0, 9), (6, 9)),  # the usual case: the tail
        ([(-5, 6)], (0, 9), (6, 9)),
        ([(3, 12)], (0, 9), (0, 3)),  # the head
        ([(0, 3), (5, 9)], (0, 9), (3, 5)),  # a hole
        ([(2, 3), (5, 6)], (0, 9), (0, 9)),  # head and tail: one read of the whole window
        ([(0, 3), (3, 9)], (0, 9), None),
        ([(-1, 10)], (0, 9), None),
        ([(9, 12), (-3, 0)], (0, 9), (0, 9)),  # touching the window is not covering it
    ],
)
def test_the_part_left_to_ask(
    covered: list[tuple[int, int]], window: tuple[int, int], hull: tuple[int, int] | None
) -> None:
    found = uncovered_hull(span(*window), [span(*s) for s in covered])
    assert found == (None if hull is None else span(*hull))


@settings(max_examples=200, deadline=None)
@given(
    covered=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10)), max_size=6),
    window=st.tuples(st.integers(0, 40), st.integers(1, 20)),
)
def test_the_part_left_to_ask_holds_every_uncovered_instant(
    covered: list[tuple[int, int]], window: tuple[int, int]
) -> None:
    spans = [span(start, start + length) for start, length in covered]
    asked = span(window[0], window[0] + window[1])
    hull = uncovered_hull(asked, spans)
    for half_hours in range(2 * window[0], 2 * (window[0] + window[1])):
        instant = at(half_hours / 2)
        is_covered = any(s.contains(instant) for s in spans)
        assert is_covered or (hull is not None and hull.contains(instant))
    if hull is not None:
        assert asked.start_at <= hull.start_at < hull.end_at <= asked.end_at
        # Its ends are uncovered: the hull is no wider than it must be.
        assert not any(s.contains(hull.start_at) for s in spans)
        assert not any(s.contains(hull.end_at - timedelta(microseconds=1)) for s in spans)


class Vendor:
    """A live vendor at the network boundary: hourly bars of two symbols with holes, counting reads.

    With `in_progress`, it also serves the bar under way, its close moving with the clock, as raw
    Yahoo or Eastmoney do; otherwise only finished bars, as the adapters do.
    """

    name = "vendor"
    market = "crypto"
    intervals = ("1h",)

    def __init__(
        self, hours: Mapping[str, Sequence[int]], now: list[datetime], *, in_progress: bool
    ):
        self.hours = hours
        self.now = now
        self.in_progress = in_progress
        self.asked: list[tuple[datetime, datetime]] = []

    def _bar(self, symbol: str, hour: int) -> Bar | None:
        now = self.now[0]
        seen = min(now, at(hour + 1)) - at(hour)
        if seen <= timedelta(0) or (seen < HOUR and not self.in_progress):
            return None
        close = Decimal(hour) + Decimal(seen.total_seconds()) / 3600
        return bar(hour, close=close, symbol=symbol)

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        self.asked.append((start_at, end_at))
        out: dict[str, tuple[Bar, ...]] = {}
        for symbol in symbols:
            found = [self._bar(symbol, hour) for hour in self.hours.get(symbol, ())]
            kept = tuple(b for b in found if b is not None and start_at <= b.start_at < end_at)
            if kept:
                out[symbol] = kept
        return out

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return {}

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return ()


def _plain(found: Mapping[str, Sequence[Bar]]) -> dict[str, tuple[Bar, ...]]:
    return {symbol: tuple(bars) for symbol, bars in found.items() if bars}


READS = st.lists(
    st.tuples(
        st.integers(0, 150),  # minutes the clock moves on
        st.integers(1, 30),  # hours the window reaches back from its end
        st.integers(-3, 2),  # hours from the clock to the window end
        st.sampled_from([("BTC/USDT",), ("ETH/USDT",), ("BTC/USDT", "ETH/USDT")]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    holes=st.sets(st.integers(0, 47), max_size=20),
    in_progress=st.booleans(),
    reads=READS,
)
def test_reading_through_the_cache_answers_what_the_vendor_answers(
    holes: set[int], in_progress: bool, reads: list[tuple[int, int, int, tuple[str, ...]]]
) -> None:
    hours = {
        "BTC/USDT": [hour for hour in range(48) if hour not in holes],
        "ETH/USDT": [hour for hour in range(48) if hour % 7 and hour not in holes],
    }
    now = [at(10)]
    vendor = Vendor(hours, now, in_progress=in_progress)
    source = CachingSource(vendor, MemoryBarCache(), now=lambda: now[0])
    for minutes, back_h, ahead_h, symbols in reads:
        now[0] += timedelta(minutes=minutes)
        end_at = now[0] + timedelta(hours=ahead_h)
        window = (symbols, "1h", end_at - timedelta(hours=back_h), end_at)
        through_cache = _plain(asyncio.run(source.bars(*window)))
        assert through_cache == _plain(asyncio.run(vendor.bars(*window)))


def test_slot_after_slot_the_vendor_is_asked_for_the_new_bar_only() -> None:
    now = [at(30)]
    vendor = Vendor({"BTC/USDT": range(48)}, now, in_progress=False)
    source = CachingSource(vendor, MemoryBarCache(), now=lambda: now[0])
    for _ in range(3):
        for lookback in (20, 5):  # two reads a slot, as two agents or two tools would make
            asyncio.run(source.bars(["BTC/USDT"], "1h", now[0] - lookback * HOUR, now[0]))
        now[0] += HOUR
    assert vendor.asked == [(at(10), at(30)), (at(30), at(31)), (at(31), at(32))]
