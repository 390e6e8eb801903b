"""`verify_ledger` on real databases: a clean ledger passes, hand-made corruption is named exactly,
and 1,000 random fills across all three markets verify and re-apply as no-ops."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import Engine, bindparam, text

from openbell.markets.domain import Fill, Order, Side
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell.store.types import ExactDecimal
from openbell.store.verify import (
    CASH_BALANCE,
    NAV_SNAPSHOT,
    ONE_FILL_PER_ORDER,
    POSITION_QUANTITY,
    verify_ledger,
)
from openbell_testkit.store import CURRENCY, INSTRUMENTS, NOW, dump_tables, fill_for, make_order


def _trade(ledger: Ledger, market: str = "us", name: str = "alice") -> tuple[int, int, int]:
    """An account with one buy of 10 at 100; returns (account id, order id, fill id)."""
    agent_id = ledger.ensure_agent(name, "random", NOW)
    account_id = ledger.open_account(agent_id, market, CURRENCY[market], Decimal(10000), NOW)
    cycle_id = ledger.claim_cycle(account_id, NOW, "d", NOW + timedelta(minutes=5), NOW)
    assert cycle_id is not None
    order = make_order(instrument=INSTRUMENTS[market][0], quantity=Decimal(10))
    fill = fill_for(order, Decimal(100), fees=Decimal("1.5"))
    recorded = ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill)
    assert recorded.fill_id is not None
    return account_id, recorded.order_id, recorded.fill_id


def test_a_clean_ledger_verifies(ledger: Ledger, engine: Engine) -> None:
    account_id, _, _ = _trade(ledger)
    ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {"AAPL": Decimal("101.5")})
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    assert report.summary() == "ledger ok: 1 accounts, 1 fills, 1 snapshots"
    assert report.lines() == []


def test_a_hand_corrupted_cash_balance_is_named(ledger: Ledger, engine: Engine) -> None:
    account_id, _, _ = _trade(ledger)
    _trade(ledger, market="cn", name="bob")
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE account SET cash = :cash WHERE id = :id").bindparams(
                bindparam("cash", type_=ExactDecimal())
            ),
            {"cash": Decimal("9000.01"), "id": account_id},
        )
    report = verify_ledger(engine)
    assert not report.ok
    [breach] = report.breaches
    assert (breach.account_id, breach.agent_name, breach.market) == (account_id, "alice", "us")
    assert breach.invariant == CASH_BALANCE
    assert (breach.expected, breach.actual) == (Decimal("8998.50"), Decimal("9000.01"))
    [line] = report.lines()
    assert f"account {account_id} (alice/us) cash_balance" in line
    assert "8998.50" in line
    assert "9000.01" in line
    assert report.summary().startswith("ledger BREACHED: 1 breaches in 1 accounts")


def test_a_hand_duplicated_fill_is_named_with_its_order_and_both_fills(
    ledger: Ledger, engine: Engine
) -> None:
    account_id, order_id, fill_id = _trade(ledger)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO fill (order_id, account_id, idempotency_key, symbol, side, quantity,"
                " price, notional, fees, currency, filled_at, price_source)"
                " SELECT order_id, account_id, 'forged', symbol, side, quantity, price, notional,"
                " fees, currency, filled_at, price_source FROM fill WHERE id = :id"
            ),
            {"id": fill_id},
        )
        duplicate_id = connection.execute(
            text("SELECT id FROM fill WHERE idempotency_key = 'forged'")
        ).scalar_one()
    report = verify_ledger(engine)
    by_invariant = {breach.invariant: breach for breach in report.breaches}
    duplicate = by_invariant[ONE_FILL_PER_ORDER]
    assert duplicate.account_id == account_id
    assert (duplicate.expected, duplicate.actual) == (Decimal(1), Decimal(2))
    assert duplicate.detail == f"order {order_id} has fills {fill_id}, {duplicate_id}"
    # The forged fill never moved the balances, so they disagree with the fills too.
    assert by_invariant[CASH_BALANCE].expected == Decimal("7997.00")
    assert by_invariant[POSITION_QUANTITY].expected == Decimal(20)


def test_a_snapshot_that_disagrees_with_the_ledger_is_named(ledger: Ledger, engine: Engine) -> None:
    account_id, _, _ = _trade(ledger)
    snapshot = ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {"AAPL": Decimal(2)})
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE nav_mark SET quantity = :q").bindparams(
                bindparam("q", type_=ExactDecimal())
            ),
            {"q": Decimal(11)},
        )
    report = verify_ledger(engine)
    details = [(b.invariant, b.expected, b.actual, b.detail) for b in report.breaches]
    assert details[0][:3] == (NAV_SNAPSHOT, Decimal(10), Decimal(11))
    assert f"snapshot {snapshot.snapshot_id}" in details[0][3]
    assert "AAPL quantity" in details[0][3]


def _set_mark_value(engine: Engine, value: Decimal) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE nav_mark SET value = :v").bindparams(bindparam("v", type_=ExactDecimal())),
            {"v": value},
        )
        connection.execute(
            text("UPDATE nav_snapshot SET positions_value = :v, nav = cash + :v").bindparams(
                bindparam("v", type_=ExactDecimal())
            ),
            {"v": value},
        )


def test_a_mark_value_is_checked_by_the_money_rule(ledger: Ledger, engine: Engine) -> None:
    """A holding's value is quantity x mark rounded half-up to the cent; the exact product (what
    snapshots written before the rule hold) verifies too, any other value is named."""
    account_id, _, _ = _trade(ledger)  # 10 AAPL
    ledger.write_nav_snapshot(account_id, NOW, SnapshotKind.SLOT, {"AAPL": Decimal("101.2345")})
    assert verify_ledger(engine).ok
    _set_mark_value(engine, Decimal("1012.345"))  # the exact product, as written before the rule
    assert verify_ledger(engine).ok
    _set_mark_value(engine, Decimal("1012.34"))  # rounded half-even, or down: not the rule
    [breach] = verify_ledger(engine).breaches
    assert (breach.invariant, breach.expected, breach.actual) == (
        NAV_SNAPSHOT,
        Decimal("1012.35"),
        Decimal("1012.34"),
    )
    assert "AAPL value at 101.2345" in breach.detail


@dataclass(frozen=True)
class _Placed:
    cycle_id: int
    seq: int
    order: Order
    fill: Fill


def _random_fills(ledger: Ledger, rng: random.Random, count: int) -> list[_Placed]:
    """`count` valid fills over two agents in each market, never overdrawing or overselling."""
    accounts = []
    for market in ("us", "cn", "crypto"):
        for name in ("alpha", "beta"):
            agent_id = ledger.ensure_agent(name, "random", NOW)
            cash = Decimal(10_000_000)
            account_id = ledger.open_account(agent_id, market, CURRENCY[market], cash, NOW)
            accounts.append((account_id, market, {"cash": cash}, {}))
    placed: list[_Placed] = []
    cycles: dict[int, tuple[int, int]] = {}
    index = 0
    while len(placed) < count:
        index += 1
        account_id, market, money, held = rng.choice(accounts)
        instrument = rng.choice(INSTRUMENTS[market])
        at = NOW + timedelta(minutes=index)
        holding = held.get(instrument.symbol, Decimal(0))
        sell = holding > 0 and rng.random() < 0.4
        if market == "crypto":
            quantity = Decimal(rng.randint(1, 500_000)).scaleb(-5)
        else:
            quantity = Decimal(rng.randint(1, 30) * (100 if market == "cn" else 1))
        if sell:
            quantity = min(quantity, holding)
        price = Decimal(rng.randint(100, 5_000_000)).scaleb(-rng.choice((2, 3, 4)))
        order = make_order(
            instrument=instrument,
            side=Side.SELL if sell else Side.BUY,
            quantity=quantity,
            placed_at=at,
        )
        fill = fill_for(order, price, fees=Decimal(rng.randint(0, 500)).scaleb(-2))
        if fill.cash_delta + money["cash"] < 0:
            continue
        money["cash"] += fill.cash_delta
        held[instrument.symbol] = holding + (-quantity if sell else quantity)
        cycle_id, seq = cycles.get(account_id, (0, 99))
        if seq >= 20:  # a new cycle every 20 orders, once the account's last one is done
            if cycle_id:
                assert ledger.finish_cycle(cycle_id, CycleStatus.DONE, at, held_by="bulk")
            cycle_id = ledger.claim_cycle(account_id, at, "bulk", at + timedelta(minutes=5), at)
            assert cycle_id is not None
            seq = 0
        seq += 1
        cycles[account_id] = (cycle_id, seq)
        ledger.record_order(cycle_id=cycle_id, seq=seq, order=order, outcome=fill)
        placed.append(_Placed(cycle_id, seq, order, fill))
    return placed


def test_a_thousand_random_fills_verify_and_reapply_as_no_ops(
    ledger: Ledger, engine: Engine
) -> None:
    placed = _random_fills(ledger, random.Random(20251001), 1000)
    assert len(placed) == 1000
    report = verify_ledger(engine)
    assert report.ok, "\n".join(report.lines())
    assert report.summary() == "ledger ok: 6 accounts, 1000 fills, 0 snapshots"
    before = dump_tables(engine)
    for item in placed:
        again = ledger.record_order(
            cycle_id=item.cycle_id, seq=item.seq, order=item.order, outcome=item.fill
        )
        assert not again.created
        assert again.outcome == item.fill
    assert dump_tables(engine) == before
