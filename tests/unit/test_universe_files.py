"""Universe files grown from published member lists: the review schedule, the merge of each list
(point in time: nothing before the list that shows it), the refusals, and the TOML round trip."""

from __future__ import annotations

import tomllib
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Instrument
from openbell.markets.errors import ConfigError
from openbell.markets.universe_files import (
    merge_universe,
    next_review,
    render_universe,
    write_universe,
)
from openbell.markets.universes import Period, Universe, load_universe, parse_universe

XSHG = calendar_for("XSHG")


def listed(day: date, *symbols: str, name: str = "csi300") -> Universe:
    """A published member list of `day`, as the akshare adapter parses one."""
    return Universe(
        name=name,
        market="cn",
        as_of=day,
        instruments=tuple(
            Instrument(symbol=s, market="cn", currency="CNY", name=f"n{s[:6]}") for s in symbols
        ),
        source="csindex",
        benchmark="000300.SH",
    )


@pytest.mark.parametrize(
    ("day", "review"),
    [
        (date(2025, 11, 28), date(2025, 12, 15)),  # 2nd Friday 12-12, next session Monday
        (date(2025, 12, 12), date(2025, 12, 15)),
        (date(2025, 12, 15), date(2026, 6, 15)),  # 2nd Friday of June 2026 is 06-12
        (date(2025, 6, 13), date(2025, 6, 16)),
        (date(2025, 1, 2), date(2025, 6, 16)),
        (date(2026, 12, 20), date(2027, 6, 14)),  # past XSHG's known sessions: the Monday
    ],
)
def test_the_next_periodic_review(day: date, review: date) -> None:
    assert next_review(day, XSHG) == review


def test_the_first_list_vouches_for_its_members_until_the_next_review() -> None:
    first = merge_universe(None, listed(date(2025, 11, 28), "600519.SH", "000001.SZ"), XSHG)
    assert first.coverage is not None
    assert (first.coverage.from_date, first.coverage.until_date) == (
        date(2025, 11, 28),
        date(2025, 12, 15),
    )
    assert first.memberships == {}
    assert first.covers(date(2025, 11, 28), date(2025, 12, 12))
    assert not first.covers(date(2025, 11, 27), date(2025, 12, 12))
    assert not first.covers(date(2025, 11, 28), date(2025, 12, 15))


def test_a_later_list_dates_who_joined_and_who_left_on_its_own_day() -> None:
    first = merge_universe(
        None, listed(date(2025, 11, 28), "600519.SH", "000001.SZ", "601899.SH"), XSHG
    )
    second = listed(date(2025, 12, 16), "600519.SH", "000001.SZ", "600900.SH")
    merged = merge_universe(first, second, XSHG)
    assert merged.symbols == ("600519.SH", "000001.SZ", "601899.SH", "600900.SH")
    assert merged.as_of == date(2025, 12, 16)
    assert merged.memberships["601899.SH"] == Period(
        until_date=date(2025, 12, 16), source="first missing from the list published 2025-12-16"
    )
    assert merged.memberships["600900.SH"] == Period(
        from_date=date(2025, 12, 16), source="first on the list published 2025-12-16"
    )
    assert merged.coverage is not None
    assert (merged.coverage.from_date, merged.coverage.until_date) == (
        date(2025, 11, 28),
        date(2026, 6, 15),
    )
    # point in time: the day before the second list is the first list's, never the second's
    assert merged.members_on(date(2025, 12, 15)) == ("600519.SH", "000001.SZ", "601899.SH")
    assert merged.members_on(date(2025, 12, 16)) == ("600519.SH", "000001.SZ", "600900.SH")
    offered = merged.offered_on(date(2025, 12, 1), with_bars={"600519.SH", "600900.SH"})
    assert offered.symbols == ("600519.SH",)
    # and a third list: the leaver stays left, the joiner stays in
    third = merge_universe(merged, listed(date(2026, 1, 5), *second.symbols), XSHG)
    assert third.memberships == merged.memberships
    assert third.as_of == date(2026, 1, 5)


def test_the_same_list_again_changes_nothing() -> None:
    first = merge_universe(None, listed(date(2025, 11, 28), "600519.SH"), XSHG)
    assert merge_universe(first, listed(date(2025, 11, 28), "600519.SH"), XSHG) == first


