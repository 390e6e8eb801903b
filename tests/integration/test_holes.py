"""Holes in the watched history: a slot of an enrolled account without a cycle row, behind a later
one, is recorded `missed` at start-up (`daemon_down`: no daemon rang it) and while the daemon runs
(a row gone from behind the sweep's mark), on SQLite and Postgres."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlmodel import Session, col, select

from openbell.agents.baselines import build_agent
from openbell.daemon.clock import ScaledClock
from openbell.store import tables
from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell_testkit.live import (
    START_AT,
    crypto_plan,
    cycles,
    migrated,
    running,
    sleep_until,
    verifies,
)

DEAD_RUN = "deadhost:99999:0123456789ab"


def test_a_hole_behind_a_later_cycle_is_recorded_at_start(db_url: str) -> None:
    url = migrated(db_url)
    engine = make_engine(url)
    ledger = Ledger(engine)
    # A daemon watched the market from 23:00, ran 00:00, was down at 01:00, ran 02:00 and died.
    DaemonRuns(engine).record_start(DEAD_RUN, ["crypto"], START_AT - timedelta(hours=1))
    ids = []
    for name, kind in (("buy-and-hold", "buy_and_hold"), ("random", "random")):
        agent_id = ledger.ensure_agent(name, kind, START_AT - timedelta(hours=1))
        ids.append(
            ledger.open_account(
                agent_id, "crypto", "USDT", Decimal(10000), START_AT - timedelta(hours=1)
            )
        )
    for account_id in ids:
        for hours in (0, 2):
            slot_at = START_AT + timedelta(hours=hours)
            cycle_id = ledger.claim_cycle(
                account_id, slot_at, DEAD_RUN, slot_at + timedelta(minutes=1), slot_at
            )
            assert cycle_id is not None
            ledger.finish_cycle(cycle_id, CycleStatus.SKIPPED, slot_at, reason="data_unavailable")
    engine.dispose()

    clock = ScaledClock(START_AT + timedelta(hours=3, minutes=10), speed=600.0)
    with running(crypto_plan(url), clock):
        time.sleep(1.5)
    by_key = {(row.account_id, row.slot_at): row for row in cycles(url)}
    for account_id in ids:
        hole = by_key[(account_id, START_AT + timedelta(hours=1))]
        assert (hole.status, hole.reason) == ("missed", "daemon_down")
        assert by_key[(account_id, START_AT + timedelta(hours=2))].status == "skipped"
        assert by_key[(account_id, START_AT + timedelta(hours=3))].status == "done"
    assert verifies(url)


@pytest.mark.sqlite_only
def test_a_row_gone_behind_the_mark_is_found_while_running(db_url: str) -> None:
    url = migrated(db_url)
    speed = 1800.0
    clock = ScaledClock(START_AT + timedelta(hours=1, minutes=40), speed=speed)
    # The cash agent never places an order: any of its cycles can go without breaking the ledger.
    agents = (build_agent("cash", "cash", market="crypto"),)
    with running(crypto_plan(url, agents=agents, lease_s=2400.0), clock):
        sleep_until(clock, START_AT + timedelta(hours=3, minutes=40))
        # Its first cycle in its watched history (from the account's opening: a slow start-up
        # can catch up a slot before it), long behind the sweep's mark (03:10 at most), is gone.
        engine = make_engine(url)
        try:
            with Session(engine) as session:
                account = session.exec(select(tables.AccountRow)).one()
                gone = session.exec(
                    select(tables.CycleRow)
                    .where(tables.CycleRow.slot_at >= account.created_at)
                    .order_by(col(tables.CycleRow.slot_at))
                ).first()
                assert gone is not None
                assert gone.slot_at <= START_AT + timedelta(hours=3)
                key = (gone.account_id, gone.slot_at)
                session.delete(gone)
                session.commit()
        finally:
            engine.dispose()
        time.sleep(3.0)
    found = [row for row in cycles(url) if (row.account_id, row.slot_at) == key]
    assert [(row.status, row.reason) for row in found] == [("missed", "record_lost")]
