"""What a live read records for a cache replay, on real SQLite and Postgres: bars with the first
decision time they were fetched final for, news with the first decision time it was served for,
quotes per decision time, fundamentals reports with when they were known, read back exactly; and
the replay source and fundamentals that show them as live. A bar the vendor delivered late is
hidden from the replay's gateway until the live daemon had it, and a look-ahead probe at the
replay's gateway finds nothing the live daemon fetched after the decision time."""

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
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.recorded import (
    CacheReplaySource,
    KnownBar,
    KnownFundamentals,
    KnownNews,
    KnownReport,
    RecordedQuote,
    RecordingFundamentals,
)
from openbell.markets.sources import SourceIdentity, SymbolFilter
from openbell.ops.wiring.cache_replay import cache_source
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


def hour_bar(hour: int, price: Decimal | None = None, symbol: str = "BTC/USDT") -> Bar:
    """The bar of `symbol` over the hour from 2025-07-08 `hour`:00 (its price: 100 + hour)."""
    at = utc(2025, 7, 8) + timedelta(hours=hour)
    return flat_bar(symbol, at, timedelta(hours=1), price or Decimal(100 + hour), Decimal(1))


def bars() -> dict[str, list[KnownBar]]:
    """Six hourly bars, each known at its end."""
    return {"1h": [KnownBar(bar=hour_bar(h), known_at=hour_bar(h).end_at) for h in range(6)]}


class LaggingVendor(SourceIdentity):
    """A live vendor of hourly bars that delivers each bar only `lag` after its end, and the bar
    in progress (unfinished) from its start."""

    def __init__(self, clock: SimulatedClock, lag: timedelta, symbols: Sequence[str]) -> None:
        super().__init__("lagging", "crypto", ("1h",))
        self._clock = clock
        self._lag = lag
        self._symbols = tuple(symbols)

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        now = self._clock.now()
        out: dict[str, list[Bar]] = {}
        for symbol in symbols:
            for hour in range(-30, 12):
                found = hour_bar(hour, symbol=symbol)
                delivered = found.end_at + self._lag <= now or found.start_at <= now < found.end_at
                if start_at <= found.start_at < end_at and delivered:
                    out.setdefault(symbol, []).append(found)
        return out


def live_bar_reads(cache: SqlBarCache, *, lag: timedelta, hours: range) -> list[tuple[int, int]]:
    """A live gateway over a `LaggingVendor` through the cache, read at each of `hours` (the daemon
    asking 5 s after the slot): for each, (hour, the end hour of the last bar it showed)."""
    clock = SimulatedClock(utc(2025, 7, 8))
    vendor = LaggingVendor(clock, lag, ["BTC/USDT", "ETH/USDT"])
    gateway = PointInTimeGateway(CachingSource(vendor, cache, now=clock.now))
    seen = []
    for hour in hours:
        decided_at = utc(2025, 7, 8, hour)
        clock.set(decided_at + FIVE_S)
        found = asyncio.run(gateway.bars("BTC/USDT", "1h", 5, decided_at))
        asyncio.run(gateway.bars("ETH/USDT", "1h", 5, decided_at))
        seen.append((hour, found.bars[-1].end_at.hour))
    return seen


def replay_gateway(db_url: str) -> PointInTimeGateway:
    cached = cache_source("crypto", ["BTC/USDT", "ETH/USDT"], db_url)
    assert cached.source is not None
    return PointInTimeGateway(cached.source)


def test_a_bar_fetched_late_is_hidden_from_the_replay_until_it_was_fetched(
    db_url: str, engine: Engine
) -> None:
    cache = SqlBarCache(engine)
    # The vendor delivers each bar 90 minutes after its end: at 05:00 the last bar it has is the
    # one that ended at 03:00.
    live = live_bar_reads(cache, lag=timedelta(minutes=90), hours=range(3, 9))
    assert live == [(3, 1), (4, 2), (5, 3), (6, 4), (7, 5), (8, 6)]
    recorded = {
        entry.bar.end_at: entry.known_at
        for entry in cache.recorded_bars(["BTC/USDT"], "1h")["BTC/USDT"]
    }
    # Fetched final at 05:00:05 for the 05:00 decision: known from 05:00, not from its end.
    assert recorded[utc(2025, 7, 8, 3)] == utc(2025, 7, 8, 5)
    assert recorded[utc(2025, 7, 8, 6)] == utc(2025, 7, 8, 8)
    assert max(recorded) == utc(2025, 7, 8, 6)  # the later ones were never delivered final
    gateway = replay_gateway(db_url)
    replayed = []
    for hour in range(3, 9):
        found = asyncio.run(gateway.bars("BTC/USDT", "1h", 5, utc(2025, 7, 8, hour)))
        replayed.append((hour, found.bars[-1].end_at.hour))
    assert replayed == live
    # Between slots too: the bar that ended at 03:00 is not shown a microsecond before 05:00.
    before = asyncio.run(gateway.bars("BTC/USDT", "1h", 5, utc(2025, 7, 8, 5) - MICRO))
    assert before.bars[-1].end_at == utc(2025, 7, 8, 2)