@pytest.mark.parametrize(
    ("published", "refusal"),
    [
        (listed(date(2025, 12, 15), "600519.SH"), "older than the file's last list"),
        (listed(date(2025, 12, 16), "601318.SH"), "differs from the file's list of that same"),
        (listed(date(2026, 1, 5), "600519.SH", "601899.SH"), "601899.SH left universe csi300"),
        (listed(date(2026, 1, 5), "600519.SH", name="sse50"), "cannot be merged into universe"),
    ],
)
def test_lists_that_cannot_be_merged_are_refused(published: Universe, refusal: str) -> None:
    first = merge_universe(None, listed(date(2025, 11, 28), "600519.SH", "601899.SH"), XSHG)
    held = merge_universe(first, listed(date(2025, 12, 16), "600519.SH"), XSHG)
    with pytest.raises(ValueError, match=refusal):
        merge_universe(held, published, XSHG)


# Lists of a pool of six codes on increasing days: each list's day sees exactly that list.
POOL = ("600519.SH", "601318.SH", "600036.SH", "000001.SZ", "300750.SZ", "688981.SH")


@st.composite
def histories(draw: st.DrawFn) -> list[Universe]:
    """Member lists on increasing days where no member comes back once it left."""
    days = sorted(
        draw(
            st.sets(
                st.integers(min_value=0, max_value=500).map(
                    lambda n: date(2024, 1, 1) + timedelta(days=n)
                ),
                min_size=1,
                max_size=6,
            )
        )
    )
    gone: set[str] = set()
    current: set[str] = set()
    out: list[Universe] = []
    for day in days:
        members = draw(st.sets(st.sampled_from([s for s in POOL if s not in gone]), min_size=1))
        gone |= current - members
        current = members
        out.append(listed(day, *sorted(members)))
    return out


@settings(max_examples=60, deadline=None)
@given(histories(), st.integers(min_value=0, max_value=600))
def test_every_day_sees_the_last_list_published_by_then(lists: list[Universe], offset: int) -> None:
    held: Universe | None = None
    for published in lists:
        held = merge_universe(held, published, XSHG)
    assert held is not None
    for published in lists:
        assert set(held.members_on(published.as_of)) == set(published.symbols)
    day = lists[0].as_of + timedelta(days=offset)
    if held.coverage is not None and held.coverage.contains(day):
        last = [published for published in lists if published.as_of <= day][-1]
        assert set(held.members_on(day)) == set(last.symbols)
    # the file says the same after a round trip through its text
    assert parse_universe(tomllib.loads(render_universe(held))) == held


def test_the_text_round_trips_names_flags_and_weights() -> None:
    odd = Instrument(
        symbol="600000.SH", market="cn", currency="CNY", name='A"B\\C\tD\x7f', is_st=True
    )
    universe = Universe(
        name="odd",
        market="cn",
        as_of=date(2025, 11, 28),
        instruments=(odd,),
        source='csindex "sheet"',
        weights_pct={"600000.SH": Decimal("1.250")},
        coverage=Period(from_date=date(2025, 11, 28), source="because"),
        memberships={
            "600000.SH": Period(
                from_date=date(2025, 11, 28), until_date=date(2026, 1, 5), source="s"
            )
        },
    )
    text = render_universe(universe, comment="line one\nline two")
    assert text.startswith("# line one\n# line two\n")
    assert parse_universe(tomllib.loads(text)) == universe


def test_a_universe_file_loads_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "lists" / "csi300.toml"
    merged = merge_universe(None, listed(date(2025, 11, 28), "600519.SH"), XSHG)
    write_universe(path, merged, comment="made by a test")
    assert load_universe(str(path)) == merged
    assert [p.name for p in path.parent.iterdir()] == ["csi300.toml"]  # no temporary left
    with pytest.raises(ConfigError, match="cannot be read"):
        load_universe(str(tmp_path / "missing.toml"))
    (tmp_path / "bad.toml").write_text('name = "x"\n')
    with pytest.raises(ConfigError, match=r"is invalid: .*missing keys"):
        load_universe(str(tmp_path / "bad.toml"))
