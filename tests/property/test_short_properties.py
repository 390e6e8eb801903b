"""Property: random sequences of buy, sell, short and cover orders at random prices, executed by
the real market rules (US equities and crypto) and recorded by the real `Ledger` and by the
replay's batched `ReplayLedger`, on real SQLite and Postgres. After every step: cash is the
initial cash plus the fills' cash deltas, each position is the signed sum of its fills (buy and
cover +, sell and short -), no fill crosses zero, an account that may not short never holds a
short, the initial margin requirement holds after every accepted short (and buy while short),
and `ledger verify` passes. Borrow fees: before each order, the account is charged the fee of
every calendar day ended since that it ended short (at the last price seen by then), and cash
counts them (initial + fills - fees); a day's fee is charged once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import AccountState, Fill, Order, Side, utc
from openbell.markets.execution import execute
from openbell.markets.margin import borrow_fee, initial_margin_check
from openbell.markets.rules import rules_for
from openbell.store.ledger import Ledger
from openbell.store.margin_ledger import BorrowFee
from openbell.store.records import SnapshotKind
from openbell.store.replay_ledger import ReplayLedger
from openbell.store.verify import verify_ledger
from openbell_testkit.store import CURRENCY, INSTRUMENTS, clear_tables

INITIAL_CASH = {"us": Decimal(10_000), "crypto": Decimal(10_000)}
US_SESSION_DAYS = (1, 2, 3, 6, 7, 8)  # October 2025, 14:30-20:00Z is inside each session


@dataclass(frozen=True)
class Step:
    market: str
    agent: int  # agent 0 may short, agent 1 may not
    symbol: int
    side: Side
    quantity: Decimal
    whole: bool
    price: Decimal
    now: datetime


def _now(market: str) -> st.SearchStrategy[datetime]:
    if market == "us":
        return st.builds(
            lambda day, minute: utc(2025, 10, day, 14, 30) + timedelta(minutes=minute),
            st.sampled_from(US_SESSION_DAYS),
            st.integers(0, 329),
        )
    return st.builds(
        lambda minute: utc(2025, 10, 4) + timedelta(minutes=minute), st.integers(0, 10 * 1440)
    )


@st.composite
def steps(draw: st.DrawFn) -> Step:
    market = draw(st.sampled_from(("us", "us", "crypto")))
    if market == "us":
        quantity = draw(st.sampled_from(("1", "3", "7", "25", "2.5", "60")).map(Decimal))
        price = draw(st.decimals(Decimal(5), Decimal(400), places=2))
    else:
        quantity = draw(st.decimals(Decimal("0.001"), Decimal(2), places=4))
        price = draw(st.decimals(Decimal(50), Decimal(9000), places=4))
    return Step(
        market=market,
        agent=draw(st.sampled_from((0, 0, 0, 1))),
        symbol=draw(st.sampled_from((0, 0, 0, 1))),
        side=draw(
            st.sampled_from((Side.SHORT, Side.SHORT, Side.COVER, Side.COVER, Side.BUY, Side.SELL))
        ),
        quantity=quantity,
        whole=draw(st.booleans()),
        price=price,
        now=draw(_now(market)),
    )


@dataclass
class _Account:
    account_id: int
    cycle_id: int
    market: str
    allow_short: bool
    seq: int = 0
    cash: Decimal = Decimal(0)
    held: dict[str, Decimal] | None = None


def _margin_holds(state: AccountState, marks: dict[str, Decimal], initial: Decimal) -> bool:
    """Equity >= longs + `initial` x shorts at `marks`, each holding valued `|q| x mark` to the
    currency's minor unit, half up (as a NAV snapshot values it: design §4's equity is the
    NAV)."""
    places = Decimal(1).scaleb(-2 if state.cash.currency == "USD" else -8)

    def value(quantity: Decimal, symbol: str) -> Decimal:
        return (abs(quantity) * marks[symbol]).quantize(places, rounding=ROUND_HALF_UP)

    held = _quantities(state).items()
    long_value = sum((value(q, s) for s, q in held if q > 0), Decimal(0))
    short_value = sum((value(q, s) for s, q in held if q < 0), Decimal(0))
    equity = state.cash.amount + long_value - short_value
    return equity >= long_value + initial * short_value


def _quantities(state: AccountState) -> dict[str, Decimal]:
    return {symbol: position.quantity for symbol, position in state.positions.items()}


def _crosses(side: Side, before: Decimal, after: Decimal) -> bool:
    if side is Side.BUY:
        return before < 0 or after < before
    if side is Side.SELL:
        return after < 0 or after > before
    if side is Side.SHORT:
        return before > 0 or after > before
    return after > 0 or after < before


def _charge_fees(
    ledger: Ledger, account: _Account, at: datetime, marks: dict[str, Decimal]
) -> Decimal:
    """Charge the account's borrow fees due by `at`, each short marked at the last price seen
    (every price seen was before the day's end: fees are charged at the first step after it);
    the total charged."""
    rules = rules_for(account.market).shorting
    assert rules is not None
    fees = [
        BorrowFee(
            account_id=account.account_id,
            symbol=symbol,
            day=short_day.day,
            quantity=quantity,
            price=marks[symbol],
            rate_bps=rules.borrow_fee_bps_per_year,
            day_count=rules.day_count,
            amount=borrow_fee(quantity, marks[symbol], rules, CURRENCY[account.market]),
            currency=CURRENCY[account.market],
            charged_at=at,
        )
        for short_day in ledger.short_days_due(account.account_id, at)
        for symbol, quantity in short_day.shorts.items()
    ]
    charged = ledger.charge_borrow_fees(account.account_id, fees)
    assert len(charged) == len(fees)
    assert ledger.charge_borrow_fees(account.account_id, fees) == []  # once per day
    if charged:
        event("borrow fees charged")
    return sum((fee.amount for fee in charged), Decimal(0))


def _run(ledger: Ledger, engine: Engine, plan: list[Step], *, verify_each: bool) -> list[Fill]:
    accounts: dict[tuple[str, int], _Account] = {}
    marks: dict[str, dict[str, Decimal]] = defaultdict(dict)
    fills: list[Fill] = []
    for step in sorted(plan, key=lambda s: s.now):
        key = (step.market, step.agent)
        if key not in accounts:
            agent_id = ledger.ensure_agent(f"agent-{step.agent}", "random", step.now)
            account_id = ledger.open_account(
                agent_id,
                step.market,
                CURRENCY[step.market],
                INITIAL_CASH[step.market],
                step.now,
                allow_short=step.agent == 0,
            )
            if isinstance(ledger, ReplayLedger):
                ledger.own([account_id])
            lease = step.now + timedelta(days=30)
            cycle_id = ledger.claim_cycle(account_id, step.now, "prop", lease, step.now)
            assert cycle_id is not None
            accounts[key] = _Account(
                account_id, cycle_id, step.market, step.agent == 0, 0, INITIAL_CASH[step.market], {}
            )
        account = accounts[key]
        assert account.held is not None
        account.cash -= _charge_fees(ledger, account, step.now, marks[step.market])
        instrument = INSTRUMENTS[step.market][step.symbol]
        symbol = instrument.symbol
        rules = rules_for(step.market)
        assert rules.shorting is not None
        marks[step.market][symbol] = step.price
        state = ledger.account_state(account.account_id, step.now)
        held = state.quantity(symbol)
        quantity = step.quantity
        # Cover or sell what is open (all of it, or a part), so that both fill often enough.
        if step.side is Side.COVER and held < 0:
            quantity = -held if step.whole else min(quantity, -held)
        if step.side is Side.SELL and held > 0:
            quantity = held if step.whole else min(quantity, held)
        order = Order(instrument=instrument, side=step.side, quantity=quantity, placed_at=step.now)
        known = {s: marks[step.market].get(s, step.price) for s in state.positions}
        known[symbol] = step.price
        outcome = execute(
            order=order,
            account=state,
            price=step.price,
            now=step.now,
            rules=rules,
            calendar=calendar_for(rules.calendar_id),
            margin=initial_margin_check(known, rules.shorting),
        )
        account.seq += 1
        ledger.record_order(
            cycle_id=account.cycle_id, seq=account.seq, order=order, outcome=outcome
        )
        after = ledger.account_state(account.account_id, step.now)
        if isinstance(outcome, Fill):
            fills.append(outcome)
            event(f"{outcome.side.value} filled")
            account.cash += outcome.cash_delta
            before = account.held.get(symbol, Decimal(0))
            account.held[symbol] = before + outcome.signed_quantity
            assert not _crosses(outcome.side, before, account.held[symbol]), (before, outcome)
            if outcome.side is Side.SHORT or (
                outcome.side is Side.BUY and any(q < 0 for q in account.held.values())
            ):
                assert _margin_holds(after, known, rules.shorting.initial_margin)
        else:
            event(f"{step.side.value} refused: {outcome.reason.value}")
        assert after.cash.amount == account.cash
        assert _quantities(after) == {s: q for s, q in account.held.items() if q != 0}
        if not account.allow_short:
            assert all(q >= 0 for q in _quantities(after).values())
        assert all(p.cost >= 0 for p in after.positions.values())
        if verify_each:
            report = verify_ledger(engine)
            assert report.ok, "\n".join(report.lines())
    at = max(step.now for step in plan) + timedelta(minutes=1)
    for (market, _), account in accounts.items():
        account.cash -= _charge_fees(ledger, account, at, marks[market])
        state = ledger.account_state(account.account_id, at)
        assert state.cash.amount == account.cash
        snapshot = ledger.write_nav_snapshot(
            account.account_id, at, SnapshotKind.CLOSE, dict(marks[market])
        )
        value = sum(
            (q * marks[market][s] for s, q in _quantities(state).items()), Decimal(0)
        ).quantize(Decimal(1).scaleb(-2 if market == "us" else -8))
        assert snapshot.nav == state.cash.amount + snapshot.positions_value
        assert abs(snapshot.positions_value - value) <= Decimal("0.01") * len(state.positions)
    return fills


_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    # One migrated database per test; every example starts by emptying its tables.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(plan=st.lists(steps(), min_size=3, max_size=14))
def test_random_long_short_orders_keep_cash_positions_margin_and_verify(
    ledger: Ledger, engine: Engine, plan: list[Step]
) -> None:
    clear_tables(engine)
    fills = _run(ledger, engine, plan, verify_each=True)
    note(f"{len(plan)} orders, {len(fills)} fills")
    event("a short filled" if any(f.side is Side.SHORT for f in fills) else "no short filled")
    report = verify_ledger(engine)
    assert report.ok, "\n".join(report.lines())
    assert report.fills == len(fills)


@_SETTINGS
@given(plan=st.lists(steps(), min_size=3, max_size=14))
def test_random_long_short_orders_in_a_batched_replay_verify_after_the_flush(
    engine: Engine, plan: list[Step]
) -> None:
    clear_tables(engine)
    replay = ReplayLedger(engine, start_at=min(step.now for step in plan))
    fills = _run(replay, engine, plan, verify_each=False)
    replay.check()
    report = verify_ledger(engine)
    assert report.ok, "\n".join(report.lines())
    assert report.fills == len(fills)
