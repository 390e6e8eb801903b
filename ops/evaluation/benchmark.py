"""The benchmark of each market as a NAV series, priced point-in-time from recorded bars.

This module owns what a market's benchmark is (by default US: QQQ; A-shares: the SSE-50 index
`000016.SH`; crypto: the CD5 basket, BTC 74.56 %, ETH 15.97 %, XRP 5.20 %, SOL 3.53 %, ADA 0.76 %,
weights normalised to sum to one; a market configured with another, such as the CSI 300 index
`000300.SH`, has that one instrument: `ops.wiring.market_benchmarks`) and how it becomes a NAV
series at the accounts' snapshot timestamps.
Prices come from one or more `ReplaySource`s under the gateway's quote rule: at `t`, the open of
a bar starting at `t`, else the close of the last bar ended by `t`, never a quote stamped after
`t`; of several sources, the latest such quote wins. A report prices from the bars bundled with
openbell and the final bars the live daemon cached in the ledger's database (`benchmark_sources`),
so a live arena's benchmark moves past the end of the bundled data: every slot snapshot reads the
benchmark's last daily bar, which the cache keeps once it has ended. Carry-forward: when `t` has
no quote, or its quote is older than one already used (an hourly slot inside a session when only
daily index bars exist would fall back to yesterday's close), the last price used is kept. A
basket's value is
`sum(w_i * p_i(t) / p_i(t0))` from the first timestamp `t0` where every component has a price;
the NAV is that value (a single instrument: `p(t) / p(t0)`) times the accounts' initial cash, so
the benchmark can be shown as a leaderboard row. Timestamps before `t0` have no benchmark value.

A close-to-close convention (`ops.evaluation.conventions`) prices the benchmark at its bars' closes
instead (`close_navs`): at the end of each bar of the cadence's interval that starts at a slot, from
the close of the last such bar ended by the first slot (the value before the window's first
decision, stamped at that slot; none when the bars hold no earlier close, and then the first close
is the base); a basket's weights either normalised or as published (AI-Trader's CD5, whose published
weights sum to 100.02 %: the base is the cash and the basket is worth 100.02 % of it at its own
prices, as AI-Trader's index file reads).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType

from sqlalchemy import Engine

from openbell.markets.barfile import bundled_names_for
from openbell.markets.domain import check_decimal, check_market
from openbell.markets.replay_source import ReplaySource, micros
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.store.cache import SqlBarCache

#: The CD5 crypto basket: coin weights in percent, as published (they sum to 100.02).
CD5_WEIGHTS: Mapping[str, Decimal] = MappingProxyType(
    {
        "BTC/USDT": Decimal("74.56"),
        "ETH/USDT": Decimal("15.97"),
        "XRP/USDT": Decimal("5.20"),
        "SOL/USDT": Decimal("3.53"),
        "ADA/USDT": Decimal("0.76"),
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Benchmark:
    """A market's benchmark: its name and its components with weights summing to one, and the
    weights as its publisher states them (fractions; `weights` when it states none)."""

    name: str
    weights: Mapping[str, Decimal]
    published: Mapping[str, Decimal] | None = None

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError(f"benchmark {self.name} has no components")
        for symbol, weight in self.weights.items():
            check_decimal(f"weight of {symbol}", weight, positive=True)
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))
        published = self.weights if self.published is None else self.published
        if set(published) != set(self.weights):
            raise ValueError(f"benchmark {self.name}: published weights name other components")
        object.__setattr__(self, "published", MappingProxyType(dict(published)))

    @classmethod
    def basket(cls, name: str, percents: Mapping[str, Decimal]) -> Benchmark:
        """A basket of published `percents`, its weights normalised to sum to one."""
        total = sum(percents.values(), Decimal(0))
        return cls(
            name=name,
            weights={symbol: w / total for symbol, w in percents.items()},
            published={symbol: w / 100 for symbol, w in percents.items()},
        )

    def weights_as(self, *, published: bool) -> Mapping[str, Decimal]:
        """The published weights, or the normalised ones."""
        return self.published if published and self.published is not None else self.weights

    @property
    def label(self) -> str:
        """The benchmark's name as a leaderboard row: `benchmark:QQQ`."""
        return f"benchmark:{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketBasis:
    """What a market's reports measure against: its `benchmark` (a configured one, or the
    default) and the bar `sources` beyond the bundled bars and the ledger's cache its prices may
    come from (the files of a `replay:PATH` source, such as imported CSI 300 bars)."""

    benchmark: Benchmark
    sources: tuple[ReplaySource, ...] = ()


_BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType(
    {
        "us": Benchmark(name="QQQ", weights={"QQQ": Decimal(1)}),
        "cn": Benchmark(name="000016.SH", weights={"000016.SH": Decimal(1)}),
        "crypto": Benchmark.basket("CD5", CD5_WEIGHTS),
    }
)


def benchmark_for(market: str, symbol: str | None = None) -> Benchmark:
    """The benchmark of `market` ("us", "cn" or "crypto"): the one instrument `symbol` when given
    (a configured benchmark, such as the CSI 300 index `000300.SH`), else the market's default."""
    check_market(market)
    default = _BENCHMARKS[market]
    if symbol is None or symbol == default.name:
        return default
    return Benchmark(name=symbol, weights={symbol: Decimal(1)})


#: The intervals of cached bars a benchmark is priced from (what the live adapters fetch).
CACHED_INTERVALS = ("1h", "1d")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.lru_cache(maxsize=3)
def bundled_source(market: str) -> ReplaySource:
    """The replay source over the bars bundled for `market`, read once per process."""
    return ReplaySource.from_bundled(market)


def bundled_source_of(market: str, symbols: Collection[str]) -> ReplaySource:
    """A replay source over the bars bundled for `market` for a caller that prices `symbols`
    only: over the files that may hold them (`barfile.bundled_names_for`; each symbol is priced
    from its own bars, so its quotes are the same), read once per process for each choice of
    files; `bundled_source(market)` itself when that choice is every file."""
    names = bundled_names_for(market, symbols)
    if names == bundled_names_for(market):
        return bundled_source(market)
    return _bundled_files(market, names)


@functools.lru_cache(maxsize=3)
def _bundled_files(market: str, names: tuple[str, ...]) -> ReplaySource:
    return ReplaySource.from_bundled(market, names=names)


def benchmark_sources(
    engine: Engine, market: str, until: datetime, symbols: Sequence[str] | None = None
) -> tuple[ReplaySource, ...]:
    """The bar sources the benchmark of `market` is priced from, up to `until`, in a report on
    `engine`'s ledger: the bundled bars, and the final bars of the benchmark's components (or of
    `symbols`) that start before `until` in the ledger's bar cache (written by a live daemon), if
    it holds any."""
    symbols = sorted(benchmark_for(market).weights if symbols is None else set(symbols))
    bundled = bundled_source_of(market, symbols)
    cache = SqlBarCache(engine)
    cached = {
        interval: [
            found.bar
            for series in cache.get_bars(symbols, interval, _EPOCH, until).values()
            for found in series
        ]
        for interval in CACHED_INTERVALS
    }
    kept = {interval: bars for interval, bars in cached.items() if bars}
    if not kept:
        return (bundled,)
    live = ReplaySource(market=market, bars=kept, name=f"bar-cache:{market}")
    return (bundled, live)


def report_sources(
    engine: Engine,
    market: str,
    stamps: Sequence[datetime],
    source: ReplaySource | None = None,
    symbols: Sequence[str] | None = None,
    extra: Sequence[ReplaySource] = (),
) -> tuple[ReplaySource, ...]:
    """The price sources of a report over `stamps` (increasing): `source` when given, else
    `benchmark_sources` of `symbols` up to just after the last stamp (a bar starting after it is
    never quoted at one); then the `extra` sources (a replay's imported bar files: where the
    others have a quote they win the tie); none without stamps."""
    if source is not None:
        return (source, *extra)
    if not stamps:
        return ()
    until = stamps[-1] + timedelta(microseconds=1)
    return (*benchmark_sources(engine, market, until, symbols), *extra)


def carried_prices(
    sources: Sequence[ReplaySource], symbol: str, timestamps: Sequence[datetime]
) -> list[Decimal | None]:
    """The price of `symbol` at each timestamp (in increasing order), carried forward.

    Each timestamp takes its point-in-time quote, the latest among `sources` (the first source
    wins a tie), unless it has none, or the quote is stamped before the last one used; then the
    last price used is kept. `None` until the first quote.
    """
    return carried_prices_of(sources, [symbol], timestamps)[symbol]


def carried_prices_of(
    sources: Sequence[ReplaySource], symbols: Sequence[str], timestamps: Sequence[datetime]
) -> dict[str, list[Decimal | None]]:
    """`carried_prices` of each of `symbols`: each source is walked along the timestamps once per
    symbol (`ReplaySource.prices_along`), the timestamps converted once for all."""
    stamps_us = [micros(at) for at in timestamps]
    out: dict[str, list[Decimal | None]] = {}
    for symbol in symbols:
        along = [source.prices_along(symbol, stamps_us) for source in sources]
        prices: list[Decimal | None] = []
        used: tuple[int, Decimal] | None = None
        for index, now_us in enumerate(stamps_us):
            found: tuple[int, Decimal] | None = None
            for quotes in along:
                quote = quotes[index]
                # The gateway's filter: a quote stamped after `at` is never used.
                if (
                    quote is not None
                    and quote[0] <= now_us
                    and (found is None or quote[0] > found[0])
                ):
                    found = quote
            if found is not None and (used is None or found[0] >= used[0]):
                used = found
            prices.append(used[1] if used is not None else None)
        out[symbol] = prices
    return out


