"""Replay: a `MarketDataSource` over recorded bars, with the replay price rules of DESIGN §2 and §4.

This module owns `ReplaySource`, which serves bars from canonical bar files (`barfile.py`: bundled
ones, or the files of a `replay:PATH` config) or from in-memory bars (the fake that unit tests use),
and recorded news. It also owns the two replay price rules. The quote known at `t` is the open of a
bar starting exactly at `t` (finest interval first), else the close of the bar that ended last at or
before `t` (ties go to the finer interval). The fill price of an order placed at `t` is the open of
the first bar starting at or after `t` (earliest start wins, ties go to the finer interval). It
knows each symbol's whole history, so it tells the gateway when a symbol first had an ended bar
(`first_bar_ends`). Its bars are prepared once per source (a replay builds one): each symbol's
`BarSeries` (`bar_series.py`) is read on its first query and kept, lookups are bisections over its
sorted microsecond stamps, its `Bar`s are built only when bars are asked for, never for a quote or a
fill price, and the gateway reads the bars ended by its decision time as `BarWindow`s of it
(`ended_windows`), with no bar filtered or decoded again.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Final

from openbell.markets.bar_series import BarSeries, BarWindow, bar_quote
from openbell.markets.barfile import BarSet, bundled_names_for, read_bars, read_bundled
from openbell.markets.domain import Bar, NewsItem, Quote, check_market, check_utc
from openbell.markets.errors import ConfigError, IntervalUnavailable
from openbell.markets.sources import SourceIdentity, SymbolFilter, check_symbols, finest_first

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """`at` (aware UTC) as whole microseconds since the Unix epoch."""
    check_utc("at", at)
    return (at - _EPOCH) // _MICROSECOND


def _series_of(
    symbol: str, bars: Iterable[Bar], known_at: Callable[[Bar], datetime | None]
) -> BarSeries:
    ordered = tuple(sorted(bars, key=lambda bar: bar.start_at))
    for earlier, later in itertools.pairwise(ordered):
        if later.start_at < earlier.end_at:
            raise ValueError(f"{symbol}: bars at {earlier.start_at} and {later.start_at} overlap")
    if any(bar.symbol != symbol for bar in ordered):
        raise ValueError(f"bars filed under {symbol} belong to another symbol")
    knowns = [known_at(bar) for bar in ordered]
    if all(known is None for known in knowns):
        return BarSeries.of_bars(ordered)
    # Shown from the later of its end and when it was known, and never before an earlier bar.
    shown = itertools.accumulate(
        (
            micros(bar.end_at if known is None else max(bar.end_at, known))
            for bar, known in zip(ordered, knowns, strict=True)
        ),
        max,
    )
    return BarSeries.of_bars(ordered, list(shown))


class _Interval:
    """The bars of one interval: where each symbol's bars come from, and its series once built."""

    def __init__(self, interval: str) -> None:
        self.interval = interval
        self._loaders: dict[str, Callable[[], BarSeries]] = {}
        self._series: dict[str, BarSeries] = {}
        self._starts: list[int] | None = None

    def add(self, symbol: str, loader: Callable[[], BarSeries], origin: str) -> None:
        if symbol in self._loaders:
            raise ConfigError(f"{origin}: {symbol} {self.interval} bars are loaded twice")
        self._loaders[symbol] = loader

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(self._loaders)

    def series(self, symbol: str) -> BarSeries | None:
        found = self._series.get(symbol)
        if found is None:
            loader = self._loaders.get(symbol)
            if loader is None:
                return None
            found = self._series[symbol] = loader()
        return found

    def all_starts(self) -> list[int]:
        if self._starts is None:
            starts: set[int] = set()
            for symbol in self._loaders:
                series = self.series(symbol)
                if series is not None:
                    starts.update(series.starts)
            self._starts = sorted(starts)
        return self._starts


def _barset_loader(barset: BarSet, symbol: str) -> Callable[[], BarSeries]:
    # A BarSet is sorted and checked on read; its `Bar`s are built only when bars are asked for.
    return lambda: BarSeries(barset.prices(symbol), lambda lo, hi: barset.rows(symbol, lo, hi))


