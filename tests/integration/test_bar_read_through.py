"""Reading bars back from the store's cache, on real SQLite and Postgres: a covered, final window
costs no vendor read, only the uncovered part is asked, and nothing served is from the future."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from openbell.daemon.clock import SimulatedClock
from openbell.daemon.plan import MarketPlan, build_desks
from openbell.markets.cache import CachingSource
from openbell.markets.coverage import TimeSpan
from openbell.markets.domain import Bar, NewsItem, Quote, utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.store.cache import SqlBarCache
from openbell.store.ledger import Ledger

BTC, ETH = "BTC/USDT", "ETH/USDT"


def at(hour: float) -> datetime:
    return utc(2025, 7, 8) + timedelta(hours=hour)


def bar(hour: int, close: str = "1", *, symbol: str = BTC) -> Bar:
    price = Decimal(close)
    return Bar(
        symbol=symbol,
        start_at=at(hour),
        end_at=at(hour + 1),
        open=price,
        high=price,
        low=price,
        close=price,
        volume=Decimal(1),
    )


class Vendor:
    """A live vendor at the network boundary: serves the bars it holds that started before its
    clock (the one under way too, as raw Yahoo does), and records every window asked of it."""

    name = "vendor"
    market = "crypto"
    intervals = ("1h",)

    def __init__(self, bars: Sequence[Bar], now: list[datetime]) -> None:
        self.held = {(b.symbol, b.start_at): b for b in bars}
        self.now = now
        self.asked: list[tuple[tuple[str, ...], datetime, datetime]] = []

    def hold(self, *bars: Bar) -> None:
        self.held.update({(b.symbol, b.start_at): b for b in bars})

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        self.asked.append((tuple(symbols), start_at, end_at))
        out: dict[str, list[Bar]] = {}
        for (symbol, start), held in sorted(self.held.items()):
            if symbol in symbols and start_at <= start < end_at and start < self.now[0]:
                out.setdefault(symbol, []).append(held)
        return out

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return {}

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return ()


def reader(
    engine: Engine, bars: Sequence[Bar], now: datetime
) -> tuple[CachingSource, Vendor, list[datetime]]:
    clock = [now]
    vendor = Vendor(bars, clock)
    return CachingSource(vendor, SqlBarCache(engine), now=lambda: clock[0]), vendor, clock


def read(
    source: CachingSource, start_h: float, end_h: float, symbols: Sequence[str] = (BTC,)
) -> dict[str, list[Bar]]:
    found = asyncio.run(source.bars(symbols, "1h", at(start_h), at(end_h)))
    return {symbol: list(bars) for symbol, bars in found.items() if bars}


def test_a_final_window_read_again_costs_no_vendor_read(engine: Engine) -> None:
    source, vendor, _ = reader(engine, [bar(h, str(h + 1)) for h in range(10)], at(10))
    first = read(source, 0, 10)
    assert first == {BTC: [bar(h, str(h + 1)) for h in range(10)]}
    assert read(source, 0, 10) == first
    assert read(source, 4, 8) == {BTC: first[BTC][4:8]}
    assert vendor.asked == [((BTC,), at(0), at(10))]


def test_one_bar_past_the_covered_part_asks_the_vendor_for_the_tail_only(engine: Engine) -> None:
    source, vendor, clock = reader(engine, [bar(h, str(h + 1)) for h in range(12)], at(10))
    read(source, 0, 10)
    clock[0] = at(11)
    assert read(source, 1, 11) == {BTC: [bar(h, str(h + 1)) for h in range(1, 11)]}
    assert vendor.asked[1:] == [((BTC,), at(10), at(11))]


def test_a_holiday_inside_a_covered_span_is_not_asked_again(engine: Engine) -> None:
    held = [bar(h) for h in range(12) if h not in (3, 4, 5)]
    source, vendor, clock = reader(engine, held, at(10))
    first = read(source, 0, 10)
    assert [b.start_at for b in first[BTC]] == [at(h) for h in (0, 1, 2, 6, 7, 8, 9)]
    assert read(source, 2, 7) == {BTC: [bar(2), bar(6)]}
    assert read(source, 3, 6) == {}
    clock[0] = at(11)
    read(source, 0, 11)
    assert vendor.asked == [((BTC,), at(0), at(10)), ((BTC,), at(10), at(11))]


def test_a_bar_unfinished_when_fetched_is_fetched_again(engine: Engine) -> None:
    source, vendor, clock = reader(engine, [bar(h) for h in range(9)], at(9.5))
    vendor.hold(bar(9, "5"))  # the bar under way at 09:30, as the vendor shows it then
    assert read(source, 0, 10)[BTC][-1] == bar(9, "5")
    clock[0] = at(10)
    vendor.hold(bar(9, "7"))  # its final values
    assert read(source, 0, 10)[BTC][-1] == bar(9, "7")
    assert vendor.asked == [((BTC,), at(0), at(10)), ((BTC,), at(9), at(10))]
    assert read(source, 0, 10)[BTC][-1] == bar(9, "7")
    assert len(vendor.asked) == 2


def test_nothing_at_or_after_the_window_end_or_the_clock_is_served(engine: Engine) -> None:
    source, vendor, clock = reader(engine, [bar(h) for h in range(10)], at(10))
    read(source, 0, 10)
    assert read(source, 0, 5) == {BTC: [bar(h) for h in range(5)]}
    assert read(source, 0, 4.5) == {BTC: [bar(h) for h in range(5)]}  # 04:00 starts before 04:30
    clock[0] = at(7.5)  # a clock behind the fetch: a bar not ended by it is not served
    assert read(source, 0, 10) == {BTC: [bar(h) for h in range(7)]}
    assert len(vendor.asked) == 1


def test_bars_cached_outside_a_covered_span_are_not_served(engine: Engine) -> None:
    cache = SqlBarCache(engine)
    cache.put_bars(
        source="vendor", interval="1h", bars=[bar(h) for h in range(10)], fetched_at=at(10)
    )
    cache.put_coverage(
        source="vendor",
        interval="1h",
        spans={BTC: TimeSpan(start_at=at(0), end_at=at(4))},
        fetched_at=at(10),
    )
    clock = [at(10)]
    # The vendor's answer now differs from the bars cached past the span, and lacks two.
    vendor = Vendor([bar(h, "2") for h in range(8)], clock)
    source = CachingSource(vendor, cache, now=lambda: clock[0])
    assert read(source, 0, 10) == {
        BTC: [*(bar(h) for h in range(4)), *(bar(h, "2") for h in range(4, 8))]
    }
    assert vendor.asked == [((BTC,), at(4), at(10))]


def test_symbols_are_asked_together_over_what_none_of_them_covers(engine: Engine) -> None:
    held = [bar(h, symbol=symbol) for h in range(12) for symbol in (BTC, ETH)]
    source, vendor, clock = reader(engine, held, at(10))
    read(source, 0, 10, [BTC])
    read(source, 0, 8, [ETH])
    clock[0] = at(11)
    found = read(source, 0, 11, [BTC, ETH])
    assert found == {symbol: [bar(h, symbol=symbol) for h in range(11)] for symbol in (BTC, ETH)}
    assert vendor.asked[2:] == [((BTC, ETH), at(8), at(11))]
    assert read(source, 0, 11, [ETH, BTC]) == found
    assert len(vendor.asked) == 3


def test_a_failing_cache_read_falls_back_to_the_vendor(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    source, vendor, _ = reader(engine, [bar(h) for h in range(10)], at(10))
    read(source, 0, 10)
    with engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE bar_coverage"))
    with caplog.at_level(logging.WARNING, logger="openbell.markets.cache"):
        assert read(source, 0, 10) == {BTC: [bar(h) for h in range(10)]}
    assert vendor.asked == [((BTC,), at(0), at(10))] * 2
    assert {r.message for r in caplog.records} == {
        "bar_cache_read_failed",
        "bar_cache_write_failed",
    }
    # The bars themselves were still recorded.
    assert len(SqlBarCache(engine).get_bars([BTC], "1h", at(0), at(10))[BTC]) == 10


def test_coverage_spans_merge_and_read_back_per_source_and_interval(engine: Engine) -> None:
    cache = SqlBarCache(engine)

    def put(start_h: int, end_h: int, *, source: str = "vendor", interval: str = "1h") -> None:
        spans = {BTC: TimeSpan(start_at=at(start_h), end_at=at(end_h))}
        cache.put_coverage(source=source, interval=interval, spans=spans, fetched_at=at(end_h))

    for start_h, end_h in ((0, 3), (5, 6), (3, 4), (2, 5), (8, 9)):
        put(start_h, end_h)
    put(0, 20, source="other")
    put(0, 20, interval="1d")
    covered = cache.get_coverage(
        source="vendor", symbols=[BTC, ETH], interval="1h", start_at=at(1), end_at=at(8)
    )
    assert covered == {BTC: (TimeSpan(start_at=at(0), end_at=at(6)),)}
    with engine.connect() as connection:
        count = connection.execute(sa.text("SELECT count(*) FROM bar_coverage")).scalar_one()
    assert count == 4  # 0-6 and 8-9 of the vendor's 1h bars, and the two others


class CountingVendor(Vendor):
    """A live-like source over recorded crypto bars (finished ones only), counting its reads."""

    def __init__(self, replay: ReplaySource, clock: SimulatedClock) -> None:
        super().__init__([], [clock.now()])
        self._replay = replay
        self._clock = clock

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        self.asked.append((tuple(symbols), start_at, end_at))
        found = await self._replay.bars(symbols, interval, start_at, end_at)
        now = self._clock.now()
        return {symbol: [b for b in bars if b.end_at <= now] for symbol, bars in found.items()}


def test_the_live_desks_read_bars_back_from_the_store(engine: Engine) -> None:
    now = utc(2025, 11, 4, 5)  # inside the bundled crypto hourly bars
    clock = SimulatedClock(now)
    replay = ReplaySource.from_bundled("crypto", names=["crypto-1h"])
    vendor = CountingVendor(replay, clock)
    market = MarketPlan(
        market="crypto",
        source=vendor,
        universe=load_universe("crypto10"),
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=(),
        fill_price=replay.first_price_at_or_after,
    )
    desks, _ = build_desks([market], Ledger(engine), now, clock=clock, cache=SqlBarCache(engine))
    gateway = desks["crypto"].gateway

    def last_bars(lookback: int) -> list[Bar]:
        return list(asyncio.run(gateway.bars("BTC/USDT", "1h", lookback, clock.now())).bars)

    first = last_bars(20)
    assert last_bars(20) == first
    assert last_bars(5) == first[-5:]
    assert len(vendor.asked) == 1
    clock.set(now + timedelta(hours=1))
    later = last_bars(20)
    assert later[:-1] == first[1:]
    assert vendor.asked[1][1:] == (now, now + timedelta(hours=1))
    assert later == list(
        asyncio.run(
            replay.bars(["BTC/USDT"], "1h", now - timedelta(hours=19), now + timedelta(hours=1))
        )["BTC/USDT"]
    )
