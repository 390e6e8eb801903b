"""What the live daemon saw, as recorded, and the replay source that shows exactly that again.

This module owns the values a recording holds (`KnownBar`, `KnownNews`, `KnownReport`,
`RecordedQuote`: each with the first decision time it was known or served for, its `known_at`), the
`Recording` port a cache replay reads them from (the store implements it in `store/cache.py`),
`RecordingFundamentals`, which records every fundamentals report a live source serves, and
`CacheReplaySource`, a `ReplaySource` over a recording.

Point-in-time, "indexed by public release time" (Herculean), as live: at decision time `t` a news
item is shown only if it was published by `t` and known by `t` (served to a live read for `t` or
earlier; an imported item is known from its publication time); a fundamentals report only if it was
published and known by `t`; a bar only once the live daemon had it final by `t` (its `known_at`: the
decision time of the read that first fetched it final, never before its end; a bar the vendor
delivered late stays hidden until then), and never before a bar that precedes it (the gateway reads
runs of bars: a bar fetched ahead of an earlier one waits for it). A bar is shown with the last
values fetched: a re-fetch with other values (a vendor's revision) moved its `known_at` to the
re-fetch, so its earlier values are not shown again, and it is hidden until then. The quote at `t`
and the fill price of an order placed at `t` are the latest quote the live source answered for a
decision time at or before `t` (stamped no later than `t`), as `LatestQuotes` filled live; a symbol
without recorded quotes (one whose bars the live daemon fetched but never quoted, such as a
benchmark) is quoted at the close of its last bar shown by `t` and filled by the replay rule of
`replay_source.py` (the open of the first bar starting at or after `t`: the broker's price, never
shown to an agent).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

from openbell.markets.adapters.vendor_calls import Now
from openbell.markets.domain import Bar, NewsItem, Quote, check_utc
from openbell.markets.fundamentals import FundamentalsReport, FundamentalsSource
from openbell.markets.replay_source import ReplaySource, micros
from openbell.markets.sources import SymbolFilter, check_symbols

logger = logging.getLogger(__name__)
_MICROSECOND: Final = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownBar:
    """A final bar and the first decision time its values were known for (never before its end)."""

    bar: Bar
    known_at: datetime

    def __post_init__(self) -> None:
        check_utc("known_at", self.known_at)
        if self.known_at < self.bar.end_at:
            raise ValueError(
                f"{self.bar.symbol} bar at {self.bar.start_at} known at {self.known_at}, before "
                f"its end {self.bar.end_at}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownNews:
    """A news item and the first decision time it was known for (never before it was published)."""

    item: NewsItem
    known_at: datetime

    def __post_init__(self) -> None:
        check_utc("known_at", self.known_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownReport:
    """A fundamentals report and the first decision time it was known for."""

    report: FundamentalsReport
    known_at: datetime

    def __post_init__(self) -> None:
        check_utc("known_at", self.known_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedQuote:
    """The quote a live source answered when asked for decision time `asked_at`."""

    asked_at: datetime
    quote: Quote

    def __post_init__(self) -> None:
        check_utc("asked_at", self.asked_at)


def known_for(fetched_at: datetime, end_at: datetime) -> datetime:
    """The decision time an answer to a read of `[start, end_at)` fetched at `fetched_at` is known
    for: the read's last instant (`end_at` is one microsecond past the decision time, as the
    gateway and the fundamentals tool ask), or its fetch time if that came first."""
    return min(fetched_at, end_at - _MICROSECOND)


class Recording(Protocol):
    """What a cache replay reads: the recorded final bars, news, reports and quotes."""

    def recorded_bars(
        self, symbols: Sequence[str], interval: str
    ) -> Mapping[str, Sequence[KnownBar]]:
        """The final bars of `symbols` of `interval` with when each was first known, oldest first
        (bars never fetched final are left out: the live gateway never showed them either)."""
        ...

    def recorded_news(self, symbols: Sequence[str]) -> Sequence[KnownNews]:
        """The news about `symbols` and the market-wide news (no symbol), any order."""
        ...

    def recorded_reports(self, symbols: Sequence[str]) -> Sequence[KnownReport]:
        """The fundamentals reports of `symbols`, any order."""
        ...

    def recorded_quotes(self, symbols: Sequence[str]) -> Sequence[RecordedQuote]:
        """The quotes of `symbols` the live sources answered, any order."""
        ...


class ReportCache(Protocol):
    """Where `RecordingFundamentals` puts the reports it serves (the store's cache)."""

    def put_reports(
        self, *, source: str, reports: Sequence[KnownReport], fetched_at: datetime
    ) -> None:
        """Record reports not yet recorded (a report's first `known_at` is kept)."""
        ...


class RecordingFundamentals:
    """A `FundamentalsSource` that records each report `source` serves, known for the decision
    time it was asked for. A failing write is logged (`fundamentals_cache_write_failed`) and never
    hides the answer, as in `CachingSource`."""

    def __init__(self, source: FundamentalsSource, cache: ReportCache, *, now: Now) -> None:
        self._source = source
        self._cache = cache
        self._now = now

    @property
    def name(self) -> str:
        return self._source.name

    @property
    def point_in_time(self) -> bool:
        return self._source.point_in_time

    async def reports(
        self, symbol: str, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[FundamentalsReport]:
        found = await self._source.reports(symbol, start_at, end_at, limit)
        fetched_at = self._now()
        known = known_for(fetched_at, end_at)
        kept = [
            KnownReport(report=report, known_at=max(known, report.published_at)) for report in found
        ]
        try:
            if kept:
                self._cache.put_reports(
                    source=self._source.name, reports=kept, fetched_at=fetched_at
                )
        except Exception:
            logger.warning(
                "fundamentals_cache_write_failed", exc_info=True, extra={"source": self.name}
            )
        return found


class KnownFundamentals:
    """Recorded reports served as live: a report is returned for a read ending at `end_at` (the
    decision time plus one microsecond) only if it was known by then."""

    name = "recorded"
    point_in_time = True

    def __init__(self, reports: Iterable[KnownReport]) -> None:
        self._reports = tuple(sorted(reports, key=lambda known: known.report.published_at))

    async def reports(
        self, symbol: str, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[FundamentalsReport]:
        found = [
            known.report
            for known in self._reports
            if known.report.symbol == symbol
            and start_at <= known.report.published_at < end_at
            and known.known_at < end_at
        ]
        found.reverse()
        return tuple(found[: max(limit, 0)])


class CacheReplaySource(ReplaySource):
    """A `ReplaySource` over what a live daemon recorded (or a user imported): its final bars, its
    news and quotes shown as live (see the module docstring). `bars` are by interval."""

    def __init__(
        self,
        *,
        market: str,
        bars: Mapping[str, Iterable[KnownBar]],
        news: Iterable[KnownNews] = (),
        quotes: Iterable[RecordedQuote] = (),
        name: str,
    ) -> None:
        known = sorted(news, key=lambda entry: entry.item.published_at)
        by_interval = {interval: tuple(found) for interval, found in bars.items()}
        super().__init__(
            market=market,
            bars={
                interval: [entry.bar for entry in found] for interval, found in by_interval.items()
            },
            known_at={
                (interval, entry.bar.symbol, entry.bar.start_at): entry.known_at
                for interval, found in by_interval.items()
                for entry in found
            },
            name=name,
        )
        self._known_news = known
        self._known_us = [micros(entry.item.published_at) for entry in known]
        by_symbol: dict[str, list[RecordedQuote]] = {}
        for recorded in sorted(quotes, key=lambda recorded: recorded.asked_at):
            by_symbol.setdefault(recorded.quote.symbol, []).append(recorded)
        self._quotes = by_symbol
        self._asked_us = {
            symbol: [micros(recorded.asked_at) for recorded in found]
            for symbol, found in by_symbol.items()
        }

    def _recorded_quote(self, symbol: str, at: datetime) -> Quote | None:
        """The latest quote answered for a decision time at or before `at`, stamped by `at`."""
        found = self._quotes.get(symbol, [])
        index = bisect.bisect_right(self._asked_us.get(symbol, []), micros(at))
        for recorded in reversed(found[:index]):
            if recorded.quote.at <= at:
                return recorded.quote
        return None

    def quote_at(self, symbol: str, at: datetime) -> Quote | None:
        """The recorded quote (see the module docstring); for a symbol without recorded quotes,
        the close of its last bar shown by `at` (the open of a bar starting at `at`, the replay
        rule's quote, was fetched only once that bar had ended)."""
        if symbol in self._quotes:
            return self._recorded_quote(symbol, at)
        return self._quote_at(symbol, micros(at), opening=False)

    def first_price_at_or_after(self, symbol: str, at: datetime) -> Quote | None:
        """The live fill price: the latest recorded quote at `at`; the replay rule for a symbol
        without recorded quotes."""
        if symbol in self._quotes:
            return self._recorded_quote(symbol, at)
        return super().first_price_at_or_after(symbol, at)

    def add_news(self, items: Iterable[NewsItem]) -> None:
        """Add `items` (the injection probe's planted items), each known from its publication
        time."""
        known = [*self._known_news, *(KnownNews(item=i, known_at=i.published_at) for i in items)]
        self._known_news = sorted(known, key=lambda entry: entry.item.published_at)
        self._known_us = [micros(entry.item.published_at) for entry in self._known_news]

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Recorded news published in `[start_at, end_at)` and known before `end_at`, newest
        first, at most `limit`."""
        wanted = None if symbols is None else frozenset(check_symbols(symbols))
        first = bisect.bisect_left(self._known_us, micros(start_at))
        last = bisect.bisect_left(self._known_us, micros(end_at), first)
        out: list[NewsItem] = []
        for entry in reversed(self._known_news[first:last]):
            if len(out) >= limit:
                break
            if entry.known_at < end_at and (wanted is None or entry.item.symbol in wanted):
                out.append(entry.item)
        return tuple(out)
