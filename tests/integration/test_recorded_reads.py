"""What a live read records for a cache replay, on real SQLite and Postgres: news with the first
decision time it was served for, quotes per decision time, fundamentals reports with when they were
known, read back exactly; and the replay source and fundamentals that show them as live."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from openbell.daemon.clock import SimulatedClock
from openbell.markets.cache import CachingSource, MemoryBarCache
from openbell.markets.domain import Bar, NewsItem, Quote, utc
from openbell.markets.fundamentals import FundamentalsReport, RecordedFundamentals
from openbell.markets.recorded import (
    CacheReplaySource,
    KnownFundamentals,
    KnownNews,
    KnownReport,
    RecordedQuote,
    RecordingFundamentals,
)
from openbell.markets.sources import SourceIdentity, SymbolFilter
from openbell.store.cache import SqlBarCache
from openbell_testkit.bars import flat_bar

MICRO = timedelta(microseconds=1)
FIVE_S = timedelta(seconds=5)


def item(hour: int, title: str, symbol: str | None = "BTC/USDT") -> NewsItem:
    return NewsItem(symbol=symbol, published_at=utc(2025, 7, 8, hour), title=title, source="w")


def report(published_hour: int, eps: str, symbol: str = "BTC/USDT") -> FundamentalsReport:
    return FundamentalsReport(
        symbol=symbol,
        period_end=date(2025, 6, 30),
        published_at=utc(2025, 7, 8, published_hour),
        currency="USDT",
        values={"eps": Decimal(eps), "revenue": Decimal("123456789.000001")},
        source="vendor",
    )


class Vendor(SourceIdentity):
    """A live source answering fixed news and quotes."""

    def __init__(self, quotes: Mapping[str, Quote], news: Sequence[NewsItem]) -> None:
        super().__init__("vendor", "crypto", ("1h",))
        self._quotes = quotes
        self._news = news

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        return {}

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return {symbol: self._quotes[symbol] for symbol in symbols if symbol in self._quotes}

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return [i for i in self._news if start_at <= i.published_at < end_at][:limit]


def test_a_news_item_is_known_from_the_first_decision_time_it_was_served_for(
    engine: Engine,
) -> None:
    cache = SqlBarCache(engine)
    clock = SimulatedClock(utc(2025, 7, 8, 3) + FIVE_S)
    source = CachingSource(Vendor({}, [item(1, "early"), item(2, "later")]), cache, now=clock.now)
    decided_at = utc(2025, 7, 8, 3)
    asyncio.run(source.news(None, decided_at - timedelta(hours=48), decided_at + MICRO, 10))
    clock.set(utc(2025, 7, 8, 5) + FIVE_S)
    later = utc(2025, 7, 8, 5)
    asyncio.run(source.news(None, later - timedelta(hours=48), later + MICRO, 10))
    known = {entry.item.title: entry.known_at for entry in cache.recorded_news(["BTC/USDT"])}
    assert known == {"early": decided_at, "later": decided_at}
    assert [entry.item for entry in cache.recorded_news(["ETH/USDT"])] == []


def test_an_imported_news_item_is_known_from_its_publication(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    cache.put_news(source="import:x", items=[item(1, "wire", None)], fetched_at=utc(2026, 1, 1))
    (entry,) = cache.recorded_news(["BTC/USDT"])
    assert (entry.item, entry.known_at) == (item(1, "wire", None), utc(2025, 7, 8, 1))


def test_quotes_are_recorded_per_decision_time_and_read_back_exactly(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    clock = SimulatedClock(utc(2025, 7, 8, 3) + FIVE_S)
    quote = Quote(symbol="BTC/USDT", price=Decimal("108123.45678901"), at=utc(2025, 7, 8, 3))
    source = CachingSource(Vendor({"BTC/USDT": quote}, []), cache, now=clock.now)
    asyncio.run(source.quote(["BTC/USDT", "ETH/USDT"], utc(2025, 7, 8, 3)))
    asyncio.run(source.quote(["BTC/USDT"], utc(2025, 7, 8, 3)))  # asked again: kept once
    assert cache.recorded_quotes(["BTC/USDT", "ETH/USDT"]) == (
        RecordedQuote(asked_at=utc(2025, 7, 8, 3), quote=quote),
    )


def test_served_reports_are_recorded_once_with_when_they_were_known(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    clock = SimulatedClock(utc(2025, 7, 8, 6) + FIVE_S)
    live = RecordedFundamentals.of([report(2, "1.5"), report(5, "1.7", symbol="ETH/USDT")])
    recording = RecordingFundamentals(live, cache, now=clock.now)
    decided_at = utc(2025, 7, 8, 6)
    for _ in range(2):
        found = asyncio.run(
            recording.reports("BTC/USDT", decided_at - timedelta(days=800), decided_at + MICRO, 5)
        )
        assert found == (report(2, "1.5"),)
    assert recording.point_in_time
    assert cache.recorded_reports(["BTC/USDT", "ETH/USDT"]) == (
        KnownReport(report=report(2, "1.5"), known_at=decided_at),
    )


def test_a_failing_report_write_keeps_the_answer() -> None:
    class Broken(MemoryBarCache):
        def put_reports(self, **_: object) -> None:  # type: ignore[override]
            raise RuntimeError("disk full")

    recording = RecordingFundamentals(
        RecordedFundamentals.of([report(2, "1.5")]), Broken(), now=lambda: utc(2025, 7, 8, 6)
    )
    found = asyncio.run(recording.reports("BTC/USDT", utc(2025, 7, 1), utc(2025, 7, 9), 5))
    assert found == (report(2, "1.5"),)


def test_known_fundamentals_show_a_report_only_once_known() -> None:
    known = KnownFundamentals(
        [
            KnownReport(report=report(2, "1.5"), known_at=utc(2025, 7, 8, 4)),
            KnownReport(report=report(1, "1.4"), known_at=utc(2025, 7, 8, 1)),
        ]
    )

    def at(hour: int) -> Sequence[FundamentalsReport]:
        decided_at = utc(2025, 7, 8, hour)
        return asyncio.run(known.reports("BTC/USDT", utc(2025, 1, 1), decided_at + MICRO, 5))

    assert at(0) == ()
    assert at(3) == (report(1, "1.4"),)  # the newer report was published at 02:00, known at 04:00
    assert at(4) == (report(2, "1.5"), report(1, "1.4"))


def bars() -> dict[str, list[Bar]]:
    return {
        "1h": [
            flat_bar(
                "BTC/USDT", utc(2025, 7, 8, h), timedelta(hours=1), Decimal(100 + h), Decimal(1)
            )
            for h in range(6)
        ]
    }


def test_the_cache_replay_quotes_and_fills_at_the_recorded_quotes() -> None:
    recorded = [
        RecordedQuote(
            asked_at=utc(2025, 7, 8, 2),
            quote=Quote(symbol="BTC/USDT", price=Decimal("102.5"), at=utc(2025, 7, 8, 2)),
        ),
        RecordedQuote(
            asked_at=utc(2025, 7, 8, 4),
            quote=Quote(symbol="BTC/USDT", price=Decimal("104.5"), at=utc(2025, 7, 8, 4)),
        ),
    ]
    source = CacheReplaySource(market="crypto", bars=bars(), quotes=recorded, name="cache:crypto")
    assert source.quote_at("BTC/USDT", utc(2025, 7, 8, 1)) is None
    price = source.first_price_at_or_after("BTC/USDT", utc(2025, 7, 8, 3))
    assert price is not None
    assert price.price == Decimal("102.5")
    latest = source.quote_at("BTC/USDT", utc(2025, 7, 8, 5))
    assert latest is not None
    assert latest.price == Decimal("104.5")


def test_a_symbol_without_recorded_quotes_falls_back_to_the_replay_rules() -> None:
    source = CacheReplaySource(market="crypto", bars=bars(), name="cache:crypto")
    fill = source.first_price_at_or_after("BTC/USDT", utc(2025, 7, 8, 3))
    assert fill is not None
    assert (fill.price, fill.at) == (Decimal(103), utc(2025, 7, 8, 3))


def test_the_cache_replay_shows_news_once_known() -> None:
    lagged = KnownNews(item=item(1, "lagged"), known_at=utc(2025, 7, 8, 4))
    prompt = KnownNews(item=item(2, "prompt"), known_at=utc(2025, 7, 8, 2))
    source = CacheReplaySource(
        market="crypto", bars=bars(), news=[lagged, prompt], name="cache:crypto"
    )

    def titles(hour: int) -> list[str]:
        decided_at = utc(2025, 7, 8, hour)
        found = asyncio.run(source.news(None, utc(2025, 7, 7), decided_at + MICRO, 10))
        return [i.title for i in found]

    assert titles(1) == []
    assert titles(3) == ["prompt"]
    assert titles(4) == ["prompt", "lagged"]
