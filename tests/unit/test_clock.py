"""Clocks: the system clock is aware UTC; the simulated clock moves only forward, when told; the
scaled clock runs at its speed, and the fake-clock forms parse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from openbell.daemon.clock import Clock, ScaledClock, SimulatedClock, SystemClock, parse_fake_clock

START = datetime(2025, 3, 3, 14, 30, tzinfo=UTC)


def test_system_clock_is_aware_utc() -> None:
    clock: Clock = SystemClock()
    now = clock.now()
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)


def test_simulated_clock_sets_and_advances() -> None:
    clock: Clock = SimulatedClock(START)
    assert clock.now() == START
    assert isinstance(clock, SimulatedClock)
    assert clock.advance(timedelta(hours=1)) == START + timedelta(hours=1)
    later = START + timedelta(days=1)
    assert clock.set(later) == later
    assert clock.now() == later


def test_simulated_clock_converts_to_utc() -> None:
    shanghai = timezone(timedelta(hours=8))
    clock = SimulatedClock(datetime(2025, 3, 3, 9, 30, tzinfo=shanghai))
    assert clock.now() == datetime(2025, 3, 3, 1, 30, tzinfo=UTC)
    assert clock.now().utcoffset() == timedelta(0)
    assert clock.now().tzinfo is UTC


def test_simulated_clock_refuses_naive_times_and_going_back() -> None:
    with pytest.raises(ValueError, match="naive"):
        SimulatedClock(datetime(2025, 3, 3))  # noqa: DTZ001
    clock = SimulatedClock(START)
    with pytest.raises(ValueError, match="back"):
        clock.set(START - timedelta(seconds=1))
    with pytest.raises(ValueError, match="negative"):
        clock.advance(timedelta(seconds=-1))
    assert clock.now() == START


def test_fake_clock_forms() -> None:
    clock = parse_fake_clock("2025-11-03T13:55:00Z:60")
    assert clock.speed == 60
    assert clock.now() >= datetime(2025, 11, 3, 13, 55, tzinfo=UTC)
    assert parse_fake_clock("2025-11-03T13:55:00+00:00").speed == 1
    with pytest.raises(ValueError, match="START"):
        parse_fake_clock("tomorrow")
    with pytest.raises(ValueError, match="zone"):
        parse_fake_clock("2025-11-03T13:55:00")


def test_scaled_clock_runs_at_its_speed() -> None:
    ticks = iter([100.0, 102.0])
    clock = ScaledClock(START, speed=30, monotonic=lambda: next(ticks))
    assert clock.now() == START + timedelta(seconds=60)
