"""The research tools on a real toolbox over replay data: news are point-in-time (never published
after `now`, newest first, capped, filtered by symbol and query), fundamentals are refused where
the data is not point-in-time and otherwise only reports published by `now` are served, and
`calculate` answers exactly or with a structured error; every answer carries `as_of`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest

from openbell.agents.tools import CalculationOut, ErrorCode, FundamentalsOut, NewsOut, ToolError
from openbell.markets.domain import NewsItem
from openbell.markets.fundamentals import (
    Fundamentals,
    FundamentalsReport,
    LiveFundamentals,
    RecordedFundamentals,
)
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, Arena, make_arena

D = Decimal
HOUR = timedelta(hours=1)


pytestmark = pytest.mark.sqlite_only


def news_items(seed: int = 7, n: int = 120) -> list[NewsItem]:
    """Items about AAPL, MSFT or the market, published up to 4 days either side of US_OPEN."""
    rng = random.Random(seed)
    return [
        NewsItem(
            symbol=rng.choice(["AAPL", "MSFT", None]),
            published_at=US_OPEN + timedelta(minutes=rng.randint(-96 * 60, 96 * 60)),
            title=f"item {i} {'earnings' if i % 3 == 0 else 'update'}",
            source="test",
        )
        for i in range(n)
    ] + [NewsItem(symbol="AAPL", published_at=US_OPEN, title="at the bell", source="test")]


@functools.cache
def source_with_news() -> ReplaySource:
    return ReplaySource.from_bundled("us", names=["us-1d"], news=news_items())


def news_arena(ledger: Ledger) -> Arena:
    arena = make_arena(ledger, "us")
    source = source_with_news()
    return dataclasses.replace(arena, source=source, gateway=PointInTimeGateway(source))


@pytest.mark.parametrize("hours_later", [0, 1, 5, 30, 70])
def test_news_are_never_published_after_now(ledger: Ledger, hours_later: int) -> None:
    arena = news_arena(ledger)
    now = US_OPEN + hours_later * HOUR
    every = news_items()

    async def scenario() -> list[object]:
        tools = await arena.toolbox(now)
        return [
            await tools.get_news(lookback_hours=96, limit=50),
            await tools.get_news("AAPL", lookback_hours=96, limit=50),
            await tools.get_news(query="EARNINGS", lookback_hours=720, limit=50),
            await tools.get_news("MSFT", lookback_hours=6, limit=3),
        ]

    for found in asyncio.run(scenario()):
        assert isinstance(found, NewsOut), found
        assert found.as_of == now
        stamps = [item.published_at for item in found.items]
        assert all(stamp <= now for stamp in stamps)
        assert stamps == sorted(stamps, reverse=True)
    market, apple, earnings, msft = asyncio.run(scenario())
    assert isinstance(market, NewsOut)
    assert isinstance(apple, NewsOut)
    assert isinstance(earnings, NewsOut)
    assert isinstance(msft, NewsOut)
    expected = sorted(
        (i for i in every if now - 96 * HOUR <= i.published_at <= now),
        key=lambda i: i.published_at,
        reverse=True,
    )[:50]
    assert [i.title for i in market.items] == [i.title for i in expected]
    assert {i.symbol for i in apple.items} <= {"AAPL"}
    assert all("earnings" in i.title for i in earnings.items)
    assert len(msft.items) <= 3
    assert all(now - 6 * HOUR <= i.published_at for i in msft.items)


def test_news_of_an_unknown_symbol_and_bad_arguments_are_structured_errors(
    ledger: Ledger,
) -> None:
    arena = news_arena(ledger)

    async def scenario() -> list[object]:
        tools = await arena.toolbox(US_OPEN)
        return [
            await tools.call("get_news", {"symbol": "IBM"}),
            await tools.call("get_news", {"lookback_hours": 0}),
            await tools.call("get_news", {"limit": 10_000}),
            await tools.call("get_news", {"when": "tomorrow"}),
        ]

    unknown, *invalid = asyncio.run(scenario())
    assert isinstance(unknown, ToolError)
    assert unknown.code is ErrorCode.UNKNOWN_SYMBOL
    for error in invalid:
        assert isinstance(error, ToolError)
        assert error.code is ErrorCode.INVALID_ARGUMENTS
        assert error.hint


def test_fundamentals_are_refused_in_a_replay_without_point_in_time_data(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> object:
        return await (await arena.toolbox(US_OPEN)).get_fundamentals("AAPL")

    refused = asyncio.run(scenario())
    assert isinstance(refused, ToolError)
    assert refused.code is ErrorCode.NOT_POINT_IN_TIME
    assert refused.as_of == US_OPEN
    assert refused.hint


def report(published_at: datetime, period_end: date, eps: str) -> FundamentalsReport:
    return FundamentalsReport(
        symbol="AAPL",
        period_end=period_end,
        published_at=published_at,
        currency="USD",
        values={"eps": D(eps), "revenue": D("94930000000")},
    )


def test_fundamentals_serve_only_reports_published_by_now(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    reports = [
        report(US_OPEN - timedelta(days=60), date(2025, 6, 28), "1.57"),
        report(US_OPEN - timedelta(days=150), date(2025, 3, 29), "1.65"),
        report(US_OPEN, date(2025, 9, 27), "1.85"),  # published at the bell: known
        report(US_OPEN + timedelta(days=30), date(2025, 12, 27), "2.84"),  # the future
    ]

    async def scenario(point_in_time: bool) -> list[object]:
        source = RecordedFundamentals.of(reports, point_in_time=point_in_time)
        tools = await arena.toolbox(US_OPEN, fundamentals=source)
        return [await tools.get_fundamentals("AAPL"), await tools.get_fundamentals("IBM")]

    found, unknown = asyncio.run(scenario(True))
    assert isinstance(found, FundamentalsOut)
    assert found.as_of == US_OPEN
    assert [r.values["eps"] for r in found.reports] == [D("1.85"), D("1.57"), D("1.65")]
    assert isinstance(unknown, ToolError)
    assert unknown.code is ErrorCode.UNKNOWN_SYMBOL
    restated, _ = asyncio.run(scenario(False))
    assert isinstance(restated, ToolError)
    assert restated.code is ErrorCode.NOT_POINT_IN_TIME


def snapshot(fetched_at: datetime, **figures: Decimal) -> Fundamentals:
    return Fundamentals(symbol="AAPL", fetched_at=fetched_at, source="vendor", **figures)  # type: ignore[arg-type]


def test_live_snapshots_are_served_as_reports_published_at_their_fetch_time(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us")
    asked: list[datetime] = []
    fetched = {"at": US_OPEN}

    async def fetch(symbol: str, at: datetime) -> Fundamentals:
        asked.append(at)
        return snapshot(fetched["at"], trailing_pe=D("32.7"), market_cap=D("3136659996672"))

    live = LiveFundamentals(fetch, name="vendor", currency="USD")

    async def scenario() -> object:
        tools = await arena.toolbox(US_OPEN, fundamentals=live)
        return await tools.get_fundamentals("AAPL")

    found = asyncio.run(scenario())
    assert isinstance(found, FundamentalsOut)
    assert asked == [US_OPEN]  # the snapshot is asked for as of the decision time
    [shown] = found.reports
    assert (shown.published_at, shown.period_end, shown.currency) == (
        US_OPEN,
        US_OPEN.date(),
        "USD",
    )
    assert shown.values == {"trailing_pe": D("32.7"), "market_cap": D("3136659996672")}
    # A vendor stamping its snapshot after the decision time is never served.
    fetched["at"] = US_OPEN + timedelta(seconds=1)
    late = asyncio.run(scenario())
    assert isinstance(late, FundamentalsOut)
    assert late.reports == []


def test_a_live_snapshot_without_figures_is_no_report() -> None:
    async def fetch(symbol: str, at: datetime) -> Fundamentals:
        return snapshot(at)

    live = LiveFundamentals(fetch, name="vendor", currency="USD")
    window = (US_OPEN - timedelta(days=1), US_OPEN + timedelta(microseconds=1))
    assert asyncio.run(live.reports("AAPL", *window, 4)) == ()
    assert asyncio.run(live.reports("AAPL", *window, 0)) == ()


def test_calculate_through_the_toolbox(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def scenario() -> list[object]:
        tools = await arena.toolbox(US_OPEN)
        return [
            await tools.calculate("10000 * 0.1 / 3"),
            await tools.calculate("__import__('os').system('true')"),
            await tools.calculate("1 / 0"),
            await tools.call("calculate", {"expression": "1" * 501}),
        ]

    value, attack, zero, long = asyncio.run(scenario())
    assert isinstance(value, CalculationOut)
    assert value.value == D("333.3333333333333333333333333")
    assert value.as_of == US_OPEN
    for error, code in (
        (attack, ErrorCode.INVALID_EXPRESSION),
        (zero, ErrorCode.ARITHMETIC_ERROR),
        (long, ErrorCode.INVALID_ARGUMENTS),
    ):
        assert isinstance(error, ToolError)
        assert error.code is code
        assert error.hint
        assert error.as_of == US_OPEN
