"""The ledger on real SQLite and Postgres: accounts, cycle claims, orders, fills, NAV snapshots."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from openbell.markets.domain import Lot, Rejection, RejectReason, Side
from openbell.markets.errors import ConfigError, LedgerBreach, SchemaError
from openbell.store.db import check_schema, make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import current_revision, head_revision, upgrade
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.store import INSTRUMENTS, NOW, dump_tables, fill_for, make_order

AAPL, MSFT, _ = INSTRUMENTS["us"]


def _account(ledger: Ledger, cash: str = "10000", market: str = "us", currency: str = "USD") -> int:
    agent_id = ledger.ensure_agent("tester", "random", NOW)
    return ledger.open_account(agent_id, market, currency, Decimal(cash), NOW)


def _cycle(ledger: Ledger, account_id: int, minutes: int = 0) -> int:
    slot = NOW + timedelta(minutes=minutes)
    cycle_id = ledger.claim_cycle(account_id, slot, "daemon-a", slot + timedelta(minutes=10), slot)
    assert cycle_id is not None
    return cycle_id


def test_agents_and_accounts_are_idempotent(ledger: Ledger) -> None:
    agent_id = ledger.ensure_agent("tester", "random", NOW)
    assert ledger.ensure_agent("tester", "llm", NOW) == agent_id
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal("10000.00"), NOW)
    assert ledger.open_account(agent_id, "us", "USD", Decimal(5), NOW) == account_id
    assert ledger.open_account(agent_id, "cn", "CNY", Decimal(5), NOW) != account_id
    state = ledger.account_state(account_id, NOW)
    assert state.market == "us"
    assert state.cash.amount == Decimal("10000.00")
    assert state.cash.currency == "USD"
    assert state.positions == {}


def test_a_cycle_is_claimed_once_and_an_expired_lease_is_taken_over(ledger: Ledger) -> None:
    account_id = _account(ledger)
    lease = NOW + timedelta(minutes=5)
    cycle_id = ledger.claim_cycle(account_id, NOW, "daemon-a", lease, NOW)
    assert cycle_id is not None
    assert (
        ledger.claim_cycle(account_id, NOW, "daemon-b", lease, NOW + timedelta(minutes=1)) is None
    )
    later = lease + timedelta(seconds=1)
    taken = ledger.claim_cycle(account_id, NOW, "daemon-b", later + timedelta(minutes=5), later)
    assert taken == cycle_id
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, later)
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, later)  # a retried finish is a no-op
    with pytest.raises(ValueError, match="already done"):
        ledger.finish_cycle(cycle_id, CycleStatus.FAILED, later, error_class="X")
    much_later = later + timedelta(days=1)
    assert ledger.claim_cycle(account_id, NOW, "daemon-c", much_later, much_later) is None
    with pytest.raises(ValueError, match="no account"):
        ledger.claim_cycle(999_999, NOW, "daemon-a", lease, NOW)


def test_record_order_applies_fill_cash_and_position_in_one_go(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id)
    order = make_order(quantity=Decimal(10))
    fill = fill_for(order, Decimal("187.335"), fees=Decimal("0.10"))
    recorded = ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill)
    assert recorded.created
    assert recorded.outcome == fill
    assert recorded.idempotency_key == f"{cycle_id}:1"
    state = ledger.account_state(account_id, NOW)
    assert state.cash.amount == Decimal(10000) - Decimal("1873.35") - Decimal("0.10")
    position = state.positions["AAPL"]
    assert position.quantity == Decimal(10)
    assert position.cost == Decimal("1873.45")
    assert position.recent_buys == (Lot(quantity=Decimal(10), acquired_at=NOW),)

    before = dump_tables(engine)
    again = ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill)
    assert not again.created
    assert again.outcome == fill
    assert (again.order_id, again.fill_id) == (recorded.order_id, recorded.fill_id)
    other = fill_for(order, Decimal(1))  # a retry with another outcome changes nothing either
    assert ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=other).outcome == fill
    assert dump_tables(engine) == before


def test_sells_reduce_average_cost_and_a_full_sale_closes_the_position(ledger: Ledger) -> None:
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id)
    buy = make_order(quantity=Decimal(3))
    ledger.record_order(cycle_id=cycle_id, seq=1, order=buy, outcome=fill_for(buy, Decimal(100)))
    sell = make_order(side=Side.SELL, quantity=Decimal(1))
    ledger.record_order(cycle_id=cycle_id, seq=2, order=sell, outcome=fill_for(sell, Decimal(110)))
    position = ledger.account_state(account_id, NOW).positions["AAPL"]
    assert (position.quantity, position.cost) == (Decimal(2), Decimal("200.00"))
    sell_rest = make_order(side=Side.SELL, quantity=Decimal(2))
    outcome = fill_for(sell_rest, Decimal(90))
    ledger.record_order(cycle_id=cycle_id, seq=3, order=sell_rest, outcome=outcome)
    state = ledger.account_state(account_id, NOW)
    assert state.positions == {}
    assert state.cash.amount == Decimal(10000) - 300 + 110 + 180


def test_a_rejection_is_stored_and_replayed(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id)
    order = make_order()
    rejection = Rejection(reason=RejectReason.LOT_SIZE, message="whole lots only", at=NOW)
    recorded = ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=rejection, target_weight=Decimal("0.25")
    )
    assert recorded.created
    assert recorded.fill_id is None
    replayed = ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=rejection)
    assert replayed.outcome == rejection
    assert not replayed.created
    with engine.connect() as connection:
        row = connection.execute(
            text('SELECT status, reject_reason, target_weight FROM "order"')
        ).one()
    assert (row.status, row.reject_reason) == ("rejected", "lot_size")
    assert Decimal(row.target_weight) == Decimal("0.25")
    assert ledger.account_state(account_id, NOW).cash.amount == Decimal(10000)


def test_an_overdraft_or_oversell_is_refused_and_writes_nothing(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger, cash="100")
    cycle_id = _cycle(ledger, account_id)
    before = dump_tables(engine)
    order = make_order(quantity=Decimal(1))
    with pytest.raises(LedgerBreach, match="cash"):
        ledger.record_order(
            cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(101))
        )
    sell = make_order(side=Side.SELL, quantity=Decimal(1))
    with pytest.raises(LedgerBreach, match="holding 0"):
        ledger.record_order(
            cycle_id=cycle_id, seq=2, order=sell, outcome=fill_for(sell, Decimal(1))
        )
    wrong = make_order(instrument=MSFT)
    with pytest.raises(ValueError, match="does not match"):
        ledger.record_order(
            cycle_id=cycle_id, seq=3, order=wrong, outcome=fill_for(order, Decimal(1))
        )
    assert dump_tables(engine) == before


def test_concurrent_retries_of_one_order_fill_it_once(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id)
    order = make_order(quantity=Decimal(2))
    fill = fill_for(order, Decimal(50))
    barrier = threading.Barrier(4)
    results = []
    errors: list[Exception] = []

    def place() -> None:
        barrier.wait()
        try:
            results.append(ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill))
        except Exception as exc:  # noqa: BLE001  (collected and asserted on below)
            errors.append(exc)

    threads = [threading.Thread(target=place) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(result.created for result in results) == [False, False, False, True]
    assert {result.fill_id for result in results} == {results[0].fill_id}
    assert ledger.account_state(account_id, NOW).cash.amount == Decimal(9900)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM fill")).scalar_one() == 1


def test_nav_snapshot_values_holdings_at_their_marks(ledger: Ledger) -> None:
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id)
    for seq, (instrument, quantity, price) in enumerate(
        [(AAPL, "3", "100.00"), (MSFT, "2", "400.50")], start=1
    ):
        order = make_order(instrument=instrument, quantity=Decimal(quantity))
        ledger.record_order(
            cycle_id=cycle_id, seq=seq, order=order, outcome=fill_for(order, Decimal(price))
        )
    marks = {"AAPL": Decimal("101.123456789"), "MSFT": Decimal(399), "NVDA": Decimal(1)}
    at = NOW + timedelta(hours=1)
    snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, marks)
    assert snapshot.cash == Decimal(10000) - Decimal("300.00") - Decimal("801.00")
    # 3 x 101.123456789 = 303.370370367, valued by the money rule: to the cent, half-up.
    assert snapshot.marks["AAPL"].value == Decimal("303.37")
    assert snapshot.positions_value == Decimal("303.37") + Decimal(798)
    assert snapshot.nav == snapshot.cash + snapshot.positions_value
    assert set(snapshot.marks) == {"AAPL", "MSFT"}
    assert snapshot.last_fill_id is not None
    same = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {"AAPL": Decimal(1)})
    assert same == snapshot
    with pytest.raises(ValueError, match="no mark for held MSFT"):
        ledger.write_nav_snapshot(account_id, at, SnapshotKind.CLOSE, {"AAPL": Decimal(1)})


def test_check_schema_asks_for_an_upgrade_until_migrated(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        with pytest.raises(SchemaError, match="run `openbell db upgrade`"):
            check_schema(engine)
        assert current_revision(engine) is None
        assert upgrade(db_url) == head_revision()
        assert check_schema(engine) == head_revision()
    finally:
        engine.dispose()


def test_make_engine_refuses_bad_urls_and_prepares_sqlite(tmp_path: Path) -> None:
    for url in ("not a url", "mysql://localhost/db", "postgres+asyncpg://x@y/z"):
        with pytest.raises(ConfigError, match="store url"):
            make_engine(url)
    path = tmp_path / "deep" / "er" / "openbell.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert path.exists()
    finally:
        engine.dispose()
