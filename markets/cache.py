"""The bar and news cache port, its in-memory fake, and the source that reads bars through it.

This module owns `BarCache`, the protocol the store implements (`store/cache.py`) to keep every
fetched bar, news item and quote with its `fetched_at` (news and quotes also with the decision time
they were served for, which a cache replay shows them from: `recorded.py`), and the spans over which
a source's bars are all cached and final (`coverage.py`); `MemoryBarCache`, the fake beside it; and
`CachingSource`, a `MarketDataSource` that serves bars from the cache where it covers the window
asked, asks a live source for the rest and records what came back. A bar is final once its end has
passed when it was fetched (`end_at <= fetched_at`): a final bar is never replaced by an unfinished
one, and an unfinished bar is replaced by any later fetch. A final bar also keeps when it was first
known (`known_at`, which a cache replay shows it from): the decision time of the read that first
fetched it final, or its end if later; a re-fetch with the same values keeps that time, one with
other values (a vendor's revision) moves it to the re-fetch, so no value is ever shown before it was
fetched. News items are kept once per (symbol, published_at, title) and quotes once per (source,
symbol, decision time); neither is read back live (a cache replay reads them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from openbell.markets.adapters.vendor_calls import Now
from openbell.markets.coverage import TimeSpan, fetched_span, merge_spans, uncovered_hull
from openbell.markets.domain import Bar, NewsItem, Quote, check_utc
from openbell.markets.recorded import KnownReport, RecordedQuote, known_for
from openbell.markets.sources import (
    ForwardingSource,
    MarketDataSource,
    SymbolFilter,
    check_symbols,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedBar:
    """A bar as fetched from `source` at `fetched_at`; final when it had ended by then. `known_at`
    is when a final bar's values were first known (never before its end; None: unfinished)."""

    bar: Bar
    interval: str
    source: str
    fetched_at: datetime
    known_at: datetime | None = None

    def __post_init__(self) -> None:
        check_utc("fetched_at", self.fetched_at)
        if self.known_at is not None:
            check_utc("known_at", self.known_at)
            if self.known_at < self.bar.end_at:
                raise ValueError(
                    f"{self.bar.symbol} bar at {self.bar.start_at} known at {self.known_at}, "
                    f"before its end {self.bar.end_at}"
                )

    @property
    def is_final(self) -> bool:
        """Whether the bar had ended when it was fetched (so its values can no longer change)."""
        return self.bar.end_at <= self.fetched_at