def _known_in(
    known_at: Mapping[tuple[str, str, datetime], datetime], interval: str
) -> Callable[[Bar], datetime | None]:
    """When each in-memory bar of `interval` was known, by (interval, symbol, start)."""
    return lambda bar: known_at.get((interval, bar.symbol, bar.start_at))


def _bars_loader(
    symbol: str, bars: Sequence[Bar], known_at: Callable[[Bar], datetime | None]
) -> Callable[[], BarSeries]:
    series = _series_of(symbol, bars, known_at)  # checked now, so a bad fake fails where built
    return lambda: series


def bar_files(paths: Sequence[str | Path]) -> list[Path]:
    """The bar files at `paths`, in order: a directory stands for each `*.parquet` file directly
    inside it (`ConfigError` for a directory with none)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob("*.parquet"))
            if not found:
                raise ConfigError(f"replay directory {path} holds no *.parquet bar file")
            files.extend(found)
        else:
            files.append(path)
    return files


class _Walk:
    """Where `prices_along` is in one series: how many of its bars started before the last
    stamp (`started`) and how many were shown by it (`shown`), where the next bisections start."""

    __slots__ = ("series", "shown", "started")

    def __init__(self, series: BarSeries) -> None:
        self.series = series
        self.started = 0
        self.shown = 0


def _walk_to(walks: Sequence[_Walk], now_us: int) -> tuple[int, Decimal] | None:
    """`ReplaySource._quote_at` at `now_us` over the walks' series (finest first), as (the
    quote's stamp in µs, its price), each walk moved on to `now_us`."""
    latest: tuple[int, BarSeries, int] | None = None
    for walk in walks:
        series = walk.series
        starts = series.starts
        if now_us < starts[0]:  # nothing of it by then
            continue
        index = walk.started = bisect.bisect_left(starts, now_us, walk.started)
        if index < len(starts) and starts[index] == now_us:
            return now_us, series.opens[index]
        walk.shown = bisect.bisect_right(series.shown, now_us, walk.shown)
        ended = walk.shown - 1
        if ended >= 0 and (latest is None or series.ends[ended] > latest[0]):
            latest = (series.ends[ended], series, ended)
    if latest is None:
        return None
    end_us, found, index = latest
    return end_us, found.closes[index]