def benchmark_navs(
    market: str,
    timestamps: Sequence[datetime],
    initial_cash: Decimal,
    *,
    sources: Sequence[ReplaySource] | None = None,
    benchmark: Benchmark | None = None,
) -> list[NavPoint]:
    """The benchmark's NAV at each of `timestamps` from the first one it has a value at.

    `timestamps` must increase; `sources` default to the bundled bars of `market` and `benchmark`
    to `benchmark_for(market)`. The first point's NAV is `initial_cash` (see the module docstring).
    """
    check_decimal("initial_cash", initial_cash, positive=True)
    chosen = benchmark or benchmark_for(market)
    data = tuple(sources) if sources else (bundled_source_of(market, chosen.weights),)
    ordered = sorted(set(timestamps))
    if list(timestamps) != ordered:
        raise ValueError("benchmark timestamps must increase strictly")
    prices = carried_prices_of(data, list(chosen.weights), ordered)
    start = next(
        (i for i in range(len(ordered)) if all(p[i] is not None for p in prices.values())), None
    )
    if start is None:
        return []
    # Prices are carried forward, so from `start` on no component lacks one.
    known = {
        symbol: [price for price in series[start:] if price is not None]
        for symbol, series in prices.items()
    }
    out: list[NavPoint] = []
    for offset, at in enumerate(ordered[start:]):
        value = sum(
            (
                weight * known[symbol][offset] / known[symbol][0]
                for symbol, weight in chosen.weights.items()
            ),
            Decimal(0),
        )
        out.append(NavPoint(at=at, nav=initial_cash * value))
    return out


_FAR = datetime(2200, 1, 1, tzinfo=UTC)


def _bar_closes(
    sources: Sequence[ReplaySource], symbol: str, interval: str
) -> dict[datetime, tuple[datetime, Decimal]]:
    """Each bar of `symbol` and `interval` among `sources`: its start -> (its end, its close);
    of two sources with a bar starting at the same instant, the first wins."""
    out: dict[datetime, tuple[datetime, Decimal]] = {}
    for source in sources:
        if interval in source.intervals:
            for bar in source.bars_between([symbol], interval, _EPOCH, _FAR).get(symbol, ()):
                out.setdefault(bar.start_at, (bar.end_at, bar.close))
    return out


def close_navs(
    market: str,
    slots: Sequence[datetime],
    interval: str,
    initial_cash: Decimal,
    *,
    sources: Sequence[ReplaySource] | None = None,
    published: bool = False,
    benchmark: Benchmark | None = None,
) -> list[NavPoint]:
    """The benchmark valued close to close over `slots` (increasing): see the module docstring.

    A point at the end of each bar of `interval` starting at a slot where every component has
    one (at the latest end of them), and before them the base point (`initial_cash`), stamped at
    the first slot, when every component has a close of that interval ended by it; otherwise the
    first point's closes are the base. `published`: the basket in its published weights.
    """
    check_decimal("initial_cash", initial_cash, positive=True)
    chosen = benchmark or benchmark_for(market)
    data = tuple(sources) if sources else (bundled_source_of(market, chosen.weights),)
    ordered = sorted(set(slots))
    if list(slots) != ordered:
        raise ValueError("benchmark slots must increase strictly")
    weights = chosen.weights_as(published=published)
    bars = {symbol: _bar_closes(data, symbol, interval) for symbol in weights}
    rows = [[bars[symbol].get(slot) for symbol in weights] for slot in ordered]
    points = [[found for found in row if found is not None] for row in rows]
    points = [row for row in points if len(row) == len(weights)]
    if not ordered or not points:
        return []
    first = ordered[0]
    before = {s: [ended for ended in b.values() if ended[0] <= first] for s, b in bars.items()}
    out: list[NavPoint] = []
    if all(before.values()):
        base = {symbol: max(ended)[1] for symbol, ended in before.items()}
        out.append(NavPoint(at=first, nav=initial_cash))
    else:
        base = {symbol: close for symbol, (_, close) in zip(weights, points[0], strict=True)}
    for row in points:
        value = sum(
            (weights[s] * close / base[s] for s, (_, close) in zip(weights, row, strict=True)),
            Decimal(0),
        )
        out.append(NavPoint(at=max(end for end, _ in row), nav=initial_cash * value))
    return out
