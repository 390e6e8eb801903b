"""The bar and news cache in the store, on real SQLite and Postgres: finality, exact decimals,
idempotent news, the write-through source over it, and the live desks recording what they read."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy import Engine

from openbell.daemon.clock import SimulatedClock
from openbell.daemon.plan import MarketPlan, build_desks
from openbell.markets.cache import CachingSource
from openbell.markets.domain import Bar, NewsItem, Quote, utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.types import UtcDateTime
from openbell_testkit.bars import flat_bar

DAY = (utc(2025, 7, 8), utc(2025, 7, 9))


def bar(hour: int, close: str, *, symbol: str = "BTC/USDT", volume: str = "1") -> Bar:
    return flat_bar(
        symbol, utc(2025, 7, 8, hour), timedelta(hours=1), Decimal(close), Decimal(volume)
    )


def news(hour: int, title: str, symbol: str | None = "BTC/USDT") -> NewsItem:
    return NewsItem(
        symbol=symbol,
        published_at=utc(2025, 7, 8, hour),
        title=title,
        url=f"https://example.com/{hour}",
        source="feed:Wire",
    )


def closes(cache: SqlBarCache, *, final_only: bool = True) -> list[tuple[Decimal, bool]]:
    found = cache.get_bars(["BTC/USDT"], "1h", *DAY, final_only=final_only).get("BTC/USDT", ())
    return [(cached.bar.close, cached.is_final) for cached in found]


def test_a_bar_is_final_only_after_its_end_and_then_never_replaced(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    cache.put_bars(
        source="x", interval="1h", bars=[bar(1, "10")], fetched_at=utc(2025, 7, 8, 1, 30)
    )
    assert cache.get_bars(["BTC/USDT"], "1h", *DAY) == {}
    assert closes(cache, final_only=False) == [(Decimal(10), False)]
    cache.put_bars(source="x", interval="1h", bars=[bar(1, "11")], fetched_at=utc(2025, 7, 8, 2))
    cache.put_bars(source="x", interval="1h", bars=[bar(1, "12")], fetched_at=utc(2025, 7, 8, 1))
    assert closes(cache) == [(Decimal(11), True)]


def test_an_unfinished_bar_is_replaced_by_the_final_one(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    cache.put_bars(source="x", interval="1h", bars=[bar(3, "10")], fetched_at=utc(2025, 7, 8, 3, 5))
    cache.put_bars(
        source="x", interval="1h", bars=[bar(3, "10.5")], fetched_at=utc(2025, 7, 8, 3, 40)
    )
    (unfinished,) = cache.get_bars(["BTC/USDT"], "1h", *DAY, final_only=False)["BTC/USDT"]
    assert (unfinished.bar.close, unfinished.fetched_at) == (
        Decimal("10.5"),
        utc(2025, 7, 8, 3, 40),
    )
    assert not unfinished.is_final
    cache.put_bars(source="y", interval="1h", bars=[bar(3, "11")], fetched_at=utc(2025, 7, 8, 4, 1))
    (final,) = cache.get_bars(["BTC/USDT"], "1h", *DAY)["BTC/USDT"]
    assert final.is_final
    assert (final.bar, final.source, final.fetched_at) == (bar(3, "11"), "y", utc(2025, 7, 8, 4, 1))


def test_a_final_bar_is_not_overwritten_by_a_later_unfinished_fetch(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    cache.put_bars(source="x", interval="1h", bars=[bar(5, "20")], fetched_at=utc(2025, 7, 8, 6))
    # A vendor that serves the bar again as in progress (a lagging mirror, a clock behind).
    cache.put_bars(
        source="z", interval="1h", bars=[bar(5, "21")], fetched_at=utc(2025, 7, 8, 5, 59)
    )
    (kept,) = cache.get_bars(["BTC/USDT"], "1h", *DAY)["BTC/USDT"]
    assert (kept.bar.close, kept.source, kept.fetched_at) == (Decimal(20), "x", utc(2025, 7, 8, 6))
    # A final re-fetch still replaces it, as the in-memory cache does.
    cache.put_bars(source="x", interval="1h", bars=[bar(5, "22")], fetched_at=utc(2025, 7, 8, 9))
    assert closes(cache) == [(Decimal(22), True)]


def test_28_digit_decimals_round_trip_exactly(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    price = "12345678901234567890.12345678"  # 28 significant digits
    volume = "0.1234567890123456789012345678"
    cache.put_bars(
        source="x",
        interval="1h",
        bars=[bar(1, price, volume=volume)],
        fetched_at=utc(2025, 7, 9),
    )
    (cached,) = cache.get_bars(["BTC/USDT"], "1h", *DAY)["BTC/USDT"]
    assert cached.bar == bar(1, price, volume=volume)
    assert str(cached.bar.close) == price
    assert str(cached.bar.volume) == volume


def test_reads_select_by_symbol_interval_and_window_oldest_first(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    fetched_at = utc(2025, 7, 10)
    cache.put_bars(
        source="x",
        interval="1h",
        bars=[bar(4, "4"), bar(2, "2"), bar(3, "3", symbol="ETH/USDT")],
        fetched_at=fetched_at,
    )
    cache.put_bars(source="x", interval="1d", bars=[bar(0, "9")], fetched_at=fetched_at)
    found = cache.get_bars(["BTC/USDT", "ETH/USDT", "SOL/USDT"], "1h", *DAY)
    assert {symbol: [c.bar.close for c in bars] for symbol, bars in found.items()} == {
        "BTC/USDT": [Decimal(2), Decimal(4)],
        "ETH/USDT": [Decimal(3)],
    }
    window = cache.get_bars(["BTC/USDT"], "1h", utc(2025, 7, 8, 2), utc(2025, 7, 8, 4))
    assert [c.bar.close for c in window["BTC/USDT"]] == [Decimal(2)]
    assert cache.get_bars([], "1h", *DAY) == {}


def test_a_put_larger_than_one_statement_keeps_every_bar(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    symbols = [f"S{n:04d}/USDT" for n in range(1200)]
    bars = [bar(1, "1", symbol=symbol) for symbol in symbols]
    cache.put_bars(source="x", interval="1h", bars=bars, fetched_at=utc(2025, 7, 9))
    assert len(cache.get_bars(symbols, "1h", *DAY)) == 1200


def test_news_is_kept_once_and_read_newest_first(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    items = [
        news(1, "Bitcoin steady"),
        news(3, "Ether up", "ETH/USDT"),
        news(2, "Markets open", None),
    ]
    for fetched_hour in (4, 5):
        cache.put_news(
            source="x", items=[*items, items[2]], fetched_at=utc(2025, 7, 8, fetched_hour)
        )
    newest_first = (items[1], items[2], items[0])
    assert cache.get_news(None, *DAY, limit=10) == newest_first
    assert cache.get_news(None, *DAY, limit=2) == newest_first[:2]
    assert cache.get_news(["BTC/USDT"], *DAY, limit=10) == (items[0],)
    assert cache.get_news(None, utc(2025, 7, 8, 2), utc(2025, 7, 8, 3), limit=10) == (items[2],)


def test_the_caching_source_records_what_it_reads(engine: Engine) -> None:
    item = NewsItem(symbol="BTC/USDT", published_at=utc(2025, 7, 8, 3), title="Bitcoin steady")
    inner = ReplaySource(market="crypto", bars={"1h": [bar(1, "10"), bar(2, "11")]}, news=[item])
    cache = SqlBarCache(engine)
    source = CachingSource(inner, cache, now=lambda: utc(2025, 7, 8, 2, 30))
    asyncio.run(source.bars(["BTC/USDT"], "1h", *DAY))
    for _ in range(2):
        asyncio.run(source.news(None, *DAY, limit=5))
    kept = cache.get_bars(["BTC/USDT"], "1h", *DAY, final_only=False)["BTC/USDT"]
    assert [c.is_final for c in kept] == [True, False]  # 02:00-03:00 had not ended at 02:30
    assert {c.source for c in kept} == {inner.name}
    assert cache.get_news(None, *DAY, limit=5) == (item,)


class VendorSource:
    """A live-like source (not a `ReplaySource`) serving recorded bars under a vendor's name."""

    def __init__(self, replay: ReplaySource) -> None:
        self._replay = replay

    name = "vendor"

    @property
    def market(self) -> str:
        return self._replay.market

    @property
    def intervals(self) -> tuple[str, ...]:
        return self._replay.intervals

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        return await self._replay.bars(symbols, interval, start_at, end_at)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return await self._replay.quote(symbols, at)

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return await self._replay.news(symbols, start_at, end_at, limit)


