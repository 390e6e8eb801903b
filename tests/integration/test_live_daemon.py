"""The live daemon on a fast fake clock: it rings every open slot once, on SQLite and Postgres,
with three daemons sharing one Postgres, and after Postgres drops its connections."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy.engine import make_url

from openbell.daemon.clock import ScaledClock
from openbell.markets.slots import slots_between
from openbell_testkit.live import START_AT, crypto_plan, cycles, fills, migrated, running, verifies
from openbell_testkit.postgres import terminate_connections

#: One hourly slot every 6 real seconds, so the 30-minute grace is 3 real seconds: at 1800 (a slot
#: every 2 s, a grace of 1 s) a fresh clone's run on a loaded machine held the daemon's loop past
#: the grace and the bell was `missed`.
SPEED = 600.0
#: 40 clock minutes, 4 real seconds: a daemon thread held up that long (a loaded machine) loses
#: its claim to a peer.
LEASE_S = 2400.0
#: Three daemons in one process share its interpreter lock, and their cycles' ledger calls hold
#: the event loop, so on a loaded machine one daemon's loop can stall for a second or more. At
#: 1800 times real time that is the whole 30-minute grace (the bell is missed: `missed` cycles, or
#: `interrupted` ones that a peer's sweep takes for abandoned once the lease ends and the grace has
#: passed), and the first slot came 33 ms after the clock started, before three daemons had
#: started up (no cycle at all at 00:00). These run three times slower in real time: a slot every
#: 6 s, a grace of 3 s, a lease of 6 s, 1 s to start up before the first slot (and the grace after
#: it, as a catch-up); checked over three slots, 20 s in all.
SHARED_SPEED = 600.0
SHARED_LEASE_S = 3600.0


def wait_until(clock: ScaledClock, hours: float) -> None:
    target = START_AT + timedelta(hours=hours)
    time.sleep(max(0.0, (target - clock.now()).total_seconds() / clock.speed))


def test_daemon_rings_each_slot_once_and_the_ledger_verifies(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
    with running(crypto_plan(url, lease_s=LEASE_S), clock):
        wait_until(clock, 3.2)
    rows = cycles(url)
    slots = sorted({row.slot_at for row in rows})
    assert slots[:3] == slots_between("crypto", "hourly", START_AT, START_AT + timedelta(hours=3))
    assert Counter((row.account_id, row.slot_at) for row in rows).most_common(1)[0][1] == 1
    assert {row.status for row in rows} <= {"done", "interrupted"}
    assert sum(row.status == "done" for row in rows) >= 6
    assert fills(url) > 0
    assert verifies(url)


def test_a_second_daemon_on_the_same_sqlite_file_is_refused(sqlite_url: str) -> None:
    from openbell.daemon.live import run_live
    from openbell.daemon.stopping import StopRequest
    from openbell.markets.errors import OperatorError

    url = migrated(sqlite_url)
    clock = ScaledClock(START_AT, speed=1.0)
    with (
        running(crypto_plan(url), clock),
        pytest.raises(OperatorError, match="another openbell daemon"),
    ):
        run_live(crypto_plan(url), clock, stop=StopRequest())


@pytest.mark.postgres
def test_three_daemons_on_one_postgres_run_every_cycle_once(pg_url: str) -> None:
    url = migrated(pg_url)
    clock = ScaledClock(START_AT - timedelta(minutes=10), speed=SHARED_SPEED)
    plans = [crypto_plan(url, run_id=f"daemon-{n}", lease_s=SHARED_LEASE_S) for n in range(3)]
    with running(plans[0], clock), running(plans[1], clock), running(plans[2], clock):
        wait_until(clock, 3.2)
    rows = cycles(url)
    per_cycle = Counter((row.account_id, row.slot_at) for row in rows)
    assert max(per_cycle.values()) == 1
    expected = slots_between("crypto", "hourly", START_AT, START_AT + timedelta(hours=3))
    assert {row.slot_at for row in rows} >= set(expected)
    assert {row.status for row in rows if row.slot_at in expected} == {"done"}
    # Which daemon wins a claim is a race, so how the work was split is not asserted here; that
    # the daemons start their claims at different accounts is (tests/unit/test_runner.py).
    assert {row.claimed_by for row in rows} <= {"daemon-0", "daemon-1", "daemon-2"}
    # Each done cycle filled at most what one run would: buy-and-hold buys once per symbol.
    assert verifies(url)
    assert fills(url) > 0


@pytest.mark.postgres
def test_daemon_survives_postgres_dropping_its_connections(pg_url: str) -> None:
    url = migrated(pg_url)
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
    with running(crypto_plan(url, run_id="survivor", lease_s=LEASE_S), clock):
        wait_until(clock, 1.2)
        assert terminate_connections(url) >= 1
        wait_until(clock, 3.2)
    rows = cycles(url)
    late = [row for row in rows if row.slot_at >= START_AT + timedelta(hours=2)]
    assert late
    assert {row.status for row in late} == {"done"}
    assert verifies(url)


@pytest.mark.postgres
def test_the_fault_test_kills_only_its_own_connections(pg_url: str) -> None:
    """Another run on the same server, database and user keeps its connection."""
    parsed = make_url(pg_url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    own_name = str(parsed.query["application_name"])
    with (
        psycopg.connect(conninfo, autocommit=True) as bystander,
        psycopg.connect(conninfo, autocommit=True, application_name=own_name) as own,
    ):
        assert terminate_connections(pg_url) == 1
        assert bystander.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError):
            own.execute("SELECT 1")
