"""The ledger's cycle state machine (claims, take-overs, leases, finishes, missed slots, interrupts,
expired leases), account pauses, and NAV snapshots written twice (SQLite, Postgres)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select

from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, MissedSlot, SnapshotKind
from openbell.store.tables import NavSnapshotRow
from openbell_testkit.store import NOW, fill_for, make_order

T0 = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)


def _cash_account(ledger: Ledger, name: str = "cash") -> int:
    agent_id = ledger.ensure_agent(name, "cash", T0)
    return ledger.open_account(agent_id, "us", "USD", Decimal(1000), T0)


def _account(ledger: Ledger, market: str = "us") -> int:
    agent_id = ledger.ensure_agent("tester", "cash", NOW)
    return ledger.open_account(agent_id, market, "USD", Decimal("10000.00"), NOW)


def test_a_claimed_cycle_is_found_and_taken_over_whatever_its_lease(ledger: Ledger) -> None:
    account_id = _account(ledger)
    assert ledger.find_cycle(account_id, NOW) is None
    lease = NOW + timedelta(hours=1)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run-a", lease, NOW)
    assert cycle_id is not None
    found = ledger.find_cycle(account_id, NOW)
    assert found is not None
    assert (found.cycle_id, found.status, found.claimed_by) == (
        cycle_id,
        CycleStatus.CLAIMED,
        "run-a",
    )
    # The lease has not ended, so claim_cycle refuses; a resumed replay takes it anyway.
    assert ledger.claim_cycle(account_id, NOW, "run-b", lease, NOW) is None
    assert ledger.take_over_cycle(cycle_id, "run-b", lease + timedelta(hours=1))
    taken = ledger.find_cycle(account_id, NOW)
    assert taken is not None
    assert taken.claimed_by == "run-b"
    assert taken.lease_until == lease + timedelta(hours=1)
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, NOW)
    assert not ledger.take_over_cycle(cycle_id, "run-c", lease)
    done = ledger.find_cycle(account_id, NOW)
    assert done is not None
    assert (done.status, done.claimed_by) == (CycleStatus.DONE, "run-b")


def test_count_cycles_counts_the_accounts_slots_in_a_window(ledger: Ledger) -> None:
    account_id = _account(ledger)
    other = ledger.open_account(
        ledger.ensure_agent("other", "cash", NOW), "us", "USD", Decimal(1), NOW
    )
    for day in range(3):
        at = NOW + timedelta(days=day)
        ledger.claim_cycle(account_id, at, "run", at, at)
    ledger.claim_cycle(other, NOW, "run", NOW, NOW)
    assert ledger.count_cycles([account_id], start_at=NOW) == 3
    assert ledger.count_cycles([account_id], start_at=NOW, end_at=NOW + timedelta(days=1)) == 1
    assert ledger.count_cycles([account_id, other], start_at=NOW + timedelta(seconds=1)) == 2
    assert ledger.count_cycles([account_id], start_at=NOW + timedelta(days=3)) == 0
    assert ledger.count_cycles([], start_at=NOW) == 0


def test_rewriting_a_nav_snapshot_returns_the_first_and_adds_no_row(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run", NOW, NOW)
    assert cycle_id is not None
    order = make_order()
    ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(30)))
    assert ledger.find_nav_snapshot(account_id, NOW, SnapshotKind.SLOT) is None
    first = ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {"AAPL": Decimal(31)})
    # A resumed cycle writes the same snapshot again, maybe with other marks (or none at all).
    again = ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {"AAPL": Decimal(99)})
    bare = ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {})
    assert again == first
    assert bare == first
    assert ledger.find_nav_snapshot(account_id, NOW, SnapshotKind.SLOT) == first
    assert first.nav == Decimal("10000.00") - Decimal("300.00") + Decimal(310)
    with engine.connect() as connection:
        rows = connection.execute(select(func.count()).select_from(NavSnapshotRow)).scalar_one()
    assert rows == 1


def test_a_holder_renews_and_releases_only_the_claims_it_still_holds(ledger: Ledger) -> None:
    account_id = _account(ledger)
    lease = NOW + timedelta(minutes=1)
    mine = ledger.claim_cycle(account_id, NOW, "run-a", lease, NOW)
    later = NOW + timedelta(hours=1)
    other = _account(ledger, "crypto")  # another account: a later claim of one supersedes
    taken = ledger.claim_cycle(other, later, "run-a", later + timedelta(minutes=1), later)
    assert mine is not None
    assert taken is not None
    assert ledger.take_over_cycle(taken, "run-b", later + timedelta(minutes=2))
    renewed_until = NOW + timedelta(minutes=5)
    assert ledger.renew_claims({mine, taken}, "run-a", renewed_until) == {mine}
    found = ledger.find_cycle(account_id, NOW)
    assert found is not None
    assert found.lease_until == renewed_until
    # Not yet ended: nobody else may claim it; released: anyone may, at once.
    assert ledger.claim_cycle(account_id, NOW, "run-c", NOW, NOW + timedelta(minutes=2)) is None
    at = NOW + timedelta(minutes=2)
    assert ledger.release_claims({mine, taken}, "run-a", at) == {mine}
    assert ledger.claim_cycle(account_id, NOW, "run-c", at + timedelta(minutes=1), at) == mine
    assert ledger.renew_claims({mine}, "run-a", renewed_until) == set()  # lost to run-c
    assert ledger.renew_claims(set(), "run-a", renewed_until) == set()


def test_a_run_finishes_only_a_claim_it_still_holds(ledger: Ledger) -> None:
    account_id = _account(ledger)
    lease = NOW + timedelta(minutes=1)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run-a", lease, NOW)
    assert cycle_id is not None
    assert ledger.take_over_cycle(cycle_id, "run-b", lease + timedelta(minutes=1))
    done_at = NOW + timedelta(minutes=3)
    assert not ledger.finish_cycle(cycle_id, CycleStatus.DONE, done_at, held_by="run-a")
    found = ledger.find_cycle(account_id, NOW)
    assert found is not None
    assert found.status is CycleStatus.CLAIMED
    assert ledger.finish_cycle(cycle_id, CycleStatus.DONE, done_at, held_by="run-b")
    assert ledger.finish_cycle(cycle_id, CycleStatus.DONE, done_at, held_by="run-b")  # again
    assert not ledger.finish_cycle(cycle_id, CycleStatus.FAILED, done_at, held_by="run-b")
    assert not ledger.finish_cycle(cycle_id, CycleStatus.DONE, done_at, held_by="run-a")


def test_record_missed_once_and_never_over_a_claim(ledger: Ledger) -> None:
    account_id = _cash_account(ledger)
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


def test_missed_slots_are_recorded_in_one_go_where_the_slot_has_no_row(ledger: Ledger) -> None:
    first, second = _cash_account(ledger), _cash_account(ledger, name="other")
    slots = [T0 + timedelta(hours=hour) for hour in range(3)]
    claimed = ledger.claim_cycle(first, slots[1], "run", slots[1] + timedelta(minutes=5), slots[1])
    assert claimed is not None
    missed = [
        MissedSlot(account_id=account_id, slot_at=slot_at, reason="daemon_stalled")
        for account_id in (first, second)
        for slot_at in slots
    ]
    now = T0 + timedelta(hours=4)
    assert ledger.record_missed_many(missed, now) == 5  # not over the claim
    assert ledger.record_missed_many(missed, now) == 0  # a slot is recorded once
    found = ledger.find_cycle(first, slots[1])
    assert found is not None
    assert (found.cycle_id, found.status) == (claimed, CycleStatus.CLAIMED)
    assert ledger.cycles_per_account([first, second], T0, slots[2]) == {first: 2, second: 2}
    assert ledger.cycles_per_account([first], slots[2], now) == {first: 1}
    assert ledger.cycles_per_account([first], now, now + timedelta(hours=1)) == {}
    with pytest.raises(ValueError, match="cause"):
        MissedSlot(account_id=first, slot_at=T0, reason="")


def test_interrupt_only_expired_or_own_claims(ledger: Ledger) -> None:
    account_id = _cash_account(ledger)
    lease_until = T0 + timedelta(minutes=10)
    cycle_id = ledger.claim_cycle(account_id, T0, "a:1:x", lease_until, T0)
    assert cycle_id is not None
    assert not ledger.interrupt_cycle(cycle_id, T0, expired_at=T0)  # still under lease
    assert not ledger.interrupt_cycle(cycle_id, T0, held_by="b:2:y")  # someone else's
    assert [c.cycle_id for c in ledger.claims(held_by="a:1:x")] == [cycle_id]
    assert ledger.claims(expired_at=T0) == []
    later = lease_until + timedelta(seconds=1)
    assert [c.cycle_id for c in ledger.claims(expired_at=later)] == [cycle_id]
    assert ledger.interrupt_cycle(cycle_id, later, expired_at=later)
    assert not ledger.interrupt_cycle(cycle_id, later, expired_at=later)  # once
    found = ledger.find_cycle(account_id, T0)
    assert found is not None
    assert found.status is CycleStatus.INTERRUPTED


def test_pause_and_slots(ledger: Ledger) -> None:
    first, second = _cash_account(ledger, "a"), _cash_account(ledger, "b")
    ledger.set_paused(second, True)
    assert ledger.paused([first, second]) == {second}
    assert ledger.last_slot(first) is None
    ledger.record_missed(first, T0, T0)
    assert ledger.last_slot(first) == T0
    assert ledger.slots_with_cycles([first, second], T0, T0 + timedelta(hours=1)) == {(first, T0)}
    assert ledger.account_opened_at(first) == T0


def test_expire_claims_of_other_holders(ledger: Ledger) -> None:
    account_id = _cash_account(ledger)
    # Another account holds "me"'s claim: a later claim of one account would supersede.
    other = ledger.open_account(
        ledger.ensure_agent("other", "cash", T0), "crypto", "USDT", Decimal(1), T0
    )
    dead = ledger.claim_cycle(account_id, T0, "dead", T0 + timedelta(hours=1), T0)
    mine = ledger.claim_cycle(other, T0 + timedelta(hours=1), "me", T0 + timedelta(hours=2), T0)
    assert dead is not None
    assert mine is not None
    assert ledger.expire_claims(T0, except_holder="me") == 1
    assert [c.cycle_id for c in ledger.claims(expired_at=T0)] == [dead]
    taken = ledger.claim_cycle(account_id, T0, "me", T0 + timedelta(hours=1), T0)
    assert taken == dead
