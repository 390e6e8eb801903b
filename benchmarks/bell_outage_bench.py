"""Every bell leaves a record (issue 30): how late a slot runs once its store is back, how soon the
cycles of a slot whose store stayed away past the grace are recorded `missed`, and what the hole
sweep costs on a big ledger.

Part 1, outages. The live daemon (`run_live`, in a thread, on a `ScaledClock` at `--speed` clock
seconds per real second) rings the bundled crypto hourly bars with two agents on a fresh Postgres
schema, through the test kit's TCP proxy (`openbell_testkit.proxy`), which is cut one clock minute
before the 02:00 bell and restored some minutes after it: inside the hourly grace (15 minutes) and
past it. For each outage it prints when the store came back, when the slot's cycles were claimed
(their `started_at`) and how long after the store came back that was, and the attempts and
`late_s` of the daemon's `slot_ran_late` line; past the grace, when the `missed`
(`store_unavailable`) rows were written (their `started_at`), how long after the store came back.
Times are on the daemon's clock; the retry's back-off is in clock seconds, so the figures hold at
any speed above the real-time floor of the waits (50 ms).

Part 2, the sweep. A ledger of `--accounts` accounts with a cycle at each of `--slots` hourly
slots (written directly, as `missed` rows), whole or with one cycle in every 500 deleted (a few
holes in every account's history, the sweep's worst case: it reads their rows); then the hole sweep
(`HoleSweep`) is timed: the first sweep (the whole watched history, as at start-up), a later one
(an hour later: one new slot), and the deep check (behind the mark), on SQLite and on Postgres.
It checks that the first sweep found every deleted cycle.

Not a test: run it by hand, `.venv/bin/python benchmarks/bell_outage_bench.py [--speed 60]
[--accounts 15 --slots 1800] [--pg URL] [--no-outages]` (default Postgres `DEFAULT_PG`; it needs
CREATE on the database, and drops the schemas it makes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import delete
from structlog.testing import capture_logs

from openbell.daemon.clock import ScaledClock
from openbell.daemon.holes import HoleSweep, MissedCause, WatchedMarket
from openbell.markets.slots import slots_between
from openbell.store.core_tables import CYCLE_TABLE
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import MissedSlot
from openbell_testkit.live import START_AT, crypto_plan, cycles, running, sleep_until
from openbell_testkit.postgres import PgServer
from openbell_testkit.proxy import TcpProxy

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BELL = START_AT + timedelta(hours=2)
GRACE = timedelta(minutes=15)
#: Minutes after the bell at which the store comes back.
OUTAGES = (2, 5, 10, 20)


@contextmanager
def schemas(url: str) -> Iterator[PgServer]:
    server = PgServer(url=url, prefix=f"bell_bench_{uuid.uuid4().hex[:8]}")
    try:
        yield server
    finally:
        with psycopg.connect(server.conninfo, autocommit=True) as connection:
            for schema in server.schemas:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def outage(server: PgServer, speed: float, back_after: timedelta) -> dict[str, Any]:
    url = server.fresh_schema_url()
    upgrade(url)
    restore_at = BELL + back_after
    with capture_logs() as logs, TcpProxy.to(url) as proxy:
        clock = ScaledClock(BELL - timedelta(minutes=5), speed=speed)
        with running(crypto_plan(proxy.url(url), grace=GRACE, lease_s=600.0), clock):
            sleep_until(clock, BELL - timedelta(minutes=1))
            proxy.cut()
            sleep_until(clock, restore_at)
            restored_at = clock.now()
            proxy.restore()
            sleep_until(clock, max(restore_at, BELL + GRACE) + timedelta(minutes=3))
    rows = [row for row in cycles(url) if row.slot_at == BELL]
    late = [line for line in logs if line["event"] == "slot_ran_late"]
    started = [row.started_at for row in rows if row.started_at is not None]
    return {
        "back_after_min": back_after.total_seconds() / 60,
        "restored_at": restored_at,
        "rows": sorted((row.status, row.reason or "") for row in rows),
        "first_started_at": min(started) if started else None,
        "after_restore_s": (
            round((min(started) - restored_at).total_seconds(), 1) if started else None
        ),
        "attempts": late[0]["attempts"] if late else None,
        "late_s": late[0]["late_s"] if late else None,
    }


def sweep_cost(url: str, accounts: int, slots: int, every: int) -> dict[str, float | int]:
    upgrade(url)
    engine = make_engine(url)
    try:
        ledger = Ledger(engine)
        start_at = START_AT - timedelta(hours=slots)
        grid = slots_between("crypto", "hourly", start_at, START_AT)
        ids = []
        for n in range(accounts):
            agent_id = ledger.ensure_agent(f"agent-{n}", "cash", start_at)
            ids.append(ledger.open_account(agent_id, "crypto", "USDT", Decimal(1000), start_at))
        written = [
            MissedSlot(account_id=account_id, slot_at=slot_at, reason="bench")
            for account_id in ids
            for slot_at in grid
        ]
        ledger.record_missed_many(written, START_AT)
        gone = written[::every] if every else []
        with engine.begin() as connection:
            for missed in gone:
                connection.execute(
                    delete(CYCLE_TABLE).where(
                        CYCLE_TABLE.c.account_id == missed.account_id,
                        CYCLE_TABLE.c.slot_at == missed.slot_at,
                    )
                )
        sweep = HoleSweep(
            ledger,
            [
                WatchedMarket(
                    market="crypto",
                    cadence="hourly",
                    grace=GRACE,
                    accounts=dict.fromkeys(ids, start_at),
                )
            ],
        )

        def cause(_market: str, _slot_at: datetime, _paused: bool) -> MissedCause:
            return MissedCause.DAEMON_DOWN

        now = START_AT + GRACE - timedelta(minutes=1)  # the grid's last slot is past its grace
        began = time.perf_counter()
        first = sweep.sweep(now, cause, set())
        first_s = time.perf_counter() - began
        if first.get("crypto", 0) != len(gone):
            raise SystemExit(f"the first sweep recorded {first}, not the {len(gone)} deleted")
        began = time.perf_counter()
        sweep.sweep(now + timedelta(hours=1), cause, set())
        later_s = time.perf_counter() - began
        began = time.perf_counter()
        lost = sweep.deep_check(now + timedelta(hours=1))
        deep_s = time.perf_counter() - began
        if lost:
            raise SystemExit(f"the deep check found holes the sweep had filled: {lost}")
    finally:
        engine.dispose()
    return {
        "cycles": len(written),
        "holes": len(gone),
        "first_sweep_s": round(first_s, 3),
        "later_sweep_s": round(later_s, 4),
        "deep_check_s": round(deep_s, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=float, default=60.0)
    parser.add_argument("--accounts", type=int, default=15)
    parser.add_argument("--slots", type=int, default=1800)
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--no-outages", dest="outages", action="store_false")
    args = parser.parse_args()
    with schemas(args.pg) as server:
        if args.outages:
            print(f"part 1: Postgres away from 01:59 across the 02:00 bell, {args.speed}x clock")
        for minutes in OUTAGES if args.outages else ():
            print(" ", outage(server, args.speed, timedelta(minutes=minutes)))
        print(f"part 2: hole sweep, {args.accounts} accounts x {args.slots} hourly slots")
        for every in (0, 500):
            with tempfile.TemporaryDirectory() as folder:
                sqlite = f"sqlite:///{Path(folder) / 'ledger.db'}"
                print("  sqlite  ", sweep_cost(sqlite, args.accounts, args.slots, every))
            pg = server.fresh_schema_url()
            print("  postgres", sweep_cost(pg, args.accounts, args.slots, every))


if __name__ == "__main__":
    main()