class BarCache(Protocol):
    """Fetched bars and news, each with when it was fetched. Every datetime is aware UTC."""

    def put_bars(
        self,
        *,
        source: str,
        interval: str,
        bars: Sequence[Bar],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        """Record `bars`; a bar is final when `end_at <= fetched_at`, and known from the later of
        its end and `known_at` (the decision time the read was for, never after `fetched_at`;
        None: `fetched_at`). See the module docstring."""
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

    def put_coverage(
        self,
        *,
        source: str,
        interval: str,
        spans: Mapping[str, TimeSpan],
        fetched_at: datetime,
    ) -> None:
        """Record that every bar of `source` starting in each symbol's span is cached and final."""
        ...

    def get_coverage(
        self,
        *,
        source: str,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
    ) -> Mapping[str, Sequence[TimeSpan]]:
        """Each symbol's covered spans overlapping `[start_at, end_at)`, merged, oldest first."""
        ...

    def put_news(
        self,
        *,
        source: str,
        items: Sequence[NewsItem],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        """Record news items not yet cached, each known from `known_at` (the decision time it was
        served for; never before its publication; None: from its publication)."""
        ...

    def put_quotes(
        self, *, source: str, quotes: Sequence[RecordedQuote], fetched_at: datetime
    ) -> None:
        """Record the quotes `source` answered, once per (source, symbol, asked_at)."""
        ...

    def put_reports(
        self, *, source: str, reports: Sequence[KnownReport], fetched_at: datetime
    ) -> None:
        """Record fundamentals reports not yet recorded; a report's first `known_at` is kept."""
        ...

    def get_news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Cached news published in `[start_at, end_at)` (None: any symbol), newest first."""
        ...


def bar_known_from(fetched_at: datetime, known_at: datetime | None) -> datetime:
    """When the bars of a read fetched at `fetched_at` for decision time `known_at` (None: a read
    for no decision) are known, their ends aside: the decision time, never after the fetch."""
    check_utc("fetched_at", fetched_at)
    if known_at is None:
        return fetched_at
    check_utc("known_at", known_at)
    return min(known_at, fetched_at)


def _news_key(item: NewsItem) -> tuple[str | None, datetime, str]:
    return (item.symbol, item.published_at, item.title)


class MemoryBarCache:
    """A `BarCache` in a dict, for tests and for running without a database."""

    def __init__(self) -> None:
        self._bars: dict[tuple[str, str, datetime], CachedBar] = {}
        self._coverage: dict[tuple[str, str, str], tuple[TimeSpan, ...]] = {}
        self._news: dict[tuple[str | None, datetime, str], NewsItem] = {}
        #: When each news item was first known, and the quotes recorded: for tests to read.
        self.news_known_at: dict[tuple[str | None, datetime, str], datetime] = {}
        self.quotes: dict[tuple[str, str, datetime], RecordedQuote] = {}
        self.reports: dict[tuple[str, date, datetime], KnownReport] = {}

    def put_bars(
        self,
        *,
        source: str,
        interval: str,
        bars: Sequence[Bar],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        known = bar_known_from(fetched_at, known_at)
        for bar in bars:
            key = (bar.symbol, interval, bar.start_at)
            old = self._bars.get(key)
            final = bar.end_at <= fetched_at
            if old is not None and old.is_final and not final:
                continue
            if final and old is not None and old.is_final and old.bar == bar:
                first = old.known_at  # the same values: known since they were first fetched
            else:
                first = max(known, bar.end_at) if final else None
            self._bars[key] = CachedBar(
                bar=bar, interval=interval, source=source, fetched_at=fetched_at, known_at=first
            )

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

    def put_coverage(
        self,
        *,
        source: str,
        interval: str,
        spans: Mapping[str, TimeSpan],
        fetched_at: datetime,
    ) -> None:
        check_utc("fetched_at", fetched_at)
        for symbol, span in spans.items():
            key = (source, symbol, interval)
            self._coverage[key] = merge_spans((*self._coverage.get(key, ()), span))

    def get_coverage(
        self,
        *,
        source: str,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
    ) -> Mapping[str, Sequence[TimeSpan]]:
        out: dict[str, tuple[TimeSpan, ...]] = {}
        for symbol in check_symbols(symbols):
            spans = self._coverage.get((source, symbol, interval), ())
            found = tuple(s for s in spans if s.start_at < end_at and start_at < s.end_at)
            if found:
                out[symbol] = found
        return out

    def put_news(
        self,
        *,
        source: str,
        items: Sequence[NewsItem],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        check_utc("fetched_at", fetched_at)
        for item in items:
            self._news.setdefault(_news_key(item), item)
            known = item.published_at if known_at is None else max(known_at, item.published_at)
            self.news_known_at.setdefault(_news_key(item), known)

    def put_quotes(
        self, *, source: str, quotes: Sequence[RecordedQuote], fetched_at: datetime
    ) -> None:
        check_utc("fetched_at", fetched_at)
        for recorded in quotes:
            self.quotes.setdefault((source, recorded.quote.symbol, recorded.asked_at), recorded)

    def put_reports(
        self, *, source: str, reports: Sequence[KnownReport], fetched_at: datetime
    ) -> None:
        check_utc("fetched_at", fetched_at)
        for known in reports:
            report = known.report
            self.reports.setdefault((report.symbol, report.period_end, report.published_at), known)

    def get_news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        wanted = None if symbols is None else frozenset(check_symbols(symbols))
        found = [
            item
            for item in self._news.values()
            if start_at <= item.published_at < end_at and (wanted is None or item.symbol in wanted)
        ]
        found.sort(key=lambda item: item.published_at, reverse=True)
        return tuple(found[:limit])


#: What the cache knows of one symbol: the bars it serves, and the part of the window it does not
#: cover (None: it covers the whole window).
_Known = tuple[tuple[Bar, ...], TimeSpan | None]


class CachingSource(ForwardingSource):
    """A `MarketDataSource` that reads bars through `cache` and records what `source` returns.

    `now` is the daemon clock's `now`; the `fetched_at` of a bar read is taken as the read is
    asked, so that a bar ending while the vendor answers is not taken for final; the bars fetched
    are known from the read's `end_at` (the gateway reads the bars started before its decision
    time), or from their fetch if that came first. For each symbol,
    the part of the window the cache covers is served from it and the rest is asked of `source`:
    one read for all such symbols over the smallest window holding each one's uncovered part
    (typically the newest bar). A bar served from the cache starts inside the window and inside a
    covered span, was final when fetched, and has ended by `now`. The answer is recorded with the
    span it covers (`coverage.py`). The cache only saves vendor calls: a failing cache read falls
    back to `source` and a failing write keeps its answer (logged as `bar_cache_read_failed`,
    `bar_cache_write_failed`). News and quotes are recorded, never read back (a failing write is
    logged as `news_cache_write_failed`, `quote_cache_write_failed`). Failures of `source`
    propagate unchanged.
    """

    def __init__(self, source: MarketDataSource, cache: BarCache, *, now: Now) -> None:
        super().__init__(source)
        self._cache = cache
        self._now = now

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        asked = tuple(dict.fromkeys(check_symbols(symbols)))
        asked_at = self._now()
        if not asked or end_at <= start_at:
            return await self._fetch(asked, interval, start_at, end_at, asked_at, end_at)
        window = TimeSpan(start_at=start_at, end_at=end_at)
        try:
            known = self._known(asked, interval, window, asked_at)
        except Exception:
            logger.warning(
                "bar_cache_read_failed",
                exc_info=True,
                extra={"source": self.name, "interval": interval},
            )
            return await self._fetch(asked, interval, start_at, end_at, asked_at, end_at)
        holes = [hull for _, hull in known.values() if hull is not None]
        if not holes:
            return {symbol: bars for symbol, (bars, _) in known.items() if bars}
        vendor = TimeSpan(
            start_at=min(hull.start_at for hull in holes),
            end_at=max(hull.end_at for hull in holes),
        )
        missing = tuple(symbol for symbol, (_, hull) in known.items() if hull is not None)
        fetched = await self._fetch(
            missing, interval, vendor.start_at, vendor.end_at, asked_at, end_at
        )
        out: dict[str, tuple[Bar, ...]] = {}
        for symbol, (cached, hull) in known.items():
            if hull is None:
                merged = cached
            else:
                merged = _merge(cached, fetched.get(symbol, ()), vendor, window)
            if merged:
                out[symbol] = merged
        return out

    def _known(
        self, symbols: tuple[str, ...], interval: str, window: TimeSpan, now: datetime
    ) -> dict[str, _Known]:
        covered = self._cache.get_coverage(
            source=self.name,
            symbols=symbols,
            interval=interval,
            start_at=window.start_at,
            end_at=window.end_at,
        )
        with_spans = [symbol for symbol in symbols if covered.get(symbol)]
        cached = (
            self._cache.get_bars(with_spans, interval, window.start_at, window.end_at)
            if with_spans
            else {}
        )
        out: dict[str, _Known] = {}
        for symbol in symbols:
            spans = covered.get(symbol, ())
            served = tuple(
                found.bar
                for found in cached.get(symbol, ())
                if found.is_final
                and found.bar.end_at <= now
                and window.contains(found.bar.start_at)
                and any(span.contains(found.bar.start_at) for span in spans)
            )
            out[symbol] = (served, uncovered_hull(window, spans))
        return out

    async def _fetch(
        self,
        symbols: tuple[str, ...],
        interval: str,
        start_at: datetime,
        end_at: datetime,
        fetched_at: datetime,
        known_at: datetime,
    ) -> Mapping[str, Sequence[Bar]]:
        """`source`'s bars for the window, recorded in the cache with what they cover, known from
        `known_at` (the end of the read asked for)."""
        found = await self._source.bars(symbols, interval, start_at, end_at)
        try:
            self._record(found, symbols, interval, start_at, end_at, fetched_at, known_at)
        except Exception:
            logger.warning(
                "bar_cache_write_failed",
                exc_info=True,
                extra={"source": self.name, "interval": interval},
            )
        return found

    def _record(
        self,
        found: Mapping[str, Sequence[Bar]],
        symbols: tuple[str, ...],
        interval: str,
        start_at: datetime,
        end_at: datetime,
        fetched_at: datetime,
        known_at: datetime,
    ) -> None:
        every = tuple(bar for bars in found.values() for bar in bars)
        self._cache.put_bars(
            source=self._source.name,
            interval=interval,
            bars=every,
            fetched_at=fetched_at,
            known_at=known_at,
        )
        if end_at <= start_at:
            return
        asked = TimeSpan(start_at=start_at, end_at=end_at)
        spans: dict[str, TimeSpan] = {}
        for symbol in symbols:
            span = fetched_span(asked, found.get(symbol, ()), fetched_at)
            if span is not None:
                spans[symbol] = span
        if spans:
            # After the bars: a span is never recorded over bars that are not in the cache.
            self._cache.put_coverage(
                source=self._source.name, interval=interval, spans=spans, fetched_at=fetched_at
            )

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        found = await self._source.news(symbols, start_at, end_at, limit)
        fetched_at = self._now()
        try:
            self._cache.put_news(
                source=self._source.name,
                items=tuple(found),
                fetched_at=fetched_at,
                known_at=known_for(fetched_at, end_at),
            )
        except Exception:
            logger.warning("news_cache_write_failed", exc_info=True, extra={"source": self.name})
        return found

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        found = await self._source.quote(symbols, at)
        recorded = tuple(RecordedQuote(asked_at=at, quote=quote) for quote in found.values())
        try:
            if recorded:
                self._cache.put_quotes(
                    source=self._source.name, quotes=recorded, fetched_at=self._now()
                )
        except Exception:
            logger.warning("quote_cache_write_failed", exc_info=True, extra={"source": self.name})
        return found


def _merge(
    cached: Sequence[Bar], fetched: Sequence[Bar], vendor: TimeSpan, window: TimeSpan
) -> tuple[Bar, ...]:
    """Cached bars outside the `vendor` read and fetched ones inside `window`, oldest first."""
    by_start = {bar.start_at: bar for bar in cached if not vendor.contains(bar.start_at)}
    by_start.update((bar.start_at, bar) for bar in fetched if window.contains(bar.start_at))
    return tuple(by_start[start] for start in sorted(by_start))
