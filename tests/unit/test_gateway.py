"""The point-in-time gateway: nothing after `now` ever comes out, and what comes out is right.

A slot's snapshot also says which symbols had a bar ended by the slot: from the replay source's
history, or for a source without one from the bars it fetched and the earliest it has seen."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from openbell.markets.barfile import BarFileMeta, write_bars
from openbell.markets.domain import Bar, NewsItem, Quote, utc
from openbell.markets.errors import IntervalUnavailable
from openbell.markets.gateway import MAX_GAP_DAYS, BarsResult, PointInTimeGateway, QuotesResult
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import FirstBars, ForwardingSource

T = TypeVar("T")
SHANGHAI = ZoneInfo("Asia/Shanghai")
SYMBOLS = ("600000.SH", "600519.SH")
#: Five A-share sessions around a weekend, with hourly bars 09:30, 10:30, 13:00, 14:00 Shanghai.
DAYS = ((2025, 10, 16), (2025, 10, 17), (2025, 10, 20), (2025, 10, 21), (2025, 10, 22))
HOURLY = ((9, 30), (10, 30), (13, 0), (14, 0))
US = timedelta(microseconds=1)


def run(awaitable: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await awaitable

    return asyncio.run(wrapped())


def local(year: int, month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


def bar(symbol: str, start_at: datetime, end_at: datetime, seq: int) -> Bar:
    base = Decimal(10 + SYMBOLS.index(symbol) * 100 + seq)
    return Bar(
        symbol=symbol,
        start_at=start_at,
        end_at=end_at,
        open=base + Decimal("0.11"),
        high=base + Decimal(1),
        low=base,
        close=base + Decimal("0.55"),
        volume=Decimal(1000 + seq),
    )


def small_bars() -> dict[str, list[Bar]]:
    hourly, daily = [], []
    for symbol in SYMBOLS:
        for day, ymd in enumerate(DAYS):
            if symbol == "600519.SH" and day == 2:
                continue  # a suspended day: one symbol has a gap
            for slot, (hour, minute) in enumerate(HOURLY):
                start_at = local(*ymd, hour, minute)
                hourly.append(bar(symbol, start_at, start_at + timedelta(hours=1), day * 4 + slot))
            daily.append(bar(symbol, local(*ymd, 9, 30), local(*ymd, 15), day * 7))
    return {"1h": hourly, "1d": daily}


NEWS = tuple(
    NewsItem(
        symbol=SYMBOLS[n % 3] if n % 3 < 2 else None,
        published_at=local(2025, 10, 16, 8) + timedelta(hours=7 * n),
        title=f"item {n}",
    )
    for n in range(24)
)


def meta(interval: str) -> BarFileMeta:
    return BarFileMeta(
        market="cn",
        interval=interval,
        timezone="Asia/Shanghai",
        label="start",
        adjustment="raw",
        source="test",
        provenance="tests/unit/test_gateway.py",
    )


@pytest.fixture(scope="module")
def small_source(tmp_path_factory: pytest.TempPathFactory) -> ReplaySource:
    folder: Path = tmp_path_factory.mktemp("bars")
    for interval, bars in small_bars().items():
        write_bars(folder / f"cn-{interval}.parquet", bars, meta(interval))
    return ReplaySource.from_paths("cn", [folder], news=NEWS)


@functools.cache
def bundled(market: str) -> ReplaySource:
    return ReplaySource.from_bundled(market, names=[f"{market}-1h", f"{market}-1d"])


def all_bars(source: ReplaySource, symbol: str, interval: str) -> tuple[Bar, ...]:
    found = source.bars_between([symbol], interval, utc(2000, 1, 1), utc(2100, 1, 1))
    return found.get(symbol, ())


def boundaries(source: ReplaySource) -> list[datetime]:
    stamps: set[datetime] = set()
    for interval in source.intervals:
        for symbol in sorted(source.symbols(interval))[:3]:
            for found in all_bars(source, symbol, interval):
                stamps.update((found.start_at, found.end_at))
    return sorted(stamps)


@functools.cache
def bundled_stamps(market: str) -> list[datetime]:
    return boundaries(bundled(market))


@st.composite
def instants(draw: st.DrawFn, stamps: Sequence[datetime]) -> datetime:
    """Bar boundaries, exactly or 1 µs either side, or anywhere within two days of one."""
    stamp = draw(st.sampled_from(stamps))
    if draw(st.booleans()):
        return stamp + draw(st.sampled_from((-US, timedelta(0), US)))
    span = timedelta(days=2) // US
    return stamp + timedelta(microseconds=draw(st.integers(-span, span)))


def check_point_in_time(source: ReplaySource, now: datetime, data: st.DataObject) -> None:
    gateway = PointInTimeGateway(source)
    known = sorted(source.symbols())
    symbol = data.draw(st.sampled_from([*known[:4], "UNKNOWN", "600000"]), label="symbol")
    interval = data.draw(st.sampled_from([*source.intervals, "5m"]), label="interval")
    lookback = data.draw(st.integers(1, 60), label="lookback")
    if interval == "5m":
        with pytest.raises(IntervalUnavailable) as raised:
            run(gateway.bars(symbol, interval, lookback, now))
        assert str(now.year) not in str(raised.value)
        return
    result = run(gateway.bars(symbol, interval, lookback, now))
    assert isinstance(result, BarsResult)
    assert result.as_of == now
    assert all(found.end_at <= now for found in result.bars)
    expected = [found for found in all_bars(source, symbol, interval) if found.end_at <= now]
    assert list(result.bars) == expected[-lookback:]
    event("bars returned" if result.bars else "no bars")

    wanted = data.draw(st.lists(st.sampled_from([*known[:4], "UNKNOWN"]), max_size=4))
    quotes = run(gateway.quote(wanted, now))
    assert isinstance(quotes, QuotesResult)
    assert quotes.as_of == now
    assert all(quote.at <= now for quote in quotes.quotes.values())
    assert set(quotes.quotes) | set(quotes.missing) == set(wanted)
    assert "UNKNOWN" not in quotes.quotes
    for quote in quotes.quotes.values():
        event("quote is an open" if quote.at == now else "quote is a close")

    lookback_news = timedelta(hours=data.draw(st.integers(1, 24 * 10)))
    news = run(gateway.news(data.draw(st.none() | st.just([symbol])), lookback_news, now))
    assert news.as_of == now
    assert all(now - lookback_news <= item.published_at <= now for item in news.items)
    stamps = [item.published_at for item in news.items]
    assert stamps == sorted(stamps, reverse=True)

    snapshot = run(gateway.snapshot(wanted, now))
    assert snapshot.at == now
    assert dict(snapshot.quotes) == dict(quotes.quotes)


SMALL_STAMPS = sorted(
    {at for bars in small_bars().values() for b in bars for at in (b.start_at, b.end_at)}
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), now=instants(SMALL_STAMPS))
def test_small_dataset_never_shows_the_future(
    small_source: ReplaySource, data: st.DataObject, now: datetime
) -> None:
    check_point_in_time(small_source, now, data)


@pytest.mark.parametrize("market", ["us", "cn"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_bundled_data_never_shows_the_future(market: str, data: st.DataObject) -> None:
    source = bundled(market)
    now = data.draw(instants(bundled_stamps(market)), label="now")
    check_point_in_time(source, now, data)


def test_quote_at_a_us_hourly_slot_is_that_bars_open() -> None:
    source = bundled("us")
    slot = utc(2025, 10, 1, 14)
    hour_bar = source.bars_between(["AAPL"], "1h", slot, slot + US)["AAPL"][0]
    result = run(PointInTimeGateway(source).quote(["AAPL"], slot))
    assert result.quotes["AAPL"] == Quote(symbol="AAPL", price=hour_bar.open, at=slot)
    assert result.missing == ()


def test_the_shanghai_15_00_hourly_bar_shows_only_at_15_00() -> None:
    gateway = PointInTimeGateway(bundled("cn"))
    just_before = local(2025, 10, 9, 14, 59) + timedelta(seconds=59)
    before = run(gateway.bars("600519.SH", "1h", 1, just_before)).bars[-1]
    at_close = run(gateway.bars("600519.SH", "1h", 1, local(2025, 10, 9, 15))).bars[-1]
    assert before.end_at == local(2025, 10, 9, 14)
    assert (at_close.start_at, at_close.end_at) == (local(2025, 10, 9, 14), local(2025, 10, 9, 15))


def test_a_cn_daily_bar_shows_only_once_its_session_closed() -> None:
    gateway = PointInTimeGateway(bundled("cn"))
    during = run(gateway.daily_closes("600519.SH", 1, local(2025, 10, 9, 14)))
    after = run(gateway.daily_closes("600519.SH", 1, local(2025, 10, 9, 15)))
    assert during.ended_at == (local(2025, 9, 30, 15),)  # before the National Day holiday
    assert after.ended_at == (local(2025, 10, 9, 15),)
    day_bar = bundled("cn").bars_between(
        ["600519.SH"], "1d", local(2025, 10, 9, 9, 30), local(2025, 10, 9, 10)
    )
    assert after.closes == (day_bar["600519.SH"][0].close,)


def test_snapshot_carries_the_previous_sessions_close(small_source: ReplaySource) -> None:
    slot = local(2025, 10, 21, 9, 30)
    snapshot = run(PointInTimeGateway(small_source).snapshot([*SYMBOLS, "UNKNOWN"], slot))
    first_hour = small_source.bars_between(list(SYMBOLS), "1h", slot, slot + US)
    previous_day = small_source.bars_between(list(SYMBOLS), "1d", local(2025, 10, 20, 9, 30), slot)
    assert {s: q.price for s, q in snapshot.quotes.items()} == {
        s: bars[0].open for s, bars in first_hour.items()
    }
    assert snapshot.missing == ("UNKNOWN",)
    assert dict(snapshot.previous_closes) == {
        "600000.SH": previous_day["600000.SH"][0].close,
        "600519.SH": all_bars(small_source, "600519.SH", "1d")[1].close,  # suspended on the 20th
    }


def test_lookback_widens_past_a_suspension(small_source: ReplaySource) -> None:
    gateway = PointInTimeGateway(small_source)
    result = run(gateway.bars("600519.SH", "1d", 4, local(2025, 10, 23, 9)))
    assert [found.start_at.astimezone(SHANGHAI).day for found in result.bars] == [16, 17, 21, 22]


def test_bad_arguments_are_refused(small_source: ReplaySource) -> None:
    gateway = PointInTimeGateway(small_source)
    now = local(2025, 10, 21, 10)
    with pytest.raises(ValueError, match="lookback"):
        run(gateway.bars("600000.SH", "1h", 0, now))
    with pytest.raises(ValueError, match="lookback"):
        run(gateway.bars("600000.SH", "1h", 1001, now))
    with pytest.raises(ValueError, match="naive"):
        run(gateway.quote(["600000.SH"], now.replace(tzinfo=None)))
    with pytest.raises(TypeError, match="sequence of symbols"):
        run(gateway.quote("600000.SH", now))


class LeakySource:
    """A broken source that answers with the future: the gateway must drop all of it."""

    name = "leaky"
    market = "crypto"
    intervals = ("1h",)

    def __init__(self, now: datetime) -> None:
        self.now = now

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        hours = [self.now - timedelta(hours=2), self.now - timedelta(hours=1), self.now]
        made = [
            Bar(
                symbol="BTC/USDT",
                start_at=at,
                end_at=at + timedelta(hours=1),
                open=Decimal(1),
                high=Decimal(1),
                low=Decimal(1),
                close=Decimal(1),
                volume=Decimal(0),
            )
            for at in hours
        ]
        return {"BTC/USDT": made}

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return {
            "BTC/USDT": Quote(symbol="BTC/USDT", price=Decimal(1), at=at + US),
            "ETH/USDT": Quote(symbol="BTC/USDT", price=Decimal(1), at=at),
        }

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return [
            NewsItem(symbol=None, published_at=self.now + US, title="tomorrow"),
            NewsItem(symbol=None, published_at=self.now, title="now"),
        ]


def test_a_source_that_leaks_the_future_is_filtered() -> None:
    now = utc(2025, 11, 10, 12)
    gateway = PointInTimeGateway(LeakySource(now))
    bars = run(gateway.bars("BTC/USDT", "1h", 10, now)).bars
    assert [found.end_at for found in bars] == [now - timedelta(hours=1), now]
    quotes = run(gateway.quote(["BTC/USDT", "ETH/USDT"], now))
    assert quotes.quotes == {}
    assert quotes.missing == ("BTC/USDT", "ETH/USDT")
    news = run(gateway.news(None, timedelta(days=1), now))
    assert [item.title for item in news.items] == ["now"]


def test_results_refuse_to_hold_the_future() -> None:
    now = utc(2025, 11, 10, 12)
    with pytest.raises(ValueError, match="look-ahead"):
        QuotesResult(as_of=now, quotes={"X": Quote(symbol="X", price=Decimal(1), at=now + US)})


def test_a_view_reads_at_its_bound_time(small_source: ReplaySource) -> None:
    now = local(2025, 10, 21, 13)
    view = PointInTimeGateway(small_source).at(now)
    assert run(view.bars("600000.SH", "1h", 2)).as_of == now
    assert run(view.quote(["600000.SH"])).quotes["600000.SH"].at == now
    assert run(view.daily_closes("600000.SH", 2)).ended_at[-1] == local(2025, 10, 20, 15)
    assert run(view.news(None, timedelta(days=1), limit=2)).items == NEWS[16:18][::-1]


# -- which symbols had a bar ended by the slot (issue 9, item 4) ---------------------------------


def test_a_snapshot_names_the_symbols_with_a_bar_ended_by_its_slot(
    small_source: ReplaySource,
) -> None:
    gateway = PointInTimeGateway(small_source)
    first = local(2025, 10, 16, 9, 30)  # both symbols' first bars start here
    at_first = run(gateway.snapshot([*SYMBOLS, "UNKNOWN"], first))
    assert set(at_first.quotes) == set(SYMBOLS)  # priced at the open of their first bars...
    assert at_first.with_bars == frozenset()  # ...but no bar of theirs has ended
    assert run(gateway.snapshot([*SYMBOLS], first + timedelta(hours=1) - US)).with_bars == set()
    after = run(gateway.snapshot([*SYMBOLS, "UNKNOWN"], first + timedelta(hours=1)))
    assert after.with_bars == frozenset(SYMBOLS)


def test_a_source_without_history_is_read_from_its_recent_bars(
    small_source: ReplaySource,
) -> None:
    # A live source cannot say when its data starts: the gateway reads the bars it fetches for
    # the snapshot, and remembers the earliest it has seen.
    live = ForwardingSource(small_source)
    assert not isinstance(live, FirstBars)
    gateway = PointInTimeGateway(live)
    assert run(gateway.snapshot(list(SYMBOLS), local(2025, 10, 16, 9, 30))).with_bars == set()
    monday = local(2025, 10, 20, 9, 30)  # 600519.SH is suspended that day
    assert run(gateway.snapshot([*SYMBOLS, "UNKNOWN"], monday)).with_bars == set(SYMBOLS)
    much_later = utc(2026, 6, 1)  # nothing in the snapshot's first window any more
    assert run(gateway.snapshot(list(SYMBOLS), much_later)).with_bars == set(SYMBOLS)
    # A fresh gateway looks further back for the symbols its first window has nothing of (a long
    # suspension), up to MAX_GAP_DAYS; past that it has seen nothing of them.
    fresh = PointInTimeGateway(ForwardingSource(small_source))
    assert run(fresh.snapshot(list(SYMBOLS), much_later)).with_bars == set(SYMBOLS)
    past_the_gap = utc(2025, 10, 23) + timedelta(days=MAX_GAP_DAYS + 1)
    assert run(gateway.snapshot(list(SYMBOLS), past_the_gap)).with_bars == set(SYMBOLS)
    fresh = PointInTimeGateway(ForwardingSource(small_source))
    assert run(fresh.snapshot(list(SYMBOLS), past_the_gap)).with_bars == set()
    # what was seen later says nothing about earlier times
    assert run(gateway.snapshot(list(SYMBOLS), local(2025, 10, 16, 9, 30))).with_bars == set()
