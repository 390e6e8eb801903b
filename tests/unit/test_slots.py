"""Decision slots: default and explicit slot times per market, closed days, and replay slots."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from openbell.markets.barfile import read_bundled
from openbell.markets.domain import Bar, utc
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import (
    observed_slots_per_session,
    replay_slots,
    slots_between,
    slots_per_session,
)
from openbell_testkit.bars import flat_bar

DAY = timedelta(days=1)


def hm(*pairs: tuple[int, int]) -> list[tuple[int, int]]:
    return list(pairs)


def hours_minutes(slots: list[datetime]) -> list[tuple[int, int]]:
    return [(at.hour, at.minute) for at in slots]


@pytest.mark.parametrize(
    ("market", "cadence", "day", "slot_times", "expected_utc"),
    [
        pytest.param("us", "daily", utc(2025, 10, 1), None, hm((13, 30)), id="us-daily-summer"),
        pytest.param("us", "daily", utc(2025, 11, 10), None, hm((14, 30)), id="us-daily-winter"),
        pytest.param(
            "us",
            "hourly",
            utc(2025, 10, 1),
            None,
            hm((13, 30), (14, 30), (15, 30), (16, 30), (17, 30), (18, 30), (19, 30)),
            id="us-hourly-0930-to-1530-new-york",
        ),
        pytest.param("us", "hourly", utc(2025, 11, 27), None, [], id="us-thanksgiving"),
        pytest.param("us", "daily", utc(2025, 11, 27), None, [], id="us-thanksgiving-daily"),
        pytest.param(
            "us",
            "hourly",
            utc(2025, 11, 28),
            None,
            hm((14, 30), (15, 30), (16, 30), (17, 30)),
            id="us-half-day-closes-at-13",
        ),
        pytest.param("us", "hourly", utc(2025, 10, 4), None, [], id="us-saturday"),
        pytest.param("us", "daily", utc(2025, 10, 5), None, [], id="us-sunday"),
        pytest.param(
            "us",
            "daily",
            utc(2025, 10, 1),
            ["09:45", "15:59"],
            hm((13, 45), (19, 59)),
            id="us-explicit-times",
        ),
        pytest.param(
            "us", "hourly", utc(2025, 10, 1), ["08:00", "16:00"], [], id="us-explicit-outside"
        ),
        pytest.param("cn", "daily", utc(2025, 10, 9), None, hm((1, 30)), id="cn-daily-0930"),
        pytest.param(
            "cn",
            "hourly",
            utc(2025, 10, 9),
            None,
            hm((1, 30), (2, 30), (5, 0), (6, 0)),
            id="cn-hourly-skips-the-lunch-break",
        ),
        pytest.param(
            "cn",
            "hourly",
            utc(2025, 10, 9),
            ["11:29", "11:30", "12:00", "13:00"],
            hm((3, 29), (5, 0)),
            id="cn-explicit-times-in-lunch-do-not-ring",
        ),
        pytest.param("cn", "hourly", utc(2025, 10, 3), None, [], id="cn-national-day"),
        pytest.param("cn", "daily", utc(2025, 10, 11), None, [], id="cn-makeup-saturday-closed"),
        pytest.param("crypto", "daily", utc(2025, 10, 4), None, hm((0, 0)), id="crypto-saturday"),
        pytest.param(
            "crypto",
            "hourly",
            utc(2025, 11, 27),
            None,
            [(hour, 0) for hour in range(24)],
            id="crypto-24-hourly",
        ),
        pytest.param(
            "crypto",
            "daily",
            utc(2025, 11, 27),
            ["00:00", "12:30"],
            hm((0, 0), (12, 30)),
            id="crypto-explicit",
        ),
    ],
)
def test_slots_of_one_day(
    market: str,
    cadence: str,
    day: datetime,
    slot_times: list[str] | None,
    expected_utc: list[tuple[int, int]],
) -> None:
    # The UTC day and the market's local day coincide for every session in this table.
    slots = slots_between(market, cadence, day, day + DAY, slot_times=slot_times)
    assert hours_minutes(slots) == expected_utc
    assert all(at.date() == day.date() for at in slots)


def test_a_range_is_half_open_and_spans_weekends() -> None:
    slots = slots_between("us", "daily", utc(2025, 10, 3, 13, 30), utc(2025, 10, 7, 13, 30))
    assert slots == [utc(2025, 10, 3, 13, 30), utc(2025, 10, 6, 13, 30)]
    assert slots_between("us", "daily", utc(2025, 10, 7), utc(2025, 10, 7)) == []


def test_a_week_of_crypto_hours() -> None:
    slots = slots_between("crypto", "hourly", utc(2025, 11, 3), utc(2025, 11, 10))
    assert len(slots) == 7 * 24
    assert slots == sorted(set(slots))


@pytest.mark.parametrize(
    ("market", "cadence", "slot_times", "expected"),
    [
        ("us", "daily", None, 1),
        ("us", "hourly", None, 7),
        ("cn", "daily", None, 1),
        ("cn", "hourly", None, 4),
        ("crypto", "daily", None, 1),
        ("crypto", "hourly", None, 24),
        ("us", "daily", ["09:30", "12:00", "12:00"], 2),
        ("cn", "daily", ["12:00"], 0),
    ],
)
def test_slots_per_session(
    market: str, cadence: str, slot_times: list[str] | None, expected: int
) -> None:
    assert slots_per_session(market, cadence, slot_times=slot_times) == expected


@pytest.mark.parametrize(
    ("slot_times", "cadence"),
    [
        (["9:30"], "daily"),
        (["24:00"], "daily"),
        ([], "daily"),
        ("09:30", "daily"),
        (None, "weekly"),
    ],
)
def test_bad_slot_settings_are_refused(slot_times: list[str] | None, cadence: str) -> None:
    with pytest.raises(ValueError, match=r"slot time|cadence"):
        slots_between("us", cadence, utc(2025, 10, 1), utc(2025, 10, 2), slot_times=slot_times)


def test_a_range_past_the_known_calendar_does_not_ring() -> None:
    with pytest.raises(CalendarOutOfRange):
        slots_between("cn", "daily", utc(2026, 12, 1), utc(2027, 2, 1))


@pytest.mark.parametrize(
    ("name", "day", "expected_utc"),
    [
        pytest.param(
            "us-1h",
            utc(2025, 10, 1),
            hm((14, 0), (15, 0), (16, 0), (17, 0), (18, 0), (19, 0)),
            id="us-data-stamped-10-to-15-new-york",
        ),
        pytest.param("cn-1h", utc(2025, 10, 9), hm((1, 30), (2, 30), (5, 0), (6, 0)), id="cn-1h"),
        pytest.param("us-1d", utc(2025, 7, 3), hm((13, 30)), id="us-1d-half-day"),
        pytest.param(
            "crypto-1h", utc(2025, 11, 1), [(hour, 0) for hour in range(24)], id="crypto-1h"
        ),
    ],
)
def test_replay_slots_from_bundled_data(
    name: str, day: datetime, expected_utc: list[tuple[int, int]]
) -> None:
    barset = read_bundled(name)
    slots = replay_slots(barset, barset.meta.market, barset.meta.interval, day, day + DAY)
    assert hours_minutes(slots) == expected_utc


def test_replay_bars_outside_a_session_give_no_slot() -> None:
    def make(start_at: datetime) -> Bar:
        return flat_bar("600000.SH", start_at, timedelta(minutes=30), Decimal(1), Decimal(1))

    lunch, saturday, morning = utc(2025, 10, 9, 4), utc(2025, 10, 11, 2), utc(2025, 10, 9, 2)
    source = ReplaySource(market="cn", bars={"1h": [make(lunch), make(saturday), make(morning)]})
    slots = replay_slots(source, "cn", "1h", utc(2025, 10, 1), utc(2025, 10, 31))
    assert slots == [morning]
    with pytest.raises(ValueError, match="market"):
        replay_slots(source, "us", "1h", utc(2025, 10, 1), utc(2025, 10, 31))


def _new_york(day: tuple[int, int, int], *hours: int) -> list[datetime]:
    """Instants at whole New York hours of one day (EDT before 2025-11-02, EST after)."""
    offset = 4 if day < (2025, 11, 2) else 5
    return [utc(*day, hour + offset) for hour in hours]


US_FULL_DAYS = [(2025, 11, day) for day in (20, 21, 24, 25, 26)]
SIX = (10, 11, 12, 13, 14, 15)


@pytest.mark.parametrize(
    ("market", "stamps", "expected"),
    [
        pytest.param(
            "us",
            [at for day in US_FULL_DAYS for at in _new_york(day, *SIX)],
            6,
            id="us-replay-hours-10-to-15",
        ),
        pytest.param(
            "us",
            [at for day in US_FULL_DAYS for at in _new_york(day, *SIX)]
            + _new_york((2025, 11, 28), 10, 11, 12),
            6,
            id="us-a-half-day-does-not-move-the-median",
        ),
        pytest.param(
            "us",
            _new_york((2025, 11, 26), 13, 14, 15) + _new_york((2025, 12, 1), *SIX),
            6,
            id="us-a-window-cut-mid-session-takes-the-upper-middle",
        ),
        pytest.param(
            "us",
            [utc(2025, 10, day, 13, 30) for day in (1, 2, 3, 6)],
            1,
            id="us-daily",
        ),
        pytest.param(
            "cn",
            [
                utc(2025, 10, day, hour, minute)
                for day in (9, 10, 13)
                for hour, minute in ((1, 30), (2, 30), (5, 0), (6, 0))
            ],
            4,
            id="cn-hourly-across-the-lunch-break",
        ),
        pytest.param(
            "crypto",
            [utc(2025, 10, 1) + timedelta(hours=h) for h in range(72)],
            24,
            id="crypto-utc-days",
        ),
        pytest.param("us", [], None, id="no-stamps"),
    ],
)
def test_observed_slots_per_session(
    market: str, stamps: list[datetime], expected: int | None
) -> None:
    assert observed_slots_per_session(market, stamps) == expected
