"""The coverage of a universe's members by a replay's data: who has bars in the window, said in one
sentence (issue 15, item 6)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from openbell.daemon.plan import MarketPlan
from openbell.markets.domain import Instrument, utc
from openbell.markets.member_coverage import member_coverage
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Period, Universe
from openbell.ops.replay_checks import partial_coverage
from openbell_testkit.bars import flat_bar

DAY = timedelta(days=1)


def source() -> ReplaySource:
    def bars(symbol: str, first: int, last: int) -> list:  # type: ignore[type-arg]
        return [
            flat_bar(symbol, utc(2025, 7, day), DAY, Decimal(10), Decimal(1))
            for day in range(first, last + 1)
        ]

    return ReplaySource(
        market="crypto", bars={"1d": [*bars("AAA", 1, 10), *bars("BBB", 8, 10)], "1h": []}
    )


def test_members_without_a_bar_in_the_window_are_named() -> None:
    found = member_coverage(
        source(),
        universe="three",
        members=["AAA", "BBB", "CCC"],
        interval="1d",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 5),
    )
    assert (found.covered, found.missing, found.complete) == (1, ("BBB", "CCC"), False)
    assert found.describe() == (
        "markets.crypto: universe three has data for 1 of its 3 members (33.3%) in this "
        "replay's window; no data for BBB, CCC"
    )


def test_a_member_with_bars_only_of_another_interval_is_not_covered() -> None:
    found = member_coverage(
        source(),
        universe="two",
        members=["AAA", "BBB"],
        interval="1h",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 11),
    )
    assert found.missing == ("AAA", "BBB")


def test_every_member_with_bars_is_complete() -> None:
    found = member_coverage(
        source(),
        universe="two",
        members=["AAA", "BBB", "AAA"],
        interval="1d",
        start_at=utc(2025, 7, 8),
        end_at=utc(2025, 7, 9),
    )
    assert (found.complete, found.members) == (True, ("AAA", "BBB"))
    assert found.describe().endswith(
        "has data for 2 of its 2 members (100.0%) in this replay's window"
    )


def test_a_long_list_of_missing_members_is_cut_after_ten() -> None:
    members = [f"S{n:02d}" for n in range(14)]
    found = member_coverage(
        source(),
        universe="many",
        members=members,
        interval="1d",
        start_at=utc(2025, 7, 1),
        end_at=utc(2025, 7, 2),
    )
    assert found.describe().endswith(
        "no data for S00, S01, S02, S03, S04, S05, S06, S07, S08, S09 and 4 more"
    )


def test_a_dated_member_outside_the_window_is_not_asked_for() -> None:
    instruments = tuple(
        Instrument(symbol=symbol, market="crypto", currency="USDT") for symbol in ("AAA", "BBB")
    )
    universe = Universe(
        name="dated",
        market="crypto",
        as_of=date(2025, 7, 1),
        instruments=instruments,
        memberships={"BBB": Period(from_date=date(2025, 7, 6))},  # its bars start on the 8th
    )
    plan = MarketPlan(
        market="crypto",
        source=source(),
        universe=universe,
        cadence="daily",
        initial_cash=Decimal(1000),
        agents=(),
    )
    assert partial_coverage(plan, utc(2025, 7, 1), utc(2025, 7, 5)) is None
    said = partial_coverage(plan, utc(2025, 7, 1), utc(2025, 7, 8))
    assert said is not None
    assert "1 of its 2 members" in said
