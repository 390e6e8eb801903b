"""Reads across a long suspension: the last close before a slot's session is found however long
the symbol has not traded, by the prepared road (replay), the range-and-filter road and a source
that cannot say when its data starts (a live vendor), and never anything after the slot."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TypeVar
from zoneinfo import ZoneInfo

import pytest

from openbell.markets.domain import Bar
from openbell.markets.gateway import MAX_GAP_DAYS, PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import ForwardingSource, MarketDataSource

T = TypeVar("T")
SHANGHAI = ZoneInfo("Asia/Shanghai")
SUSPENDED = "600000.SH"
TRADING = "600519.SH"
LAST_BEFORE = date(2025, 6, 30)  # the suspended stock's last session before its suspension
BACK = date(2025, 8, 18)  # its first session back, seven weeks later


def run(awaitable: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await awaitable

    return asyncio.run(wrapped())


def local(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


def weekdays(first: date, last: date) -> list[date]:
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    return [day for day in days if day.weekday() < 5]


def daily(symbol: str, days: Sequence[date], first_close: Decimal) -> list[Bar]:
    bars = []
    for n, day in enumerate(days):
        close = first_close + Decimal(n) / 100
        bars.append(
            Bar(
                symbol=symbol,
                start_at=local(day, 9, 30),
                end_at=local(day, 15),
                open=close,
                high=close,
                low=close,
                close=close,
                volume=Decimal(1000),
            )
        )
    return bars


def source() -> ReplaySource:
    suspended = [
        *weekdays(date(2025, 6, 2), LAST_BEFORE),
        *weekdays(BACK, date(2025, 8, 22)),
    ]
    bars = [
        *daily(SUSPENDED, suspended, Decimal("10.00")),
        *daily(TRADING, weekdays(date(2025, 6, 2), date(2025, 8, 22)), Decimal("1500.00")),
    ]
    return ReplaySource(market="cn", bars={"1d": bars})


class WithHistory(ForwardingSource):
    """Read through the port only (no prepared windows), but knowing each symbol's history."""

    def __init__(self, replay: ReplaySource) -> None:
        super().__init__(replay)
        self._replay = replay

    def first_bar_ends(self, symbols: Sequence[str]) -> Mapping[str, datetime]:
        return self._replay.first_bar_ends(symbols)


def roads(replay: ReplaySource) -> dict[str, MarketDataSource]:
    return {"prepared": replay, "ranges": WithHistory(replay), "vendor": ForwardingSource(replay)}


@pytest.mark.parametrize("road", ["prepared", "ranges", "vendor"])
def test_the_previous_close_is_the_last_one_before_a_long_suspension(road: str) -> None:
    replay = source()
    gateway = PointInTimeGateway(roads(replay)[road])
    slot = local(BACK, 9, 30)
    before = next(
        b
        for b in replay.bars_between([SUSPENDED], "1d", local(LAST_BEFORE, 9), slot)[SUSPENDED]
        if b.start_at.astimezone(SHANGHAI).date() == LAST_BEFORE
    )
    assert (slot - before.end_at).days > 40  # well past the window a single close is read from

    snapshot = run(gateway.snapshot([SUSPENDED, TRADING], slot))
    assert snapshot.previous_closes[SUSPENDED] == before.close
    assert SUSPENDED in snapshot.with_bars  # offered on its first session back, as in replay
    closes = run(gateway.last_closes([SUSPENDED], "1d", slot))
    assert (closes[SUSPENDED].price, closes[SUSPENDED].at) == (before.close, before.end_at)
    assert run(gateway.latest_closes([SUSPENDED], slot))[SUSPENDED] == closes[SUSPENDED]
    assert run(gateway.daily_closes(SUSPENDED, 1, slot)).closes == (before.close,)
    assert run(gateway.bars(SUSPENDED, "1d", 3, slot)).bars[-1] == before

    # The session back has not ended at its open; once it has, its own close is the last.
    after = run(gateway.snapshot([SUSPENDED], local(BACK + timedelta(days=1), 9, 30)))
    back_bar = replay.bars_between([SUSPENDED], "1d", slot, slot + timedelta(hours=1))[SUSPENDED]
    assert after.previous_closes[SUSPENDED] == back_bar[0].close


@pytest.mark.parametrize("road", ["prepared", "ranges", "vendor"])
def test_nothing_is_found_past_the_longest_gap_nor_after_the_slot(road: str) -> None:
    replay = source()
    gateway = PointInTimeGateway(roads(replay)[road])
    far = local(date(2025, 8, 22), 15) + timedelta(days=MAX_GAP_DAYS + 30)
    assert run(gateway.last_closes([SUSPENDED], "1d", far)) == {}
    assert run(gateway.snapshot([SUSPENDED], far)).previous_closes.get(SUSPENDED) is None
    # Before the stock's first bar ended there is nothing at all.
    first_open = local(date(2025, 6, 2), 9, 30)
    assert run(gateway.snapshot([SUSPENDED], first_open)).previous_closes == {}
