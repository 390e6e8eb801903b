"""Synthetic bars for the scale benchmarks: a seeded random walk written as canonical bar files.

`write_walk` writes two bar files (`barfile.write_bars`, the format a `replay:PATH` source reads)
into a folder: hourly bars at the market's live hourly slots over `[hourly_from, end)` (US 09:30
to 15:30 New York, the last one half an hour long; crypto every hour), and daily bars over the
sessions from `daily_from` (earlier, so that the SMA(200) baseline has its history from the first
slot). Each symbol's price walks hour by hour with a fixed seed (numpy's PCG64), so the same
arguments always give the same bytes; a daily bar is its session's hourly bars aggregated (open of
the first, close of the last, the highest high, the lowest low, the summed volume), and the walk
runs over the daily-only sessions too, so the two intervals agree. Prices are Decimals of two
places, volumes whole numbers. Nothing here is written into the repository: callers pass a
temporary folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from openbell.markets.barfile import BarFileMeta, write_bars
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar
from openbell.markets.rules import rules_for

HOUR = timedelta(hours=1)
#: Hourly volatility of the walk's log price, and its drift per hour (a gentle up-trend, so the
#: crossover rule trades both ways over a year).
HOURLY_SIGMA = 0.006
HOURLY_DRIFT = 0.00002


def session_hours(market: str, first: date, last: date) -> list[tuple[date, list[datetime]]]:
    """Each session of `market` from `first` through `last`, with the starts of its hourly bars
    (the live hourly slots: the open, then every hour while the session is open)."""
    calendar = calendar_for(rules_for(market).calendar_id)
    out = []
    for day in calendar.sessions_between(first, last):
        session = calendar.session(day)
        if session.break_start_at is not None:
            raise ValueError(f"{market} has lunch breaks; the synthetic walk does not model them")
        starts = []
        at = session.open_at
        while at < session.close_at:
            starts.append(at)
            at += HOUR
        out.append((day, starts))
    return out


def _bar(symbol: str, start_at: datetime, end_at: datetime, prices: Sequence[float]) -> Bar:
    open_, high, low, close, volume = prices
    cents = [Decimal(round(value * 100)).scaleb(-2) for value in (open_, high, low, close)]
    return Bar(
        symbol=symbol,
        start_at=start_at,
        end_at=end_at,
        open=cents[0],
        high=max(cents),
        low=min(cents),
        close=cents[3],
        volume=Decimal(int(volume)),
    )


def write_walk(
    folder: Path,
    *,
    market: str,
    symbols: Sequence[str],
    daily_from: date,
    hourly_from: date,
    end: date,
    seed: int = 20240101,
) -> tuple[Path, Path]:
    """Write `<market>-1h.parquet` and `<market>-1d.parquet` into `folder`; their paths.

    Daily bars cover the sessions `daily_from` through `end`, hourly bars those from `hourly_from`
    (inclusive dates, as the calendar of `market` has them).
    """
    sessions = session_hours(market, daily_from, end)
    calendar = calendar_for(rules_for(market).calendar_id)
    closes = {day: calendar.session_close(day) for day, _ in sessions}
    hours = sum(len(starts) for _, starts in sessions)
    rng = np.random.Generator(np.random.PCG64(seed))
    # One row per symbol: the log price after each hour, from a start between 20 and 400.
    start_prices = np.exp(rng.uniform(math.log(20), math.log(400), size=len(symbols)))
    steps = rng.normal(HOURLY_DRIFT, HOURLY_SIGMA, size=(len(symbols), hours))
    paths = start_prices[:, None] * np.exp(np.cumsum(steps, axis=1))
    wicks = np.abs(rng.normal(0, HOURLY_SIGMA / 2, size=(len(symbols), hours, 2)))
    volumes = rng.integers(10_000, 1_000_000, size=(len(symbols), hours))
    hourly: list[Bar] = []
    daily: list[Bar] = []
    for row, symbol in enumerate(symbols):
        column = 0
        previous = float(start_prices[row])
        for day, starts in sessions:
            session_bars = []
            for start_at in starts:
                close = float(paths[row, column])
                high = max(previous, close) * (1 + wicks[row, column, 0])
                low = min(previous, close) * (1 - wicks[row, column, 1])
                end_at = min(start_at + HOUR, closes[day])
                prices = (previous, high, low, close, volumes[row, column])
                session_bars.append(_bar(symbol, start_at, end_at, prices))
                previous = close
                column += 1
            daily.append(
                Bar(
                    symbol=symbol,
                    start_at=session_bars[0].start_at,
                    end_at=session_bars[-1].end_at,
                    open=session_bars[0].open,
                    high=max(bar.high for bar in session_bars),
                    low=min(bar.low for bar in session_bars),
                    close=session_bars[-1].close,
                    volume=sum((bar.volume for bar in session_bars), Decimal(0)),
                )
            )
            if day >= hourly_from:
                hourly.extend(session_bars)
    zone = calendar.timezone
    paths_out = []
    for interval, bars in (("1h", hourly), ("1d", daily)):
        meta = BarFileMeta(
            market=market,
            interval=interval,
            timezone=zone,
            label="start",
            adjustment="raw",
            source="synthetic random walk (benchmarks/synthetic_bars.py)",
            provenance=f"seed {seed}, {len(symbols)} symbols, {daily_from}..{end}",
        )
        path = folder / f"{market}-{interval}.parquet"
        write_bars(path, bars, meta)
        paths_out.append(path)
    return paths_out[0], paths_out[1]


def first_slot(market: str, day: date) -> datetime:
    """The first hourly slot of the session on or after `day` (UTC)."""
    calendar = calendar_for(rules_for(market).calendar_id)
    [session_day] = calendar.sessions_between(day, day + timedelta(days=10))[:1]
    return calendar.session_open(session_day).astimezone(UTC)


def midnight(day: date) -> datetime:
    """`day` at 00:00 UTC."""
    return datetime.combine(day, time(0), tzinfo=UTC)
