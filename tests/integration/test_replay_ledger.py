"""The replay's ledger on real SQLite and Postgres: the same answers and the same rows as the plain
ledger, written only at a flush, and a refused fill changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import Fill, Order, Rejection, RejectReason, Side
from openbell.markets.errors import LedgerBreach
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind
from openbell.store.replay_ledger import ReplayLedger
from openbell_testkit.store import (
    CLAIM_COLUMNS,
    INSTRUMENTS,
    NOW,
    dump_tables,
    fill_for,
    make_order,
)

AAPL, MSFT, _ = INSTRUMENTS["us"]
#: Columns written from the ids of other rows or counters that differ between two databases.
_IDS = frozenset({"id", "cycle_id", "order_id", "snapshot_id", "idempotency_key", "last_fill_id"})


def _accounts(ledger: Ledger) -> list[int]:
    ids = []
    for name in ("alpha", "beta"):
        agent_id = ledger.ensure_agent(name, "random", NOW)
        ids.append(ledger.open_account(agent_id, "us", "USD", Decimal(10000), NOW))
    return ids


def _orders(slot: int) -> list[tuple[Order, Fill | Rejection]]:
    """A day's orders: buy AAPL and MSFT, sell part of AAPL, a rejection, sell the rest."""
    at = NOW + timedelta(days=slot)
    buy_aapl = make_order(instrument=AAPL, quantity=Decimal(7), placed_at=at)
    buy_msft = make_order(instrument=MSFT, quantity=Decimal(3), placed_at=at)
    sell_some = make_order(instrument=AAPL, side=Side.SELL, quantity=Decimal(4), placed_at=at)
    rejected = make_order(instrument=MSFT, quantity=Decimal(10**6), placed_at=at)
    sell_rest = make_order(instrument=AAPL, side=Side.SELL, quantity=Decimal(3), placed_at=at)
    return [
        (buy_aapl, fill_for(buy_aapl, Decimal("101.37"), fees=Decimal("0.51"))),
        (buy_msft, fill_for(buy_msft, Decimal("333.33"), fees=Decimal("0.50"))),
        (sell_some, fill_for(sell_some, Decimal("102.01"), fees=Decimal("0.21"))),
        (rejected, Rejection(reason=RejectReason.INSUFFICIENT_CASH, message="no", at=at)),
        (sell_rest, fill_for(sell_rest, Decimal("99.99"))),
    ]


def _run(
    ledger: Ledger,
    account_ids: list[int],
    slots: int,
    between: Callable[[], None] | None = None,
) -> list[object]:
    """Claim, trade, value and finish `slots` daily cycles of each account, calling `between`
    after each slot; what it was told."""
    seen: list[object] = []
    for slot in range(slots):
        if slot and between is not None:
            between()
        at = NOW + timedelta(days=slot)
        for account_id in account_ids:
            cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
            assert cycle_id is not None
            for seq, (order, outcome) in enumerate(_orders(slot), start=1):
                ledger.record_order(cycle_id=cycle_id, seq=seq, order=order, outcome=outcome)
                state = ledger.account_state(account_id, at)
                held = ledger.open_positions(account_id)
                assert held == {symbol: p.quantity for symbol, p in state.positions.items()}
                seen.extend([state, held])
            seen.append([o.symbol for o in ledger.recent_orders(account_id, at, 3)])
            marks = {"AAPL": Decimal(100), "MSFT": Decimal("300.5")}
            snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, marks)
            seen.append((snapshot.cash, snapshot.nav, dict(snapshot.marks)))
            assert ledger.finish_cycle(cycle_id, CycleStatus.DONE, at, held_by="run")
    return seen


def _written_behind(replay: ReplayLedger) -> None:
    replay.seal()
    replay.write_behind()


@pytest.mark.parametrize(
    "between",
    [
        None,
        ReplayLedger.flush,
        ReplayLedger.seal,  # written by the next seal, or by the read the book cannot answer
        _written_behind,
        ReplayLedger.flush_forked,  # by a child process on a SQLite file, in the process on PG
    ],
    ids=["one-batch", "flushed", "sealed", "written-behind", "forked"],
)
def test_the_replay_ledger_answers_and_writes_what_the_ledger_does(
    engine: Engine, tmp_path: Path, between: Callable[[ReplayLedger], None] | None
) -> None:
    """Two ledgers, the plain one on a SQLite file and the replay's on `engine`'s database
    (SQLite and Postgres): the same calls, the same answers, the same rows after a flush; also
    with a batch a slot, flushed, sealed, or sealed and written in a worker thread or a forked
    child while the next slot's cycles run (each read of the ledger, `recent_orders`, waiting for
    it)."""
    plain_url = f"sqlite:///{(tmp_path / 'plain.db').as_posix()}"
    upgrade(plain_url)
    plain_engine = make_engine(plain_url)
    try:
        plain = Ledger(plain_engine)
        plain_ids = _accounts(plain)
        expected = _run(plain, plain_ids, slots=3)

        replay = ReplayLedger(engine, start_at=NOW)
        ids = _accounts(replay)
        replay.own(ids)
        got = _run(
            replay, ids, slots=3, between=None if between is None else lambda: between(replay)
        )
        if between is None:
            assert dump_tables(engine)["cycle"] == [], "nothing is written before the flush"
        assert replay.pending > 0
        replay.check()
        assert got == expected
        leave_out = CLAIM_COLUMNS | _IDS
        theirs, ours = (
            dump_tables(plain_engine, leave_out=leave_out),
            dump_tables(engine, leave_out=leave_out),
        )
    finally:
        plain_engine.dispose()
    for table in ("account", "cycle", "order", "fill", "position", "nav_snapshot", "nav_mark"):
        assert ours[table] == theirs[table], table
    assert ours["fill"]


