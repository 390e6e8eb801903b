"""Negative positions in the ledger, on real SQLite and Postgres: shorts and covers executed by the
real market rules, recorded by the `Ledger` and by the replay's batched `ReplayLedger`, with each
day's borrow fees charged before its snapshot as the daemon charges them, verify (cash less the
fees, signed positions, costs as open proceeds, NAV = cash + signed q x mark); a fill that would
cross zero is refused and writes nothing; corporate actions on a short (it pays the dividend, a
split scales it); and `ledger verify` names a short where it is not allowed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from openbell.markets.calendars import calendar_for
from openbell.markets.corporate_actions import ActionKind, CorporateAction
from openbell.markets.domain import Fill, Instrument, Order, Rejection, RejectReason, Side, utc
from openbell.markets.errors import LedgerBreach
from openbell.markets.execution import execute
from openbell.markets.rules import US
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind
from openbell.store.replay_ledger import ReplayLedger
from openbell.store.verify import CROSSES_ZERO, SHORT_NOT_ALLOWED, verify_ledger
from openbell_testkit.store import (
    CLAIM_COLUMNS,
    INSTRUMENTS,
    charge_fees_due,
    dump_tables,
    fill_for,
    make_order,
)

AAPL, MSFT, _ = INSTRUMENTS["us"]
#: Mid-session minutes of three October 2025 US sessions.
DAYS = (utc(2025, 10, 1, 15), utc(2025, 10, 2, 15), utc(2025, 10, 3, 15))
_IDS = frozenset({"id", "cycle_id", "order_id", "snapshot_id", "idempotency_key", "last_fill_id"})


def _account(ledger: Ledger, name: str = "bear", *, allow_short: bool = True) -> int:
    agent_id = ledger.ensure_agent(name, "test", DAYS[0])
    return ledger.open_account(
        agent_id, "us", "USD", Decimal(10000), DAYS[0], allow_short=allow_short
    )


def _place(
    ledger: Ledger,
    account_id: int,
    cycle_id: int,
    seq: int,
    side: Side,
    quantity: str,
    price: str,
    instrument: Instrument = AAPL,
    at: datetime = DAYS[0],
) -> Fill | Rejection:
    """Execute an order by the US rules against the account as the ledger holds it, and record
    it."""
    order = Order(instrument=instrument, side=side, quantity=Decimal(quantity), placed_at=at)
    outcome = execute(
        order=order,
        account=ledger.account_state(account_id, at),
        price=Decimal(price),
        now=at,
        rules=US,
        calendar=calendar_for(US.calendar_id),
    )
    ledger.record_order(cycle_id=cycle_id, seq=seq, order=order, outcome=outcome)
    return outcome


def _trade_days(
    ledger: Ledger, account_id: int, before_fees: Callable[[], None] = lambda: None
) -> list[object]:
    """Three days of shorting, adding, covering part, a long beside it and a cover of the rest,
    each day valued after the borrow fees of the days before are charged (at the day before's
    marks, as the daemon does); what the ledger answered along the way."""
    seen: list[object] = []
    closes: dict[str, Decimal] = {}
    script = (
        ((Side.SHORT, "10", "200", AAPL), (Side.BUY, "5", "300", MSFT)),
        (
            (Side.SHORT, "5", "210", AAPL),
            (Side.COVER, "6", "190", AAPL),
            (Side.BUY, "1", "1", AAPL),
        ),
        ((Side.COVER, "9", "180", AAPL), (Side.SELL, "5", "320", MSFT)),
    )
    marks = ({"AAPL": "205", "MSFT": "301"}, {"AAPL": "195", "MSFT": "310"}, {"AAPL": "181"})
    for day, (at, orders, mark) in enumerate(zip(DAYS, script, marks, strict=True)):
        cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
        assert cycle_id is not None
        for seq, (side, quantity, price, instrument) in enumerate(orders, start=1):
            outcome = _place(
                ledger, account_id, cycle_id, seq, side, quantity, price, instrument, at
            )
            seen.append((day, seq, outcome))
            seen.append(ledger.account_state(account_id, at))
        before_fees()
        fees = charge_fees_due(ledger, account_id, at, closes)
        seen.append([(fee.symbol, fee.day, fee.quantity, fee.amount) for fee in fees])
        prices = {symbol: Decimal(price) for symbol, price in mark.items()}
        closes = prices
        snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.CLOSE, prices)
        seen.append((snapshot.cash, snapshot.positions_value, snapshot.nav, dict(snapshot.marks)))
        assert ledger.finish_cycle(cycle_id, CycleStatus.DONE, at, held_by="run")
    return seen


def test_shorts_and_covers_move_cash_and_signed_positions_and_verify(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    seen = _trade_days(ledger, account_id)
    outcomes = [item[2] for item in seen if isinstance(item, tuple) and len(item) == 3]
    fills = [outcome for outcome in outcomes if isinstance(outcome, Fill)]
    assert [(f.side, f.quantity) for f in fills] == [
        (Side.SHORT, Decimal(10)),
        (Side.BUY, Decimal(5)),
        (Side.SHORT, Decimal(5)),
        (Side.COVER, Decimal(6)),
        (Side.COVER, Decimal(9)),
        (Side.SELL, Decimal(5)),
    ]
    refused = [outcome for outcome in outcomes if isinstance(outcome, Rejection)]
    assert [r.reason for r in refused] == [RejectReason.INSUFFICIENT_POSITION]  # buy on a short
    assert "cover the short first" in refused[0].message
    state = ledger.account_state(account_id, DAYS[2])
    assert state.allow_short
    assert state.positions == {}
    charged = [item for item in seen if isinstance(item, list)]
    # The short of 10 AAPL held over October 1 (marked 205) and the 9 left over October 2 (195),
    # each |q| x close x 30 bps / 10000 / 365, charged at the next day's snapshot.
    assert charged == [
        [],
        [("AAPL", DAYS[0].date(), Decimal(-10), Decimal("0.02"))],
        [("AAPL", DAYS[1].date(), Decimal(-9), Decimal("0.01"))],
    ]
    borrowed = sum((fee[3] for fees in charged for fee in fees), Decimal(0))
    expected_cash = Decimal(10000) + sum((f.cash_delta for f in fills), Decimal(0)) - borrowed
    assert state.cash.amount == expected_cash
    snapshots = [item for item in seen if isinstance(item, tuple) and len(item) == 4]
    cash, positions_value, nav, marks = snapshots[0]
    assert marks["AAPL"].quantity == Decimal(-10)
    assert marks["AAPL"].value == Decimal(-2050)  # -10 x 205
    assert positions_value == Decimal(-2050) + Decimal(1505)
    assert nav == cash + positions_value
    # Day one: short 10 AAPL at 199.90 (200 slipped 5 bps down), buy 5 MSFT at 300.15.
    assert cash == Decimal(10000) + Decimal("1999.00") - Decimal("1500.75")
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    assert (report.fills, report.borrow_fees) == (6, 2)


def test_a_short_keeps_its_open_proceeds_as_its_cost(ledger: Ledger) -> None:
    account_id = _account(ledger)
    at = DAYS[0]
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    _place(ledger, account_id, cycle_id, 1, Side.SHORT, "10", "200")
    _place(ledger, account_id, cycle_id, 2, Side.SHORT, "5", "100")
    position = ledger.account_state(account_id, at).positions["AAPL"]
    assert (position.quantity, position.cost) == (
        Decimal(-15),
        Decimal("1999.00") + Decimal("499.75"),
    )
    _place(ledger, account_id, cycle_id, 3, Side.COVER, "5", "150")
    position = ledger.account_state(account_id, at).positions["AAPL"]
    closed = (Decimal("2498.75") * 5 / 15).quantize(Decimal("0.01"))
    assert (position.quantity, position.cost) == (Decimal(-10), Decimal("2498.75") - closed)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((Side.SHORT, "3"), (Side.BUY, "1")),
        ((Side.BUY, "3"), (Side.SHORT, "1")),
        ((Side.SHORT, "3"), (Side.COVER, "4")),
        ((Side.SHORT, "3"), (Side.SELL, "1")),
    ],
)
def test_a_fill_that_would_cross_zero_is_refused_and_writes_nothing(
    ledger: Ledger, engine: Engine, first: tuple[Side, str], second: tuple[Side, str]
) -> None:
    account_id = _account(ledger)
    at = DAYS[0]
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    opening = make_order(side=first[0], quantity=Decimal(first[1]), placed_at=at)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=opening, outcome=fill_for(opening, Decimal(100))
    )
    before = dump_tables(engine)
    crossing = make_order(side=second[0], quantity=Decimal(second[1]), placed_at=at)
    with pytest.raises(LedgerBreach):
        ledger.record_order(
            cycle_id=cycle_id, seq=2, order=crossing, outcome=fill_for(crossing, Decimal(100))
        )
    assert dump_tables(engine) == before
    assert verify_ledger(engine).ok


def test_verify_names_a_short_where_it_is_not_allowed_and_a_crossing(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _account(ledger)
    at = DAYS[0]
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    _place(ledger, account_id, cycle_id, 1, Side.SHORT, "3", "100")
    _place(ledger, account_id, cycle_id, 2, Side.COVER, "2", "100")
    assert verify_ledger(engine).ok
    with engine.begin() as connection:
        connection.execute(text("UPDATE account SET allow_short = :no"), {"no": False})
    report = verify_ledger(engine)
    assert {breach.invariant for breach in report.breaches} == {SHORT_NOT_ALLOWED}
    with engine.begin() as connection:
        connection.execute(text("UPDATE account SET allow_short = :yes"), {"yes": True})
        connection.execute(text("UPDATE fill SET quantity = 4 WHERE side = 'cover'"))
        connection.execute(text("UPDATE position SET quantity = 1"))
    crossing = [b for b in verify_ledger(engine).breaches if b.invariant == CROSSES_ZERO]
    assert len(crossing) == 1
    assert (crossing[0].expected, crossing[0].actual) == (Decimal(-3), Decimal(1))
    assert "AAPL goes from -3 to 1" in crossing[0].detail


def test_a_cn_account_cannot_allow_shorting(ledger: Ledger) -> None:
    agent_id = ledger.ensure_agent("bear", "test", DAYS[0])
    with pytest.raises(ValueError, match="A-shares cannot be shorted"):
        ledger.open_account(agent_id, "cn", "CNY", Decimal(100000), DAYS[0], allow_short=True)


def test_opening_an_account_again_follows_the_config_s_allow_short(ledger: Ledger) -> None:
    account_id = _account(ledger, allow_short=False)
    assert not ledger.account_state(account_id, DAYS[0]).allow_short
    assert _account(ledger, allow_short=True) == account_id
    assert ledger.account_state(account_id, DAYS[0]).allow_short
    assert _account(ledger, allow_short=False) == account_id  # never shorted: may opt out
    assert not ledger.account_state(account_id, DAYS[0]).allow_short


def test_an_account_that_has_shorted_keeps_allow_short(ledger: Ledger, engine: Engine) -> None:
    account_id = _account(ledger)
    at = DAYS[0]
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    _place(ledger, account_id, cycle_id, 1, Side.SHORT, "3", "100")
    _place(ledger, account_id, cycle_id, 2, Side.COVER, "3", "100")
    with pytest.raises(ValueError, match="has shorted, so it keeps allow_short"):
        _account(ledger, allow_short=False)
    assert ledger.account_state(account_id, at).allow_short
    assert verify_ledger(engine).ok


def test_the_replay_ledger_writes_the_shorts_the_ledger_does(
    engine: Engine, tmp_path: Path
) -> None:
    plain_url = f"sqlite:///{(tmp_path / 'plain.db').as_posix()}"
    upgrade(plain_url)
    plain_engine = make_engine(plain_url)
    try:
        plain = Ledger(plain_engine)
        expected = _trade_days(plain, _account(plain))
        replay = ReplayLedger(engine, start_at=DAYS[0])
        account_id = _account(replay)
        replay.own([account_id])
        written: list[int] = []
        got = _trade_days(
            replay, account_id, lambda: written.append(len(dump_tables(engine)["fill"]))
        )
        # A day's fills wait in the batch until its borrow fees are looked up (after the day's
        # orders, before its snapshot, as the daemon does), which flushes first.
        assert written == [0, 2, 4]
        replay.check()
        assert got == expected
        leave_out = CLAIM_COLUMNS | _IDS
        theirs = dump_tables(plain_engine, leave_out=leave_out)
        ours = dump_tables(engine, leave_out=leave_out)
    finally:
        plain_engine.dispose()
    for table in ("account", "order", "fill", "position", "nav_snapshot", "nav_mark", "borrow_fee"):
        assert ours[table] == theirs[table], table
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    assert (report.fills, report.borrow_fees) == (6, 2)


def test_the_replay_ledger_refuses_a_crossing_fill_and_changes_nothing(engine: Engine) -> None:
    replay = ReplayLedger(engine, start_at=DAYS[0])
    account_id = _account(replay)
    replay.own([account_id])
    at = DAYS[0]
    cycle_id = replay.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    _place(replay, account_id, cycle_id, 1, Side.SHORT, "3", "100")
    before = replay.account_state(account_id, at)
    buy = make_order(side=Side.BUY, quantity=Decimal(1), placed_at=at)
    with pytest.raises(LedgerBreach):
        replay.record_order(cycle_id=cycle_id, seq=2, order=buy, outcome=fill_for(buy, Decimal(1)))
    assert replay.account_state(account_id, at) == before
    replay.flush()
    assert verify_ledger(engine).ok


# -- corporate actions on a short ------------------------------------------------------------------

BEFORE = utc(2020, 8, 28, 15)  # the last session before AAPL's 4-for-1 split
EX_AT = utc(2020, 8, 31, 13, 30)


def _action(kind: ActionKind, **amount: Decimal) -> CorporateAction:
    return CorporateAction(
        symbol="AAPL",
        kind=kind,
        ex_date=EX_AT.date(),
        ex_at=EX_AT,
        currency="USD",
        source="test",
        **amount,
    )


def _short_before(ledger: Ledger, quantity: str) -> int:
    agent_id = ledger.ensure_agent("bear", "test", BEFORE)
    account_id = ledger.open_account(
        agent_id, "us", "USD", Decimal(10000), BEFORE, allow_short=True
    )
    cycle_id = ledger.claim_cycle(account_id, BEFORE, "run", BEFORE + timedelta(minutes=5), BEFORE)
    assert cycle_id is not None
    order = make_order(side=Side.SHORT, quantity=Decimal(quantity), placed_at=BEFORE)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(500))
    )
    return account_id


def test_a_short_pays_the_dividend(ledger: Ledger, engine: Engine) -> None:
    account_id = _short_before(ledger, "10")
    cash = ledger.account_state(account_id, EX_AT).cash.amount
    applied = ledger.apply_corporate_action(
        account_id, _action(ActionKind.CASH_DIVIDEND, cash=Decimal("0.82")), at=EX_AT
    )
    assert applied is not None
    assert (applied.quantity_before, applied.cash_delta) == (Decimal(-10), Decimal("-8.20"))
    assert ledger.account_state(account_id, EX_AT).cash.amount == cash - Decimal("8.20")
    report = verify_ledger(engine)
    assert report.ok, report.lines()


def test_a_split_scales_a_short_and_a_fraction_is_bought_back(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _short_before(ledger, "10")
    applied = ledger.apply_corporate_action(
        account_id, _action(ActionKind.SPLIT, ratio=Decimal(4)), at=EX_AT
    )
    assert applied is not None
    assert applied.quantity_delta == Decimal(-30)
    position = ledger.account_state(account_id, EX_AT).positions["AAPL"]
    assert (position.quantity, position.cost) == (Decimal(-40), Decimal(5000))
    other = _short_before_named(ledger, "bear-2", "3")
    cash = ledger.account_state(other, EX_AT).cash.amount
    half = ledger.apply_corporate_action(
        other, _action(ActionKind.SPLIT, ratio=Decimal("1.5")), at=EX_AT, price=Decimal(120)
    )
    assert half is not None
    # -3 x 1.5 = -4.5: the short keeps -4 and pays for the half share it is cut off.
    assert (half.quantity_delta, half.fraction, half.cash_delta) == (
        Decimal(-1),
        Decimal("-0.5"),
        Decimal("-60.00"),
    )
    assert ledger.account_state(other, EX_AT).cash.amount == cash - Decimal(60)
    position = ledger.account_state(other, EX_AT).positions["AAPL"]
    assert position.quantity == Decimal(-4)
    assert position.cost == Decimal(1500) - (
        Decimal(1500) * Decimal("0.5") / Decimal("4.5")
    ).quantize(Decimal("0.01"))
    report = verify_ledger(engine)
    assert report.ok, report.lines()


def _short_before_named(ledger: Ledger, name: str, quantity: str) -> int:
    agent_id = ledger.ensure_agent(name, "test", BEFORE)
    account_id = ledger.open_account(
        agent_id, "us", "USD", Decimal(10000), BEFORE, allow_short=True
    )
    cycle_id = ledger.claim_cycle(account_id, BEFORE, "run", BEFORE + timedelta(minutes=5), BEFORE)
    assert cycle_id is not None
    order = make_order(side=Side.SHORT, quantity=Decimal(quantity), placed_at=BEFORE)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(500))
    )
    return account_id
