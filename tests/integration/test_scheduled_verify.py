"""The running daemon verifies the whole ledger on its schedule (`[store] full_verify_every_h`),
in a worker thread beside its bells: a breach planted while it runs pauses that account, whose
later slots then go unrun, while the other account's bells go on; on real SQLite and Postgres."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import select, update
from sqlmodel import col

from openbell.daemon.clock import ScaledClock
from openbell.store.db import make_engine
from openbell.store.tables import AccountRow
from openbell_testkit.live import START_AT, crypto_plan, cycles, migrated, query, running

#: One hourly slot every 6 real seconds, so the 30-minute grace is 3 real seconds: at 1800 (a grace
#: of 1 s) a loaded machine can hold a bell past it, and the paused account's later rows would then
#: say the bell was missed rather than `account_paused` (`test_account_paused.py`, stop 37).
SPEED = 600.0
#: The schedule, in clock seconds: a full verification every two hourly slots.
EVERY_S = 7200.0


def _wait_until(clock: ScaledClock, hours: float) -> None:
    target = START_AT + timedelta(hours=hours)
    time.sleep(max(0.0, (target - clock.now()).total_seconds() / clock.speed))


def _add_a_cent(url: str, account_id: int) -> None:
    """Move the account's stored cash by a cent that no fill explains."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            cash = connection.execute(
                select(AccountRow.cash).where(col(AccountRow.id) == account_id)
            ).scalar_one()
            connection.execute(
                update(AccountRow)
                .where(col(AccountRow.id) == account_id)
                .values(cash=cash + Decimal("0.01"))
            )
    finally:
        engine.dispose()


def test_a_breach_found_by_the_scheduled_verification_pauses_its_account(db_url: str) -> None:
    url = migrated(db_url)
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
    plan = replace(crypto_plan(url), full_verify_every_s=EVERY_S)
    with running(plan, clock):
        _wait_until(clock, 1.5)
        [(broken,)] = query(
            url,
            "SELECT account.id FROM account JOIN agent ON agent.id = account.agent_id "
            "WHERE agent.name = 'buy-and-hold'",
        )
        _add_a_cent(url, broken)
        breached_at = clock.now()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if query(url, "SELECT paused FROM account WHERE id = :id", id=broken)[0][0]:
                break
            time.sleep(0.1)
        paused_at = clock.now()
        _wait_until(clock, (paused_at - START_AT).total_seconds() / 3600 + 3.2)
    assert query(url, "SELECT paused FROM account WHERE id = :id", id=broken)[0][0]
    assert paused_at - breached_at <= timedelta(seconds=EVERY_S * 2)
    rows = cycles(url)
    later = paused_at + timedelta(hours=1)
    after = [r for r in rows if r.account_id == broken and r.slot_at >= later]
    assert after  # each later bell leaves a record for the paused account ...
    assert {(r.status, r.reason) for r in after} == {("missed", "account_paused")}  # ... not a run
    assert [r for r in rows if r.account_id != broken and r.slot_at >= later]
    [(stored,)] = query(url, "SELECT count(*) FROM verify_checkpoint")
    assert stored == 1  # the clean account's; the broken one has none
