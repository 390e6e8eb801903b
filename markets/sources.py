"""The market-data port: what openbell asks of any source of bars, quotes and news.

This module owns the `MarketDataSource` protocol that the replay source (`replay.py`) and the live
adapters (yfinance, akshare, ccxt) implement, the intervals a source may serve and their order,
`SymbolFilter` (the symbols a news read is about), `FirstBars` (the optional member of a source
that knows each symbol's whole history), `SourceIdentity` (a source's fixed name, market and
intervals), and `ForwardingSource`, the base of the decorators that
wrap a source. A source answers plain time-range questions and knows nothing of decision time:
point-in-time filtering is the gateway's job (`gateway.py`), so a source may return a bar that has
not finished yet (live vendors do) and the gateway drops it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol, TypeAlias, runtime_checkable

from openbell.markets.domain import Bar, NewsItem, Quote

#: The nominal length of each interval a source may serve; it orders intervals finest first.
#: A daily bar really spans one session (6.5 h in New York), but it is still coarser than "1h".
INTERVAL_LENGTHS: Final[Mapping[str, timedelta]] = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
}

#: The symbols a news read is about: a sequence of symbols, or None for every symbol the source
#: serves.
SymbolFilter: TypeAlias = Sequence[str] | None


def finest_first(intervals: Iterable[str]) -> tuple[str, ...]:
    """`intervals` without repeats, finest first; an interval openbell does not know raises."""
    unique = set(intervals)
    unknown = sorted(unique - set(INTERVAL_LENGTHS))
    if unknown:
        raise ValueError(f"unknown intervals {unknown}; known: {sorted(INTERVAL_LENGTHS)}")
    return tuple(sorted(unique, key=INTERVAL_LENGTHS.__getitem__))


class MarketDataSource(Protocol):
    """A source of market data for one market. Every datetime is aware UTC; every method is async.

    Contract (the live adapters and the fake follow it; a test can check a new adapter against it):

    ============  ===========  =================================================================
    member        requirement  contract
    ============  ===========  =================================================================
    `name`        required     stable id for logs and fills: "replay:us", "yfinance", ...
    `market`      required     the market served: "us", "cn" or "crypto"
    `intervals`   required     the bar intervals served, finest first (see `INTERVAL_LENGTHS`)
    `bars`        required     for each symbol, its bars whose `start_at` is in
                               `[start_at, end_at)`, oldest first, never overlapping; a symbol
                               with none may be absent or map to an empty sequence. The last bar
                               may be unfinished (`end_at` after the time asked about): the
                               gateway drops it. Vendor stamps (start or end labels, local or
                               naive times, lots) are converted to `Bar` inside the adapter. An
                               interval not in `intervals` raises `IntervalUnavailable`.
    `quote`       optional     for each symbol it can price, the last trade price known at `at`,
                               stamped with when it was known (`Quote.at <= at`). A source
                               without quotes returns `{}` and the gateway reports every symbol
                               as missing.
    `news`        optional     items published in `[start_at, end_at)` about any of `symbols`
                               (None: all items, market-wide ones included), newest first, at
                               most `limit`. A source without news returns `()`.
    ============  ===========  =================================================================

    Failures: a network error, a rate limit or a vendor 5xx is translated at the adapter into
    `DataUnavailable` (or its `RateLimited`) with `raise ... from exc`; vendor exceptions never
    escape. What a source does not serve at all (an interval, a symbol) is `NotServed`
    (`IntervalUnavailable`, `SymbolUnavailable`), which no retry can help. Bad credentials or a
    bad exchange id are an `OperatorError`.
    """

    @property
    def name(self) -> str:
        """A stable id for logs and fill records."""
        ...

    @property
    def market(self) -> str:
        """The market this source serves."""
        ...

    @property
    def intervals(self) -> tuple[str, ...]:
        """The bar intervals served, finest first."""
        ...

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        """Bars starting in `[start_at, end_at)` for each of `symbols`, oldest first."""
        ...

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        """The last price known at `at` for each symbol the source can price."""
        ...

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """News published in `[start_at, end_at)`, newest first, at most `limit` items."""
        ...


@runtime_checkable
class FirstBars(Protocol):
    """A source that knows each symbol's whole history (the replay source does).

    The gateway offers a symbol at `t` only once it has a bar ended by `t`; such a source says
    when that first happened, and a source without this member is asked for recent bars instead.
    """

    def first_bar_ends(self, symbols: Sequence[str]) -> Mapping[str, datetime]:
        """The end of each symbol's earliest bar of any interval; a symbol without bars is left
        out."""
        ...


class SourceIdentity:
    """The fixed members of a `MarketDataSource`: its name, market and the intervals it serves.

    A base for sources that hold them (the adapters, the replay source); each is read-only.
    """

    def __init__(self, name: str, market: str, intervals: tuple[str, ...]) -> None:
        self._name = name
        self._market = market
        self._intervals = intervals

    @property
    def name(self) -> str:
        return self._name

    @property
    def market(self) -> str:
        return self._market

    @property
    def intervals(self) -> tuple[str, ...]:
        return self._intervals


class ForwardingSource:
    """A `MarketDataSource` that passes every member through to `source`.

    The base of source decorators (caching, retrying, remembering quotes): a subclass overrides
    only the reads it changes and reaches the wrapped source as `self._source`.
    """

    def __init__(self, source: MarketDataSource) -> None:
        self._source = source

    @property
    def name(self) -> str:
        return self._source.name

    @property
    def market(self) -> str:
        return self._source.market

    @property
    def intervals(self) -> tuple[str, ...]:
        return self._source.intervals

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        return await self._source.bars(symbols, interval, start_at, end_at)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return await self._source.quote(symbols, at)

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return await self._source.news(symbols, start_at, end_at, limit)


def check_symbols(symbols: Sequence[str]) -> tuple[str, ...]:
    """`symbols` as a tuple; a bare string (a sequence of characters) is refused."""
    if isinstance(symbols, str):
        raise TypeError(f"pass a sequence of symbols, not the string {symbols!r}")
    return tuple(symbols)
