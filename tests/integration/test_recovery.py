"""Start-up recovery after a daemon died (kill -9): abandoned claims are completed while their
slot's grace is open and interrupted after; slots slept through are recorded `missed`; an account
whose ledger fails verification is paused and the others go on."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session

from openbell.daemon.clock import ScaledClock
from openbell.store import tables
from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell_testkit.live import (
    START_AT,
    crypto_plan,
    cycles,
    migrated,
    running,
    verifies,
)

SPEED = 600.0
GRACE = timedelta(minutes=30)
DEAD_RUN = "deadhost:99999:0123456789ab"


def open_accounts(engine: Engine) -> list[int]:
    ledger = Ledger(engine)
    ids = []
    for name, kind in (("buy-and-hold", "buy_and_hold"), ("random", "random")):
        agent_id = ledger.ensure_agent(name, kind, START_AT - timedelta(days=1))
        ids.append(
            ledger.open_account(
                agent_id, "crypto", "USDT", Decimal(10000), START_AT - timedelta(hours=6)
            )
        )
    return ids


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_restart_after_a_crash_recovers_every_slot(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = migrated(request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url"))
    engine = make_engine(url)
    ledger = Ledger(engine)
    first, second = open_accounts(engine)
    DaemonRuns(engine).record_start(DEAD_RUN, ["crypto"], START_AT - timedelta(hours=6))
    restart_at = START_AT + timedelta(hours=3, minutes=10)
    # The dead daemon, watching since 18:00, finished 00:00, died inside 01:00 (past its grace at
    # restart) and inside 03:00 (in its grace); both leases ended before the restart. 02:00
    # never rang.
    for account_id in (first, second):
        ledger.record_missed(account_id, START_AT, START_AT)  # a finished row, any status
    old = START_AT + timedelta(hours=1)
    current = START_AT + timedelta(hours=3)
    lease_end = current + timedelta(minutes=5)
    stale = ledger.claim_cycle(first, old, DEAD_RUN, old + timedelta(minutes=40), old)
    taken = ledger.claim_cycle(first, current, DEAD_RUN, lease_end, current)
    assert stale is not None
    assert taken is not None
    engine.dispose()

    clock = ScaledClock(restart_at, speed=SPEED)
    with running(crypto_plan(url, grace=GRACE), clock):
        time.sleep(1.5)

    by_key = {(row.account_id, row.slot_at): row for row in cycles(url)}
    assert by_key[(first, old)].status == "interrupted"
    assert by_key[(first, current)].status == "done"  # completed, taken over
    assert by_key[(first, current)].claimed_by != DEAD_RUN
    assert by_key[(second, current)].status == "done"  # the catch-up rang the slot for all
    for account_id in (first, second):
        hole = by_key[(account_id, START_AT + timedelta(hours=2))]
        assert (hole.status, hole.reason) == ("missed", "daemon_down")
    assert (by_key[(second, old)].status, by_key[(second, old)].reason) == ("missed", "daemon_down")
    assert "claimed" not in {row.status for row in by_key.values()}
    assert verifies(url)


def test_an_account_failing_verification_is_paused_and_the_others_go_on(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    engine = make_engine(url)
    first, second = open_accounts(engine)
    with Session(engine) as session:  # corrupt the first account's running balance
        session.execute(
            update(tables.AccountRow).where(tables.AccountRow.id == first).values(cash=Decimal(1))
        )
        session.commit()
    clock = ScaledClock(START_AT - timedelta(minutes=2), speed=SPEED)
    # Stopped once the other account's 00:00 cycle is done, well inside the slot's grace: at its
    # end the paused account's slot is recorded `missed` (account_paused), which a fixed sleep
    # after a slow start-up reached.
    cutoff = START_AT + GRACE / 2
    with running(crypto_plan(url, grace=GRACE), clock):
        while not any(row.account_id == second and row.status == "done" for row in cycles(url)):
            assert clock.now() < cutoff, "the other account's cycle did not run inside the grace"
            time.sleep(0.05)
    statuses = {(row.account_id, row.status) for row in cycles(url)}
    assert (second, "done") in statuses
    assert not any(account_id == first for account_id, _ in statuses)
    with Session(engine) as session:
        account = session.get(tables.AccountRow, first)
        assert account is not None
        assert account.paused
    engine.dispose()
