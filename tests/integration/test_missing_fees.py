"""`ledger verify` names a missing borrow fee, on real SQLite and Postgres: a calendar day (UTC) an
account ended short, ended by its latest NAV snapshot, without its `borrow_fee` row. A day not
yet ended by the latest snapshot is not due; a fee charged later is found; a fee row removed from
a replay of the pair-neutral baseline (which shorts and is charged by the daemon's path) is named
with its account, symbol and day, and the replay itself verifies."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal

from sqlalchemy import Engine, delete, select

from openbell.agents.baselines import build_agent
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Side, utc
from openbell.store.core_tables import BORROW_FEE_TABLE
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import SnapshotKind
from openbell.store.verify import MISSING_BORROW_FEE, Breach, verify_ledger
from openbell_testkit.replay import crypto_daily
from openbell_testkit.store import charge_fees_due, fill_for, make_order

SHORTED_AT = utc(2025, 10, 1, 15)  # a Wednesday session
MARKS = {"AAPL": Decimal(100)}


def _missing(engine: Engine) -> list[Breach]:
    return [b for b in verify_ledger(engine).breaches if b.invariant == MISSING_BORROW_FEE]


def _short_account(ledger: Ledger) -> int:
    agent_id = ledger.ensure_agent("bear", "test", SHORTED_AT)
    account_id = ledger.open_account(
        agent_id, "us", "USD", Decimal(10000), SHORTED_AT, allow_short=True
    )
    cycle_id = ledger.claim_cycle(
        account_id, SHORTED_AT, "run", SHORTED_AT + timedelta(minutes=5), SHORTED_AT
    )
    assert cycle_id is not None
    order = make_order(side=Side.SHORT, quantity=Decimal(10), placed_at=SHORTED_AT)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, MARKS["AAPL"])
    )
    return account_id


def test_a_day_ended_short_without_its_fee_is_named(ledger: Ledger, engine: Engine) -> None:
    account_id = _short_account(ledger)
    ledger.write_nav_snapshot(account_id, utc(2025, 10, 1, 20), SnapshotKind.CLOSE, MARKS)
    assert verify_ledger(engine).ok  # October 1 has not ended by the latest snapshot
    ledger.write_nav_snapshot(account_id, utc(2025, 10, 1, 23, 59), SnapshotKind.SLOT, MARKS)
    assert verify_ledger(engine).ok
    # A snapshot at the instant the day ends, written without charging its fee.
    ledger.write_nav_snapshot(account_id, utc(2025, 10, 2), SnapshotKind.SLOT, MARKS)
    report = verify_ledger(engine)
    assert [b.invariant for b in report.breaches] == [MISSING_BORROW_FEE]  # cash still reconciles
    (breach,) = report.breaches
    assert (breach.account_id, breach.expected, breach.actual) == (account_id, Decimal(-10), None)
    assert breach.line() == (
        f"account {account_id} (bear/us) missing_borrow_fee: expected -10, actual None: no "
        "borrow fee charged for AAPL on 2025-10-01: the account ended that day (UTC) short 10 "
        "AAPL, before its latest NAV snapshot at 2025-10-02T00:00:00+00:00"
    )
    # Charged late, at the next snapshot, the fee is found; then the next day is due.
    later = utc(2025, 10, 2, 15)
    fees = charge_fees_due(ledger, account_id, later, MARKS)
    assert [(fee.symbol, fee.day) for fee in fees] == [("AAPL", date(2025, 10, 1))]
    ledger.write_nav_snapshot(account_id, later, SnapshotKind.SLOT, MARKS)
    assert verify_ledger(engine).ok
    ledger.write_nav_snapshot(account_id, utc(2025, 10, 4, 12), SnapshotKind.SLOT, MARKS)
    assert [(b.detail.split(":")[0]) for b in _missing(engine)] == [
        "no borrow fee charged for AAPL on 2025-10-02",
        "no borrow fee charged for AAPL on 2025-10-03",
    ]


def test_a_covered_short_owes_only_the_days_it_ended_short(ledger: Ledger, engine: Engine) -> None:
    account_id = _short_account(ledger)
    cycle_id = ledger.claim_cycle(
        account_id, utc(2025, 10, 2, 15), "run", utc(2025, 10, 2, 16), utc(2025, 10, 2, 15)
    )
    assert cycle_id is not None
    cover = make_order(side=Side.COVER, quantity=Decimal(10), placed_at=utc(2025, 10, 2, 15))
    ledger.record_order(cycle_id=cycle_id, seq=1, order=cover, outcome=fill_for(cover, Decimal(90)))
    ledger.write_nav_snapshot(account_id, utc(2025, 10, 9, 15), SnapshotKind.SLOT, {})
    assert [b.detail.split(":")[0] for b in _missing(engine)] == [
        "no borrow fee charged for AAPL on 2025-10-01"
    ]


def test_a_pair_neutral_replay_verifies_and_a_removed_fee_is_named(db_url: str) -> None:
    upgrade(db_url)
    agent = build_agent(
        "pair_neutral",
        "pair-neutral",
        market="crypto",
        pairs=(("BTC/USDT", "ETH/USDT"), ("SOL/USDT", "XRP/USDT")),
        sessions=5,
    )
    market = replace(crypto_daily(agent), shorting_agents=frozenset({"pair-neutral"}))
    plan = ReplayPlan(
        store_url=db_url, start_at=utc(2025, 11, 1), end_at=utc(2025, 11, 8), markets=(market,)
    )
    replayed = run_replay(plan)
    assert replayed.cycles_done == 7
    assert replayed.cycles_failed == 0
    engine = make_engine(db_url)
    try:
        report = verify_ledger(engine)
        assert report.ok, report.lines()
        assert report.borrow_fees >= 2 * 6  # a short per pair, over every day but the last
        with engine.begin() as connection:
            fee = connection.execute(
                select(BORROW_FEE_TABLE).order_by(BORROW_FEE_TABLE.c.day.desc()).limit(1)
            ).one()
            connection.execute(delete(BORROW_FEE_TABLE).where(BORROW_FEE_TABLE.c.id == fee.id))
        missing = _missing(engine)
        assert [(b.account_id, b.expected) for b in missing] == [(fee.account_id, fee.quantity)]
        assert missing[0].detail.startswith(
            f"no borrow fee charged for {fee.symbol} on {fee.day.isoformat()}: "
        )
        assert f"(pair-neutral/crypto) {MISSING_BORROW_FEE}" in missing[0].line()
    finally:
        engine.dispose()