def test_a_look_ahead_probe_at_the_replay_gateway_sees_nothing_fetched_after_now(
    db_url: str, engine: Engine
) -> None:
    cache = SqlBarCache(engine)
    live_bar_reads(cache, lag=timedelta(minutes=70), hours=range(10))
    recorded = cache.recorded_bars(["BTC/USDT", "ETH/USDT"], "1h")
    known = {
        (symbol, entry.bar.end_at): entry.known_at
        for symbol, found in recorded.items()
        for entry in found
    }
    first_known = {symbol: found[0].known_at for symbol, found in recorded.items()}
    assert all(at >= end + timedelta(minutes=70) for (_, end), at in known.items())
    gateway = replay_gateway(db_url)
    symbols = ["BTC/USDT", "ETH/USDT"]
    now = utc(2025, 7, 7, 20)
    while now <= utc(2025, 7, 8, 12):
        shown: list[tuple[str, datetime]] = []  # (symbol, bar end) of every bar a read used
        for symbol in symbols:
            found = asyncio.run(gateway.bars(symbol, "1h", 50, now))
            shown.extend((symbol, bar.end_at) for bar in found.bars)
            averages = asyncio.run(gateway.moving_averages(symbol, "1h", [1, 3], now))
            if averages.ended_at is not None:
                shown.append((symbol, averages.ended_at))
        # No quote was recorded: the quotes are the closes of the last bars shown, not the opens
        # of the bars starting at `now` (fetched only once they had ended).
        for closes in (
            asyncio.run(gateway.last_closes(symbols, "1h", now)),
            asyncio.run(gateway.latest_closes(symbols, now)),
            asyncio.run(gateway.quote(symbols, now)).quotes,
        ):
            shown.extend((symbol, quote.at) for symbol, quote in closes.items())
        for key in shown:
            assert known[key] <= now, f"{key} known at {known[key]} shown at {now}"
        snapshot = asyncio.run(gateway.snapshot(symbols, now))
        assert snapshot.with_bars == {symbol for symbol in symbols if first_known[symbol] <= now}
        now += timedelta(minutes=20)


def test_a_refetched_bar_keeps_when_its_values_were_first_known(engine: Engine) -> None:
    cache = SqlBarCache(engine)

    def put(bar: Bar, fetched_at: datetime, known_at: datetime | None = None) -> None:
        cache.put_bars(
            source="x", interval="1h", bars=[bar], fetched_at=fetched_at, known_at=known_at
        )

    def recorded() -> tuple[Decimal, datetime]:
        (entry,) = cache.recorded_bars(["BTC/USDT"], "1h")["BTC/USDT"]
        return entry.bar.close, entry.known_at

    put(hour_bar(1, Decimal("101.5")), utc(2025, 7, 8, 1, 30))  # unfinished: not recorded
    assert cache.recorded_bars(["BTC/USDT"], "1h") == {}
    put(hour_bar(1, Decimal(101)), utc(2025, 7, 8, 3) + FIVE_S, utc(2025, 7, 8, 3))
    assert recorded() == (Decimal(101), utc(2025, 7, 8, 3))
    put(hour_bar(1, Decimal("101.000")), utc(2025, 7, 8, 6) + FIVE_S, utc(2025, 7, 8, 6))
    assert recorded() == (Decimal(101), utc(2025, 7, 8, 3))  # the same value: known since 03:00
    put(hour_bar(1, Decimal("100.9")), utc(2025, 7, 8, 7) + FIVE_S, utc(2025, 7, 8, 7))
    # A revision: the new value is shown only from its fetch, never from 03:00.
    assert recorded() == (Decimal("100.9"), utc(2025, 7, 8, 7))
    # Without a decision time, a bar is known from its fetch; never before its end.
    put(hour_bar(4), utc(2025, 7, 8, 8))
    put(hour_bar(5), utc(2025, 7, 8, 6, 30), utc(2025, 7, 8, 5))
    known = {
        entry.bar.start_at.hour: entry.known_at
        for entry in cache.recorded_bars(["BTC/USDT"], "1h")["BTC/USDT"]
    }
    assert known == {1: utc(2025, 7, 8, 7), 4: utc(2025, 7, 8, 8), 5: utc(2025, 7, 8, 6)}


def test_the_memory_cache_keeps_known_times_as_the_store_does() -> None:
    cache = MemoryBarCache()
    cache.put_bars(
        source="x",
        interval="1h",
        bars=[hour_bar(1)],
        fetched_at=utc(2025, 7, 8, 3) + FIVE_S,
        known_at=utc(2025, 7, 8, 3),
    )
    cache.put_bars(source="x", interval="1h", bars=[hour_bar(1)], fetched_at=utc(2025, 7, 8, 6))
    (found,) = cache.get_bars(["BTC/USDT"], "1h", utc(2025, 7, 8), utc(2025, 7, 9))["BTC/USDT"]
    assert (found.fetched_at, found.known_at) == (utc(2025, 7, 8, 6), utc(2025, 7, 8, 3))
    cache.put_bars(
        source="x", interval="1h", bars=[hour_bar(1, Decimal(7))], fetched_at=utc(2025, 7, 8, 7)
    )
    (found,) = cache.get_bars(["BTC/USDT"], "1h", utc(2025, 7, 8), utc(2025, 7, 9))["BTC/USDT"]
    assert found.known_at == utc(2025, 7, 8, 7)


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
