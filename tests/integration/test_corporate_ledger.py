"""Corporate actions in the ledger, on real SQLite and Postgres: a split or a dividend is one
idempotent entry that moves the position and the cash, `ledger verify` accounts for it (cash,
positions, NAV snapshots, the entitlement and the amounts), and tampering with one is named."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, bindparam, text

from openbell.markets.corporate_actions import ActionKind, CorporateAction
from openbell.markets.domain import Side, utc
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.types import ExactDecimal
from openbell.store.verify import (
    ACTION_AMOUNT,
    ACTION_ENTITLEMENT,
    CASH_BALANCE,
    POSITION_QUANTITY,
    verify_ledger,
)
from openbell_testkit.store import INSTRUMENTS, dump_tables, fill_for, make_order

AAPL = INSTRUMENTS["us"][0]
MOUTAI = INSTRUMENTS["cn"][0]
BEFORE = utc(2020, 8, 28, 13, 30)  # the last session before AAPL's 4-for-1 split
EX_AT = utc(2020, 8, 31, 13, 30)  # its ex-date's open


def split(ratio: str = "4", symbol: str = "AAPL", ex_at: datetime = EX_AT) -> CorporateAction:
    return CorporateAction(
        symbol=symbol,
        kind=ActionKind.SPLIT,
        ex_date=ex_at.date(),
        ex_at=ex_at,
        currency="USD",
        source="test",
        ratio=Decimal(ratio),
    )


def dividend(cash: str, symbol: str, ex_at: datetime, currency: str) -> CorporateAction:
    return CorporateAction(
        symbol=symbol,
        kind=ActionKind.CASH_DIVIDEND,
        ex_date=ex_at.date(),
        ex_at=ex_at,
        currency=currency,
        source="test",
        cash=Decimal(cash),
    )


def _account(ledger: Ledger, market: str = "us", cash: str = "10000") -> int:
    agent_id = ledger.ensure_agent(f"holder-{market}", "test", BEFORE)
    return ledger.open_account(
        agent_id, market, "USD" if market == "us" else "CNY", Decimal(cash), BEFORE
    )


def _trade(
    ledger: Ledger,
    account_id: int,
    at: datetime,
    side: Side,
    quantity: str,
    price: str,
    instrument=AAPL,
) -> None:
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    order = make_order(instrument=instrument, side=side, quantity=Decimal(quantity), placed_at=at)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(price))
    )
    ledger.finish_cycle(cycle_id, "done", at)  # type: ignore[arg-type]


def _verified(engine: Engine) -> str:
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    return report.summary()


def test_a_4_for_1_split_quadruples_the_holding_once(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    before = ledger.account_state(account_id, EX_AT)
    applied = ledger.apply_corporate_action(account_id, split(), at=EX_AT)
    assert applied is not None
    assert applied.created
    assert (applied.quantity_before, applied.quantity_delta, applied.cash_delta) == (
        Decimal(10),
        Decimal(30),
        Decimal(0),
    )
    after = ledger.account_state(account_id, EX_AT)
    assert after.positions["AAPL"].quantity == Decimal(40)
    assert after.positions["AAPL"].cost == before.positions["AAPL"].cost  # per share: a quarter
    assert after.cash == before.cash
    dump = dump_tables(engine)
    again = ledger.apply_corporate_action(account_id, split(), at=EX_AT + timedelta(hours=1))
    assert again is not None
    assert not again.created
    assert again.entry_id == applied.entry_id
    assert dump_tables(engine) == dump
    assert _verified(engine).endswith(", 1 corporate actions")


def test_a_dividend_pays_the_holding_before_the_ex_date(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger, "cn", "400000")
    ex_at = utc(2025, 6, 26, 1, 30)
    _trade(ledger, account_id, utc(2025, 6, 24, 1, 30), Side.BUY, "100", "1437.20", MOUTAI)
    _trade(ledger, account_id, ex_at, Side.BUY, "100", "1415.00", MOUTAI)  # bought ex: no dividend
    cash = ledger.account_state(account_id, ex_at).cash.amount
    applied = ledger.apply_corporate_action(
        account_id, dividend("27.673", "600519.SH", ex_at, "CNY"), at=ex_at
    )
    assert applied is not None
    assert (applied.quantity_before, applied.cash_delta) == (Decimal(100), Decimal("2767.30"))
    state = ledger.account_state(account_id, ex_at)
    assert state.cash.amount == cash + Decimal("2767.30")
    assert state.positions["600519.SH"].quantity == Decimal(200)
    _verified(engine)


def test_nothing_held_before_the_ex_date_makes_no_entry(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, EX_AT, Side.BUY, "10", "127.58")
    assert ledger.apply_corporate_action(account_id, split(), at=EX_AT) is None
    assert ledger.account_state(account_id, EX_AT).positions["AAPL"].quantity == Decimal(10)
    assert dump_tables(engine)["corporate_action"] == []


def test_a_reverse_split_pays_the_fraction_in_cash_and_takes_its_cost(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "25", "8.00")  # cost 200.00
    with pytest.raises(ValueError, match="cash in lieu needs the ex-date's price"):
        ledger.apply_corporate_action(account_id, split("0.1"), at=EX_AT)
    applied = ledger.apply_corporate_action(account_id, split("0.1"), at=EX_AT, price=Decimal(81))
    assert applied is not None
    assert (applied.quantity_delta, applied.fraction, applied.cash_delta, applied.cost_delta) == (
        Decimal(-23),
        Decimal("0.5"),
        Decimal("40.50"),
        Decimal("-40.00"),
    )
    position = ledger.account_state(account_id, EX_AT).positions["AAPL"]
    assert (position.quantity, position.cost) == (Decimal(2), Decimal("160.00"))
    _verified(engine)


def test_an_action_applied_late_counts_only_what_was_held_before_the_ex_date(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    _trade(ledger, account_id, EX_AT, Side.SELL, "10", "127.58")  # sold ex, before it was applied
    _trade(ledger, account_id, EX_AT + timedelta(days=1), Side.BUY, "5", "132.76")
    applied = ledger.apply_corporate_action(account_id, split(), at=EX_AT + timedelta(days=1))
    assert applied is not None
    assert applied.quantity_before == Decimal(10)
    assert ledger.account_state(account_id, EX_AT).positions["AAPL"].quantity == Decimal(35)
    _verified(engine)


def test_actions_apply_in_ex_date_order_and_in_the_accounts_currency(ledger: Ledger) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    ledger.apply_corporate_action(account_id, split(), at=EX_AT)
    earlier = dividend("0.82", "AAPL", utc(2020, 8, 7, 13, 30), "USD")
    with pytest.raises(ValueError, match="after a later one"):
        ledger.apply_corporate_action(account_id, earlier, at=EX_AT)
    with pytest.raises(ValueError, match="CNY"):
        ledger.apply_corporate_action(
            account_id, dividend("1", "AAPL", utc(2020, 9, 1, 13, 30), "CNY"), at=EX_AT
        )


def test_snapshots_around_a_split_verify_and_hold_their_value(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    close = utc(2020, 8, 28, 20, 0)
    first = ledger.write_nav_snapshot(
        account_id, close, SnapshotKind.CLOSE, {"AAPL": Decimal("499.23")}
    )
    ledger.apply_corporate_action(account_id, split(), at=EX_AT)
    second = ledger.write_nav_snapshot(
        account_id, EX_AT, SnapshotKind.SLOT, {"AAPL": Decimal("127.58")}
    )
    assert first.last_action_id is None
    assert second.last_action_id is not None
    assert second.marks["AAPL"].quantity == Decimal(40)
    assert (first.nav, second.nav) == (Decimal("10000.00"), Decimal("10110.90"))  # not -75%
    _verified(engine)


def _tamper(engine: Engine, column: str, value: Decimal) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(f"UPDATE corporate_action SET {column} = :v").bindparams(  # noqa: S608
                bindparam("v", type_=ExactDecimal())
            ),
            {"v": value},
        )


def test_a_tampered_entry_is_named(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger, "cn", "200000")
    ex_at = utc(2025, 6, 26, 1, 30)
    _trade(ledger, account_id, utc(2025, 6, 24, 1, 30), Side.BUY, "100", "1437.20", MOUTAI)
    ledger.apply_corporate_action(
        account_id, dividend("27.673", "600519.SH", ex_at, "CNY"), at=ex_at
    )
    _tamper(engine, "cash_delta", Decimal("2800.00"))
    found = {breach.invariant for breach in verify_ledger(engine).breaches}
    assert found == {CASH_BALANCE, ACTION_AMOUNT}
    _tamper(engine, "cash_delta", Decimal("2767.30"))
    _tamper(engine, "quantity_before", Decimal(200))
    report = verify_ledger(engine)
    entitlement, amount = report.breaches
    assert (entitlement.invariant, entitlement.expected, entitlement.actual) == (
        ACTION_ENTITLEMENT,
        Decimal(100),
        Decimal(200),
    )
    assert "600519.SH held before the ex-date" in entitlement.detail
    assert (amount.invariant, amount.expected, amount.actual) == (
        ACTION_AMOUNT,
        Decimal("5534.60"),  # what 200 shares would have been paid
        Decimal("2767.30"),
    )


def test_a_split_entry_that_does_not_reach_the_position_is_named(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    ledger.apply_corporate_action(account_id, split(), at=EX_AT)
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM corporate_action"))
    [breach] = verify_ledger(engine).breaches
    assert (breach.invariant, breach.expected, breach.actual) == (
        POSITION_QUANTITY,
        Decimal(10),
        Decimal(40),
    )


def test_an_ex_date_is_kept_as_a_date(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    _trade(ledger, account_id, BEFORE, Side.BUY, "10", "499.23")
    ledger.apply_corporate_action(account_id, split(), at=EX_AT)
    [row] = dump_tables(engine)["corporate_action"]
    assert date(2020, 8, 31) in row
