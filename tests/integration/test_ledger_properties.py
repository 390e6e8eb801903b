"""Property: random order sequences in all three markets, executed by the real market rules and
recorded in the ledger, keep every invariant `verify_ledger` checks, and re-recording each order
with its idempotency key changes nothing. Runs on real SQLite and Postgres."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Fill, Order, Rejection, Side, utc
from openbell.markets.execution import execute
from openbell.markets.rules import rules_for
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.verify import verify_ledger
from openbell_testkit.store import CURRENCY, INSTRUMENTS, clear_tables, dump_tables

INITIAL_CASH = {"us": Decimal(100_000), "cn": Decimal(1_000_000), "crypto": Decimal(100_000)}
US_SESSION_DAYS = (1, 2, 3, 6, 7, 8, 9, 10)  # October 2025, 14:30-20:00Z is inside each session


@dataclass(frozen=True)
class Step:
    market: str
    agent: int
    symbol: int
    side: Side
    quantity: Decimal
    sell_all: bool
    price: Decimal
    limit_move: Decimal
    now: datetime


def _now(market: str) -> st.SearchStrategy[datetime]:
    if market == "us":
        return st.builds(
            lambda day, minute: utc(2025, 10, day, 14, 30) + timedelta(minutes=minute),
            st.sampled_from(US_SESSION_DAYS),
            st.integers(0, 329),
        )
    if market == "cn":  # 09:30-11:30 Shanghai on two sessions before the National Day holiday
        return st.builds(
            lambda day, minute: utc(2025, 9, day, 1, 30) + timedelta(minutes=minute),
            st.sampled_from((29, 30)),
            st.integers(0, 119),
        )
    return st.builds(
        lambda minute: utc(2025, 10, 4) + timedelta(minutes=minute), st.integers(0, 10 * 1440)
    )


def _quantity(market: str) -> st.SearchStrategy[Decimal]:
    if market == "us":
        return st.sampled_from(("1", "7", "25", "2.5", "120")).map(Decimal)
    if market == "cn":
        return st.sampled_from(("100", "300", "1000", "150", "50", "20000")).map(Decimal)
    return st.decimals(Decimal("0.001"), Decimal(2), places=4)


def _price(market: str) -> st.SearchStrategy[Decimal]:
    if market == "crypto":
        return st.decimals(Decimal(5), Decimal(60000), places=4)
    return st.decimals(Decimal("0.5"), Decimal(800), places=2)


@st.composite
def steps(draw: st.DrawFn) -> Step:
    market = draw(st.sampled_from(("us", "cn", "crypto")))
    return Step(
        market=market,
        agent=draw(st.sampled_from((0, 0, 0, 1))),
        symbol=draw(st.sampled_from((0, 0, 1))),
        side=draw(st.sampled_from(Side)),
        quantity=draw(_quantity(market)),
        sell_all=draw(st.booleans()),
        price=draw(_price(market)),
        limit_move=Decimal(draw(st.sampled_from(("0.85", "0.97", "1", "1", "1.03", "1.1")))),
        now=draw(_now(market)),
    )


@dataclass(frozen=True)
class Placed:
    cycle_id: int
    seq: int
    order: Order
    outcome: Fill | Rejection


def _run(ledger: Ledger, plan: list[Step]) -> tuple[list[Placed], dict[int, dict[str, Decimal]]]:
    accounts: dict[tuple[str, int], tuple[int, int]] = {}
    seqs: dict[int, int] = {}
    last_prices: dict[int, dict[str, Decimal]] = {}
    placed = []
    for step in sorted(plan, key=lambda s: s.now):
        key = (step.market, step.agent)
        if key not in accounts:
            agent_id = ledger.ensure_agent(f"agent-{step.agent}", "random", step.now)
            account_id = ledger.open_account(
                agent_id, step.market, CURRENCY[step.market], INITIAL_CASH[step.market], step.now
            )
            lease = step.now + timedelta(minutes=10)
            cycle_id = ledger.claim_cycle(account_id, step.now, "prop", lease, step.now)
            assert cycle_id is not None
            accounts[key] = (account_id, cycle_id)
        account_id, cycle_id = accounts[key]
        instrument = INSTRUMENTS[step.market][step.symbol]
        state = ledger.account_state(account_id, step.now)
        quantity = step.quantity
        held = state.quantity(instrument.symbol)
        if step.side is Side.SELL and held > 0:
            # Sell what is held (all of it, or a part), so that sells fill often enough.
            quantity = held if step.sell_all else min(quantity, held)
        order = Order(instrument=instrument, side=step.side, quantity=quantity, placed_at=step.now)
        rules = rules_for(step.market)
        outcome = execute(
            order=order,
            account=state,
            price=step.price,
            now=step.now,
            rules=rules,
            calendar=calendar_for(rules.calendar_id),
            prev_close=(step.price / step.limit_move).quantize(Decimal("0.01")),
        )
        seqs[cycle_id] = seq = seqs.get(cycle_id, 0) + 1
        ledger.record_order(cycle_id=cycle_id, seq=seq, order=order, outcome=outcome)
        placed.append(Placed(cycle_id, seq, order, outcome))
        if isinstance(outcome, Fill):
            last_prices.setdefault(account_id, {})[outcome.symbol] = outcome.price
    return placed, last_prices


def _sold(item: Placed) -> bool:
    return isinstance(item.outcome, Fill) and item.outcome.side is Side.SELL


@settings(
    max_examples=40,
    deadline=None,
    # One migrated database per test; every example starts by emptying its tables.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(plan=st.lists(steps(), min_size=3, max_size=16))
def test_random_orders_keep_every_invariant_and_replay_as_no_ops(
    ledger: Ledger, engine: Engine, plan: list[Step]
) -> None:
    clear_tables(engine)
    placed, last_prices = _run(ledger, plan)
    at = max(step.now for step in plan) + timedelta(minutes=1)
    for account_id, prices in last_prices.items():
        ledger.write_nav_snapshot(account_id, at, SnapshotKind.CLOSE, prices)
    fills = sum(isinstance(item.outcome, Fill) for item in placed)
    note(f"{len(placed)} orders, {fills} fills")
    event("some orders filled" if fills else "no order filled")
    event("a sell filled" if any(_sold(item) for item in placed) else "no sell filled")
    report = verify_ledger(engine)
    assert report.ok, "\n".join(report.lines())
    assert report.fills == fills
    before = dump_tables(engine)
    for item in placed:
        again = ledger.record_order(
            cycle_id=item.cycle_id, seq=item.seq, order=item.order, outcome=item.outcome
        )
        assert not again.created
        assert again.outcome == item.outcome
    assert dump_tables(engine) == before
