"""Postgres going away across a bell, through a TCP proxy the test cuts between the daemon and the
server, on a fast fake clock: back inside the slot's grace, the slot runs (late) and its cycles are
done; away past it, every account has a `missed` cycle at the slot that says `store_unavailable`.
And a property over random outage windows: no slot between the first bell and the last is ever
without its rows, and a slot whose store came back inside its grace is done."""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from openbell.daemon.clock import ScaledClock
from openbell.markets.slots import slots_between
from openbell_testkit.live import (
    START_AT,
    CycleRow,
    crypto_plan,
    cycles,
    migrated,
    running,
    sleep_until,
    verifies,
    wait_for_start,
)
from openbell_testkit.postgres import PgServer
from openbell_testkit.proxy import TcpProxy

pytestmark = pytest.mark.postgres

SPEED = 1800.0  # an hourly bell every two real seconds
GRACE = timedelta(minutes=30)  # one real second
#: 40 clock minutes: a daemon thread held up on a loaded machine keeps its claims.
LEASE_S = 2400.0
BELL = START_AT + timedelta(hours=2)


def at_bell(rows: list[CycleRow], slot_at: datetime) -> list[CycleRow]:
    return [row for row in rows if row.slot_at == slot_at]


def run_with_outage(url: str, cut_at: datetime, restore_at: datetime, end_at: datetime) -> None:
    """Run a daemon from 01:20 to `end_at` with the store cut from `cut_at` to `restore_at`."""
    with TcpProxy.to(url) as proxy:
        clock = ScaledClock(START_AT + timedelta(hours=1, minutes=20), speed=SPEED)
        with running(crypto_plan(proxy.url(url), grace=GRACE, lease_s=LEASE_S), clock):
            wait_for_start(url)
            assert clock.now() < cut_at, "the daemon took too long to start"
            sleep_until(clock, cut_at)
            proxy.cut()
            sleep_until(clock, restore_at)
            assert proxy.refused > 0  # the daemon did try the store while it was away
            proxy.restore()
            sleep_until(clock, end_at)


def test_postgres_back_inside_the_grace_runs_the_slot_late(pg_url: str) -> None:
    url = migrated(pg_url)
    restore_at = BELL + timedelta(minutes=10)
    run_with_outage(url, BELL - timedelta(minutes=8), restore_at, BELL + timedelta(minutes=70))
    rows = cycles(url)
    bell = at_bell(rows, BELL)
    assert len(bell) == 2, rows
    assert {row.status for row in bell} == {"done"}
    # Run late, after the store came back: the claim's start says so.
    assert all(
        row.started_at is not None and restore_at <= row.started_at <= BELL + GRACE
        for row in bell
    ), bell
    assert {row.status for row in at_bell(rows, BELL + timedelta(hours=1))} == {"done"}
    assert verifies(url)


def test_postgres_away_past_the_grace_records_each_account_missed(pg_url: str) -> None:
    url = migrated(pg_url)
    restore_at = BELL + GRACE + timedelta(minutes=8)
    run_with_outage(url, BELL - timedelta(minutes=8), restore_at, BELL + timedelta(minutes=75))
    rows = cycles(url)
    bell = at_bell(rows, BELL)
    assert len(bell) == 2, rows
    assert {(row.status, row.reason) for row in bell} == {("missed", "store_unavailable")}
    assert {row.status for row in at_bell(rows, BELL + timedelta(hours=1))} == {"done"}
    assert verifies(url)


# -- the property ------------------------------------------------------------------------------

PROPERTY_SPEED = 3600.0  # an hourly bell every real second
PROPERTY_GRACE = timedelta(minutes=40)
#: Ten clock minutes: a slot cut off in mid-run has its claims back well inside the grace.
PROPERTY_LEASE_S = 600.0
#: How close to a bell or a grace's end an outage's edge may fall and still be judged: the
#: machine's hiccups move the daemon by a few clock minutes at this speed.
MARGIN = timedelta(minutes=8)
FIRST_BELL = START_AT + timedelta(hours=1)
BELLS = 5


