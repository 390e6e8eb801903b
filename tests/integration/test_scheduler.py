"""The bells: cron fire times filtered by the calendar ring exactly the sessions' slots.

The triggers are the ones `Bells` schedules; walking them over a week and keeping the instants the
calendar says are open must give exactly `slots_between` (the slot rule), across the US DST
switches and the Shanghai lunch break. A real `Bells` on a fast fake clock rings and skips, with
the clock injected through its triggers: APScheduler itself is left alone.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest
from apscheduler.triggers.base import BaseTrigger

from openbell.daemon.clock import ScaledClock, SimulatedClock
from openbell.daemon.scheduler import (
    Bells,
    ClockTime,
    ClockTrigger,
    MarketBell,
    close_trigger,
    horizon_ok,
    latest_fire,
    slot_trigger,
)
from openbell.markets.slots import slots_between


def fires(trigger: BaseTrigger, start_at: datetime, end_at: datetime) -> list[datetime]:
    out = []
    at = trigger.get_next_fire_time(None, start_at)
    while at is not None and at < end_at:
        out.append(at.astimezone(UTC))
        at = trigger.get_next_fire_time(at, at + timedelta(microseconds=1))
    return out


def bell(market: str, cadence: str, slot_times: tuple[str, ...] | None = None) -> MarketBell:
    return MarketBell(
        market=market, cadence=cadence, grace=timedelta(minutes=15), slot_times=slot_times
    )


WEEKS = [
    ("us", "hourly", date(2026, 3, 2)),  # US DST starts Sunday 2026-03-08
    ("us", "hourly", date(2026, 3, 9)),
    ("us", "daily", date(2026, 3, 5)),
    ("us", "hourly", date(2026, 10, 26)),  # US DST ends Sunday 2026-11-01
    ("us", "hourly", date(2026, 11, 2)),
    ("us", "hourly", date(2026, 11, 23)),  # Thanksgiving and a half day
    ("cn", "hourly", date(2026, 9, 28)),  # National Day holidays
    ("cn", "daily", date(2026, 9, 28)),
    ("crypto", "hourly", date(2026, 3, 6)),
    ("crypto", "daily", date(2026, 10, 30)),
]


@pytest.mark.parametrize(("market", "cadence", "monday"), WEEKS)
def test_open_fire_times_are_exactly_the_slots(market: str, cadence: str, monday: date) -> None:
    spec = bell(market, cadence)
    start_at = datetime(monday.year, monday.month, monday.day, tzinfo=UTC) - timedelta(days=1)
    end_at = start_at + timedelta(days=9)
    rung = [at for at in fires(slot_trigger(spec), start_at, end_at) if spec.calendar.is_open(at)]
    expected = slots_between(market, cadence, start_at, end_at)
    assert rung == expected
    assert expected  # the week has sessions


def test_us_hourly_rings_at_local_half_past_on_both_sides_of_the_dst_switch() -> None:
    spec = bell("us", "hourly")
    before = fires(
        slot_trigger(spec), datetime(2026, 3, 6, tzinfo=UTC), datetime(2026, 3, 7, tzinfo=UTC)
    )
    after = fires(
        slot_trigger(spec), datetime(2026, 3, 9, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC)
    )
    assert before[0] == datetime(2026, 3, 6, 14, 30, tzinfo=UTC)  # 09:30 EST
    assert after[0] == datetime(2026, 3, 9, 13, 30, tzinfo=UTC)  # 09:30 EDT
    assert len(before) == len(after) == 7


def test_shanghai_lunch_break_never_rings() -> None:
    spec = bell("cn", "hourly", slot_times=("09:30", "10:30", "11:30", "12:00", "13:00", "14:00"))
    day = datetime(2026, 11, 2, tzinfo=UTC)
    fired = fires(slot_trigger(spec), day - timedelta(hours=8), day + timedelta(hours=16))
    rung = [at for at in fired if spec.calendar.is_open(at)]
    shanghai = [f"{at + timedelta(hours=8):%H:%M}" for at in rung]
    assert shanghai == ["09:30", "10:30", "13:00", "14:00"]  # 11:30 and 12:00 are the break
    assert len(fired) == 4  # the configured times outside every session are not even scheduled


def test_close_trigger_covers_half_days() -> None:
    spec = bell("us", "daily")
    closes = fires(
        close_trigger(spec), datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC)
    )
    session_close = spec.calendar.session_close(date(2026, 11, 27))
    assert session_close == datetime(2026, 11, 27, 18, 0, tzinfo=UTC)  # 13:00 New York
    assert session_close in closes


def test_latest_fire_is_the_coalesced_run_time() -> None:
    trigger = slot_trigger(bell("crypto", "hourly"))
    now = datetime(2026, 1, 5, 10, 7, tzinfo=UTC)
    assert latest_fire(trigger, now, timedelta(minutes=15)) == datetime(2026, 1, 5, 10, tzinfo=UTC)
    assert latest_fire(trigger, now, timedelta(minutes=5)) is None


@pytest.mark.parametrize(
    ("today", "ok"),
    [(date(2026, 11, 29), True), (date(2026, 12, 24), True), (date(2026, 12, 25), False)],
)
def test_calendar_horizon_rule(today: date, ok: bool) -> None:
    """XSHG is known through 2026-12-31: a market rings only with 7 days still known."""
    now = datetime(today.year, today.month, today.day, 12, tzinfo=UTC)
    assert horizon_ok(bell("cn", "daily"), now) is ok
    assert horizon_ok(bell("crypto", "daily"), now)
    assert horizon_ok(bell("us", "daily"), now)


def test_bells_ring_open_slots_on_a_fast_fake_clock() -> None:
    """Across the Shanghai lunch break at 1800x: 10:30 rings, 11:30/12:00 skip, 13:00 rings."""
    rung: list[tuple[str, datetime]] = []
    spec = MarketBell(
        market="cn",
        cadence="hourly",
        grace=timedelta(minutes=20),
        slot_times=("10:30", "11:30", "13:00"),
    )
    # 10:25 Shanghai on a regular session (02:25 UTC).
    clock = ScaledClock(datetime(2026, 11, 2, 2, 25, tzinfo=UTC), speed=1800)

    async def on_slot(market: str, at: datetime) -> None:
        rung.append((market, at))

    async def nothing(market: str, at: datetime) -> None:
        return None

    async def main() -> None:
        bells = Bells(
            clock=clock, bells=[spec], on_slot=on_slot, on_close=nothing, on_missed=nothing
        )
        bells.start()
        try:
            left = datetime(2026, 11, 2, 5, 5, tzinfo=UTC) - clock.now()
            await asyncio.sleep(left.total_seconds() / clock.speed)
        finally:
            bells.shutdown()

    asyncio.run(main())
    assert rung == [
        ("cn", datetime(2026, 11, 2, 2, 30, tzinfo=UTC)),
        ("cn", datetime(2026, 11, 2, 5, 0, tzinfo=UTC)),
    ]


def test_a_clock_trigger_fires_on_the_machine_when_the_clock_reaches_the_fire_time() -> None:
    """At 3600x from 10:25 Shanghai, 10:30 is 1/12 machine second away, then 13:00 (after the
    lunch break); the way back to the clock is exact."""
    spec = MarketBell(market="cn", cadence="hourly", grace=timedelta(minutes=20))
    clock_at = datetime(2026, 11, 2, 2, 25, tzinfo=UTC)
    machine_at = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ScaledClock(clock_at, speed=3600, monotonic=lambda: 0.0)
    time = ClockTime(clock, machine=SimulatedClock(machine_at))
    trigger = ClockTrigger(slot_trigger(spec), time)
    fire = trigger.get_next_fire_time(None, machine_at)
    assert fire == machine_at + timedelta(seconds=300 / 3600)
    assert time.to_clock(fire) == datetime(2026, 11, 2, 2, 30, tzinfo=UTC)
    following = trigger.get_next_fire_time(fire, fire)
    assert following is not None
    assert time.to_clock(following) == datetime(2026, 11, 2, 5, 0, tzinfo=UTC)  # 13:00 local
    assert time.seconds(spec.grace.total_seconds()) == 1


def test_bells_leave_apschedulers_modules_alone() -> None:
    from apscheduler.executors import base as executors_base
    from apscheduler.schedulers import base as schedulers_base

    spec = MarketBell(market="crypto", cadence="hourly", grace=timedelta(minutes=20))
    clock = ScaledClock(datetime(2026, 11, 2, 2, 25, tzinfo=UTC), speed=1800)

    async def nothing(market: str, at: datetime) -> None:
        return None

    async def main() -> None:
        bells = Bells(
            clock=clock, bells=[spec], on_slot=nothing, on_close=nothing, on_missed=nothing
        )
        bells.start()
        try:
            assert schedulers_base.datetime is datetime
            assert executors_base.datetime is datetime
            assert bells.next_fire("crypto") == datetime(2026, 11, 2, 3, 0, tzinfo=UTC)
        finally:
            bells.shutdown()

    asyncio.run(main())
