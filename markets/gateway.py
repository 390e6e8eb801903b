"""The point-in-time gateway: the one road from a data source to an agent (DESIGN §2, §3 step 2).

This module owns the point-in-time rule. Every read takes the decision time `now` and returns a
frozen result stamped `as_of=now` that holds only what was knowable then: bars with
`end_at <= now` (an unfinished bar is never shown), quotes with `at <= now` and news with
`published_at <= now`. The result types check this again when built, so a result holding the
future cannot exist. It also owns `MarketSnapshot`, the quotes of one market at one slot, fetched
once and shared by every agent of that slot, and the moving averages of closes the rule baselines
trade on (`moving_averages`). Sources (`sources.py`) answer time ranges; the gateway chooses the
ranges and filters what comes back, so a source's mistakes cannot leak. A source whose bars are
prepared (`bar_series.PreparedBars`: the replay source) is asked for the same ranges as windows of
bars already known to have ended by `now`, found by bisection, its means come from running sums
and the latest close over every interval (`latest_closes`: the session-close marks) from one pass
per interval; what comes out is exactly what the range-and-filter path gives (a property test checks
it). A read whose window holds none of a symbol's bars looks back `MAX_GAP_DAYS` (`_wider`), so a
last close, a snapshot's previous close and the last bars are found over any suspension: the
previous close A-share price limits are measured against is the last close before the slot's
session, however long ago.
An interval the source does not serve raises `IntervalUnavailable`; a symbol without data is an
empty result or a `missing` entry, worded the same whether the symbol is unknown or merely has no
data yet, so that an error says nothing about the future either.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from operator import attrgetter
from types import MappingProxyType
from typing import Final, TypeAlias

from openbell.markets.bar_series import (
    BarSeries,
    BarWindow,
    PreparedBars,
    bar_quote,
    mean_of_last,
    slot_setter,
)
from openbell.markets.domain import Bar, NewsItem, Quote, check_utc
from openbell.markets.errors import DataUnavailable, IntervalUnavailable
from openbell.markets.slots import slots_per_session
from openbell.markets.sources import FirstBars, MarketDataSource, check_symbols

MAX_LOOKBACK: Final = 1000
MAX_NEWS: Final = 50
#: How far back (calendar days, about ten years) a read looks for a symbol's last bar when the
#: window it reads first holds none: a symbol suspended for weeks or months still has its last
#: close (the previous close its price limits are measured against, its mark) and its last bars.
MAX_GAP_DAYS: Final = 3660

_FLOOR: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
_DAY_US: Final = 86_400_000_000
_END_AT: Final = attrgetter("end_at")
_AT: Final = attrgetter("at")
_SYMBOL: Final = attrgetter("symbol")


def _check_seen(what: str, stamps: Iterable[datetime], as_of: datetime) -> None:
    # The latest stamp, found at C speed: a 200-bar result is checked on every read. (`max` of
    # `_NO_STAMP` and the stamps, not `max(stamps, default=None)`: parsing a keyword argument
    # costs `max` more than a slot's five quotes do.)
    latest = max(itertools.chain(_NO_STAMP, stamps))
    if latest > as_of:
        raise ValueError(f"look-ahead: a {what} stamped {latest} in a result as of {as_of}")


#: An instant before any stamp (a result holding none is checked against it, and passes).
_NO_STAMP: Final = (datetime.min.replace(tzinfo=UTC),)


@dataclass(frozen=True, slots=True, kw_only=True)
class BarsResult:
    """The last bars of `symbol` that had ended by `as_of`, oldest first (empty: none known)."""

    symbol: str
    interval: str
    as_of: datetime
    bars: tuple[Bar, ...]

    def __post_init__(self) -> None:
        check_utc("as_of", self.as_of)
        _check_seen("bar end", map(_END_AT, self.bars), self.as_of)
        if {*map(_SYMBOL, self.bars)} - {self.symbol}:
            raise ValueError(f"bars of another symbol in a {self.symbol} result")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosesResult:
    """Closes of the last daily bars of `symbol` ended by `as_of`, oldest first, with their ends."""

    symbol: str
    as_of: datetime
    closes: tuple[Decimal, ...]
    ended_at: tuple[datetime, ...]

    def __post_init__(self) -> None:
        check_utc("as_of", self.as_of)
        _check_seen("bar end", self.ended_at, self.as_of)
        if len(self.closes) != len(self.ended_at):
            raise ValueError("closes and ended_at must pair up")


@dataclass(frozen=True, slots=True, kw_only=True)
class AveragesResult:
    """Means of the closes of the last bars of `symbol` ended by `as_of`, by window length (in
    bars): a window longer than the bars found is absent. `ended_at` is the end of the last bar
    averaged (None: no bar had ended)."""

    symbol: str
    interval: str
    as_of: datetime
    averages: Mapping[int, Decimal]
    ended_at: datetime | None

    def __post_init__(self) -> None:
        check_utc("as_of", self.as_of)
        object.__setattr__(self, "averages", MappingProxyType(dict(self.averages)))
        _check_seen("bar end", () if self.ended_at is None else (self.ended_at,), self.as_of)
        if self.ended_at is None and self.averages:
            raise ValueError("averages without a bar they were computed from")


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotesResult:
    """The quotes known at `as_of`, by symbol; `missing` lists the symbols asked for without one."""

    as_of: datetime
    quotes: Mapping[str, Quote]
    missing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_utc("as_of", self.as_of)
        object.__setattr__(self, "quotes", MappingProxyType(dict(self.quotes)))
        _check_seen("quote", map(_AT, self.quotes.values()), self.as_of)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewsResult:
    """News published at or before `as_of` (and within the lookback asked for), newest first."""

    as_of: datetime
    items: tuple[NewsItem, ...]

    def __post_init__(self) -> None:
        check_utc("as_of", self.as_of)
        _check_seen("news item", (item.published_at for item in self.items), self.as_of)


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketSnapshot:
    """What every agent of one market sees of it at slot `at`, fetched once per slot.

    `quotes` follow the gateway's quote rule; `previous_closes` are the closes of each symbol's last
    daily bar ended by `at` (during a session: the last close before it, however many sessions
    ago, over a suspension too: what A-share price limits are measured against), empty when the
    source serves no daily bars. `with_bars` holds
    the symbols asked for that had a bar (of any interval) ended by `at`: only those may be offered
    to an agent (a symbol that has not traded yet, or whose data starts later, is not).
    """

    market: str
    at: datetime
    quotes: Mapping[str, Quote]
    missing: tuple[str, ...] = ()
    previous_closes: Mapping[str, Decimal] = field(default_factory=dict)
    with_bars: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_utc("at", self.at)
        object.__setattr__(self, "with_bars", frozenset(self.with_bars))
        object.__setattr__(self, "quotes", MappingProxyType(dict(self.quotes)))
        object.__setattr__(self, "previous_closes", MappingProxyType(dict(self.previous_closes)))
        _check_seen("quote", map(_AT, self.quotes.values()), self.at)


class PointInTimeGateway:
    """Point-in-time reads over one `MarketDataSource`; every method takes the decision time.

    Quotes are the source's (`ReplaySource`: the open of a bar starting exactly at `now`, else the
    last close known at `now`); any stamped after `now` is dropped and reported missing. Lookbacks
    are capped at `max_lookback` bars and news at `max_news` items. Which symbols had a bar ended
    by `now` comes from the source's `first_bar_ends` when it has one (`sources.FirstBars`: the
    replay source, which knows every symbol's history); else from the bars fetched for the
    snapshot (the daily bars of its previous-close window, or the coarsest interval served),
    together with the earliest bar end this gateway has seen of each symbol. Bars come from the
    source's prepared windows when it has them (`bar_series.PreparedBars`), else from `bars`.
    """

    def __init__(
        self,
        source: MarketDataSource,
        *,
        max_lookback: int = MAX_LOOKBACK,
        max_news: int = MAX_NEWS,
    ) -> None:
        self._source = source
        self._max_lookback = max_lookback
        self._max_news = max_news
        self._bars_per_day = {"1d": 1, "1h": slots_per_session(source.market, "hourly")}
        # What the source can do beyond the port, asked once (a protocol check is slow).
        self._prepared = _KeptSeries(source) if isinstance(source, PreparedBars) else None
        self._history = source if isinstance(source, FirstBars) else None
        # When the symbols asked for together first had a bar, from a source that knows (its
        # history does not change), by the symbols.
        self._offered: dict[tuple[str, ...], _FirstEnds] = {}
        # The earliest bar end seen per symbol, for a source that cannot say when its data starts.
        self._first_seen: dict[str, datetime] = {}
        # `_window_days` by (interval, lookback), worked out once.
        self._days: dict[tuple[str, int], int] = {}

    @property
    def source(self) -> MarketDataSource:
        """The source this gateway reads."""
        return self._source

    @property
    def market(self) -> str:
        """The market of the source."""
        return self._source.market

    def at(self, now: datetime) -> GatewayView:
        """A view of this gateway bound to `now`, for a toolbox that must not choose the time."""
        check_utc("now", now)
        return GatewayView(gateway=self, now=now)

    def _check_interval(self, interval: str) -> None:
        if interval not in self._source.intervals:
            raise IntervalUnavailable(
                f"no {interval} bars from {self._source.name}; "
                f"it serves {', '.join(self._source.intervals)}",
                interval=interval,
            )

    def _window_days(self, interval: str, lookback: int) -> int:
        """Calendar days that hold `lookback` bars, with room for weekends and holidays."""
        key = (interval, lookback)
        found = self._days.get(key)
        if found is None:
            found = self._days[key] = self._count_days(interval, lookback)
        return found

    def _count_days(self, interval: str, lookback: int) -> int:
        sessions = lookback / self._bars_per_day[interval]
        if self._source.market == "crypto":
            return math.ceil(sessions) + 2
        return math.ceil(sessions * 7 / 5 * 1.25) + 14

    async def _ended_bars(
        self, symbols: tuple[str, ...], interval: str, days: int, now: datetime
    ) -> dict[str, Sequence[Bar]]:
        """The bars of each symbol that started in the `days` before `now` and had ended by `now`
        (a prepared source's windows; else read and filtered here)."""
        self._check_interval(interval)
        start_at = max(now, _FLOOR + timedelta(days=days)) - timedelta(days=days)
        if self._prepared is not None:
            windows = self._prepared.ended_windows(symbols, interval, start_at, now)
            return {symbol: windows.get(symbol, ()) for symbol in symbols}
        found = await self._source.bars(symbols, interval, start_at, now)
        out: dict[str, Sequence[Bar]] = {}
        for symbol in symbols:
            # A live source returns the bar in progress; a bar not ended by `now` is never shown.
            ended = tuple(bar for bar in found.get(symbol, ()) if bar.end_at <= now)
            out[symbol] = ended
        return out

    async def _ended_bars_over_gaps(
        self, symbols: tuple[str, ...], interval: str, days: int, now: datetime
    ) -> dict[str, Sequence[Bar]]:
        """`_ended_bars` over `days`, and for the symbols without a bar there, over `MAX_GAP_DAYS`
        (an unprepared source's road to each symbol's last bar ended by `now`, however long it has
        not traded). The second read only looks further back: should it fail (a vendor with no
        data for any of them), those symbols stay without bars, as they were after the first."""
        found = await self._ended_bars(symbols, interval, days, now)
        missing = tuple(symbol for symbol in symbols if not found.get(symbol))
        if missing and days < MAX_GAP_DAYS:
            with contextlib.suppress(DataUnavailable):
                found.update(await self._ended_bars(missing, interval, MAX_GAP_DAYS, now))
        return found

    async def _last_bars(
        self, symbol: str, interval: str, lookback: int, now: datetime
    ) -> Sequence[Bar]:
        check_utc("now", now)
        if not 1 <= lookback <= self._max_lookback:
            raise ValueError(f"lookback must be between 1 and {self._max_lookback}, got {lookback}")
        self._check_interval(interval)
        days = self._window_days(interval, lookback)
        if self._prepared is not None:
            return _prepared_last(self._prepared, symbol, interval, lookback, days, now)
        found = (await self._ended_bars((symbol,), interval, days, now))[symbol]
        wider = _wider(days, len(found), lookback)
        if wider is not None:
            found = (await self._ended_bars((symbol,), interval, wider, now))[symbol]
        return found.last(lookback) if isinstance(found, BarWindow) else found[-lookback:]

    async def bars(self, symbol: str, interval: str, lookback: int, now: datetime) -> BarsResult:
        """The last `lookback` bars of `symbol` ended by `now`, oldest first (fewer when fewer;
        over a suspension, the bars before it: see `_wider`)."""
        found = await self._last_bars(symbol, interval, lookback, now)
        return BarsResult(symbol=symbol, interval=interval, as_of=now, bars=_as_tuple(found))

    async def moving_averages(
        self, symbol: str, interval: str, windows: Sequence[int], now: datetime
    ) -> AveragesResult:
        """The mean close of the last `n` bars of `symbol` ended by `now`, for each `n` of
        `windows` that `bars(symbol, interval, max(windows), now)` holds at least `n` bars of:
        the same bars, and the same number as `sum(closes[-n:], Decimal(0)) / n` over their closes
        (from a prepared source's running sums, without adding the closes up again)."""
        return (await self.moving_averages_of((symbol,), interval, windows, now))[symbol]

    async def moving_averages_of(
        self, symbols: Sequence[str], interval: str, windows: Sequence[int], now: datetime
    ) -> dict[str, AveragesResult]:
        """`moving_averages` of each of `symbols`, in the order asked (each once): the same
        reads, their arguments checked once (a rule baseline reads every symbol's at a slot)."""
        if not windows or min(windows) < 1:
            raise ValueError(f"windows must be one or more positive lengths, got {list(windows)}")
        wanted = tuple(dict.fromkeys(symbols))
        out: dict[str, AveragesResult] = {}
        if self._prepared is not None:  # the same windows, found without building them
            lookback = max(windows)
            check_utc("now", now)
            if not 1 <= lookback <= self._max_lookback:
                raise ValueError(
                    f"lookback must be between 1 and {self._max_lookback}, got {lookback}"
                )
            self._check_interval(interval)
            days = self._window_days(interval, lookback)
            now_us = (now - _FLOOR) // _MICROSECOND  # the same instant for every symbol
            start_us = max(now_us - days * _DAY_US, 0)
            for symbol, series in self._prepared.series_of(wanted, interval):
                averages: dict[int, Decimal] = {}
                ended_at = None
                if series is not None:  # `_prepared_last`'s window, found without building it
                    # `series.span(start_us, now_us)`, inlined
                    lo = bisect.bisect_left(series.starts, start_us)
                    hi = bisect.bisect_right(series.shown, now_us)
                    hi = max(hi, lo)
                    if hi - lo < lookback:
                        lo, hi = _widened(series, lo, hi, lookback, days, now_us)
                    count = min(lookback, hi - lo)
                    if count > 0:
                        averages = series.mean_closes(hi, windows, count)
                        ended_at = series.end_at(hi - 1)
                out[symbol] = _averages_result(symbol, interval, now, averages, ended_at)
            return out
        for symbol in wanted:
            found = await self._last_bars(symbol, interval, max(windows), now)
            if isinstance(found, BarWindow):
                averages = {n: found.mean_close(n) for n in windows if n <= len(found)}
                ended_at = found.end_at
            else:
                closes = [bar.close for bar in found]
                averages = {n: mean_of_last(closes, n) for n in windows if n <= len(closes)}
                ended_at = found[-1].end_at if found else None
            out[symbol] = AveragesResult(
                symbol=symbol, interval=interval, as_of=now, averages=averages, ended_at=ended_at
            )
        return out

    async def last_closes(
        self, symbols: Sequence[str], interval: str, now: datetime
    ) -> dict[str, Quote]:
        """The close of each symbol's last `interval` bar ended by `now`, as a quote stamped with
        that bar's end: the bar `bars(symbol, interval, 1, now)` shows (however long ago, up to
        `MAX_GAP_DAYS`), read from a prepared source's close column without building a `Bar`.
        Symbols without one are absent."""
        check_utc("now", now)
        wanted = tuple(dict.fromkeys(check_symbols(symbols)))
        if self._prepared is not None:
            self._check_interval(interval)
            return _prepared_closes(self._prepared, wanted, interval, MAX_GAP_DAYS, now)
        days = self._window_days(interval, 1)
        found = await self._ended_bars_over_gaps(wanted, interval, days, now)
        out: dict[str, Quote] = {}
        for symbol, bars in found.items():
            close = _last_close(bars)
            ended_at = (
                bars.end_at if isinstance(bars, BarWindow) else bars[-1].end_at if bars else None
            )
            if close is not None and ended_at is not None:
                out[symbol] = Quote(symbol=symbol, price=close, at=ended_at)
        _check_seen("bar end", map(_AT, out.values()), now)
        return out

    async def latest_closes(self, symbols: Sequence[str], now: datetime) -> dict[str, Quote]:
        """The close of each symbol's last bar ended by `now` over every interval the source
        serves, as a quote stamped with that bar's end (the latest end wins; a tie goes to the
        finer interval): what `last_closes` gives per interval, merged. A prepared source's
        series answer it in one pass per interval, without a quote built per interval. Symbols
        without such a bar are absent; the others come in the order asked."""
        check_utc("now", now)
        wanted = tuple(dict.fromkeys(check_symbols(symbols)))
        if self._prepared is None:
            merged: dict[str, Quote] = {}
            for interval in self._source.intervals:  # finest first
                for symbol, quote in (await self.last_closes(wanted, interval, now)).items():
                    if symbol not in merged or quote.at > merged[symbol].at:
                        merged[symbol] = quote
            return {symbol: merged[symbol] for symbol in wanted if symbol in merged}
        latest = _latest_ended(self._prepared, self._source.intervals, wanted, now)
        out: dict[str, Quote] = {}
        for symbol in wanted:
            found = latest.get(symbol)
            if found is not None:
                _, series, index = found
                out[symbol] = bar_quote(symbol, series.closes[index], series.end_at(index))
        _check_seen("bar end", map(_AT, out.values()), now)
        return out

    async def latest_close_prices(
        self, symbols: Sequence[str], now: datetime
    ) -> dict[str, Decimal]:
        """The prices of `latest_closes(symbols, now)`, by symbol (a session close's marks): from
        a prepared source's series without a quote built, their bars' ends checked for look-ahead
        as the quotes' stamps are."""
        if self._prepared is None:
            quotes = await self.latest_closes(symbols, now)
            return {symbol: quote.price for symbol, quote in quotes.items()}
        check_utc("now", now)
        wanted = tuple(dict.fromkeys(check_symbols(symbols)))
        latest = _latest_ended(self._prepared, self._source.intervals, wanted, now)
        out: dict[str, Decimal] = {}
        last_end_us: int | None = None
        for symbol in wanted:
            found = latest.get(symbol)
            if found is not None:
                end_us, series, index = found
                out[symbol] = series.closes[index]
                if last_end_us is None or end_us > last_end_us:
                    last_end_us = end_us
        if last_end_us is not None:
            _check_seen("bar end", (_FLOOR + last_end_us * _MICROSECOND,), now)
        return out

    async def daily_closes(self, symbol: str, n: int, now: datetime) -> ClosesResult:
        """Closes of the last `n` daily bars of `symbol` ended by `now`, with their ends."""
        found = await self.bars(symbol, "1d", n, now)
        return ClosesResult(
            symbol=symbol,
            as_of=now,
            closes=tuple(bar.close for bar in found.bars),
            ended_at=tuple(bar.end_at for bar in found.bars),
        )

    async def quote(self, symbols: Sequence[str], now: datetime) -> QuotesResult:
        """The quote of each symbol known at `now`; symbols without one are listed in `missing`."""
        check_utc("now", now)
        quotes, missing = await self._quotes(tuple(dict.fromkeys(check_symbols(symbols))), now)
        return QuotesResult(as_of=now, quotes=quotes, missing=missing)

    async def _quotes(
        self, wanted: tuple[str, ...], now: datetime
    ) -> tuple[dict[str, Quote], tuple[str, ...]]:
        """`quote`'s quotes and missing symbols of `wanted` (checked, each once) at `now`
        (checked UTC), before they are made a `QuotesResult`."""
        found = await self._source.quote(wanted, now)
        quotes: dict[str, Quote] = {}
        missing: list[str] = []
        for symbol in wanted:
            quote = found.get(symbol)
            if quote is not None and quote.symbol == symbol and quote.at <= now:
                quotes[symbol] = quote
            else:
                missing.append(symbol)
        return quotes, tuple(missing)

    async def news(
        self,
        symbols: Sequence[str] | None,
        lookback: timedelta,
        now: datetime,
        *,
        limit: int | None = None,
    ) -> NewsResult:
        """News about `symbols` (None: all) published in `[now - lookback, now]`, newest first,
        at most `limit` items (capped at `max_news`)."""
        check_utc("now", now)
        if lookback <= timedelta(0):
            raise ValueError(f"news lookback must be positive, got {lookback}")
        cap = self._max_news if limit is None else max(0, min(limit, self._max_news))
        wanted = None if symbols is None else check_symbols(symbols)
        start_at = now - lookback
        found = await self._source.news(wanted, start_at, now + _MICROSECOND, cap)
        kept = [item for item in found if start_at <= item.published_at <= now]
        kept.sort(key=lambda item: item.published_at, reverse=True)
        return NewsResult(as_of=now, items=tuple(kept[:cap]))

    async def snapshot(self, symbols: Sequence[str], now: datetime) -> MarketSnapshot:
        """The market at slot `now`: quotes of `symbols`, their previous closes, and which of
        them had a bar ended by `now`. The quotes are `quote`'s (checked for look-ahead once, by
        the snapshot)."""
        check_utc("now", now)
        wanted = tuple(dict.fromkeys(check_symbols(symbols)))
        quotes, missing = await self._quotes(wanted, now)
        knows_history = self._history is not None
        interval = "1d" if "1d" in self._source.intervals else self._source.intervals[-1]
        recent: dict[str, Sequence[Bar]] = {}
        previous: dict[str, Decimal] = {}
        if knows_history:  # the previous closes only: which symbols had bars comes from history
            if interval == "1d" and self._prepared is not None:
                self._check_interval(interval)
                now_us = (now - _FLOOR) // _MICROSECOND
                start_us = max(now_us - MAX_GAP_DAYS * _DAY_US, 0)
                for symbol, series in self._prepared.series_of(wanted, interval):
                    if series is not None:  # `_prepared_ended`'s `last_ended`, inlined
                        ended = bisect.bisect_right(series.shown, now_us)
                        if ended and series.starts[ended - 1] >= start_us:
                            previous[symbol] = series.closes[ended - 1]
            elif interval == "1d":
                closes = await self.last_closes(wanted, interval, now)
                previous = {symbol: quote.price for symbol, quote in closes.items()}
        else:
            days = self._window_days(interval, 1)
            recent = await self._ended_bars_over_gaps(wanted, interval, days, now)
            if interval == "1d":
                previous = {
                    symbol: close
                    for symbol, bars in recent.items()
                    if (close := _last_close(bars)) is not None
                }
        with_bars = self._with_bars(wanted, recent, now)
        return _snapshot_of(self._source.market, now, quotes, missing, previous, with_bars)

    def _with_bars(
        self, symbols: tuple[str, ...], recent: Mapping[str, Sequence[Bar]], now: datetime
    ) -> frozenset[str]:
        """Which of `symbols` had a bar ended by `now` (`recent`: bars ended by `now`)."""
        if self._history is not None:
            offered = self._offered.get(symbols)
            if offered is None:
                if len(self._offered) >= _GROUPS_KEPT:
                    self._offered.clear()
                offered = self._offered[symbols] = _FirstEnds(self._history.first_bar_ends(symbols))
            return offered.ended_by(now)
        for symbol, bars in recent.items():
            if bars:
                seen = self._first_seen.get(symbol)
                if seen is None or bars[0].end_at < seen:
                    self._first_seen[symbol] = bars[0].end_at
        return frozenset(
            symbol
            for symbol in symbols
            if (seen := self._first_seen.get(symbol)) is not None and seen <= now
        )


@dataclass(frozen=True, slots=True)
class GatewayView:
    """A `PointInTimeGateway` bound to one decision time: its reads without the `now` argument."""

    gateway: PointInTimeGateway
    now: datetime

    async def bars(self, symbol: str, interval: str, lookback: int) -> BarsResult:
        """See `PointInTimeGateway.bars`."""
        return await self.gateway.bars(symbol, interval, lookback, self.now)

    async def daily_closes(self, symbol: str, n: int) -> ClosesResult:
        """See `PointInTimeGateway.daily_closes`."""
        return await self.gateway.daily_closes(symbol, n, self.now)

    async def moving_averages(
        self, symbol: str, interval: str, windows: Sequence[int]
    ) -> AveragesResult:
        """See `PointInTimeGateway.moving_averages`."""
        return await self.gateway.moving_averages(symbol, interval, windows, self.now)

    async def moving_averages_of(
        self, symbols: Sequence[str], interval: str, windows: Sequence[int]
    ) -> dict[str, AveragesResult]:
        """See `PointInTimeGateway.moving_averages_of`."""
        return await self.gateway.moving_averages_of(symbols, interval, windows, self.now)

    async def quote(self, symbols: Sequence[str]) -> QuotesResult:
        """See `PointInTimeGateway.quote`."""
        return await self.gateway.quote(symbols, self.now)

    async def news(
        self, symbols: Sequence[str] | None, lookback: timedelta, *, limit: int | None = None
    ) -> NewsResult:
        """See `PointInTimeGateway.news`."""
        return await self.gateway.news(symbols, lookback, self.now, limit=limit)


class _FirstEnds:
    """When each of some symbols first had a bar ended (`FirstBars.first_bar_ends`), sorted, and
    the sets of them that had one by an instant, each made when first asked for: which had one by
    `now` is the first `bisect_right(ends, now)` of them."""

    __slots__ = ("_ends", "_sets", "_symbols")

    def __init__(self, firsts: Mapping[str, datetime]) -> None:
        ordered = sorted(firsts.items(), key=lambda pair: pair[1])
        self._ends = [end for _, end in ordered]
        self._symbols = [symbol for symbol, _ in ordered]
        self._sets: dict[int, frozenset[str]] = {}

    def ended_by(self, now: datetime) -> frozenset[str]:
        """The symbols whose first bar had ended by `now`."""
        count = bisect.bisect_right(self._ends, now)
        found = self._sets.get(count)
        if found is None:
            found = self._sets[count] = frozenset(self._symbols[:count])
        return found


#: A symbol and its series of one interval (None: it has none).
_Found: TypeAlias = tuple[str, BarSeries | None]
#: How many groups of symbols `_KeptSeries.series_of` keeps before it starts again.
_GROUPS_KEPT: Final = 256


class _KeptSeries:
    """A prepared source whose series are each asked for once: a replay source loads a series on
    its first query and keeps it, so the same one is found again here without the lookups; so are
    the series of the symbols a read asks for together (a slot's snapshot and moving averages ask
    for the same symbols at every slot)."""

    __slots__ = ("_groups", "_series", "_source")

    def __init__(self, source: PreparedBars) -> None:
        self._source = source
        self._series: dict[tuple[str, str], BarSeries | None] = {}
        self._groups: dict[tuple[str, tuple[str, ...]], tuple[_Found, ...]] = {}

    def ended_windows(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_by: datetime
    ) -> Mapping[str, BarWindow]:
        return self._source.ended_windows(symbols, interval, start_at, end_by)

    def prepared_series(self, symbol: str, interval: str) -> BarSeries | None:
        key = (symbol, interval)
        try:
            return self._series[key]
        except KeyError:
            found = self._series[key] = self._source.prepared_series(symbol, interval)
            return found

    def series_of(self, symbols: tuple[str, ...], interval: str) -> tuple[_Found, ...]:
        """Each of `symbols` with its `interval` series (None: it has none), in order."""
        key = (interval, symbols)
        found = self._groups.get(key)
        if found is None:
            if len(self._groups) >= _GROUPS_KEPT:  # held symbols vary: keep the memory bounded
                self._groups.clear()
            found = self._groups[key] = tuple(
                (symbol, self.prepared_series(symbol, interval)) for symbol in symbols
            )
        return found


def _snapshot_of(
    market: str,
    at: datetime,
    quotes: dict[str, Quote],
    missing: tuple[str, ...],
    previous_closes: dict[str, Decimal],
    with_bars: frozenset[str],
) -> MarketSnapshot:
    """`MarketSnapshot(...)` of `snapshot`'s own reads at `at` (checked UTC), built as its
    `__post_init__` would leave it, without copying the dicts only it holds: the quotes are
    checked for look-ahead all the same (one snapshot per slot)."""
    found = _new(MarketSnapshot)
    _SET_MARKET(found, market)
    _SET_AT(found, at)
    _SET_QUOTES(found, MappingProxyType(quotes))
    _SET_MISSING(found, missing)
    _SET_PREVIOUS_CLOSES(found, MappingProxyType(previous_closes))
    _SET_WITH_BARS(found, with_bars)
    _check_seen("quote", map(_AT, quotes.values()), at)
    return found


def _prepared_last(
    prepared: PreparedBars, symbol: str, interval: str, lookback: int, days: int, now: datetime
) -> Sequence[Bar]:
    """`_last_bars` from a prepared source's series, its windows found without the mappings
    `_ended_bars` builds for many symbols: the same bisections over the same instants."""
    series = prepared.prepared_series(symbol, interval)
    if series is None:
        return ()
    now_us = (now - _FLOOR) // _MICROSECOND
    # In µs, the `max(now, _FLOOR + days) - days` that `_ended_bars` starts from.
    found = series.window(max(now_us - days * _DAY_US, 0), now_us)
    wider = _wider(days, len(found), lookback)
    if wider is not None:
        found = series.window(max(now_us - wider * _DAY_US, 0), now_us)
    return found.last(lookback)


def _widened(
    series: BarSeries, lo: int, hi: int, lookback: int, days: int, now_us: int
) -> tuple[int, int]:
    """The span `lo, hi` of `series` over `days` at `now_us`, read again over the wider window
    `_wider` asks for when it holds fewer than `lookback` bars."""
    wider = _wider(days, hi - lo, lookback)
    if wider is None:
        return lo, hi
    return series.span(max(now_us - wider * _DAY_US, 0), now_us)


def _averages_result(
    symbol: str,
    interval: str,
    now: datetime,
    averages: dict[int, Decimal],
    ended_at: datetime | None,
) -> AveragesResult:
    """`AveragesResult(...)` of `moving_averages_of`'s prepared means at `now` (checked UTC),
    built without checking again what its bisections ensure: the last bar averaged ended by
    `now`, and a fresh dict of averages only with a bar (a replay reads one per symbol and
    slot)."""
    found = _new(AveragesResult)
    _SET_SYMBOL(found, symbol)
    _SET_INTERVAL(found, interval)
    _SET_AS_OF(found, now)
    _SET_AVERAGES(found, MappingProxyType(averages))
    _SET_ENDED_AT(found, ended_at)
    return found


_new: Final = object.__new__
_SET_SYMBOL: Final = slot_setter(AveragesResult, "symbol")
_SET_INTERVAL: Final = slot_setter(AveragesResult, "interval")
_SET_AS_OF: Final = slot_setter(AveragesResult, "as_of")
_SET_AVERAGES: Final = slot_setter(AveragesResult, "averages")
_SET_ENDED_AT: Final = slot_setter(AveragesResult, "ended_at")
_SET_MARKET: Final = slot_setter(MarketSnapshot, "market")
_SET_AT: Final = slot_setter(MarketSnapshot, "at")
_SET_QUOTES: Final = slot_setter(MarketSnapshot, "quotes")
_SET_MISSING: Final = slot_setter(MarketSnapshot, "missing")
_SET_PREVIOUS_CLOSES: Final = slot_setter(MarketSnapshot, "previous_closes")
_SET_WITH_BARS: Final = slot_setter(MarketSnapshot, "with_bars")


def _prepared_closes(
    prepared: _KeptSeries, symbols: tuple[str, ...], interval: str, days: int, now: datetime
) -> dict[str, Quote]:
    """`last_closes` from a prepared source's series (see `_prepared_ended`)."""
    out = {
        symbol: bar_quote(symbol, series.closes[index], series.end_at(index))
        for symbol, series, index in _prepared_ended(
            prepared.series_of(symbols, interval), days, now
        )
    }
    _check_seen("bar end", map(_AT, out.values()), now)
    return out


def _latest_ended(
    prepared: _KeptSeries, intervals: Iterable[str], wanted: tuple[str, ...], now: datetime
) -> dict[str, tuple[int, BarSeries, int]]:
    """For each of `wanted` with a bar ended by `now` (started within `MAX_GAP_DAYS`) in a
    prepared series of any of `intervals` (finest first): the end (µs) of the latest such bar,
    its series and index (a tie goes to the finer interval)."""
    best: dict[str, tuple[int, BarSeries, int]] = {}
    for interval in intervals:
        found = prepared.series_of(wanted, interval)
        for symbol, series, index in _prepared_ended(found, MAX_GAP_DAYS, now):
            end_us = series.ends[index]
            held = best.get(symbol)
            if held is None or end_us > held[0]:
                best[symbol] = (end_us, series, index)
    return best


def _prepared_ended(
    found: Iterable[_Found], days: int, now: datetime
) -> Iterator[tuple[str, BarSeries, int]]:
    """For each symbol of `found` with a series, the series and the index of the last bar of the
    window `_ended_bars` would give (bars started in the `days` before `now` and ended by `now`),
    found with one bisection."""
    now_us = (now - _FLOOR) // _MICROSECOND
    start_us = max(now_us - days * _DAY_US, 0)
    for symbol, series in found:
        if series is not None:
            index = series.last_ended(start_us, now_us)
            if index is not None:
                yield symbol, series, index


def _wider(days: int, found: int, lookback: int) -> int | None:
    """The window (days) to read again when the window of `days` held `found` of the `lookback`
    bars asked for: four times as long when it held some (a suspension or a long holiday),
    `MAX_GAP_DAYS` when it held none (a long suspension: the last bars are still found); None
    when it held them all (or none, and it was that long already)."""
    if found >= lookback or (not found and days >= MAX_GAP_DAYS):
        return None
    return days * 4 if found else max(days, MAX_GAP_DAYS)


def _as_tuple(bars: Sequence[Bar]) -> tuple[Bar, ...]:
    """`bars` as a tuple: a window's own slice of its series, else a copy."""
    if isinstance(bars, BarWindow):
        return bars.bars
    return tuple(bars)


def _last_close(bars: Sequence[Bar]) -> Decimal | None:
    """The close of the last of `bars` (None: none), without building a window's `Bar`."""
    if isinstance(bars, BarWindow):
        return bars.last_close
    return bars[-1].close if bars else None
