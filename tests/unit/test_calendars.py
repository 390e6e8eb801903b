"""Trading calendars: open instants, sessions, lunch breaks, holidays and the known horizon."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from openbell.markets.calendars import AlwaysOpenCalendar, Session, SessionCalendar, calendar_for
from openbell.markets.domain import utc
from openbell.markets.errors import CalendarOutOfRange


@pytest.mark.parametrize(
    ("calendar_id", "at", "expected"),
    [
        pytest.param("XNYS", utc(2025, 6, 2, 13, 30), True, id="xnys-open-minute-inclusive"),
        pytest.param("XNYS", utc(2025, 6, 2, 13, 29), False, id="xnys-pre-open"),
        pytest.param("XNYS", utc(2025, 6, 2, 19, 59), True, id="xnys-last-minute"),
        pytest.param("XNYS", utc(2025, 6, 2, 20, 0), False, id="xnys-close-exclusive"),
        pytest.param("XNYS", utc(2025, 1, 2, 14, 0), False, id="xnys-winter-opens-1430"),
        pytest.param("XNYS", utc(2025, 11, 28, 17, 59), True, id="xnys-half-day-before-close"),
        pytest.param("XNYS", utc(2025, 11, 28, 18, 0), False, id="xnys-half-day-closed-at-18"),
        pytest.param("XNYS", utc(2025, 6, 7, 15, 0), False, id="xnys-saturday"),
        pytest.param("XNYS", utc(2025, 1, 9, 15, 0), False, id="xnys-adhoc-closure"),
        pytest.param("XSHG", utc(2025, 9, 30, 1, 30), True, id="xshg-open"),
        pytest.param("XSHG", utc(2025, 9, 30, 3, 29), True, id="xshg-before-lunch"),
        pytest.param("XSHG", utc(2025, 9, 30, 3, 30), False, id="xshg-lunch-starts"),
        pytest.param("XSHG", utc(2025, 9, 30, 4, 0), False, id="xshg-lunch"),
        pytest.param("XSHG", utc(2025, 9, 30, 5, 0), True, id="xshg-afternoon-reopens"),
        pytest.param("XSHG", utc(2025, 9, 30, 7, 0), False, id="xshg-close-exclusive"),
        pytest.param("XSHG", utc(2025, 10, 1, 2, 0), False, id="xshg-national-day"),
        pytest.param("XSHG", utc(2025, 9, 28, 2, 0), False, id="xshg-makeup-sunday-closed"),
        pytest.param("24/7", utc(2025, 6, 7, 3, 17), True, id="crypto-saturday-night"),
    ],
)
def test_is_open(calendar_id: str, at: datetime, expected: bool) -> None:
    assert calendar_for(calendar_id).is_open(at) is expected


@pytest.mark.parametrize(
    ("calendar_id", "at", "expected"),
    [
        pytest.param("XSHG", utc(2025, 9, 30, 4, 0), date(2025, 9, 30), id="xshg-lunch-in-session"),
        pytest.param("XSHG", utc(2025, 9, 30, 7, 0), None, id="xshg-after-close"),
        pytest.param("XSHG", utc(2025, 10, 3, 2, 0), None, id="xshg-holiday"),
        pytest.param("XNYS", utc(2025, 6, 2, 23, 0), None, id="xnys-evening"),
        pytest.param("XNYS", utc(2025, 6, 2, 19, 0), date(2025, 6, 2), id="xnys-afternoon"),
        pytest.param("24/7", utc(2025, 6, 7, 23, 59), date(2025, 6, 7), id="crypto-utc-day"),
    ],
)
def test_session_of(calendar_id: str, at: datetime, expected: date | None) -> None:
    assert calendar_for(calendar_id).session_of(at) == expected


@pytest.mark.parametrize(
    ("calendar_id", "at", "expected"),
    [
        pytest.param("XSHG", utc(2025, 10, 5, 2, 0), date(2025, 9, 30), id="xshg-holiday"),
        pytest.param("XSHG", utc(2025, 9, 30, 8, 0), date(2025, 9, 30), id="xshg-after-close"),
        pytest.param("XSHG", utc(2025, 9, 30, 1, 0), date(2025, 9, 29), id="xshg-before-open"),
        pytest.param("XNYS", utc(2025, 6, 8, 12, 0), date(2025, 6, 6), id="xnys-sunday"),
    ],
)
def test_session_at_or_before(calendar_id: str, at: datetime, expected: date) -> None:
    assert calendar_for(calendar_id).session_at_or_before(at) == expected


@pytest.mark.parametrize(
    ("calendar_id", "day", "after", "before"),
    [
        pytest.param(
            "XSHG", date(2025, 9, 30), date(2025, 10, 9), date(2025, 9, 29), id="xshg-golden-week"
        ),
        pytest.param(
            "XSHG", date(2025, 10, 3), date(2025, 10, 9), date(2025, 9, 30), id="xshg-from-holiday"
        ),
        pytest.param(
            "XSHG", date(2025, 9, 26), date(2025, 9, 29), date(2025, 9, 25), id="xshg-weekend"
        ),
        pytest.param(
            "XNYS", date(2025, 7, 3), date(2025, 7, 7), date(2025, 7, 2), id="xnys-independence"
        ),
        pytest.param(
            "XNYS", date(2025, 1, 8), date(2025, 1, 10), date(2025, 1, 7), id="xnys-adhoc-closure"
        ),
        pytest.param(
            "24/7", date(2025, 12, 31), date(2026, 1, 1), date(2025, 12, 30), id="crypto-year-end"
        ),
    ],
)
def test_next_and_previous_session(calendar_id: str, day: date, after: date, before: date) -> None:
    calendar = calendar_for(calendar_id)
    assert calendar.next_session(day) == after
    assert calendar.previous_session(day) == before


@pytest.mark.parametrize(
    ("calendar_id", "day", "expected"),
    [
        pytest.param("XSHG", date(2025, 10, 9), True, id="xshg-after-golden-week"),
        pytest.param("XSHG", date(2025, 10, 8), False, id="xshg-golden-week"),
        pytest.param("XSHG", date(2025, 9, 28), False, id="xshg-makeup-sunday"),
        pytest.param("XNYS", date(2025, 1, 9), False, id="xnys-carter-mourning"),
        pytest.param("XNYS", date(2025, 11, 28), True, id="xnys-half-day"),
        pytest.param("24/7", date(2025, 1, 1), True, id="crypto-new-year"),
    ],
)
def test_is_session(calendar_id: str, day: date, expected: bool) -> None:
    assert calendar_for(calendar_id).is_session(day) is expected


@pytest.mark.parametrize(
    ("calendar_id", "day", "open_at", "close_at", "lunch"),
    [
        pytest.param(
            "XSHG",
            date(2025, 9, 30),
            utc(2025, 9, 30, 1, 30),
            utc(2025, 9, 30, 7, 0),
            (utc(2025, 9, 30, 3, 30), utc(2025, 9, 30, 5, 0)),
            id="xshg",
        ),
        pytest.param(
            "XNYS", date(2025, 6, 2), utc(2025, 6, 2, 13, 30), utc(2025, 6, 2, 20), None, id="edt"
        ),
        pytest.param(
            "XNYS", date(2025, 1, 2), utc(2025, 1, 2, 14, 30), utc(2025, 1, 2, 21), None, id="est"
        ),
        pytest.param(
            "XNYS",
            date(2025, 11, 28),
            utc(2025, 11, 28, 14, 30),
            utc(2025, 11, 28, 18),
            None,
            id="half-day",
        ),
        pytest.param(
            "24/7", date(2025, 6, 7), utc(2025, 6, 7), utc(2025, 6, 8), None, id="crypto-utc-day"
        ),
    ],
)
def test_session_times(
    calendar_id: str,
    day: date,
    open_at: datetime,
    close_at: datetime,
    lunch: tuple[datetime, datetime] | None,
) -> None:
    calendar = calendar_for(calendar_id)
    assert calendar.session_open(day) == open_at
    assert calendar.session_close(day) == close_at
    assert calendar.session_break(day) == lunch
    assert calendar.session_open(day).utcoffset() == timedelta(0)


def test_session_open_refuses_a_non_session() -> None:
    with pytest.raises(ValueError, match="2025-10-01 is not a XSHG session"):
        calendar_for("XSHG").session_open(date(2025, 10, 1))


def test_sessions_between_skips_holidays_and_weekends() -> None:
    assert calendar_for("XSHG").sessions_between(date(2025, 9, 29), date(2025, 10, 10)) == (
        date(2025, 9, 29),
        date(2025, 9, 30),
        date(2025, 10, 9),
        date(2025, 10, 10),
    )


def test_xshg_horizon_is_exposed_and_enforced() -> None:
    calendar = calendar_for("XSHG")
    last = calendar.last_known_session
    # exchange_calendars 4.13.2 records XSHG holidays to 2026; a newer release moves this forward.
    assert last >= date(2026, 12, 31)
    assert (last.month, last.day) == (12, 31)
    assert calendar.is_session(date(2026, 12, 31))
    beyond = last + timedelta(days=4)
    with pytest.raises(CalendarOutOfRange, match=f"asked about {beyond}"):
        calendar.is_session(beyond)
    with pytest.raises(CalendarOutOfRange, match="does not know the session after"):
        calendar.next_session(last)
    with pytest.raises(CalendarOutOfRange, match="trading times"):
        calendar.is_open(datetime(beyond.year, beyond.month, beyond.day, 2, tzinfo=UTC))


def test_xnys_horizon_is_fixed_not_read_from_the_clock() -> None:
    assert calendar_for("XNYS").last_known_session == date(2030, 12, 31)
    assert calendar_for("XNYS").first_known_session == date(2000, 1, 3)


def test_calendar_for_is_cached_and_refuses_unknown_ids() -> None:
    assert calendar_for("XSHG") is calendar_for("XSHG")
    with pytest.raises(ValueError, match="unknown calendar 'XHKG'"):
        calendar_for("XHKG")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        calendar_for("XNYS").is_open(datetime(2025, 6, 2, 14, 0))  # noqa: DTZ001
    with pytest.raises(ValueError, match="timezone-aware"):
        AlwaysOpenCalendar().session_of(datetime(2025, 6, 2, 14, 0))  # noqa: DTZ001


def _session(day: int, open_hour: int, close_hour: int) -> Session:
    return Session(
        day=date(2025, 1, day),
        open_at=utc(2025, 1, day, open_hour),
        close_at=utc(2025, 1, day, close_hour),
    )


def test_session_calendar_over_an_explicit_table() -> None:
    calendar = SessionCalendar(
        calendar_id="TEST", timezone="UTC", sessions=[_session(7, 9, 17), _session(6, 9, 17)]
    )
    assert (calendar.first_known_session, calendar.last_known_session) == (
        date(2025, 1, 6),
        date(2025, 1, 7),
    )
    assert calendar.next_session(date(2025, 1, 6)) == date(2025, 1, 7)
    assert calendar.session_of(utc(2025, 1, 6, 20)) is None
    assert calendar.is_open(utc(2025, 1, 7, 9))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(lambda: _session(6, 17, 9), "before it opens", id="close-before-open"),
        pytest.param(
            lambda: Session(
                day=date(2025, 1, 6),
                open_at=utc(2025, 1, 6, 9),
                close_at=utc(2025, 1, 6, 17),
                break_start_at=utc(2025, 1, 6, 12),
            ),
            "needs both",
            id="half-a-break",
        ),
        pytest.param(
            lambda: Session(
                day=date(2025, 1, 6),
                open_at=utc(2025, 1, 6, 9),
                close_at=utc(2025, 1, 6, 17),
                break_start_at=utc(2025, 1, 6, 16),
                break_end_at=utc(2025, 1, 6, 18),
            ),
            "inside the session",
            id="break-outside",
        ),
        pytest.param(
            lambda: SessionCalendar(
                calendar_id="T", timezone="UTC", sessions=[_session(6, 9, 17), _session(6, 9, 17)]
            ),
            "overlap",
            id="duplicate-day",
        ),
        pytest.param(
            lambda: SessionCalendar(calendar_id="T", timezone="UTC", sessions=[]),
            "no sessions",
            id="empty",
        ),
    ],
)
def test_sessions_are_validated(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(ValueError, match=message):
        build()
