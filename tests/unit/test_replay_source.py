"""The replay source: time-range bars, the replay quote and fill-price rules, loading and news."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openbell.markets.bar_series import BLOCK_BARS, BLOCKS_KEPT
from openbell.markets.barfile import BarFileMeta, bundled_names_for, write_bars
from openbell.markets.domain import Bar, NewsItem, Quote, utc
from openbell.markets.errors import ConfigError, IntervalUnavailable
from openbell.markets.recorded import CacheReplaySource, KnownBar, RecordedQuote
from openbell.markets.replay_source import ReplaySource, micros
from openbell.markets.sources import MarketDataSource

T = TypeVar("T")
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def run(awaitable: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await awaitable

    return asyncio.run(wrapped())


def make_bar(symbol: str, start_hour: int, hours: int, price: str, day: int = 10) -> Bar:
    start_at = utc(2025, 11, day, start_hour)
    value = Decimal(price)
    return Bar(
        symbol=symbol,
        start_at=start_at,
        end_at=start_at + hours * HOUR,
        open=value,
        high=value + 5,
        low=value - 5,
        close=value + 1,
        volume=Decimal(1),
    )


#: BTC: hourly bars 00:00-03:00 on the 10th (none at 01:00: a gap), daily bars on the 10th and 11th.
HOURLY = [
    make_bar("BTC/USDT", 0, 1, "100"),
    make_bar("BTC/USDT", 2, 1, "102"),
    make_bar("BTC/USDT", 3, 1, "103"),
]
DAILY = [
    make_bar("BTC/USDT", 0, 24, "90"),
    make_bar("BTC/USDT", 0, 24, "95", day=11),
    make_bar("ETH/USDT", 0, 24, "30"),
]


def fake() -> ReplaySource:
    return ReplaySource(market="crypto", bars={"1d": DAILY, "1h": HOURLY})


def quote(price: str, at: datetime) -> Quote:
    return Quote(symbol="BTC/USDT", price=Decimal(price), at=at)


def test_it_is_a_market_data_source() -> None:
    source: MarketDataSource = fake()
    assert (source.name, source.market, source.intervals) == (
        "replay:crypto",
        "crypto",
        ("1h", "1d"),
    )


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        pytest.param(
            utc(2025, 11, 10, 0), quote("100", utc(2025, 11, 10, 0)), id="tie-finest-wins"
        ),
        pytest.param(
            utc(2025, 11, 10, 0) + timedelta(microseconds=1),
            quote("102", utc(2025, 11, 10, 2)),
            id="just-after-a-start-waits-for-the-next",
        ),
        pytest.param(utc(2025, 11, 10, 1), quote("102", utc(2025, 11, 10, 2)), id="over-a-gap"),
        pytest.param(
            utc(2025, 11, 10, 3, 30), quote("95", utc(2025, 11, 11)), id="coarser-is-first"
        ),
        pytest.param(utc(2025, 11, 11, 0, 1), None, id="nothing-starts-later"),
    ],
)
def test_first_price_at_or_after_is_the_next_open(at: datetime, expected: Quote | None) -> None:
    assert fake().first_price_at_or_after("BTC/USDT", at) == expected


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        pytest.param(
            utc(2025, 11, 10, 2), quote("102", utc(2025, 11, 10, 2)), id="open-at-a-start"
        ),
        pytest.param(utc(2025, 11, 10, 0), quote("100", utc(2025, 11, 10, 0)), id="finest-open"),
        pytest.param(
            utc(2025, 11, 10, 2, 30), quote("101", utc(2025, 11, 10, 1)), id="last-close-mid-bar"
        ),
        pytest.param(
            utc(2025, 11, 11, 0), quote("95", utc(2025, 11, 11, 0)), id="daily-open-at-midnight"
        ),
        pytest.param(
            utc(2025, 11, 11, 5), quote("91", utc(2025, 11, 11, 0)), id="daily-close-is-latest"
        ),
        pytest.param(utc(2025, 11, 9, 23), None, id="before-any-bar"),
    ],
)
def test_the_replay_quote_is_an_open_now_or_the_last_close(
    at: datetime, expected: Quote | None
) -> None:
    assert fake().quote_at("BTC/USDT", at) == expected


def quotes_at(
    source: ReplaySource, symbol: str, stamps: list[datetime]
) -> list[tuple[int, Decimal] | None]:
    """`quote_at` at each stamp, as `prices_along` answers it: the rule it must follow."""
    return [
        None if (found := source.quote_at(symbol, at)) is None else (micros(found.at), found.price)
        for at in stamps
    ]


def to_micros(stamps: list[datetime]) -> list[int]:
    return [micros(at) for at in stamps]


#: The fake's bars and an hourly bar that ends with the first daily one (a close tie).
ALONG = {"1d": DAILY, "1h": [*HOURLY, make_bar("BTC/USDT", 23, 1, "120")]}
#: Instants around those bars: every boundary, a microsecond either side, and between.
AROUND = sorted(
    {
        at + step
        for bar in (*ALONG["1h"], *DAILY)
        for at in (bar.start_at, bar.end_at)
        for step in (-DAY, -HOUR / 2, -timedelta(microseconds=1), timedelta(0), HOUR / 2)
    }
    | {utc(2025, 11, 12, 9), utc(2025, 11, 20)}
)


@settings(max_examples=200, deadline=None)
@given(
    stamps=st.lists(st.sampled_from(AROUND), max_size=12),
    ordered=st.booleans(),
    symbol=st.sampled_from(["BTC/USDT", "ETH/USDT", "SOL/USDT"]),
    known_late=st.booleans(),
)
def test_prices_along_are_the_quotes_at_each_stamp(
    stamps: list[datetime], ordered: bool, symbol: str, known_late: bool
) -> None:
    """Also with bars known after they ended (a cache replay's), shown from then on."""
    stamps = sorted(stamps) if ordered else stamps
    known_at = {
        (interval, bar.symbol, bar.start_at): bar.end_at + HOUR / 2
        for interval, bars in ALONG.items()
        for bar in bars
        if known_late
    }
    source = ReplaySource(market="crypto", bars=ALONG, known_at=known_at)
    assert source.prices_along(symbol, to_micros(stamps)) == quotes_at(source, symbol, stamps)


def test_prices_along_a_bundled_year_are_the_quotes_at_each_slot() -> None:
    source = ReplaySource.from_bundled("crypto")
    slots = [utc(2024, 11, 1) + n * DAY + (n % 5) * HOUR for n in range(400)]
    for symbol in ("BTC/USDT", "SOL/USDT", "NOPE/USDT"):
        assert source.prices_along(symbol, to_micros(slots)) == quotes_at(source, symbol, slots)


def test_prices_along_a_cache_replay_follow_its_own_quotes() -> None:
    recorded = [
        RecordedQuote(asked_at=utc(2025, 11, 10, 2), quote=quote("150", utc(2025, 11, 10, 1, 59)))
    ]
    source = CacheReplaySource(
        market="crypto",
        bars={"1h": [KnownBar(bar=bar, known_at=bar.end_at + HOUR) for bar in HOURLY]},
        quotes=recorded,
        name="cache:crypto",
    )
    stamps = [utc(2025, 11, 10, hour) for hour in range(6)]
    found = source.prices_along("BTC/USDT", to_micros(stamps))
    assert found == quotes_at(source, "BTC/USDT", stamps)
    assert found[2] == (micros(utc(2025, 11, 10, 1, 59)), Decimal(150))


def test_a_close_tie_goes_to_the_finer_interval() -> None:
    hourly = [make_bar("BTC/USDT", 23, 1, "120")]
    source = ReplaySource(market="crypto", bars={"1d": DAILY[:1], "1h": hourly})
    assert source.quote_at("BTC/USDT", utc(2025, 11, 11, 0, 30)) == quote("121", utc(2025, 11, 11))


def test_bars_are_the_starts_in_a_half_open_range() -> None:
    found = run(
        fake().bars(["BTC/USDT", "XRP/USDT"], "1h", utc(2025, 11, 10, 0), utc(2025, 11, 10, 3))
    )
    assert dict(found) == {"BTC/USDT": tuple(HOURLY[:2])}
    with pytest.raises(IntervalUnavailable, match="serves 1h, 1d"):
        run(fake().bars(["BTC/USDT"], "5m", utc(2025, 11, 10), utc(2025, 11, 11)))


def test_quotes_skip_symbols_without_data() -> None:
    found = run(fake().quote(["BTC/USDT", "DOGE/USDT"], utc(2025, 11, 10, 2)))
    assert set(found) == {"BTC/USDT"}


def test_news_is_newest_first_within_the_range_and_limit() -> None:
    items = [
        NewsItem(
            symbol="BTC/USDT" if n % 2 else None, published_at=utc(2025, 11, 10, n), title=str(n)
        )
        for n in range(6)
    ]
    source = ReplaySource(market="crypto", bars={"1h": HOURLY}, news=reversed(items))
    everything = run(source.news(None, utc(2025, 11, 10, 1), utc(2025, 11, 10, 5), 10))
    assert [item.title for item in everything] == ["4", "3", "2", "1"]
    btc = run(source.news(["BTC/USDT"], utc(2025, 11, 10), utc(2025, 11, 11), 2))
    assert [item.title for item in btc] == ["5", "3"]


def test_bar_starts_merge_every_symbol() -> None:
    starts = fake().bar_starts("1d", utc(2025, 11, 1), utc(2025, 11, 30))
    assert starts == (utc(2025, 11, 10), utc(2025, 11, 11))


def test_overlapping_bars_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        ReplaySource(market="crypto", bars={"1h": [make_bar("BTC/USDT", 1, 2, "10"), *HOURLY[1:]]})


def meta(market: str, interval: str) -> BarFileMeta:
    return BarFileMeta(
        market=market,
        interval=interval,
        timezone="UTC",
        label="start",
        adjustment="raw",
        source="test",
        provenance="tests/unit/test_replay_source.py",
    )


def test_from_paths_reads_files_and_directories(tmp_path: Path) -> None:
    folder = tmp_path / "bars"
    folder.mkdir()
    write_bars(folder / "a.parquet", HOURLY, meta("crypto", "1h"))
    write_bars(tmp_path / "d.parquet", DAILY, meta("crypto", "1d"))
    source = ReplaySource.from_paths("crypto", [folder, tmp_path / "d.parquet"])
    assert source.intervals == ("1h", "1d")
    assert source.first_price_at_or_after("BTC/USDT", utc(2025, 11, 10)) == quote(
        "100", utc(2025, 11, 10)
    )
    assert source.symbols() == {"BTC/USDT", "ETH/USDT"}


def test_from_paths_refuses_other_markets_repeats_and_empty_folders(tmp_path: Path) -> None:
    write_bars(tmp_path / "us.parquet", HOURLY, meta("us", "1h"))
    with pytest.raises(ConfigError, match="not crypto bars"):
        ReplaySource.from_paths("crypto", [tmp_path / "us.parquet"])
    write_bars(tmp_path / "one.parquet", HOURLY, meta("crypto", "1h"))
    write_bars(tmp_path / "two.parquet", HOURLY, meta("crypto", "1h"))
    with pytest.raises(ConfigError, match="loaded twice"):
        ReplaySource.from_paths("crypto", [tmp_path / "one.parquet", tmp_path / "two.parquet"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no \*\.parquet"):
        ReplaySource.from_paths("crypto", [tmp_path / "empty"])


def test_from_bundled_loads_every_file_of_the_market() -> None:
    source = ReplaySource.from_bundled("cn")
    assert source.intervals == ("1h", "1d")
    assert "000016.SH" in source.symbols("1d")  # the index file joins the stocks' daily bars
    assert "600519.SH" in source.symbols("1h")


def test_from_bundled_for_some_symbols_leaves_out_the_files_that_hold_none_of_them() -> None:
    every = ReplaySource.from_bundled("cn")
    index = from_bundled_for("cn", {"000016.SH"})
    # The stocks' files (600028.SH .. 688981.SH by their footers) hold no index bars.
    assert index.intervals == ("1d",)
    assert index.symbols("1d") == {"000016.SH"}
    slots = [utc(2025, 1, 2) + n * DAY + (n % 7) * HOUR for n in range(300)]
    along = index.prices_along("000016.SH", to_micros(slots))
    assert along == every.prices_along("000016.SH", to_micros(slots))
    assert sum(quote is not None for quote in along) > 200
    # A stock asked for too keeps the stocks' files; a symbol no file may hold keeps them all.
    assert from_bundled_for("cn", {"000016.SH", "600519.SH"}).intervals == ("1h", "1d")
    assert from_bundled_for("cn", {"ZZZ"}).intervals == ("1h", "1d")


def from_bundled_for(market: str, symbols: set[str]) -> ReplaySource:
    return ReplaySource.from_bundled(market, names=bundled_names_for(market, symbols))


def test_bars_of_a_file_are_those_written_however_the_window_moves(tmp_path: Path) -> None:
    # 693 hourly bars with a gap every tenth hour: windows cross the file source's blocks of bars.
    bars = [
        Bar(
            symbol="BTC/USDT",
            start_at=utc(2025, 1, 1) + hour * HOUR,
            end_at=utc(2025, 1, 1) + (hour + 1) * HOUR,
            open=Decimal(100 + hour % 37),
            high=Decimal(140),
            low=Decimal(90),
            close=Decimal(101 + hour % 31),
            volume=Decimal(hour),
        )
        for hour in range(770)
        if hour % 10 != 9
    ]
    write_bars(tmp_path / "h.parquet", bars, meta("crypto", "1h"))
    from_file = ReplaySource.from_paths("crypto", [tmp_path / "h.parquet"])
    in_memory = ReplaySource(market="crypto", bars={"1h": bars})
    first = bars[0].start_at
    windows = [(first + n * 7 * HOUR, first + (n * 7 + 200) * HOUR) for n in range(90)]
    windows += [(first + 500 * HOUR, first + 501 * HOUR), (first, first + 770 * HOUR)]
    windows += [(first + 3 * HOUR, first + 130 * HOUR), (first - HOUR, first + HOUR)]
    for start_at, end_at in windows:
        expected = in_memory.bars_between(["BTC/USDT"], "1h", start_at, end_at)
        assert from_file.bars_between(["BTC/USDT"], "1h", start_at, end_at) == expected
    # Only the blocks around the windows used last are kept, not every bar read.
    series = from_file._interval("1h").series("BTC/USDT")
    assert series is not None
    assert sum(len(block) for block in series._blocks.values()) <= BLOCKS_KEPT * BLOCK_BARS
