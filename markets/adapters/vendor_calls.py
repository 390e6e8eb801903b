"""How the live adapters call a vendor: a deadline, a rate limiter and a short-lived memo.

This module owns the vendor-independent plumbing of the live sources:
`call_blocking` runs a synchronous vendor function in a worker thread under a deadline (a hung
socket becomes `DataUnavailable`, never a stuck cycle), `RateLimiter` spaces calls to one vendor,
`Memo` keeps recent answers for a few seconds so that the reads of one slot share one request,
`check_live` refuses to answer a question about the past with data fetched now (look-ahead),
`check_bars_request` vets the arguments of a `bars` read, and `bars_within` and `newest_news` cut
what a vendor returned down to the window asked about.
Durations come from an injectable monotonic source, never from the wall clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final, Generic, TypeVar

from openbell.markets.domain import Bar, NewsItem, check_utc
from openbell.markets.errors import DataUnavailable, IntervalUnavailable

T = TypeVar("T")

#: A source of seconds that only moves forward (`time.monotonic` in production, a fake in tests).
Monotonic = Callable[[], float]
#: How a limiter waits (`asyncio.sleep` in production; a test may pass a fake that returns at once).
Sleep = Callable[[float], Awaitable[None]]
#: The decision-time source of a live adapter: the daemon passes its clock's `now`.
Now = Callable[[], datetime]

#: How far `at` may lie before the adapter's `now` and still be answered with data fetched now.
LIVE_TOLERANCE: Final = timedelta(minutes=5)


async def call_blocking(function: Callable[[], T], *, timeout_s: float, what: str) -> T:
    """Run `function` in a worker thread; past `timeout_s` seconds raise `DataUnavailable`.

    The thread itself cannot be killed and finishes in the background; its result is dropped.
    Exceptions of `function` propagate unchanged, for the adapter to translate.
    """
    try:
        return await asyncio.wait_for(asyncio.to_thread(function), timeout=timeout_s)
    except TimeoutError as exc:
        raise DataUnavailable(f"{what} timed out after {timeout_s:g} s") from exc


class RateLimiter:
    """Spaces calls at least `min_interval_s` apart, across all tasks sharing the limiter."""

    def __init__(
        self,
        min_interval_s: float,
        *,
        monotonic: Monotonic = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if min_interval_s < 0:
            raise ValueError(f"min_interval_s must not be negative, got {min_interval_s}")
        self._interval = min_interval_s
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self._next_s: float | None = None
        self.waited_s = 0.0  # total time spent waiting, for logs and tests

    async def wait(self) -> None:
        """Return when the next call may be made, and book that slot."""
        async with self._lock:
            now_s = self._monotonic()
            if self._next_s is not None and self._next_s > now_s:
                delay = self._next_s - now_s
                self.waited_s += delay
                await self._sleep(delay)
                now_s = max(self._monotonic(), self._next_s)
            self._next_s = now_s + self._interval


class Memo(Generic[T]):
    """Answers kept for `ttl_s` seconds by key, so that repeated reads do not call the vendor."""

    def __init__(
        self, ttl_s: float, *, monotonic: Monotonic = time.monotonic, max_entries: int = 512
    ) -> None:
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._max = max_entries
        self._entries: dict[Hashable, tuple[float, T]] = {}

    def get(self, key: Hashable) -> T | None:
        """The answer stored under `key` if it is younger than the TTL, else None."""
        found = self._entries.get(key)
        if found is None:
            return None
        stored_s, value = found
        if self._monotonic() - stored_s >= self._ttl_s:
            del self._entries[key]
            return None
        return value

    def put(self, key: Hashable, value: T) -> None:
        """Store `value` under `key`, evicting the oldest entry when full."""
        if len(self._entries) >= self._max and key not in self._entries:
            oldest = min(self._entries, key=lambda k: self._entries[k][0])
            del self._entries[oldest]
        self._entries[key] = (self._monotonic(), value)


def check_live(what: str, at: datetime, now: datetime) -> datetime:
    """The stamp for data fetched at `now` and asked for at `at`: `min(at, now)`.

    A live vendor answers with what it knows now; using that for an `at` well before `now` would
    show an agent the future, so such a request raises `DataUnavailable`.
    """
    check_utc("at", at)
    check_utc("now", now)
    if at < now - LIVE_TOLERANCE:
        raise DataUnavailable(
            f"{what} is live data; it cannot answer for {at.isoformat()} (now is {now.isoformat()})"
        )
    return min(at, now)


def check_bars_request(
    source: str, intervals: Sequence[str], interval: str, start_at: datetime, end_at: datetime
) -> None:
    """Raise `IntervalUnavailable` for an interval `source` does not serve; refuse naive times."""
    if interval not in intervals:
        raise IntervalUnavailable(
            f"{source} serves {', '.join(intervals)}, not {interval}", interval=interval
        )
    check_utc("start_at", start_at)
    check_utc("end_at", end_at)


def bars_within(
    found: Mapping[str, Sequence[Bar]], start_at: datetime, end_at: datetime
) -> dict[str, tuple[Bar, ...]]:
    """The bars of `found` starting in `[start_at, end_at)`; a symbol left with none is dropped."""
    return {
        symbol: kept
        for symbol, bars in found.items()
        if (kept := tuple(b for b in bars if start_at <= b.start_at < end_at))
    }


def newest_news(
    items: Iterable[NewsItem], start_at: datetime, end_at: datetime, limit: int
) -> tuple[NewsItem, ...]:
    """The items published in `[start_at, end_at)`, newest first, at most `limit`."""
    kept = [item for item in items if start_at <= item.published_at < end_at]
    kept.sort(key=lambda item: item.published_at, reverse=True)
    return tuple(kept[:limit])
