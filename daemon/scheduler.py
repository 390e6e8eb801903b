"""The bells: APScheduler 3.x jobs that ring each market's decision slots and session closes.

This module owns `Bells`. Per market it adds two jobs, `<market>:slot` and `<market>:close`, each
on CronTriggers in the market's own timezone (New York, Shanghai, UTC) at the local times the slot
rules produce for a regular week (`markets.slots`), with an explicit `misfire_grace_time` (the
market's grace), `coalesce=True` and `max_instances=1`. Cron cannot express holidays, half days or
lunch breaks, so a job first works out which fire time it serves and asks the calendar: a closed
instant logs `bell_skipped_closed` and rings nothing; an instant past the calendar's known sessions
logs the operator error `calendar_horizon` and rings nothing. An open one is handed to the
daemon's thin async callbacks, which call the cycle runner. Listeners turn `EVENT_JOB_MISSED` and
`EVENT_JOB_MAX_INSTANCES` of a slot job into `missed` cycles (through the daemon's callback) and
log `EVENT_JOB_ERROR`. The daemon's clock is injected, not patched into APScheduler: APScheduler
keeps time on the machine's clock, and each job's trigger is wrapped (`ClockTrigger`) to translate
between the two (`ClockTime`), so that under a fake clock (tests only: an offset, a speed) the
scheduler wakes at the machine instant where the fake clock reaches the fire time, and its misfire
grace is the market's grace in machine seconds (at least one). Under the system clock the
translation is the identity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

import structlog
from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
)
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from openbell.daemon.clock import Clock, SystemClock
from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.rules import rules_for
from openbell.markets.slots import slots_between

log = structlog.stdlib.get_logger(__name__)

#: A regular week of every market's calendar, from which the local bell times are read.
_REFERENCE_WEEK: Final = (
    datetime(2025, 10, 13, tzinfo=UTC),
    datetime(2025, 10, 18, tzinfo=UTC),
)
#: A year of sessions, from which the local close times (half days included) are read.
_REFERENCE_YEAR: Final = (date(2025, 1, 1), date(2025, 12, 31))
#: A market rings only while its calendar knows this many days beyond today (DESIGN §2).
HORIZON: Final = timedelta(days=7)

SlotCallback = Callable[[str, datetime], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketBell:
    """When one market rings: its cadence, optional local slot times and grace window."""

    market: str
    cadence: str
    grace: timedelta
    slot_times: tuple[str, ...] | None = None

    @property
    def calendar(self) -> TradingCalendar:
        """The market's trading calendar."""
        return calendar_for(rules_for(self.market).calendar_id)


def _cron(local_times: Iterable[tuple[int, int]], zone: str, weekdays: bool) -> BaseTrigger:
    """CronTriggers at `local_times` (hour, minute) in `zone`, one per minute value, or-ed."""
    by_minute: dict[int, list[int]] = {}
    for hour, minute in sorted(set(local_times)):
        by_minute.setdefault(minute, []).append(hour)
    triggers = [
        CronTrigger(
            day_of_week="mon-fri" if weekdays else "*",
            hour=",".join(str(hour) for hour in hours),
            minute=str(minute),
            timezone=ZoneInfo(zone),
        )
        for minute, hours in sorted(by_minute.items())
    ]
    if not triggers:
        raise ValueError("a bell needs at least one local time")
    return triggers[0] if len(triggers) == 1 else OrTrigger(triggers)


def slot_trigger(bell: MarketBell) -> BaseTrigger:
    """The cron trigger of a market's decision slots, in its local time."""
    calendar = bell.calendar
    zone = ZoneInfo(calendar.timezone)
    slots = slots_between(bell.market, bell.cadence, *_REFERENCE_WEEK, slot_times=bell.slot_times)
    if not slots and bell.slot_times is not None:  # configured times outside every session
        raise ValueError(f"{bell.market}: no configured slot time lies in a session")
    local = {(at.astimezone(zone).hour, at.astimezone(zone).minute) for at in slots}
    return _cron(local, calendar.timezone, weekdays=calendar.calendar_id != "24/7")


def close_trigger(bell: MarketBell) -> BaseTrigger:
    """The cron trigger of a market's session closes (regular and half days), in local time."""
    calendar = bell.calendar
    zone = ZoneInfo(calendar.timezone)
    if calendar.calendar_id == "24/7":
        return _cron([(0, 0)], calendar.timezone, weekdays=False)
    closes = {
        calendar.session_close(day).astimezone(zone)
        for day in calendar.sessions_between(*_REFERENCE_YEAR)
    }
    return _cron({(at.hour, at.minute) for at in closes}, calendar.timezone, weekdays=True)


