"""The bar and news cache port, its in-memory fake, and the write-through source that fills it.

This module owns `BarCache`, the protocol the store implements (`store/cache.py`) to keep every
fetched bar and news item with its `fetched_at`; `MemoryBarCache`, the fake beside it; and
`CachingSource`, a `MarketDataSource` that passes every read to a live source and records what came
back. A bar is final once its end has passed when it was fetched (`end_at <= fetched_at`): a final
bar is never replaced by an unfinished one, and an unfinished bar is replaced by any later fetch.
News items are kept once per (symbol, published_at, title).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from openbell.markets.calls import Now
from openbell.markets.domain import Bar, NewsItem, check_utc
from openbell.markets.sources import ForwardingSource, MarketDataSource, check_symbols


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedBar:
    """A bar as fetched from `source` at `fetched_at`; final when it had ended by then."""

    bar: Bar
    interval: str
    source: str
    fetched_at: datetime

    def __post_init__(self) -> None:
        check_utc("fetched_at", self.fetched_at)

    @property
    def is_final(self) -> bool:
        """Whether the bar had ended when it was fetched (so its values can no longer change)."""
        return self.bar.end_at <= self.fetched_at


class BarCache(Protocol):
    """Fetched bars and news, each with when it was fetched. Every datetime is aware UTC."""

    def put_bars(
        self, *, source: str, interval: str, bars: Sequence[Bar], fetched_at: datetime
    ) -> None:
        """Record `bars`; a bar is final when `end_at <= fetched_at` (see the module docstring)."""
        ...

    def get_bars(
        self,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
        *,
        final_only: bool = True,
    ) -> Mapping[str, Sequence[CachedBar]]:
        """Cached bars starting in `[start_at, end_at)` by symbol, oldest first."""
        ...

    def put_news(self, *, source: str, items: Sequence[NewsItem], fetched_at: datetime) -> None:
        """Record news items not yet cached."""
        ...

    def get_news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Cached news published in `[start_at, end_at)` (None: any symbol), newest first."""
        ...


def _news_key(item: NewsItem) -> tuple[str | None, datetime, str]:
    return (item.symbol, item.published_at, item.title)


class MemoryBarCache:
    """A `BarCache` in a dict, for tests and for running without a database."""

    def __init__(self) -> None:
        self._bars: dict[tuple[str, str, datetime], CachedBar] = {}
        self._news: dict[tuple[str | None, datetime, str], NewsItem] = {}

    def put_bars(
        self, *, source: str, interval: str, bars: Sequence[Bar], fetched_at: datetime
    ) -> None:
        for bar in bars:
            cached = CachedBar(bar=bar, interval=interval, source=source, fetched_at=fetched_at)
            key = (bar.symbol, interval, bar.start_at)
            old = self._bars.get(key)
            if old is None or not old.is_final or cached.is_final:
                self._bars[key] = cached

    def get_bars(
        self,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
        *,
        final_only: bool = True,
    ) -> Mapping[str, Sequence[CachedBar]]:
        wanted = frozenset(check_symbols(symbols))
        out: dict[str, list[CachedBar]] = {}
        for (symbol, kind, start), cached in sorted(self._bars.items()):
            inside = symbol in wanted and kind == interval and start_at <= start < end_at
            if inside and (cached.is_final or not final_only):
                out.setdefault(symbol, []).append(cached)
        return out

    def put_news(self, *, source: str, items: Sequence[NewsItem], fetched_at: datetime) -> None:
        check_utc("fetched_at", fetched_at)
        for item in items:
            self._news.setdefault(_news_key(item), item)

    def get_news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        wanted = None if symbols is None else frozenset(check_symbols(symbols))
        found = [
            item
            for item in self._news.values()
            if start_at <= item.published_at < end_at and (wanted is None or item.symbol in wanted)
        ]
        found.sort(key=lambda item: item.published_at, reverse=True)
        return tuple(found[:limit])


class CachingSource(ForwardingSource):
    """A `MarketDataSource` that reads through `source` and records bars and news in `cache`.

    `now` is the daemon clock's `now`: the `fetched_at` of everything recorded. Quotes pass
    through unrecorded. Failures of `source` propagate unchanged.
    """

    def __init__(self, source: MarketDataSource, cache: BarCache, *, now: Now) -> None:
        super().__init__(source)
        self._cache = cache
        self._now = now

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        found = await self._source.bars(symbols, interval, start_at, end_at)
        fetched_at = self._now()
        every: Iterable[Bar] = (bar for bars in found.values() for bar in bars)
        self._cache.put_bars(
            source=self._source.name, interval=interval, bars=tuple(every), fetched_at=fetched_at
        )
        return found

    async def news(
        self,
        symbols: Sequence[str] | None,
        start_at: datetime,
        end_at: datetime,
        limit: int,
    ) -> Sequence[NewsItem]:
        found = await self._source.news(symbols, start_at, end_at, limit)
        self._cache.put_news(source=self._source.name, items=tuple(found), fetched_at=self._now())
        return found
