"""StockBench's fundamentals rebuilt point in time (`derived_fundamentals`), worked by hand, and
the download folder's ranges (`download_folder.missing`, `merged`)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal as D

from openbell.markets.corporate_actions import ActionKind, CorporateAction
from openbell.markets.domain import Bar
from openbell.markets.importers.derived_fundamentals import daily_reports
from openbell.markets.importers.download_folder import merged, missing

FIRST = date(2024, 1, 2)


def opened(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 14, 30, tzinfo=UTC)


def bar(day: date, low: str, high: str, close: str) -> Bar:
    return Bar(
        symbol="X",
        start_at=opened(day),
        end_at=opened(day) + timedelta(hours=6, minutes=30),
        open=D(close),
        high=D(high),
        low=D(low),
        close=D(close),
        volume=D(1),
    )


def dividend(day: date, cash: str) -> CorporateAction:
    return CorporateAction(
        symbol="X",
        kind=ActionKind.CASH_DIVIDEND,
        ex_date=day,
        ex_at=opened(day),
        currency="USD",
        source="test",
        cash=D(cash),
    )


BARS = [
    bar(date(2024, 1, 2), "9", "11", "10"),  # a year and more before the window
    bar(date(2024, 6, 3), "14", "30", "20"),  # the year's high
    bar(date(2025, 1, 2), "5", "21", "20"),  # the year's low
    bar(date(2025, 3, 3), "19", "25", "24"),
    bar(date(2025, 3, 4), "23", "26", "25"),
]
ACTIONS = [
    dividend(date(2024, 3, 1), "0.30"),  # more than a year before 2025-03-04
    dividend(date(2024, 6, 3), "0.25"),
    dividend(date(2024, 9, 3), "0.25"),
    dividend(date(2025, 3, 4), "0.26"),  # goes ex on the second session of the window
]
SHARES = [(date(2024, 12, 31), D(1000)), (date(2025, 3, 4), D(990))]


def test_each_session_is_reported_at_its_open_from_facts_dated_before_it() -> None:
    sessions = [
        (date(2025, 3, 3), opened(date(2025, 3, 3))),
        (date(2025, 3, 4), opened(date(2025, 3, 4))),
    ]
    first, second = daily_reports(
        "X", BARS, ACTIONS, SHARES, sessions=sessions, currency="USD", source="yfinance"
    )
    assert (first.period_end, first.published_at) == (date(2025, 3, 3), opened(date(2025, 3, 3)))
    assert first.source == "yfinance-derived"
    # 2025-03-03: the last close before its open is 2025-01-02's, 20; the year back from the open
    # holds the 2024-06-03 and 2025-01-02 bars (not 2024-01-02's)
    assert dict(first.values) == {
        "fifty_two_week_high": D(30),
        "fifty_two_week_low": D(5),
        "last_dividend": D("0.25"),
        "dividend_yield": ((D("0.25") + D("0.25")) / 20).quantize(D("0.000001")),
        "market_cap": D(1000 * 20),
    }
    # 2025-03-04: its own dividend is ex today; 2024-03-01's is more than a year back; the count
    # dated today is not yet known; the last close is 2025-03-03's, 24
    assert dict(second.values) == {
        "fifty_two_week_high": D(30),
        "fifty_two_week_low": D(5),
        "last_dividend": D("0.26"),
        "dividend_yield": ((D("0.25") + D("0.25") + D("0.26")) / 24).quantize(D("0.000001")),
        "market_cap": D(1000 * 24),
    }


def test_without_a_year_of_bars_there_is_no_52_week_range_and_no_report_without_a_close() -> None:
    recent = BARS[2:]
    day = date(2025, 3, 4)
    (report,) = daily_reports(
        "X", recent, [], SHARES, sessions=[(day, opened(day))], currency="USD", source="v"
    )
    assert dict(report.values) == {"market_cap": D(1000 * 24)}
    assert (
        daily_reports(
            "X", [], ACTIONS, SHARES, sessions=[(day, opened(day))], currency="USD", source="v"
        )
        == []
    )


def test_a_session_with_no_figure_has_no_report() -> None:
    day = date(2025, 3, 4)
    found = daily_reports(
        "X", BARS[2:], [], [], sessions=[(day, opened(day))], currency="USD", source="v"
    )
    assert found == []


def test_missing_ranges_and_merging() -> None:
    d = date
    assert missing([], d(2025, 3, 1), d(2025, 3, 31)) == [(d(2025, 3, 1), d(2025, 3, 31))]
    covered = [(d(2025, 3, 10), d(2025, 3, 12)), (d(2025, 3, 1), d(2025, 3, 5))]
    assert missing(covered, d(2025, 3, 1), d(2025, 3, 31)) == [
        (d(2025, 3, 6), d(2025, 3, 9)),
        (d(2025, 3, 13), d(2025, 3, 31)),
    ]
    assert missing(covered, d(2025, 3, 2), d(2025, 3, 4)) == []
    assert merged([*covered, (d(2025, 3, 6), d(2025, 3, 9))]) == [(d(2025, 3, 1), d(2025, 3, 12))]
    assert merged([(d(2025, 1, 1), d(2025, 1, 2)), (d(2025, 1, 5), d(2025, 1, 6))]) == [
        (d(2025, 1, 1), d(2025, 1, 2)),
        (d(2025, 1, 5), d(2025, 1, 6)),
    ]