def latest_fire(trigger: BaseTrigger, now: datetime, lookback: timedelta) -> datetime | None:
    """The trigger's latest fire time in `[now - lookback, now]` (aware UTC), or None.

    A coalesced job runs once for its latest due fire time; this is that time.
    """
    found: datetime | None = None
    fire = trigger.get_next_fire_time(None, now - lookback)
    while fire is not None and fire <= now:
        found = fire
        fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
    return None if found is None else found.astimezone(UTC)


def horizon_ok(bell: MarketBell, now: datetime) -> bool:
    """Whether the market's calendar knows its sessions for at least `HORIZON` beyond today."""
    calendar = bell.calendar
    today = now.astimezone(ZoneInfo(calendar.timezone)).date()
    return calendar.last_known_session >= today + HORIZON


def report_horizon(bell: MarketBell, now: datetime, *, scheduled: bool) -> bool:
    """Log the operator error `calendar_horizon` when the calendar ends within `HORIZON`."""
    if horizon_ok(bell, now):
        return True
    calendar = bell.calendar
    log.error(
        "calendar_horizon",
        market=bell.market,
        calendar=calendar.calendar_id,
        last_known_session=calendar.last_known_session.isoformat(),
        horizon_days=HORIZON.days,
        scheduled=scheduled,
        action="upgrade exchange_calendars (or openbell) to a release with next year's holidays",
    )
    return False


class ClockTime:
    """Translates between the machine's clock, on which APScheduler keeps time, and `clock`.

    `clock` runs `speed` of its seconds per machine second (its `speed`, else 1) from where it was
    when this was made; the system clock itself translates to itself. Fire times translated one
    way are remembered, so that the way back gives them exactly (a cron trigger asked for the fire
    after `previous` must get `previous` to the microsecond, or it may fire twice).
    """

    def __init__(self, clock: Clock, machine: Clock | None = None) -> None:
        machine = machine if machine is not None else SystemClock()
        self.speed = float(getattr(clock, "speed", 1.0))
        self._clock_at = clock.now()
        self._machine_at = self._clock_at if isinstance(clock, SystemClock) else machine.now()
        self._known: dict[datetime, datetime] = {}

    def to_machine(self, at: datetime) -> datetime:
        """The machine instant at which the clock shows `at`."""
        machine_at = self._machine_at + (at - self._clock_at) / self.speed
        self._known[machine_at] = at
        return machine_at

    def to_clock(self, machine_at: datetime) -> datetime:
        """What the clock shows at the machine instant `machine_at`."""
        known = self._known.get(machine_at)
        if known is not None:
            return known
        return self._clock_at + (machine_at - self._machine_at) * self.speed

    def seconds(self, clock_s: float) -> int:
        """`clock_s` seconds of the clock in whole machine seconds, at least one (APScheduler's
        misfire grace is a positive integer)."""
        return max(1, int(clock_s / self.speed))


class ClockTrigger(BaseTrigger):  # type: ignore[misc]
    """`trigger`, whose fire times are on the daemon's clock, as seen on the machine's clock."""

    def __init__(self, trigger: BaseTrigger, time: ClockTime) -> None:
        self.trigger = trigger
        self._time = time

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        previous = None if previous_fire_time is None else self._time.to_clock(previous_fire_time)
        found = self.trigger.get_next_fire_time(previous, self._time.to_clock(now))
        return None if found is None else self._time.to_machine(found)

    def __str__(self) -> str:
        return f"clock[{self.trigger}]"


