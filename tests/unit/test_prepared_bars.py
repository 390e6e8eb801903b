"""Prepared bars: the gateway over a replay source's bar windows reads exactly what it reads by
asking for time ranges and filtering, and prepared moving averages equal the windowed computation.

The unprepared path is the same replay source behind a `ForwardingSource` that passes on its
`first_bar_ends` but not its `ended_windows`, so the gateway asks for ranges and filters the bars.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Context, Decimal, localcontext
from typing import TypeVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from openbell.markets.bar_series import (
    BLOCK_BARS,
    BLOCKS_KEPT,
    BarSeries,
    BarWindow,
    PreparedBars,
    mean_of_last,
)
from openbell.markets.barfile import COLUMN_BLOCK, BarSet, DecimalColumn, read_bundled
from openbell.markets.domain import Bar, utc
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import FirstBars, ForwardingSource

T = TypeVar("T")
US = timedelta(microseconds=1)


def run(awaitable: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await awaitable

    return asyncio.run(wrapped())


class Unprepared(ForwardingSource):
    """A replay source read through the port only: its history, not its windows."""

    def __init__(self, source: ReplaySource) -> None:
        super().__init__(source)
        self._replay = source

    def first_bar_ends(self, symbols: Sequence[str]) -> Mapping[str, datetime]:
        return self._replay.first_bar_ends(symbols)


@functools.cache
def bundled(market: str) -> ReplaySource:
    return ReplaySource.from_bundled(market)


@functools.cache
def stamps(market: str, symbol: str, interval: str) -> list[datetime]:
    """Every boundary of the symbol's bars of the interval (of the market's first symbol's when it
    has none), sorted."""
    source = bundled(market)
    bars = every_bar(source, symbol, interval) or every_bar(
        source, min(source.symbols(interval)), interval
    )
    return sorted({stamp for bar in bars for stamp in (bar.start_at, bar.end_at)})


@functools.cache
def every_bar(source: ReplaySource, symbol: str, interval: str) -> tuple[Bar, ...]:
    """Every bar of the symbol's interval in `source` (one of the `bundled` ones: made once)."""
    return source.bars_between([symbol], interval, utc(2000, 1, 1), utc(2100, 1, 1)).get(symbol, ())


@st.composite
def instants(draw: st.DrawFn, market: str, symbol: str, interval: str) -> datetime:
    """A boundary of the symbol's bars, exactly or 1 µs either side, anywhere within three days of
    one, or anywhere in their span."""
    found = stamps(market, symbol, interval)
    how = draw(st.sampled_from(("boundary", "near", "anywhere")))
    if how == "anywhere":
        span = (found[-1] - found[0]) // US
        return found[0] + timedelta(microseconds=draw(st.integers(0, span)))
    stamp = draw(st.sampled_from(found))
    if how == "boundary":
        return stamp + draw(st.sampled_from((-US, timedelta(0), US)))
    span = timedelta(days=3) // US
    return stamp + timedelta(microseconds=draw(st.integers(-span, span)))


def test_the_replay_source_is_prepared_and_the_forwarder_is_not() -> None:
    source = bundled("crypto")
    assert isinstance(source, PreparedBars)
    assert not isinstance(Unprepared(source), PreparedBars)
    assert isinstance(Unprepared(source), FirstBars)


