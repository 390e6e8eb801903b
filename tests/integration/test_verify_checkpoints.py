"""An incremental verification from stored checkpoints agrees with a full one, finds what is
written after them, and is not fooled by a damaged checkpoint or a row added behind it; on real
SQLite and Postgres ledgers."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine, bindparam, text

from openbell.markets.domain import Side
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell.store.types import ExactDecimal
from openbell.store.verify import CASH_BALANCE, NAV_SNAPSHOT, verify
from openbell.store.verify.checkpoints import load_checkpoints, save_checkpoints
from openbell_testkit.store import CURRENCY, INSTRUMENTS, NOW, fill_for, make_order

HOUR = timedelta(hours=1)


class _Trader:
    """Two accounts trading one slot an hour, each slot ending with a slot snapshot."""

    def __init__(self, ledger: Ledger, seed: int) -> None:
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.slot = 0
        self.accounts: list[tuple[int, dict[str, Decimal]]] = []
        for name in ("alpha", "beta"):
            agent_id = ledger.ensure_agent(name, "random", NOW)
            account_id = ledger.open_account(agent_id, "us", CURRENCY["us"], Decimal(100_000), NOW)
            self.accounts.append((account_id, {}))

    def slots(self, count: int) -> None:
        for _ in range(count):
            self.slot += 1
            at = NOW + self.slot * HOUR
            for account_id, held in self.accounts:
                self._cycle(account_id, held, at)

    def _cycle(self, account_id: int, held: dict[str, Decimal], at: datetime) -> None:
        cycle_id = self.ledger.claim_cycle(account_id, at, "test", at + HOUR, at)
        assert cycle_id is not None
        instrument = self.rng.choice(INSTRUMENTS["us"][:2])
        holding = held.get(instrument.symbol, Decimal(0))
        sell = holding > 0 and self.rng.random() < 0.4
        quantity = min(holding, Decimal(3)) if sell else Decimal(self.rng.randint(1, 5))
        order = make_order(
            instrument=instrument,
            side=Side.SELL if sell else Side.BUY,
            quantity=quantity,
            placed_at=at,
        )
        price = Decimal(self.rng.randint(9_000, 11_000)).scaleb(-2)
        self.ledger.record_order(
            cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, price, fees=Decimal(1))
        )
        held[instrument.symbol] = holding + (-quantity if sell else quantity)
        assert self.ledger.finish_cycle(cycle_id, CycleStatus.DONE, at, held_by="test")
        marks = {symbol: price for symbol, quantity in held.items() if quantity}
        self.ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, marks)


def test_an_incremental_verification_agrees_with_a_full_one(ledger: Ledger, engine: Engine) -> None:
    trader = _Trader(ledger, seed=30)
    trader.slots(12)
    first = verify(engine)
    assert first.report.ok, first.report.lines()
    assert save_checkpoints(engine, first.checkpoints, NOW) == 2
    trader.slots(5)
    since, why_not = load_checkpoints(engine)
    assert since is not None, why_not
    assert since.at == NOW
    incremental = verify(engine, since)
    assert incremental.fell_back is None
    assert incremental.report.ok
    assert (incremental.report.fills, incremental.report.snapshots) == (10, 10)
    assert incremental.report.since == NOW
    assert "written since the mark of" in incremental.report.summary()
    full = verify(engine)
    assert incremental.checkpoints.accounts == full.checkpoints.accounts
    assert incremental.checkpoints.watermarks == full.checkpoints.watermarks


def test_a_breach_written_after_the_checkpoints_is_found_as_a_full_check_finds_it(
    ledger: Ledger, engine: Engine
) -> None:
    trader = _Trader(ledger, seed=31)
    trader.slots(6)
    save_checkpoints(engine, verify(engine).checkpoints, NOW)
    trader.slots(2)
    account_id = trader.accounts[0][0]
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE account SET cash = cash || '1' WHERE id = :id")
            if engine.dialect.name == "sqlite"
            else text("UPDATE account SET cash = cash + 1 WHERE id = :id"),
            {"id": account_id},
        )
    since, _ = load_checkpoints(engine)
    assert since is not None
    incremental = verify(engine, since)
    assert incremental.fell_back is not None
    assert [b.invariant for b in incremental.report.breaches] == [CASH_BALANCE]
    assert incremental.report.lines() == verify(engine).report.lines()
    assert account_id not in incremental.checkpoints.accounts


def test_a_bad_snapshot_after_the_checkpoints_is_found(ledger: Ledger, engine: Engine) -> None:
    trader = _Trader(ledger, seed=32)
    trader.slots(4)
    save_checkpoints(engine, verify(engine).checkpoints, NOW)
    trader.slots(1)
    with engine.begin() as connection:
        newest = connection.execute(text("SELECT max(id) FROM nav_snapshot")).scalar_one()
        connection.execute(
            text("UPDATE nav_snapshot SET cash = :cash WHERE id = :id").bindparams(
                bindparam("cash", type_=ExactDecimal())
            ),
            {"cash": Decimal("1.00"), "id": newest},
        )
    since, _ = load_checkpoints(engine)
    assert since is not None
    breaches = verify(engine, since).report.breaches
    assert [breach.invariant for breach in breaches][:1] == [NAV_SNAPSHOT]
    assert f"snapshot {newest} " in breaches[0].detail


def test_a_tampered_checkpoint_is_not_used(ledger: Ledger, engine: Engine) -> None:
    trader = _Trader(ledger, seed=33)
    trader.slots(3)
    save_checkpoints(engine, verify(engine).checkpoints, NOW)
    with engine.begin() as connection:
        connection.execute(
            text('UPDATE verify_checkpoint SET state = replace(state, \'"cash":"\', \'"cash":"9\')')
        )
    since, why_not = load_checkpoints(engine)
    assert since is None
    assert "checksum" in why_not


def test_a_row_removed_behind_the_checkpoints_sends_the_ledger_to_a_full_check(
    ledger: Ledger, engine: Engine
) -> None:
    trader = _Trader(ledger, seed=34)
    trader.slots(4)
    save_checkpoints(engine, verify(engine).checkpoints, NOW)
    trader.slots(1)
    with engine.begin() as connection:
        oldest = connection.execute(text("SELECT min(id) FROM nav_snapshot")).scalar_one()
        connection.execute(text("DELETE FROM nav_mark WHERE snapshot_id = :id"), {"id": oldest})
        connection.execute(text("DELETE FROM nav_snapshot WHERE id = :id"), {"id": oldest})
    since, _ = load_checkpoints(engine)
    assert since is not None
    result = verify(engine, since)
    assert result.fell_back is not None
    assert "cannot continue" in result.fell_back
    assert result.report.ok
    assert result.report.since is None