class Bells:
    """The daemon's scheduler: rings `on_slot`/`on_close` at open instants, reports misses."""

    def __init__(
        self,
        *,
        clock: Clock,
        bells: Iterable[MarketBell],
        on_slot: SlotCallback,
        on_close: SlotCallback,
        on_missed: SlotCallback,
        on_horizon_check: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        self._bells = {bell.market: bell for bell in bells}
        self._on_slot = on_slot
        self._on_close = on_close
        self._on_missed = on_missed
        self._on_horizon_check = on_horizon_check
        self._triggers: dict[str, BaseTrigger] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._time: ClockTime | None = None
        self._scheduler = AsyncIOScheduler(timezone=ZoneInfo("UTC"))

    @property
    def markets(self) -> tuple[str, ...]:
        """The markets this scheduler rings."""
        return tuple(self._bells)

    def start(self) -> None:
        """Add the jobs and start ringing (call from inside the running event loop)."""
        self._time = time = ClockTime(self._clock)
        for market, bell in self._bells.items():
            for kind, trigger in (("slot", slot_trigger(bell)), ("close", close_trigger(bell))):
                job_id = f"{market}:{kind}"
                self._triggers[job_id] = trigger
                self._scheduler.add_job(
                    self._ring,
                    ClockTrigger(trigger, time),
                    args=(market, kind),
                    id=job_id,
                    name=job_id,
                    misfire_grace_time=time.seconds(bell.grace.total_seconds()),
                    coalesce=True,
                    max_instances=1,
                    replace_existing=True,
                )
        if self._on_horizon_check is not None:
            self._scheduler.add_job(
                self._on_horizon_check,
                ClockTrigger(CronTrigger(hour=0, minute=5, timezone=ZoneInfo("UTC")), time),
                id="calendar_horizon",
                misfire_grace_time=time.seconds(3600),
                coalesce=True,
                max_instances=1,
            )
        self._scheduler.add_listener(
            self._listen, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR
        )
        # Our own events (bell_skipped_closed, slot_finished, bell_missed) tell what rang;
        # APScheduler's own lines are third-party ones, written at warning unless asked for.
        self._scheduler.start()
        log.info("bells_started", markets=list(self._bells), jobs=sorted(self._triggers))

    def pause(self) -> None:
        """Stop ringing (running cycles go on)."""
        if self._scheduler.running:
            self._scheduler.pause()

    def shutdown(self) -> None:
        """Stop the scheduler; call after the running cycles have been drained."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def next_fire(self, market: str, kind: str = "slot") -> datetime | None:
        """When the job of `market` and `kind` fires next (UTC), or None."""
        job = self._scheduler.get_job(f"{market}:{kind}")
        at = None if job is None or self._time is None else job.next_run_time
        return None if at is None or self._time is None else self._time.to_clock(at).astimezone(UTC)

    async def _ring(self, market: str, kind: str) -> None:
        """The job: find the fire time served, ask the calendar, call the daemon."""
        bell = self._bells[market]
        now = self._clock.now()
        fire_at = latest_fire(self._triggers[f"{market}:{kind}"], now, bell.grace)
        if fire_at is None:
            return
        try:
            if kind == "close":
                day = bell.calendar.session_of(fire_at - timedelta(microseconds=1))
                if day is None or bell.calendar.session_close(day) != fire_at:
                    return
                await self._on_close(market, fire_at)
                return
            if not bell.calendar.is_open(fire_at):
                log.info("bell_skipped_closed", market=market, slot_at=fire_at)
                return
        except CalendarOutOfRange as exc:
            log.error("calendar_horizon", market=market, slot_at=fire_at, error_message=str(exc))
            return
        await self._on_slot(market, fire_at)

    def _listen(self, event: JobEvent) -> None:
        """Sync listener (APScheduler never awaits listeners): log, and hand misses on."""
        market, _, kind = event.job_id.partition(":")
        if event.code == EVENT_JOB_ERROR and isinstance(event.exception, asyncio.CancelledError):
            # Cancelled by a stop (the slot logs `slot_cancelled`): no job error, no traceback.
            log.warning("bell_cancelled", job=event.job_id)
            return
        if event.code == EVENT_JOB_ERROR:
            log.error(
                "bell_failed",
                job=event.job_id,
                error_class=type(event.exception).__name__,
                error_message=str(event.exception),
            )
            return
        times = getattr(event, "scheduled_run_times", None) or [event.scheduled_run_time]
        for run_at in times:
            at = run_at if self._time is None else self._time.to_clock(run_at)
            at = at.astimezone(UTC)
            log.warning("bell_missed", job=event.job_id, slot_at=at, code=event.code)
            if kind == "slot" and market in self._bells:
                task = asyncio.get_running_loop().create_task(self._missed(market, at))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _missed(self, market: str, at: datetime) -> None:
        try:
            if self._bells[market].calendar.is_open(at):
                await self._on_missed(market, at)
        except Exception:  # a failure here must not stop the scheduler; it is logged
            log.exception("missed_not_recorded", market=market, slot_at=at)
