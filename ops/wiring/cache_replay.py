"""A replay of what the live agents saw: a market's source read from a live daemon's cache.

This module owns `cache_source`, what `openbell replay --from-cache URL` makes of each market: a
`CacheReplaySource` (`markets.recorded`) over the final bars, news and quotes that the store at URL
recorded for the market's universe and benchmarks, and the fundamentals reports it recorded (or a
user imported with `openbell data import-news` / `import-fundamentals`), served as live. A market
of which the cache holds no bar reads its own bar files (`replay:PATH`, or the bundled ones) with
the cache's news and fundamentals: the way to replay imported news and reports over imported or
bundled bars. The store is opened read-only and disposed once read, so the replay never writes to
the live daemon's ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openbell.markets.recorded import CacheReplaySource, KnownFundamentals, KnownNews
from openbell.markets.sources import INTERVAL_LENGTHS
from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedMarket:
    """What the cache holds of one market: its source (None: no bar of the market, so the
    market's own bar files stand in), its recorded news and its fundamentals."""

    source: CacheReplaySource | None
    news: tuple[KnownNews, ...]
    fundamentals: KnownFundamentals


def cache_source(market: str, symbols: Sequence[str], store_url: str) -> CachedMarket:
    """What the cache of the store at `store_url` recorded of `market` over `symbols`."""
    engine = make_engine(store_url, read_only=True)
    try:
        cache = SqlBarCache(engine)
        bars = {}
        for interval in INTERVAL_LENGTHS:
            found = cache.recorded_bars(symbols, interval)
            if found:
                bars[interval] = [bar for symbol_bars in found.values() for bar in symbol_bars]
        news = cache.recorded_news(symbols)
        quotes = cache.recorded_quotes(symbols)
        reports = cache.recorded_reports(symbols)
    finally:
        engine.dispose()
    source = None
    if bars:
        source = CacheReplaySource(
            market=market, bars=bars, news=news, quotes=quotes, name=f"cache:{market}"
        )
    return CachedMarket(source=source, news=tuple(news), fundamentals=KnownFundamentals(reports))
