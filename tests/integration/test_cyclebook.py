"""Missed cycles and the daemon's claim bookkeeping, on SQLite and Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from openbell.store.cyclebook import CycleBook
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus

T0 = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)


def account(ledger: Ledger, name: str = "cash") -> int:
    agent_id = ledger.ensure_agent(name, "cash", T0)
    return ledger.open_account(agent_id, "us", "USD", Decimal(1000), T0)


def test_record_missed_once_and_never_over_a_claim(ledger: Ledger) -> None:
    account_id = account(ledger)
    first = ledger.record_missed(account_id, T0, T0 + timedelta(hours=2))
    assert first is not None
    assert ledger.record_missed(account_id, T0, T0 + timedelta(hours=3)) is None
    found = ledger.find_cycle(account_id, T0)
    assert found is not None
    assert found.status is CycleStatus.MISSED
    slot = T0 + timedelta(hours=1)
    claimed = ledger.claim_cycle(account_id, slot, "run", slot + timedelta(minutes=5), slot)
    assert claimed is not None
    assert ledger.record_missed(account_id, slot, slot + timedelta(hours=2)) is None


def test_interrupt_only_expired_or_own_claims(ledger: Ledger, engine: Engine) -> None:
    book = CycleBook(engine)
    account_id = account(ledger)
    lease_until = T0 + timedelta(minutes=10)
    cycle_id = ledger.claim_cycle(account_id, T0, "a:1:x", lease_until, T0)
    assert cycle_id is not None
    assert not book.interrupt(cycle_id, T0, expired_at=T0)  # still under lease
    assert not book.interrupt(cycle_id, T0, held_by="b:2:y")  # someone else's
    assert [c.cycle_id for c in book.claims(held_by="a:1:x")] == [cycle_id]
    assert book.claims(expired_at=T0) == []
    later = lease_until + timedelta(seconds=1)
    assert [c.cycle_id for c in book.claims(expired_at=later)] == [cycle_id]
    assert book.interrupt(cycle_id, later, expired_at=later)
    assert not book.interrupt(cycle_id, later, expired_at=later)  # once
    found = ledger.find_cycle(account_id, T0)
    assert found is not None
    assert found.status is CycleStatus.INTERRUPTED


def test_pause_and_slots(ledger: Ledger, engine: Engine) -> None:
    book = CycleBook(engine)
    first, second = account(ledger, "a"), account(ledger, "b")
    book.set_paused(second, True)
    assert book.paused([first, second]) == {second}
    assert book.last_slot(first) is None
    ledger.record_missed(first, T0, T0)
    assert book.last_slot(first) == T0
    assert book.slots_with_cycles([first, second], T0, T0 + timedelta(hours=1)) == {(first, T0)}
    assert book.account_opened_at(first) == T0


def test_expire_claims_of_other_holders(ledger: Ledger, engine: Engine) -> None:
    book = CycleBook(engine)
    account_id = account(ledger)
    dead = ledger.claim_cycle(account_id, T0, "dead", T0 + timedelta(hours=1), T0)
    mine = ledger.claim_cycle(
        account_id, T0 + timedelta(hours=1), "me", T0 + timedelta(hours=2), T0
    )
    assert dead is not None
    assert mine is not None
    assert book.expire_claims(T0, except_holder="me") == 1
    assert [c.cycle_id for c in book.claims(expired_at=T0)] == [dead]
    taken = ledger.claim_cycle(account_id, T0, "me", T0 + timedelta(hours=1), T0)
    assert taken == dead