@dataclass(frozen=True)
class Outage:
    cut_at: datetime
    restore_at: datetime

    def covers(self, start_at: datetime, end_at: datetime) -> bool:
        return self.cut_at <= start_at and end_at <= self.restore_at

    def touches(self, start_at: datetime, end_at: datetime) -> bool:
        return self.cut_at < end_at and start_at < self.restore_at


def random_outages(rng: random.Random) -> list[Outage]:
    """One to three outages, each from a few minutes before a bell to inside its grace or past it,
    some across several bells."""
    outages: list[Outage] = []
    bell = 0
    while bell < BELLS and len(outages) < 3:
        bell += rng.randint(0, 1)
        if bell >= BELLS:
            break
        slot_at = FIRST_BELL + timedelta(hours=bell)
        cut_at = slot_at - timedelta(minutes=rng.uniform(3, 20))
        if outages and cut_at <= outages[-1].restore_at + timedelta(minutes=5):
            break
        bell += rng.choice((0, 0, 1, 2))  # the bells it lasts across
        last_at = FIRST_BELL + timedelta(hours=min(bell, BELLS - 1))
        inside = rng.random() < 0.5
        restore_at = last_at + (
            PROPERTY_GRACE * rng.uniform(0.15, 0.6)
            if inside
            else PROPERTY_GRACE + timedelta(minutes=rng.uniform(5, 15))
        )
        outages.append(Outage(cut_at, restore_at))
        bell += 1
    return outages


def expected(slot_at: datetime, outages: list[Outage]) -> str | None:
    """What every cycle at `slot_at` must be ("done", "missed"), or None when only its row is
    judged (an outage edge too close to the bell or to the grace's end to call)."""
    grace_end = slot_at + PROPERTY_GRACE
    for outage in outages:
        if outage.covers(slot_at - MARGIN, slot_at):
            if outage.restore_at <= grace_end - MARGIN:
                return "done"
            if outage.restore_at >= grace_end + MARGIN:
                return "missed"
            return None
    if any(outage.touches(slot_at - MARGIN, slot_at + MARGIN) for outage in outages):
        return None
    return "done"


@pytest.mark.parametrize("example", range(int(os.environ.get("OPENBELL_OUTAGE_EXAMPLES", "2"))))
def test_no_slot_is_ever_without_a_row_over_random_outages(
    pg_server: PgServer, example: int
) -> None:
    seed = int(os.environ.get("OPENBELL_OUTAGE_SEED", random.SystemRandom().randrange(2**32)))
    rng = random.Random(seed + example)
    outages = random_outages(rng)
    url = migrated(pg_server.fresh_schema_url())
    end_at = FIRST_BELL + timedelta(hours=BELLS - 1) + PROPERTY_GRACE + MARGIN * 2
    with TcpProxy.to(url) as proxy:
        clock = ScaledClock(FIRST_BELL - timedelta(minutes=30), speed=PROPERTY_SPEED)
        plan = crypto_plan(proxy.url(url), grace=PROPERTY_GRACE, lease_s=PROPERTY_LEASE_S)
        with running(plan, clock):
            wait_for_start(url)
            for outage in outages:
                sleep_until(clock, outage.cut_at)
                proxy.cut()
                sleep_until(clock, outage.restore_at)
                proxy.restore()
            sleep_until(clock, end_at)
    rows = cycles(url)
    said = f"seed {seed + example} (OPENBELL_OUTAGE_SEED={seed}), outages {outages}, rows {rows}"
    assert max(Counter((row.account_id, row.slot_at) for row in rows).values()) == 1, said
    accounts = {row.account_id for row in rows}
    assert len(accounts) == 2, said
    bells = slots_between(
        "crypto", "hourly", FIRST_BELL, FIRST_BELL + timedelta(hours=BELLS - 1, minutes=1)
    )
    for slot_at in bells:
        found = at_bell(rows, slot_at)
        assert {row.account_id for row in found} == accounts, f"{slot_at}: {said}"
        want = expected(slot_at, outages)
        if want == "done":
            assert {row.status for row in found} == {"done"}, f"{slot_at}: {said}"
        elif want == "missed":
            assert {(row.status, row.reason) for row in found} == {
                ("missed", "store_unavailable")
            }, f"{slot_at}: {said}"
    assert verifies(url), said
