"""The coverage of a universe's members by a replay's data: who has bars across the window, who
only for part of it (bars starting more than `SLACK_SESSIONS` sessions late or stopping as early),
who none, and the benchmark's, said in one line and one sentence (issue 15, item 6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest

from openbell.daemon.plan import MarketPlan
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Instrument, utc
from openbell.markets.member_coverage import SLACK_SESSIONS, MemberCoverage, member_coverage
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Period, Universe
from openbell.ops.wiring.replay_checks import partial_coverage
from openbell_testkit.bars import flat_bar

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
CRYPTO = calendar_for("24/7")
XNYS = calendar_for("XNYS")
#: The window of the rule's edge tests: ten crypto sessions, 2025-07-01..10.
JULY_1, JULY_11 = utc(2025, 7, 1), utc(2025, 7, 11)


def daily(symbol: str, first: int, last: int, month: int = 7) -> list[Bar]:
    """Crypto daily bars of `symbol` on 2025-MM-first..last (inclusive)."""
    return [
        flat_bar(symbol, utc(2025, month, day), DAY, Decimal(10), Decimal(1))
        for day in range(first, last + 1)
    ]


def source() -> ReplaySource:
    return ReplaySource(
        market="crypto", bars={"1d": [*daily("AAA", 1, 10), *daily("BBB", 8, 10)], "1h": []}
    )


def universe(
    *symbols: str,
    market: str = "crypto",
    benchmark: str | None = None,
    memberships: Mapping[str, Period] | None = None,
) -> Universe:
    currency = {"crypto": "USDT", "us": "USD"}[market]
    return Universe(
        name="test",
        market=market,
        as_of=date(2025, 7, 1),
        instruments=tuple(
            Instrument(symbol=symbol, market=market, currency=currency) for symbol in symbols
        ),
        benchmark=benchmark,
        memberships=memberships or {},
    )


def crypto_coverage(
    bars: Sequence[Bar],
    members: Sequence[str],
    start_at: datetime = JULY_1,
    end_at: datetime = JULY_11,
    **universe_args: object,
) -> MemberCoverage:
    return member_coverage(
        ReplaySource(market="crypto", bars={"1d": bars}),
        universe=universe(*members, **universe_args),  # type: ignore[arg-type]
        calendar=CRYPTO,
        interval="1d",
        start_at=start_at,
        end_at=end_at,
    )


def test_members_without_a_bar_in_the_window_are_named() -> None:
    found = member_coverage(
        source(),
        universe=universe("AAA", "BBB", "CCC"),
        calendar=CRYPTO,
        interval="1d",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 5),
    )
    assert (found.covered, found.missing, found.complete) == (1, ("BBB", "CCC"), False)
    assert found.describe() == (
        "markets.crypto: universe test has data for 1 of its 3 members (33.3%) in this "
        "replay's window (4 sessions, 2025-07-01..2025-07-04); no data for BBB, CCC"
    )
    assert found.summary_line() == (
        "coverage: markets.crypto test 1/3 members (2 without data), "
        "4 sessions 2025-07-01..2025-07-04"
    )


def test_a_member_with_bars_only_of_another_interval_is_not_covered() -> None:
    found = member_coverage(
        source(),
        universe=universe("AAA", "BBB"),
        calendar=CRYPTO,
        interval="1h",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 11),
    )
    assert found.missing == ("AAA", "BBB")


def test_every_member_with_bars_across_the_window_is_complete() -> None:
    found = member_coverage(
        source(),
        universe=universe("AAA", "BBB"),
        calendar=CRYPTO,
        interval="1d",
        start_at=utc(2025, 7, 8),
        end_at=utc(2025, 7, 10),
    )
    assert (found.complete, found.members, found.partial) == (True, ("AAA", "BBB"), ())
    assert found.describe().endswith(
        "has data for 2 of its 2 members (100.0%) in this replay's window "
        "(2 sessions, 2025-07-08..2025-07-09)"
    )
    assert found.summary_line() == (
        "coverage: markets.crypto test 2/2 members, 2 sessions 2025-07-08..2025-07-09"
    )


def test_a_long_list_of_missing_members_is_cut_after_ten() -> None:
    found = member_coverage(
        source(),
        universe=universe(*(f"S{n:02d}" for n in range(14))),
        calendar=CRYPTO,
        interval="1d",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 2),
    )
    assert found.describe().endswith(
        "no data for S00, S01, S02, S03, S04, S05, S06, S07, S08, S09 and 4 more"
    )


# The rule's edges: a window of ten sessions (2025-07-01..10), AAA with a bar in each; BBB's bars
# from `first` through `last`. Up to SLACK_SESSIONS (2) sessions may lack bars at each end.
@pytest.mark.parametrize(
    ("first", "last", "state"),
    [
        (1, 10, "covered"),
        (3, 10, "covered"),  # two sessions late
        (4, 10, "partial"),  # three sessions late
        (1, 8, "covered"),  # stops two sessions early
        (1, 7, "partial"),  # stops three sessions early
        (3, 8, "covered"),  # both slacks at once
        (5, 5, "partial"),  # a single bar in the window once counted as covered
        (10, 10, "partial"),
    ],
)
def test_bars_starting_late_or_stopping_early_by_more_than_the_slack_are_partial(
    first: int, last: int, state: str
) -> None:
    assert SLACK_SESSIONS == 2
    found = crypto_coverage([*daily("AAA", 1, 10), *daily("BBB", first, last)], ["AAA", "BBB"])
    (bbb,) = [symbol for symbol in found.symbols if symbol.symbol == "BBB"]
    assert (bbb.state, bbb.first_day, bbb.last_day) == (
        state,
        date(2025, 7, first),
        date(2025, 7, last),
    )
    assert found.complete is (state == "covered")
    assert found.covered == (2 if state == "covered" else 1)


def test_a_partial_member_is_named_with_its_first_and_last_bar() -> None:
    found = crypto_coverage(
        [*daily("AAA", 1, 10), *daily("BBB", 4, 10), *daily("CCC", 1, 6)],
        ["AAA", "BBB", "CCC", "DDD"],
    )
    assert found.missing == ("DDD",)
    assert [(p.symbol, p.span()) for p in found.partial] == [
        ("BBB", "bars 2025-07-04..2025-07-10"),
        ("CCC", "bars 2025-07-01..2025-07-06"),
    ]
    assert found.describe() == (
        "markets.crypto: universe test has data for 1 of its 4 members (25.0%) in this replay's "
        "window (10 sessions, 2025-07-01..2025-07-10); no data for DDD; partial data for BBB "
        "(bars 2025-07-04..2025-07-10), CCC (bars 2025-07-01..2025-07-06)"
    )
    assert found.summary_line() == (
        "coverage: markets.crypto test 1/4 members (2 partial, 1 without data), "
        "10 sessions 2025-07-01..2025-07-10"
    )


def test_a_member_starting_before_the_window_is_reported_from_the_windows_first_bar() -> None:
    found = crypto_coverage(
        [*daily("AAA", 1, 10), *daily("BBB", 1, 6, month=6), *daily("BBB", 1, 3)],
        ["AAA", "BBB"],
    )
    (bbb,) = found.partial
    assert bbb.span() == "bars 2025-07-01..2025-07-03"


def test_the_slack_counts_the_calendars_sessions_not_days() -> None:
    """XNYS, from Thursday 2025-07-10 through Friday 07-18 (seven sessions): a first bar on Monday
    07-14 misses two sessions (the weekend is none), one on Tuesday three."""

    def sessions(symbol: str, days: Sequence[int]) -> list[Bar]:
        return [
            flat_bar(symbol, utc(2025, 7, day, 13, 30), timedelta(hours=6, minutes=30), Decimal(1),
                     Decimal(1))
            for day in days
        ]  # fmt: skip

    bars = [
        *sessions("AAA", (10, 11, 14, 15, 16, 17, 18)),
        *sessions("BBB", (14, 15, 16, 17, 18)),
        *sessions("CCC", (15, 16, 17, 18)),
    ]
    found = member_coverage(
        ReplaySource(market="us", bars={"1d": bars}),
        universe=universe("AAA", "BBB", "CCC", market="us"),
        calendar=XNYS,
        interval="1d",
        start_at=utc(2025, 7, 10),
        end_at=utc(2025, 7, 19),
    )
    assert len(found.sessions) == 7
    assert [(s.symbol, s.state) for s in found.symbols] == [
        ("AAA", "covered"),
        ("BBB", "covered"),
        ("CCC", "partial"),
    ]


def test_sessions_in_which_no_symbol_has_a_bar_do_not_ring_and_count_against_nobody() -> None:
    """A window reaching past the whole dataset replays up to its last bar: nobody is late."""
    found = crypto_coverage(
        [*daily("AAA", 1, 10), *daily("BBB", 1, 10)], ["AAA", "BBB"], end_at=utc(2025, 7, 31)
    )
    assert found.complete
    assert (found.sessions[0], found.sessions[-1]) == (date(2025, 7, 1), date(2025, 7, 10))


def test_the_hourly_cadence_is_held_to_sessions_of_hourly_bars() -> None:
    """US hourly bars over Monday 2025-07-14 .. Friday 07-18: BBB's stop at noon on Wednesday
    (two sessions early: covered), CCC's after Tuesday (three: partial). QQQ, the benchmark, has
    only daily bars, which a replay prices it from: covered."""

    def hours(symbol: str, days: Sequence[int], until_hour: int = 20) -> list[Bar]:
        return [
            flat_bar(symbol, utc(2025, 7, day, hour, 30), HOUR, Decimal(1), Decimal(1))
            for day in days
            for hour in range(13, until_hour)
        ]

    week = (14, 15, 16, 17, 18)
    bars = {
        "1h": [
            *hours("AAA", week),
            *hours("BBB", (14, 15)),
            *hours("BBB", (16,), until_hour=16),
            *hours("CCC", (14, 15)),
        ],
        "1d": [
            flat_bar("QQQ", utc(2025, 7, day, 13, 30), timedelta(hours=6, minutes=30),
                     Decimal(1), Decimal(1))
            for day in week
        ],
    }  # fmt: skip
    found = member_coverage(
        ReplaySource(market="us", bars=bars),
        universe=universe("AAA", "BBB", "CCC", market="us", benchmark="QQQ"),
        calendar=XNYS,
        interval="1h",
        start_at=utc(2025, 7, 14),
        end_at=utc(2025, 7, 19),
    )
    assert [(s.symbol, s.state, s.last_day) for s in found.symbols] == [
        ("AAA", "covered", date(2025, 7, 18)),
        ("BBB", "covered", date(2025, 7, 16)),
        ("CCC", "partial", date(2025, 7, 15)),
    ]
    assert found.benchmark is not None
    assert found.benchmark.state == "covered"
    assert found.summary_line() == (
        "coverage: markets.us test 2/3 members (1 partial), benchmark QQQ covered, "
        "5 sessions 2025-07-14..2025-07-18"
    )


def test_a_dated_member_is_held_to_the_sessions_it_is_a_member_on() -> None:
    """BBB joins on 07-06 and CCC leaves after 07-05 (`until` is the first day out): bars from
    07-08 are two sessions late for BBB, from 07-09 three; CCC's stopping on 07-05 is not early."""
    dated = {
        "BBB": Period(from_date=date(2025, 7, 6)),
        "CCC": Period(until_date=date(2025, 7, 6)),
    }
    aaa = daily("AAA", 1, 10)
    on_time = crypto_coverage(
        [*aaa, *daily("BBB", 8, 10), *daily("CCC", 1, 5)],
        ["AAA", "BBB", "CCC"],
        memberships=dated,
    )
    assert on_time.complete
    late = crypto_coverage(
        [*aaa, *daily("BBB", 9, 10), *daily("CCC", 1, 2)],
        ["AAA", "BBB", "CCC"],
        memberships=dated,
    )
    assert [(p.symbol, p.span()) for p in late.partial] == [
        ("BBB", "bars 2025-07-09..2025-07-10"),
        ("CCC", "bars 2025-07-01..2025-07-02"),
    ]
    before = crypto_coverage(
        [*aaa, *daily("BBB", 1, 5)], ["AAA", "BBB"], memberships={"BBB": dated["BBB"]}
    )
    assert before.missing == ("BBB",)  # its bars are all from before it joined


