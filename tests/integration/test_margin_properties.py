"""Property: random sequences of short, cover, buy and sell orders on a US shorting account,
executed by the real market rules with the initial-margin check and recorded in the ledger, with
the borrow fees of every ended day charged before each order (weekends included), keep the
short-side invariants: `ledger verify` passes; cash is the initial cash plus every fill's cash
less every borrow fee, to the cent; the fees are exactly one per (symbol, calendar day) held short
at the day's end, of `|q| x close x 30 bps / 365` each, recomputed here from the fills alone;
charging again changes nothing; and every short that filled left equity at or above its initial
margin requirement at the marks it was checked at. Runs on real SQLite and Postgres."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Fill, Order, Side, utc
from openbell.markets.execution import execute
from openbell.markets.margin import initial_margin_check
from openbell.markets.rules import US_SHORTING, rules_for
from openbell.store.ledger import Ledger
from openbell.store.margin_ledger import BorrowFee, day_end
from openbell.store.verify import verify_ledger
from openbell_testkit.store import INSTRUMENTS, clear_tables, dump_tables

INITIAL_CASH = Decimal(100_000)
US_SESSION_DAYS = (1, 2, 3, 6, 7, 8, 9, 10)  # October 2025, 14:30-20:00Z is inside each session
FIRST_DAY = date(2025, 10, 1)
LAST_DAY = date(2025, 10, 12)  # a Sunday: the last weekend is charged at the end
RULES = rules_for("us")
SHORTING = US_SHORTING
assert RULES.shorting == SHORTING


@dataclass(frozen=True)
class Step:
    symbol: int
    side: Side
    quantity: Decimal
    whole: bool
    price: Decimal
    now: datetime


@st.composite
def steps(draw: st.DrawFn) -> Step:
    day = draw(st.sampled_from(US_SESSION_DAYS))
    minute = draw(st.integers(0, 329))
    return Step(
        symbol=draw(st.sampled_from((0, 0, 1))),
        side=draw(st.sampled_from((Side.SHORT, Side.SHORT, Side.COVER, Side.BUY, Side.SELL))),
        quantity=Decimal(draw(st.integers(1, 400))),
        whole=draw(st.booleans()),
        price=Decimal(draw(st.integers(5000, 50000))) / 100,
        now=utc(2025, 10, day, 14, 30) + timedelta(minutes=minute),
    )


def _close(symbol: str, day: date, closes: dict[tuple[str, date], Decimal]) -> Decimal:
    """The close a day's fee is marked at: the last session close on or before the day (a
    weekend's days take Friday's)."""
    while (symbol, day) not in closes:
        day -= timedelta(days=1)
    return closes[symbol, day]


def _charge(
    ledger: Ledger, account_id: int, at: datetime, closes: dict[tuple[str, date], Decimal]
) -> list[BorrowFee]:
    fees = [
        BorrowFee(
            account_id=account_id,
            symbol=symbol,
            day=short_day.day,
            quantity=quantity,
            price=_close(symbol, short_day.day, closes),
            rate_bps=SHORTING.borrow_fee_bps_per_year,
            day_count=SHORTING.day_count,
            amount=(
                -quantity
                * _close(symbol, short_day.day, closes)
                * SHORTING.borrow_fee_bps_per_year
                / 10000
                / SHORTING.day_count
            ).quantize(Decimal("0.01"), rounding="ROUND_HALF_UP"),
            currency="USD",
            charged_at=at,
        )
        for short_day in ledger.short_days_due(account_id, at)
        for symbol, quantity in short_day.shorts.items()
    ]
    return ledger.charge_borrow_fees(account_id, fees)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    plan=st.lists(steps(), min_size=3, max_size=18),
    closes=st.lists(st.integers(5000, 50000), min_size=16, max_size=16),
)
def test_random_short_orders_keep_cash_margin_and_fee_invariants(
    ledger: Ledger, engine: Engine, plan: list[Step], closes: list[int]
) -> None:
    clear_tables(engine)
    instruments = INSTRUMENTS["us"][:2]
    # Each session day's close of each symbol (the marks fees are charged at).
    session_closes = {
        (instrument.symbol, date(2025, 10, day)): Decimal(closes[i * 8 + k]) / 100
        for i, instrument in enumerate(instruments)
        for k, day in enumerate(US_SESSION_DAYS)
    }
    session_closes.update(
        {(instrument.symbol, date(2025, 9, 30)): Decimal(100) for instrument in instruments}
    )
    start = utc(2025, 10, 1)
    agent_id = ledger.ensure_agent("shorter", "random", start)
    account_id = ledger.open_account(agent_id, "us", "USD", INITIAL_CASH, start, allow_short=True)
    calendar = calendar_for(RULES.calendar_id)
    cycles: dict[datetime, int] = {}
    seqs: dict[int, int] = defaultdict(int)
    last: dict[str, Decimal] = {}
    fills: list[Fill] = []
    checked: list[tuple[Fill, dict[str, Decimal], Decimal, dict[str, Decimal]]] = []
    for step in sorted(plan, key=lambda s: s.now):
        _charge(ledger, account_id, step.now, session_closes)
        if step.now not in cycles:
            cycle_id = ledger.claim_cycle(
                account_id, step.now, "prop", step.now + timedelta(minutes=10), step.now
            )
            assert cycle_id is not None
            cycles[step.now] = cycle_id
        cycle_id = cycles[step.now]
        instrument = instruments[step.symbol]
        state = ledger.account_state(account_id, step.now)
        assert state.allow_short
        held = state.quantity(instrument.symbol)
        quantity = step.quantity
        if step.whole and step.side is Side.COVER and held < 0:
            quantity = -held
        if step.whole and step.side is Side.SELL and held > 0:
            quantity = held
        order = Order(instrument=instrument, side=step.side, quantity=quantity, placed_at=step.now)
        marks = {**last, instrument.symbol: step.price}
        outcome = execute(
            order=order,
            account=state,
            price=step.price,
            now=step.now,
            rules=RULES,
            calendar=calendar,
            margin=initial_margin_check(marks, SHORTING),
        )
        seqs[cycle_id] += 1
        ledger.record_order(cycle_id=cycle_id, seq=seqs[cycle_id], order=order, outcome=outcome)
        if isinstance(outcome, Fill):
            fills.append(outcome)
            quantities = {s: p.quantity for s, p in state.positions.items()}
            checked.append((outcome, quantities, state.cash.amount, marks))
        last[instrument.symbol] = step.price
    end = day_end(LAST_DAY)
    _charge(ledger, account_id, end, session_closes)

    expected = _expected_fees(fills, session_closes)
    charged = {(fee.symbol, fee.day): fee.amount for fee in ledger.borrow_fees(account_id)}
    assert charged == expected
    weekend = any(d.weekday() >= 5 for _s, d in charged)
    event("fees over a weekend" if weekend else "no weekend fee")
    event("a short filled" if any(f.side is Side.SHORT for f in fills) else "no short filled")
    note(f"{len(fills)} fills, {len(charged)} fees")

    cash = (
        INITIAL_CASH
        + sum((f.cash_delta for f in fills), Decimal(0))
        - sum(charged.values(), Decimal(0))
    )
    assert ledger.account_state(account_id, end).cash.amount == cash

    _check_margins(checked)

    report = verify_ledger(engine)
    assert report.ok, "\n".join(report.lines())
    before = dump_tables(engine)
    assert _charge(ledger, account_id, end, session_closes) == []
    assert dump_tables(engine) == before


def _expected_fees(
    fills: list[Fill], closes: dict[tuple[str, date], Decimal]
) -> dict[tuple[str, date], Decimal]:
    """The borrow fees recomputed from the fills alone: one per (symbol, day) short at the day's
    end, `|q| x close x 30 bps / 365` to the cent, half up."""
    expected: dict[tuple[str, date], Decimal] = {}
    day = FIRST_DAY
    while day <= LAST_DAY:
        held_at: dict[str, Decimal] = defaultdict(Decimal)
        for fill in fills:
            if fill.filled_at < day_end(day):
                held_at[fill.symbol] += fill.signed_quantity
        for symbol, quantity in held_at.items():
            if quantity < 0:
                close = _close(symbol, day, closes)
                expected[symbol, day] = (-quantity * close * Decimal(30) / 10000 / 365).quantize(
                    Decimal("0.01"), rounding="ROUND_HALF_UP"
                )
        day += timedelta(days=1)
    return expected


def _check_margins(
    checked: list[tuple[Fill, dict[str, Decimal], Decimal, dict[str, Decimal]]],
) -> None:
    """Every short that filled left equity at or above longs + 50 % of shorts at its marks
    (exact products here; the rule values each holding to the cent, hence a cent per holding)."""
    for fill, quantities, cash_before, marks in checked:
        if fill.side is not Side.SHORT:
            continue
        after = dict(quantities)
        after[fill.symbol] = after.get(fill.symbol, Decimal(0)) + fill.signed_quantity
        longs = sum((q * marks[s] for s, q in after.items() if q > 0), Decimal(0))
        shorts = sum((-q * marks[s] for s, q in after.items() if q < 0), Decimal(0))
        equity = cash_before + fill.cash_delta + longs - shorts
        slack = Decimal("0.01") * len(after)
        assert equity >= longs + SHORTING.initial_margin * shorts - slack