@pytest.mark.parametrize("market", ["us", "cn", "crypto"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_prepared_reads_are_the_unprepared_reads(market: str, data: st.DataObject) -> None:
    source = bundled(market)
    prepared = PointInTimeGateway(source)
    unprepared = PointInTimeGateway(Unprepared(source))
    known = sorted(source.symbols())
    symbol = data.draw(st.sampled_from([*known[:4], *known[-2:], "UNKNOWN"]), label="symbol")
    interval = data.draw(st.sampled_from(source.intervals), label="interval")
    now = data.draw(instants(market, symbol, interval), label="now")
    lookback = data.draw(st.integers(1, 260), label="lookback")

    bars = run(prepared.bars(symbol, interval, lookback, now))
    assert bars == run(unprepared.bars(symbol, interval, lookback, now))
    assert all(bar.end_at <= now for bar in bars.bars)
    event("no bars" if not bars.bars else "all bars" if len(bars.bars) == lookback else "fewer")

    windows = data.draw(st.lists(st.integers(1, lookback), min_size=1, max_size=3), label="n")
    averages = run(prepared.moving_averages(symbol, interval, windows, now))
    assert averages == run(unprepared.moving_averages(symbol, interval, windows, now))

    wanted = data.draw(st.lists(st.sampled_from([*known[:6], "UNKNOWN"]), max_size=6))
    assert run(prepared.snapshot(wanted, now)) == run(unprepared.snapshot(wanted, now))
    # Many symbols' averages in one read are each symbol's own, in the order asked.
    many = run(prepared.moving_averages_of(wanted, interval, windows, now))
    assert list(many) == list(dict.fromkeys(wanted))
    assert many == {
        each: run(unprepared.moving_averages(each, interval, windows, now)) for each in wanted
    }
    assert many == run(unprepared.moving_averages_of(wanted, interval, windows, now))
    assert run(prepared.daily_closes(symbol, 3, now)) == run(
        unprepared.daily_closes(symbol, 3, now)
    )

    # A last close is the close of the one bar `bars(symbol, interval, 1, now)` shows.
    closes = run(prepared.last_closes(wanted, interval, now))
    assert closes == run(unprepared.last_closes(wanted, interval, now))
    for each in dict.fromkeys(wanted):
        last = run(unprepared.bars(each, interval, 1, now)).bars
        expected = [(last[-1].close, last[-1].end_at)] if last else []
        assert [(q.price, q.at) for q in closes.values() if q.symbol == each] == expected

    # Over every interval: the latest of each interval's last close (a tie to the finer one),
    # in the order asked, as one pass over the series gives it.
    latest = run(prepared.latest_closes(wanted, now))
    assert latest == run(unprepared.latest_closes(wanted, now))
    assert list(latest) == [each for each in dict.fromkeys(wanted) if each in latest]
    # The session close's marks: the same closes as prices, on both roads.
    prices = {each: quote.price for each, quote in latest.items()}
    assert run(prepared.latest_close_prices(wanted, now)) == prices
    assert list(run(prepared.latest_close_prices(wanted, now))) == list(prices)
    assert run(unprepared.latest_close_prices(wanted, now)) == prices
    for each in dict.fromkeys(wanted):
        found = [
            quote
            for interval_ in source.intervals  # finest first
            if (quote := run(unprepared.last_closes([each], interval_, now)).get(each))
        ]
        newest = max((quote.at for quote in found), default=None)
        expected = next((quote for quote in found if quote.at == newest), None)
        assert latest.get(each) == expected

    # Which symbols have a bar starting in a range, without building the bars.
    until = now + timedelta(days=data.draw(st.integers(0, 40), label="days"))
    assert source.symbols_between(wanted, interval, now, until) == set(
        source.bars_between(wanted, interval, now, until)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_prepared_means_are_the_windowed_means_of_bars_ended_by_now(data: st.DataObject) -> None:
    # The SMA crossover's reads (50 and 200 daily closes) over the bundled coins: each mean is the
    # windowed computation over the closes `bars` returns, and a source holding only the bars that
    # had ended by `now` gives the same means (nothing later is in them).
    source = bundled("crypto")
    symbol = data.draw(st.sampled_from(sorted(source.symbols("1d"))), label="symbol")
    now = data.draw(instants("crypto", symbol, "1d"), label="now")
    windows = data.draw(
        st.lists(st.sampled_from((1, 2, 20, 50, 199, 200, 201)), min_size=1, max_size=3)
    )
    gateway = PointInTimeGateway(source)
    found = run(gateway.moving_averages(symbol, "1d", windows, now))
    closes = [bar.close for bar in run(gateway.bars(symbol, "1d", max(windows), now)).bars]
    assert dict(found.averages) == {n: mean_of_last(closes, n) for n in windows if n <= len(closes)}
    assert found.ended_at is None or found.ended_at <= now
    past = [bar for bar in every_bar(source, symbol, "1d") if bar.end_at <= now]
    if past:
        truncated = ReplaySource(market="crypto", bars={"1d": past})
        alone = run(PointInTimeGateway(truncated).moving_averages(symbol, "1d", windows, now))
        assert dict(alone.averages) == dict(found.averages)
        assert alone.ended_at == found.ended_at
    event("some means" if found.averages else "no mean")


# -- the running sums against the windowed sum --------------------------------------------------

closes_st = st.lists(
    st.decimals(min_value=Decimal("0.00000001"), max_value=Decimal(99999999), places=8).map(
        lambda value: value.normalize()
    )
    | st.integers(1, 10**12).map(lambda n: Decimal(n).scaleb(3)),
    min_size=1,
    max_size=40,
)


def series_of(closes: list[Decimal]) -> BarSeries:
    start = utc(2024, 1, 1)
    bars = tuple(
        Bar(
            symbol="X",
            start_at=start + timedelta(days=day),
            end_at=start + timedelta(days=day + 1),
            open=close,
            high=close,
            low=close,
            close=close,
            volume=Decimal(0),
        )
        for day, close in enumerate(closes)
    )
    return BarSeries.of_bars(bars)


@settings(max_examples=300, deadline=None)
@given(closes=closes_st, data=st.data(), precision=st.integers(3, 40))
def test_a_prepared_mean_is_the_windowed_mean_in_any_context(
    closes: list[Decimal], data: st.DataObject, precision: int
) -> None:
    # Closes of mixed exponents, a context too narrow for some sums: the running sums either give
    # the windowed mean or hand over to it, never a different number.
    series = series_of(closes)
    hi = data.draw(st.integers(1, len(closes)), label="hi")
    lo = data.draw(st.integers(0, hi - 1), label="lo")
    with localcontext(Context(prec=500)):
        exact = sum(closes[lo:hi], Decimal(0))
    with localcontext() as context:
        context.prec = precision
        expected = mean_of_last(closes[lo:hi], hi - lo)
        assert series.mean_close(lo, hi) == expected
        window = BarWindow(series, 0, hi)
        assert window.mean_close(hi - lo) == expected
        event("a sum too long for the context" if context.plus(exact) != exact else "sums fit")


def test_a_window_is_the_bars_started_since_and_ended_by() -> None:
    series = series_of([Decimal(n) for n in range(1, 11)])  # ten daily bars from 2024-01-01
    day = timedelta(days=1)
    us = (utc(2024, 1, 3) - utc(1970, 1, 1)) // US
    window = series.window(us, us + 3 * (day // US))  # started on the 3rd, ended by the 6th
    assert [bar.close for bar in window] == [Decimal(3), Decimal(4), Decimal(5)]
    assert [bar.close for bar in window[-2:]] == [Decimal(4), Decimal(5)]
    assert isinstance(window[-2:], BarWindow)
    assert window.last(10).bars == window.bars
    assert window.end_at == utc(2024, 1, 6)
    assert window.mean_close(2) == Decimal("4.5")
    assert len(series.window(us, us)) == 0
    assert series.window(us, us).end_at is None
    with pytest.raises(ValueError, match="3 bars"):
        window.mean_close(4)
    with pytest.raises(ValueError, match="step 1"):
        _ = window[::2]
    # The last bar of a window, found with one bisection: none when the window is empty.
    day_us = day // US
    for start in range(us - 2 * day_us, us + 12 * day_us, day_us // 2):
        for end_by in range(start - day_us, us + 12 * day_us, day_us // 2):
            found = series.window(start, end_by)
            last = series.last_ended(start, end_by)
            assert (last is None) == (len(found) == 0)
            if last is not None:
                assert series.closes[last] == found.last_close
                assert series.end_at(last) == found.end_at


# -- bars built a block at a time ---------------------------------------------------------------


@functools.cache
def crypto_1d() -> BarSet:
    """The bundled daily crypto bar file, read once (reading it is most of an example's time)."""
    return read_bundled("crypto-1d")


@functools.cache
def btc_file_bars() -> tuple[Bar, ...]:
    return crypto_1d().bars("BTC/USDT")


@functools.cache
def btc_file_rows(lo: int, hi: int) -> tuple[Bar, ...]:
    """The file's `BTC/USDT` rows `lo .. hi - 1`, made once per range: every example's series asks
    for the same few blocks, and making a block's `Bar`s again gives equal ones."""
    return crypto_1d().rows("BTC/USDT", lo, hi)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_series_builds_only_the_blocks_asked_for(data: st.DataObject) -> None:
    every = btc_file_bars()
    barset = crypto_1d()
    built: list[tuple[int, int]] = []

    def make(lo: int, hi: int) -> tuple[Bar, ...]:
        built.append((lo, hi))  # each block the series asks for is counted, cached or not
        return btc_file_rows(lo, hi)

    series = BarSeries(barset.prices("BTC/USDT"), make)
    for _ in range(data.draw(st.integers(1, 3))):
        hi = data.draw(st.integers(0, len(every)), label="hi")
        lo = data.draw(st.integers(max(0, hi - 3 * BLOCK_BARS), hi), label="lo")
        assert series.slice(lo, hi) == every[lo:hi]
        spanned = 0 if hi <= lo else (hi - 1) // BLOCK_BARS - lo // BLOCK_BARS + 1
        if spanned <= BLOCKS_KEPT:  # the blocks of the window asked last are kept: none rebuilt
            before = len(built)
            assert BarWindow(series, lo, hi).bars == every[lo:hi]
            assert len(built) == before
        assert len(series._blocks) <= BLOCKS_KEPT  # memory follows the windows, not the file
    assert all(hi - lo <= BLOCK_BARS and lo % BLOCK_BARS == 0 for lo, hi in built)
    assert series.bars == every
    assert series.slice(5, 9) == every[5:9]


def test_a_bar_file_gives_a_symbols_rows_by_position() -> None:
    barset = read_bundled("crypto-1d")
    every = btc_file_bars()
    assert barset.rows("BTC/USDT", 0, 3) == every[:3]
    assert barset.rows("BTC/USDT", len(every) - 2, len(every) + 5) == every[-2:]
    assert barset.rows("BTC/USDT", 4, 4) == ()
    assert barset.rows("NOPE/USDT", 0, 3) == ()


def _same_decimals(got: Sequence[Decimal], expected: Sequence[Decimal]) -> bool:
    # The same digits and exponents, not only equal values: `Decimal("1.50") == Decimal("1.5")`.
    return [value.as_tuple() for value in got] == [value.as_tuple() for value in expected]


@pytest.mark.parametrize("name", ["crypto-1d", "us-1h", "cn-1d"])
def test_a_decimal_column_makes_the_decimals_pyarrow_makes(name: str) -> None:
    barset = read_bundled(name)
    for symbol in barset.symbols[:4]:
        prices = barset.prices(symbol)
        for column in (prices.opens, prices.closes):
            expected = column._column.to_pylist()
            assert _same_decimals([column[index] for index in range(len(column))], expected)
            assert _same_decimals(column[3:-2], expected[3:-2])


@settings(max_examples=80, deadline=None)
@given(
    scale=st.integers(0, 12),
    values=st.lists(st.integers(-(10**22), 10**22), min_size=1, max_size=3 * COLUMN_BLOCK),
    small=st.booleans(),
)
def test_a_decimal_column_reads_any_decimal128_as_pyarrow_does(
    scale: int, values: list[int], small: bool
) -> None:
    # Unscaled integers within an int64 are made `n * 1E-scale`; a column with one past it is
    # read through pyarrow; both give what `to_pylist` gives, block by block and by slices.
    unscaled = [value % 2**62 - 2**61 for value in values] if small else values
    kind = pa.decimal128(38, scale)
    array = pa.array([Decimal(value).scaleb(-scale) for value in unscaled], type=kind)
    column = DecimalColumn(pa.chunked_array([array[:1], array[1:]]))
    expected = array.to_pylist()
    assert _same_decimals([column[index] for index in range(len(column))], expected)
    assert _same_decimals([column[-1]], expected[-1:])
    assert _same_decimals(column[1 : len(column) : 2], expected[1::2])


def test_a_decimal_column_reads_what_its_bars_carry_by_position() -> None:
    barset = read_bundled("crypto-1d")
    every = btc_file_bars()
    closes = barset.prices("BTC/USDT").closes
    for index in (0, 1, COLUMN_BLOCK - 1, COLUMN_BLOCK, len(every) - 1, -1, -len(every)):
        assert closes[index] == every[index].close
        assert str(closes[index]) == str(every[index].close)  # the same digits, not just equal
    assert list(closes[0 : len(closes)]) == [bar.close for bar in every]
    with pytest.raises(IndexError):
        closes[len(every)]
    with pytest.raises(IndexError):
        closes[-len(every) - 1]