def test_live_desks_record_live_reads_and_not_replay_ones(engine: Engine) -> None:
    now = utc(2025, 11, 4, 5)  # inside the bundled crypto hourly bars
    clock = SimulatedClock(now)
    replay = ReplaySource.from_bundled("crypto", names=["crypto-1h"])
    cache = SqlBarCache(engine)
    window = (now - timedelta(days=3), now)

    def read_through_desk(source: ReplaySource | VendorSource, fill: bool) -> None:
        market = MarketPlan(
            market="crypto",
            source=source,
            universe=load_universe("crypto10"),
            cadence="hourly",
            initial_cash=Decimal(10000),
            agents=(),
            fill_price=replay.first_price_at_or_after if fill else None,
        )
        desks, _ = build_desks([market], Ledger(engine), now, clock=clock, cache=cache)
        result = asyncio.run(desks["crypto"].gateway.bars("BTC/USDT", "1h", 3, now))
        assert len(result.bars) == 3

    read_through_desk(replay, fill=True)
    assert cache.get_bars(["BTC/USDT"], "1h", *window, final_only=False) == {}
    read_through_desk(VendorSource(replay), fill=False)
    recorded = cache.get_bars(["BTC/USDT"], "1h", *window)["BTC/USDT"]
    assert {(c.source, c.fetched_at) for c in recorded} == {("vendor", now)}
    assert [c.bar for c in recorded[-3:]] == list(
        asyncio.run(replay.bars(["BTC/USDT"], "1h", now - timedelta(hours=3), now))["BTC/USDT"]
    )


def test_the_migration_keys_news_cached_before_it(db_url: str) -> None:
    upgrade(db_url, "0002")
    before = sa.table(
        "news",
        sa.column("symbol", sa.String()),
        sa.column("published_at", UtcDateTime()),
        sa.column("title", sa.Text()),
        sa.column("url", sa.Text()),
        sa.column("source", sa.String()),
        sa.column("fetched_at", UtcDateTime()),
    )
    row = {"symbol": None, "published_at": utc(2025, 7, 8, 2), "title": "Markets open"}
    fetched = {"url": "https://example.com/2", "source": "x", "fetched_at": utc(2025, 7, 8, 4)}
    engine = make_engine(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.insert(before), [{**row, **fetched}, {**row, **fetched}])
        upgrade(db_url)
        cache = SqlBarCache(engine)
        item = NewsItem(**row, url="https://example.com/2")
        assert cache.get_news(None, *DAY, limit=10) == (item,)
        cache.put_news(source="x", items=[item], fetched_at=utc(2025, 7, 8, 5))
        assert cache.get_news(None, *DAY, limit=10) == (item,)
    finally:
        engine.dispose()