def test_a_dated_member_outside_the_window_is_not_asked_for() -> None:
    plan = MarketPlan(
        market="crypto",
        source=source(),
        universe=universe("AAA", "BBB", memberships={"BBB": Period(from_date=date(2025, 7, 6))}),
        cadence="daily",
        initial_cash=Decimal(1000),
        agents=(),
    )
    assert partial_coverage(plan, utc(2025, 7, 1), utc(2025, 7, 5)) is None
    said = partial_coverage(plan, utc(2025, 7, 1), utc(2025, 7, 8))
    assert said is not None
    assert "1 of its 2 members" in said
    assert said.endswith("no data for BBB")  # its bars start on the 8th, after the window


@pytest.mark.parametrize(
    ("bars", "said", "state"),
    [
        (daily("IDX", 1, 6), "; partial data for its benchmark IDX (bars 2025-07-01..2025-07-06)",
         "partial"),
        ([], "; no data for its benchmark IDX", "without data"),
    ],
    ids=["stops-early", "none"],
)  # fmt: skip
def test_a_benchmark_without_bars_across_the_window_is_incomplete(
    bars: list[Bar], said: str, state: str
) -> None:
    found = crypto_coverage([*daily("AAA", 1, 10), *bars], ["AAA"], benchmark="IDX")
    assert not found.complete
    assert found.covered == 1
    assert found.describe().endswith(said)
    assert found.summary_line() == (
        f"coverage: markets.crypto test 1/1 members, benchmark IDX {state}, "
        "10 sessions 2025-07-01..2025-07-10"
    )


def test_a_benchmark_that_is_a_member_is_checked_as_one() -> None:
    found = crypto_coverage(daily("AAA", 1, 10), ["AAA"], benchmark="AAA")
    assert (found.benchmark, found.complete) == (None, True)