def test_a_refused_fill_changes_nothing_in_the_working_copy(engine: Engine) -> None:
    replay = ReplayLedger(engine, start_at=NOW)
    (account_id, _other) = _accounts(replay)
    replay.own([account_id])
    cycle_id = replay.claim_cycle(account_id, NOW, "run", NOW + timedelta(minutes=5), NOW)
    assert cycle_id is not None
    before = replay.account_state(account_id, NOW)
    too_big = make_order(instrument=AAPL, quantity=Decimal(1000))
    with pytest.raises(LedgerBreach):
        replay.record_order(
            cycle_id=cycle_id, seq=1, order=too_big, outcome=fill_for(too_big, Decimal(100))
        )
    sell = make_order(instrument=AAPL, side=Side.SELL, quantity=Decimal(1))
    with pytest.raises(LedgerBreach):
        replay.record_order(
            cycle_id=cycle_id, seq=1, order=sell, outcome=fill_for(sell, Decimal(1))
        )
    assert replay.account_state(account_id, NOW) == before
    assert replay.cycle_orders(cycle_id) == []
    replay.finish_cycle(cycle_id, CycleStatus.DONE, NOW)
    replay.check()
    assert [row[0] for row in dump_tables(engine)["order"]] == []


def _a_cycle_claimed_by_another_writer_first(engine: Engine) -> tuple[ReplayLedger, int, int]:
    """A replay's finished cycle, not yet written, whose (account, slot) another writer then
    claims in the ledger: the batch holding it cannot be written. The replay, the account and
    the other writer's cycle."""
    replay = ReplayLedger(engine, start_at=NOW)
    (account_id, _other) = _accounts(replay)
    replay.own([account_id])
    cycle_id = replay.claim_cycle(account_id, NOW, "run", NOW + timedelta(minutes=5), NOW)
    assert cycle_id is not None
    replay.finish_cycle(cycle_id, CycleStatus.DONE, NOW)
    other = Ledger(engine).claim_cycle(account_id, NOW, "other", NOW + timedelta(minutes=5), NOW)
    assert other is not None
    return replay, account_id, other


def _the_other_writer_holds_the_cycle(replay: ReplayLedger, account_id: int, other: int) -> None:
    replay.flush()  # the error was raised once; the ledger holds the other writer's claim
    found = replay.find_cycle(account_id, NOW)
    assert found is not None
    assert (found.cycle_id, found.claimed_by) == (other, "other")


def test_a_batch_written_behind_that_fails_raises_at_the_next_use_of_the_ledger(
    engine: Engine,
) -> None:
    replay, account_id, other = _a_cycle_claimed_by_another_writer_first(engine)
    replay.seal()
    replay.write_behind()
    later = NOW + timedelta(days=1)
    assert replay.account_state(account_id, later).cash.amount == Decimal(10000)  # the book's
    with pytest.raises(IntegrityError):
        replay.recent_orders(account_id, later, 3)  # the ledger's: waits for the batch
    _the_other_writer_holds_the_cycle(replay, account_id, other)


def test_a_forked_batch_that_fails_raises_at_the_next_use_of_the_ledger(engine: Engine) -> None:
    """As written behind, on a SQLite file: the child's `IntegrityError` is raised in the replay
    by its next read of the ledger, once."""
    replay, account_id, other = _a_cycle_claimed_by_another_writer_first(engine)
    later = NOW + timedelta(days=1)
    if engine.dialect.name == "postgresql":  # written in the process: raised at once
        with pytest.raises(IntegrityError):
            replay.flush_forked()
    else:
        replay.flush_forked()
        assert replay.account_state(account_id, later).cash.amount == Decimal(10000)  # the book's
        with pytest.raises(IntegrityError):
            replay.recent_orders(account_id, later, 3)  # the ledger's: waits for the child
    _the_other_writer_holds_the_cycle(replay, account_id, other)
