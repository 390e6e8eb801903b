"""Margin and borrow on a real ledger (SQLite and Postgres), plain and batched (the replay's):

a short that rises until its maintenance margin is breached at a NAV snapshot is covered at the
account's next slot, before its agent's turn, as a `cover` order with reason "margin call: ..."
and its `margin_call` row; borrow fees are charged once per calendar day held short at the day's
end, at the last close ended by then, including a US weekend, and reconcile in `ledger verify`,
which catches a tampered fee and a margin call without its cover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, select, update

from openbell.agents.broker import PaperBroker
from openbell.agents.protocol import DecisionContext
from openbell.daemon.runner import CycleRunner, MarketDesk
from openbell.daemon.valuation import charge_borrow_fees
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Fill, Instrument, Order, Side, utc
from openbell.markets.errors import ClaimLost
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.margin import MARGIN_CALL, borrow_fee
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import MarketRules, rules_for
from openbell.markets.universes import Universe
from openbell.store.core_tables import BORROW_FEE_TABLE, FILL_TABLE, MARGIN_CALL_TABLE, ORDER_TABLE
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.replay_ledger import ReplayLedger
from openbell.store.verify import BORROW_FEE, CASH_BALANCE, MARGIN_CALL_COVER, verify_ledger

DAY = timedelta(days=1)
FIRST = utc(2025, 1, 6)  # the first slot (a Monday; crypto trades every day)
SYMBOL = "BTC/USDT"
#: The open of each day's bar from FIRST on; the short of 3 at the first is called at the third
#: slot's snapshot (equity ~3970 < 25 % of 21000) and covered at the fourth.
OPENS = ("5000", "6000", "7000", "7100", "7200")
SHORTED = Decimal(3)
LEASE = timedelta(minutes=15)


def _bars(opens: Sequence[str], start: datetime, history_close: str) -> list[Bar]:
    first = Decimal(history_close)
    bars = [
        Bar(
            symbol=SYMBOL,
            start_at=start - DAY,
            end_at=start,
            open=first,
            high=first,
            low=first,
            close=first,
            volume=Decimal(1000),
        )
    ]
    for index, text in enumerate(opens):
        price = Decimal(text)
        bars.append(
            Bar(
                symbol=SYMBOL,
                start_at=start + index * DAY,
                end_at=start + (index + 1) * DAY,
                open=price,
                high=price + 100,
                low=price - 100,
                close=price + 50,
                volume=Decimal(1000),
            )
        )
    return bars


def _desk(ledger: Ledger, bars: list[Bar]) -> MarketDesk:
    source = ReplaySource(market="crypto", bars={"1d": bars})
    rules = rules_for("crypto")
    universe = Universe(
        name="one-coin",
        market="crypto",
        as_of=FIRST.date(),
        instruments=(Instrument(symbol=SYMBOL, market="crypto", currency="USDT"),),
    )
    broker = PaperBroker(
        ledger=ledger,
        rules=rules,
        calendar=calendar_for(rules.calendar_id),
        fill_price=source.first_price_at_or_after,
    )
    return MarketDesk(
        market="crypto",
        gateway=PointInTimeGateway(source),
        broker=broker,
        universe=universe,
        rules=rules,
    )


@dataclass
class Shorter:
    """Shorts `quantity` at its first cycle (through the desk's broker), then only watches: at
    each cycle it records whether it was short when its turn came."""

    desk: MarketDesk
    quantity: Decimal = SHORTED
    name: str = "shorter"
    kind: str = "test"
    short_at_turn: list[Decimal] = field(default_factory=list)

    async def decide(self, ctx: DecisionContext) -> None:
        if not self.short_at_turn:
            snapshot = await self.desk.gateway.snapshot((SYMBOL,), ctx.now)
            order = Order(
                instrument=self.desk.universe.instrument(SYMBOL),
                side=Side.SHORT,
                quantity=self.quantity,
                placed_at=ctx.now,
                reason="test short",
            )
            recorded = self.desk.broker.place(
                cycle_id=ctx.cycle_id,
                seq=1,
                order=order,
                snapshot=snapshot,
                account_id=ctx.account_id,
            )
            assert isinstance(recorded.outcome, Fill), recorded.outcome
        self.short_at_turn.append(_quantity(ctx))


def _quantity(ctx: DecisionContext) -> Decimal:
    """What the agent's account holds of SYMBOL when its turn comes (the ledger is its journal)."""
    journal = ctx.journal
    assert isinstance(journal, Ledger)
    return journal.account_state(ctx.account_id, ctx.now).quantity(SYMBOL)


def _open(ledger: Ledger, market: str = "crypto", currency: str = "USDT") -> int:
    agent_id = ledger.ensure_agent("shorter", "test", FIRST - DAY)
    return ledger.open_account(
        agent_id, market, currency, Decimal(10000), FIRST - DAY, allow_short=True
    )


def _run(ledger: Ledger, account_id: int, slots: int) -> Shorter:
    desk = _desk(ledger, _bars(OPENS, FIRST, "5000"))
    runner = CycleRunner(ledger=ledger, desks={"crypto": desk}, run_id="test", lease=LEASE)
    agent = Shorter(desk=desk)

    async def run() -> None:
        for index in range(slots):
            slot = FIRST + index * DAY
            await runner.run_slot("crypto", slot, [(account_id, agent)], slot)

    asyncio.run(run())
    return agent


@pytest.fixture(params=["ledger", "replay"])
def any_ledger(request: pytest.FixtureRequest, engine: Engine) -> Ledger:
    """The plain ledger, or the replay's batched one (checked and flushed by the test)."""
    if request.param == "ledger":
        return Ledger(engine)
    return ReplayLedger(engine, start_at=FIRST)


def _own(ledger: Ledger, account_id: int) -> None:
    if isinstance(ledger, ReplayLedger):
        ledger.own([account_id])


def _done(ledger: Ledger) -> None:
    if isinstance(ledger, ReplayLedger):
        ledger.check()  # flushes, and compares each book with the ledger


def test_a_short_past_maintenance_is_covered_at_the_next_slot(
    any_ledger: Ledger, engine: Engine
) -> None:
    ledger = any_ledger
    account_id = _open(ledger)
    _own(ledger, account_id)
    agent = _run(ledger, account_id, slots=5)
    _done(ledger)
    # The short is open at the agent's turn until the slot after the breach, covered before it.
    assert agent.short_at_turn == [-SHORTED, -SHORTED, -SHORTED, 0, 0]
    calls = ledger.margin_calls(account_id)
    assert len(calls) == 1
    call = calls[0]
    assert call.at == FIRST + 3 * DAY
    assert call.equity < call.requirement
    assert call.reason.startswith(f"{MARGIN_CALL}: equity ")
    with engine.connect() as connection:
        order = connection.execute(
            select(ORDER_TABLE).where(ORDER_TABLE.c.id == call.order_id)
        ).one()
    assert (order.side, order.seq, order.status, order.reason) == (
        "cover",
        -1,
        "filled",
        call.reason,
    )
    assert order.quantity == SHORTED
    # The call was decided on the third slot's snapshot: below maintenance there, not before.
    snapshot = ledger.find_nav_snapshot(account_id, FIRST + 2 * DAY, SnapshotKind.SLOT)
    assert snapshot is not None
    value = -snapshot.positions_value
    assert snapshot.nav < Decimal("0.25") * value
    earlier = ledger.find_nav_snapshot(account_id, FIRST + DAY, SnapshotKind.SLOT)
    assert earlier is not None
    assert earlier.nav >= Decimal("0.25") * -earlier.positions_value
    assert ledger.account_state(account_id, FIRST + 5 * DAY).positions == {}
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    assert report.margin_calls == 1


def test_borrow_fees_accrue_per_day_held_short_and_reconcile(
    any_ledger: Ledger, engine: Engine
) -> None:
    ledger = any_ledger
    account_id = _open(ledger)
    _own(ledger, account_id)
    _run(ledger, account_id, slots=5)
    _done(ledger)
    fees = ledger.borrow_fees(account_id)
    # Held short at the end of the first three days (covered at the fourth slot, 00:00).
    days = [FIRST.date() + timedelta(days=n) for n in range(3)]
    assert [fee.day for fee in fees] == days
    rules = rules_for("crypto").shorting
    assert rules is not None
    for n, fee in enumerate(fees):
        close = Decimal(OPENS[n]) + 50  # the close of the day's bar, ended at its end
        assert (fee.quantity, fee.price, fee.rate_bps) == (-SHORTED, close, Decimal(1000))
        assert fee.amount == borrow_fee(-SHORTED, close, rules, "USDT")
        assert fee.amount == (SHORTED * close * Decimal("0.1") / 365).quantize(Decimal("1e-8"))
        assert fee.charged_at == FIRST + (n + 1) * DAY  # the first snapshot after the day
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    assert report.borrow_fees == 3
    # Cash is the initial cash plus the fills' cash less every fee, to the unit.
    state = ledger.account_state(account_id, FIRST + 5 * DAY)
    with engine.connect() as connection:
        fills = connection.execute(select(FILL_TABLE)).all()
    assert sorted(row.side for row in fills) == ["cover", "short"]
    moved = sum(
        (row.notional * (1 if row.side == "short" else -1) - row.fees for row in fills),
        Decimal(0),
    )
    assert state.cash.amount == Decimal(10000) + moved - sum(fee.amount for fee in fees)


def test_verify_catches_a_tampered_fee_and_a_call_without_its_cover(
    ledger: Ledger, engine: Engine
) -> None:
    account_id = _open(ledger)
    _run(ledger, account_id, slots=5)
    assert verify_ledger(engine).ok
    with engine.begin() as connection:
        fee_id = connection.execute(select(BORROW_FEE_TABLE.c.id).limit(1)).scalar_one()
        connection.execute(
            update(BORROW_FEE_TABLE)
            .where(BORROW_FEE_TABLE.c.id == fee_id)
            .values(amount=Decimal("0.01"))
        )
    found = {breach.invariant for breach in verify_ledger(engine).breaches}
    assert {BORROW_FEE, CASH_BALANCE} <= found
    with engine.begin() as connection:
        shorted = connection.execute(
            select(ORDER_TABLE.c.id).where(ORDER_TABLE.c.side == "short")
        ).scalar_one()
        connection.execute(update(MARGIN_CALL_TABLE).values(order_id=shorted))
    assert MARGIN_CALL_COVER in {b.invariant for b in verify_ledger(engine).breaches}


def test_us_fees_accrue_over_the_weekend_at_fridays_close(ledger: Ledger) -> None:
    """A US short held over a weekend pays Friday, Saturday and Sunday at Friday's close, all
    charged at Monday's first snapshot; nothing for a day not yet ended."""
    friday = date(2025, 1, 10)
    bars = [
        Bar(
            symbol="AAPL",
            start_at=utc(2025, 1, day, 14, 30),
            end_at=utc(2025, 1, day, 21),
            open=Decimal(price),
            high=Decimal(price) + 1,
            low=Decimal(price) - 1,
            close=Decimal(price),
            volume=Decimal(1000),
        )
        for day, price in ((9, "200"), (10, "210"), (13, "220"))
    ]
    source = ReplaySource(market="us", bars={"1d": bars})
    gateway = PointInTimeGateway(source)
    account_id = _open(ledger, "us", "USD")
    cycle_id = ledger.claim_cycle(
        account_id, utc(2025, 1, 10, 15), "test", utc(2025, 1, 10, 16), utc(2025, 1, 10, 15)
    )
    assert cycle_id is not None
    rules: MarketRules = rules_for("us")
    order = Order(
        instrument=Instrument(symbol="AAPL", market="us", currency="USD"),
        side=Side.SHORT,
        quantity=Decimal(10),
        placed_at=utc(2025, 1, 10, 15),
    )
    fill = Fill(
        symbol="AAPL",
        side=Side.SHORT,
        quantity=Decimal(10),
        price=Decimal(205),
        notional=Decimal(2050),
        fees=Decimal(0),
        currency="USD",
        filled_at=utc(2025, 1, 10, 15),
        price_source="test",
    )
    ledger.record_order(cycle_id=cycle_id, seq=1, order=order, outcome=fill)
    shorting = rules.shorting
    assert shorting is not None

    def charge(at: datetime) -> list[Decimal]:
        fees = asyncio.run(charge_borrow_fees(ledger, gateway, account_id, at, shorting))
        return [fee.amount for fee in fees]

    assert charge(utc(2025, 1, 10, 21)) == []  # Friday has not ended
    monday = utc(2025, 1, 13, 14, 30)
    charged = charge(monday)
    fees = ledger.borrow_fees(account_id)
    assert [fee.day for fee in fees] == [friday + timedelta(days=n) for n in range(3)]
    assert {fee.price for fee in fees} == {Decimal(210)}  # Friday's close, never Monday's
    one_day = (Decimal(10) * 210 * Decimal("0.003") / 365).quantize(Decimal("0.01"))
    assert charged == [one_day] * 3
    assert charge(monday) == []  # charged once
    assert ledger.account_state(account_id, monday).cash.amount == Decimal(12050) - 3 * one_day
    assert verify_ledger(ledger._engine).ok


class Killed(BaseException):
    """Stands in for SIGKILL: not an `Exception`, so nothing in the runner catches it."""


@dataclass
class DiesAtCall:
    """Dies at its turn in the margin call's slot (after the covers were made), else watches."""

    slot: datetime
    name: str = "shorter"
    kind: str = "test"

    async def decide(self, ctx: DecisionContext) -> None:
        if ctx.now == self.slot:
            raise Killed


def test_a_margin_call_cycle_run_again_covers_nothing_twice(ledger: Ledger, engine: Engine) -> None:
    account_id = _open(ledger)
    _run(ledger, account_id, slots=3)  # short, then the breach at the third slot's snapshot
    call_slot = FIRST + 3 * DAY
    desk = _desk(ledger, _bars(OPENS, FIRST, "5000"))
    dead = CycleRunner(ledger=ledger, desks={"crypto": desk}, run_id="dead", lease=LEASE)
    with pytest.raises(Killed):
        asyncio.run(
            dead.run_slot("crypto", call_slot, [(account_id, DiesAtCall(call_slot))], call_slot)
        )
    assert len(ledger.margin_calls(account_id)) == 1  # covered before the agent's turn
    resumed = CycleRunner(
        ledger=ledger, desks={"crypto": desk}, run_id="resumed", lease=LEASE, take_over_claimed=True
    )
    report = asyncio.run(
        resumed.run_slot("crypto", call_slot, [(account_id, DiesAtCall(FIRST))], call_slot)
    )
    assert report.fills == 0
    assert len(ledger.margin_calls(account_id)) == 1
    with engine.connect() as connection:
        sides = connection.execute(select(FILL_TABLE.c.side)).scalars().all()
    assert sorted(sides) == ["cover", "short"]
    assert verify_ledger(engine).ok


def test_a_daemon_that_lost_its_claim_covers_nothing(engine: Engine) -> None:
    # A margin call's cover is an order of the cycle: fenced like the agent's own orders.
    stale, peer = Ledger(engine), Ledger(engine)
    account_id = _open(stale)
    slot = FIRST + DAY
    cycle_id = stale.claim_cycle(account_id, slot, "stale", slot + timedelta(seconds=60), slot)
    assert cycle_id is not None
    later = slot + timedelta(minutes=5)  # the lease ended: the peer takes the cycle over
    assert peer.claim_cycle(account_id, slot, "peer", later + timedelta(seconds=60), later)
    instrument = Instrument(symbol=SYMBOL, market="crypto", currency="USDT")
    order = Order(
        instrument=instrument,
        side=Side.COVER,
        quantity=Decimal(10),
        placed_at=slot,
        reason=f"{MARGIN_CALL}: equity 10 below maintenance 20",
    )
    fill = Fill(
        symbol=SYMBOL,
        side=Side.COVER,
        quantity=Decimal(10),
        price=Decimal(100),
        notional=Decimal(1000),
        fees=Decimal(0),
        currency="USDT",
        filled_at=slot,
        price_source="quote",
    )
    with pytest.raises(ClaimLost):
        stale.record_margin_cover(
            cycle_id=cycle_id,
            seq=-1,
            order=order,
            outcome=fill,
            equity=Decimal(10),
            requirement=Decimal(20),
        )
    with engine.connect() as connection:
        assert connection.execute(select(ORDER_TABLE)).all() == []
        assert connection.execute(select(MARGIN_CALL_TABLE)).all() == []