class ReplaySource(SourceIdentity):
    """A `MarketDataSource` of one market over recorded bars and news.

    Build it with `from_bundled`, `from_paths` (a `replay:PATH` config) or directly from in-memory
    bars. Each interval may come from several bar sets (the bundled A-share stocks and index are two
    daily files) as long as no symbol appears twice in one interval. Replay has no live quote: the
    quote and the fill price follow the rules in the module docstring. `adjustment` says what the
    in-memory bars are ("raw" unless told); a bar file says it in its metadata. `known_at` says
    when in-memory bars were first known, by (interval, symbol, start) (a cache replay's: when the
    live daemon had them final): such a bar is shown from the later of its end and that time, and
    never before a bar preceding it; other bars from their end.
    """

    def __init__(
        self,
        *,
        market: str,
        barsets: Sequence[BarSet] = (),
        bars: Mapping[str, Iterable[Bar]] | None = None,
        news: Iterable[NewsItem] = (),
        name: str | None = None,
        adjustment: str = "raw",
        known_at: Mapping[tuple[str, str, datetime], datetime] | None = None,
    ) -> None:
        check_market(market)
        knowns = known_at or {}
        name = name or f"replay:{market}"
        adjustments = {barset.meta.adjustment for barset in barsets}
        if bars:
            adjustments.add(adjustment)
        self._adjustments = frozenset(adjustments)
        data: dict[str, _Interval] = {}
        for barset in barsets:
            if barset.meta.market != market:
                raise ConfigError(
                    f"{barset.path} holds {barset.meta.market} bars, not {market} bars"
                )
            found = data.setdefault(barset.meta.interval, _Interval(barset.meta.interval))
            for symbol in barset.symbols:
                found.add(symbol, _barset_loader(barset, symbol), barset.path)
        for interval, given in (bars or {}).items():
            found = data.setdefault(interval, _Interval(interval))
            by_symbol: dict[str, list[Bar]] = {}
            for bar in given:
                by_symbol.setdefault(bar.symbol, []).append(bar)
            for symbol, symbol_bars in by_symbol.items():
                loader = _bars_loader(symbol, symbol_bars, _known_in(knowns, interval))
                found.add(symbol, loader, "in-memory bars")
        if not data:
            raise ConfigError(f"replay source {name} has no bars")
        super().__init__(name, market, finest_first(data))
        self._data = [data[interval] for interval in self._intervals]
        self._by_interval = data
        items = sorted(news, key=lambda item: item.published_at)
        self._news = items
        self._news_us = [micros(item.published_at) for item in items]
        self._first_ends: dict[str, datetime | None] = {}
        self._by_symbol: dict[str, list[BarSeries]] = {}

    @classmethod
    def from_bundled(
        cls, market: str, *, names: Sequence[str] | None = None, news: Iterable[NewsItem] = ()
    ) -> ReplaySource:
        """The bar files bundled with openbell for `market` ("us-1h", "us-1d", ...), or `names`
        (`barfile.bundled_names_for` chooses those that may hold some symbols)."""
        check_market(market)
        chosen = names if names is not None else bundled_names_for(market)
        return cls(market=market, barsets=[read_bundled(name) for name in chosen], news=news)

    @classmethod
    def from_paths(
        cls, market: str, paths: Sequence[str | Path], *, news: Iterable[NewsItem] = ()
    ) -> ReplaySource:
        """Bar files at `paths`; a directory stands for each `*.parquet` file directly inside it."""
        label = ",".join(str(path) for path in paths)
        return cls(
            market=market,
            barsets=[read_bars(path) for path in bar_files(paths)],
            news=news,
            name=f"replay:{label}",
        )

    @property
    def adjustments(self) -> frozenset[str]:
        """The adjustments of the bars served ("raw", "adjusted", ...): corporate actions may be
        applied to a replay only when this is {"raw"}, or they would be counted twice."""
        return self._adjustments

    def symbols(self, interval: str | None = None) -> frozenset[str]:
        """The symbols with bars of `interval` (of any interval when None)."""
        if interval is not None:
            return self._interval(interval).symbols
        return frozenset().union(*(data.symbols for data in self._data))

    def _interval(self, interval: str) -> _Interval:
        found = self._by_interval.get(interval)
        if found is None:
            raise IntervalUnavailable(
                f"{self._name} has no {interval} bars; it serves {', '.join(self._intervals)}",
                interval=interval,
            )
        return found

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        """Bars starting in `[start_at, end_at)` for each symbol that has any, oldest first."""
        return self.bars_between(symbols, interval, start_at, end_at)

    def bars_between(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> dict[str, tuple[Bar, ...]]:
        """The synchronous body of `bars`, for replay tooling that runs outside an event loop."""
        data = self._interval(interval)
        lo, hi = micros(start_at), micros(end_at)
        out: dict[str, tuple[Bar, ...]] = {}
        for symbol in check_symbols(symbols):
            series = data.series(symbol)
            if series is not None:
                first = bisect.bisect_left(series.starts, lo)
                last = bisect.bisect_left(series.starts, hi, first)
                if last > first:
                    out[symbol] = series.slice(first, last)
        return out

    def symbols_between(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> frozenset[str]:
        """Which of `symbols` have an `interval` bar starting in `[start_at, end_at)`: the keys of
        `bars_between`, found from the series' starts without building a bar."""
        data = self._interval(interval)
        lo, hi = micros(start_at), micros(end_at)
        found: set[str] = set()
        for symbol in check_symbols(symbols):
            series = data.series(symbol)
            if series is not None:
                first = bisect.bisect_left(series.starts, lo)
                if first < len(series.starts) and series.starts[first] < hi:
                    found.add(symbol)
        return frozenset(found)

    def prepared_series(self, symbol: str, interval: str) -> BarSeries | None:
        """The series of `symbol`'s `interval` bars, None when it has none
        (`bar_series.PreparedBars`)."""
        return self._interval(interval).series(symbol)

    def ended_windows(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_by: datetime
    ) -> dict[str, BarWindow]:
        """For each of `symbols` with `interval` bars, the window of them that started at or after
        `start_at` and had ended by `end_by` (`bar_series.PreparedBars`): the bars `bars` returns
        for `[start_at, end_by)`, less those not ended by `end_by`."""
        data = self._interval(interval)
        lo, end_by_us = micros(start_at), micros(end_by)
        out: dict[str, BarWindow] = {}
        for symbol in check_symbols(symbols):
            series = data.series(symbol)
            if series is not None:
                out[symbol] = series.window(lo, end_by_us)
        return out

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        """The replay quote known at `at` for each symbol that has one (see `quote_at`, which a
        subclass may answer otherwise: the cache replay's recorded quotes)."""
        out: dict[str, Quote] = {}
        if type(self).quote_at is ReplaySource.quote_at:  # answered here: `at` converted once
            now_us = micros(at)
            opened_at = _EPOCH + now_us * _MICROSECOND  # a bar file's bars' start at `now_us`
            kept = self._by_symbol
            for symbol in check_symbols(symbols):
                of_symbol = kept.get(symbol) or self._series_of(symbol)
                if len(of_symbol) != 1:
                    quote = self._quote_at(symbol, now_us, opened_at=opened_at)
                    if quote is not None:
                        out[symbol] = quote
                    continue
                # `_quote_at` of a symbol with bars of one interval, inlined (a replay asks for
                # every symbol at every slot): the open of its bar starting at `now_us`, else the
                # close of its last bar shown by then.
                series = of_symbol[0]
                starts = series.starts
                if not starts or now_us < starts[0]:  # nothing of it by then
                    continue
                index = bisect.bisect_left(starts, now_us)
                if index < len(starts) and starts[index] == now_us:
                    start_at = series.start_at(index) if series.own_instants else opened_at
                    out[symbol] = bar_quote(symbol, series.opens[index], start_at)
                    continue
                ended = bisect.bisect_right(series.shown, now_us) - 1
                if ended >= 0:
                    out[symbol] = bar_quote(symbol, series.closes[ended], series.end_at(ended))
            return out
        for symbol in check_symbols(symbols):
            found = self.quote_at(symbol, at)
            if found is not None:
                out[symbol] = found
        return out

    def _series_of(self, symbol: str) -> list[BarSeries]:
        """The series of `symbol` in each interval that has one, finest first (kept)."""
        found = self._by_symbol.get(symbol)
        if found is None:
            found = [series for data in self._data if (series := data.series(symbol)) is not None]
            self._by_symbol[symbol] = found
        return found

    def quote_at(self, symbol: str, at: datetime) -> Quote | None:
        """The open of a bar starting exactly at `at` (finest interval first), stamped `at`; else
        the close of the last bar shown by `at` (ended by then; a cache replay's also known then),
        stamped with its end; else None."""
        return self._quote_at(symbol, micros(at))

    def _quote_at(
        self,
        symbol: str,
        now_us: int,
        *,
        opening: bool = True,
        opened_at: datetime | None = None,
    ) -> Quote | None:
        """`quote_at`; without the open of a bar starting at `now_us` unless `opening`.
        `opened_at` is `now_us` as the instant a bar file's bar starting then carries (made once
        for many symbols; in-memory bars carry their own)."""
        latest: tuple[int, BarSeries, int] | None = None
        for series in self._series_of(symbol):
            starts = series.starts
            if not starts or now_us < starts[0]:  # nothing of it by then
                continue
            index = bisect.bisect_left(starts, now_us)
            if opening and index < len(starts) and starts[index] == now_us:
                start_at = (
                    series.start_at(index)
                    if opened_at is None or series.own_instants
                    else opened_at
                )
                return bar_quote(symbol, series.opens[index], start_at)
            ended = bisect.bisect_right(series.shown, now_us) - 1
            if ended >= 0 and (latest is None or series.ends[ended] > latest[0]):
                latest = (series.ends[ended], series, ended)
        if latest is None:
            return None
        _, found, index = latest
        return bar_quote(symbol, found.closes[index], found.end_at(index))

    def prices_along(
        self, symbol: str, stamps_us: Sequence[int]
    ) -> list[tuple[int, Decimal] | None]:
        """`quote_at(symbol, at)` at each of `stamps_us` (instants in µs since the epoch, as
        `micros` gives them) as (its stamp in µs, its price), None where it has none: what a
        report pricing symbols at every slot reads, without a `Quote` built per slot. For
        increasing stamps each bisection starts where the previous stamp's ended, so the whole
        walk costs about one pass over the series' bars in C; a stamp earlier than the one before
        starts again from the series' first bar."""
        if type(self).quote_at is not ReplaySource.quote_at:  # a subclass answers its own way
            out: list[tuple[int, Decimal] | None] = []
            for now_us in stamps_us:
                quote = self.quote_at(symbol, _EPOCH + now_us * _MICROSECOND)
                out.append(None if quote is None else (micros(quote.at), quote.price))
            return out
        walks = [_Walk(series) for series in self._series_of(symbol) if series.starts]
        found: list[tuple[int, Decimal] | None] = []
        previous_us: int | None = None
        for now_us in stamps_us:
            if previous_us is not None and now_us < previous_us:
                for walk in walks:
                    walk.started = walk.shown = 0
            previous_us = now_us
            found.append(_walk_to(walks, now_us))
        return found

    def first_bar_ends(self, symbols: Sequence[str]) -> dict[str, datetime]:
        """When each of `symbols` first had an ended bar: the earliest time a first bar of any
        interval is shown (its end; for a cache replay's, when it was known); a symbol without bars
        is left out (see `sources.FirstBars`)."""
        out: dict[str, datetime] = {}
        for symbol in check_symbols(symbols):
            if symbol not in self._first_ends:
                ends = [series.shown[0] for series in self._series_of(symbol) if series.shown]
                self._first_ends[symbol] = _EPOCH + min(ends) * _MICROSECOND if ends else None
            first = self._first_ends[symbol]
            if first is not None:
                out[symbol] = first
        return out

    def first_price_at_or_after(self, symbol: str, at: datetime) -> Quote | None:
        """The fill price of an order placed at `at`: the open of the first bar starting at or
        after `at` (earliest start wins; a tie goes to the finer interval), stamped with that
        start; None when no bar starts that late. This looks ahead on purpose: it is the broker's
        price, never shown to an agent before `Quote.at`. How far ahead is acceptable (a weekend,
        a suspension) is the broker's call."""
        now_us = micros(at)
        first: tuple[int, BarSeries, int] | None = None
        for series in self._series_of(symbol):
            index = bisect.bisect_left(series.starts, now_us)
            if index < len(series.starts) and (first is None or series.starts[index] < first[0]):
                first = (series.starts[index], series, index)
        if first is None:
            return None
        _, found, index = first
        return Quote(symbol=symbol, price=found.opens[index], at=found.start_at(index))

    def bar_starts(
        self, interval: str, start_at: datetime, end_at: datetime
    ) -> tuple[datetime, ...]:
        """The distinct starts in `[start_at, end_at)` of the `interval` bars of any symbol."""
        starts = self._interval(interval).all_starts()
        first = bisect.bisect_left(starts, micros(start_at))
        last = bisect.bisect_left(starts, micros(end_at), first)
        return tuple(_EPOCH + start * _MICROSECOND for start in starts[first:last])

    def add_news(self, items: Iterable[NewsItem]) -> None:
        """Add `items` to the recorded news (the injection probe's planted items, before the
        replay reads any): each is served, as every item, only from its publication time."""
        merged = sorted([*self._news, *items], key=lambda item: item.published_at)
        self._news = merged
        self._news_us = [micros(item.published_at) for item in merged]

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Recorded news published in `[start_at, end_at)`, newest first, at most `limit`."""
        wanted = None if symbols is None else frozenset(check_symbols(symbols))
        first = bisect.bisect_left(self._news_us, micros(start_at))
        last = bisect.bisect_left(self._news_us, micros(end_at), first)
        out: list[NewsItem] = []
        for item in reversed(self._news[first:last]):
            if len(out) >= limit:
                break
            if wanted is None or item.symbol in wanted:
                out.append(item)
        return tuple(out)
