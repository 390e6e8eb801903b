"""Fenced claims on Postgres: two runners, each on its own engine (two daemons sharing a ledger),
on a simulated clock, over in-memory crypto bars.

A daemon whose claim was lost mid-cycle (its lease ran out while its slow agent thought, and a peer
took the cycle over) writes nothing more for that cycle: not an order, a trace row or a snapshot,
even while the peer runs the account's next slot. An account's cycles never overlap: the next
slot's cycle waits for an earlier one whose holder still holds it, and marks `interrupted` one
whose lease has ended. Every (account, slot) still has exactly one cycle, and the ledger verifies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select

from openbell.agents.broker import PaperBroker
from openbell.agents.protocol import DecisionContext
from openbell.daemon.clock import SimulatedClock
from openbell.daemon.runner import CycleRunner, MarketDesk
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Instrument, utc
from openbell.markets.errors import ClaimLost
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe
from openbell.store.core_tables import CYCLE_TABLE, FILL_TABLE, ORDER_TABLE, TRACE_TABLE
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, CycleUsage, TraceEntry
from openbell.store.verify import verify_ledger

pytestmark = pytest.mark.postgres

DAY = timedelta(days=1)
FIRST = utc(2025, 1, 6)  # the first slot; daily bars from the day before
SECOND = FIRST + DAY
LEASE = timedelta(minutes=15)
PRICES = {"BTC/USDT": ("50000", "51000", "52000"), "ETH/USDT": ("3000", "3100", "3200")}
WAIT_S = 0.05  # how often a waiting cycle looks again (real seconds)
WITHIN_S = 20.0


def _bars() -> list[Bar]:
    bars = []
    for symbol, opens in PRICES.items():
        for index, text in enumerate((opens[0], *opens)):  # one bar before the first slot
            price = Decimal(text)
            bars.append(
                Bar(
                    symbol=symbol,
                    start_at=FIRST + (index - 1) * DAY,
                    end_at=FIRST + index * DAY,
                    open=price,
                    high=price + 100,
                    low=price - 100,
                    close=price + 50,
                    volume=Decimal(1000),
                )
            )
    return bars


def _desk(ledger: Ledger) -> MarketDesk:
    source = ReplaySource(market="crypto", bars={"1d": _bars()})
    rules = rules_for("crypto")
    universe = Universe(
        name="two-coins",
        market="crypto",
        as_of=FIRST.date(),
        instruments=tuple(
            Instrument(symbol=symbol, market="crypto", currency="USDT") for symbol in PRICES
        ),
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
class Daemon:
    """One daemon's share of a test: its own engine, ledger and runner on the shared clock."""

    engine: Engine
    ledger: Ledger
    runner: CycleRunner


@pytest.fixture
def daemons(pg_url: str) -> Iterator[tuple[Daemon, Daemon, SimulatedClock]]:
    upgrade(pg_url)
    clock = SimulatedClock(FIRST)
    made = []
    for run_id in ("slow", "peer"):
        engine = make_engine(pg_url)
        ledger = Ledger(engine)
        runner = CycleRunner(
            ledger=ledger,
            desks={"crypto": _desk(ledger)},
            run_id=run_id,
            lease=LEASE,
            clock=clock.now,
            wait_s=WAIT_S,
        )
        made.append(Daemon(engine, ledger, runner))
    yield made[0], made[1], clock
    for daemon in made:
        daemon.engine.dispose()


@dataclass
class Trader:
    """Waits for `go` (when given), then journals a turn (as an LLM agent does) and buys `shares`
    of `symbol`. `events` (shared by the agents of a test) records when each one started and ended
    its decision; `refused` the writes the ledger refused."""

    name: str
    symbol: str
    events: list[str]
    go: asyncio.Event | None = None
    shares: Decimal = Decimal("0.05")
    kind: str = "test"
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    refused: list[BaseException] = field(default_factory=list)

    async def decide(self, ctx: DecisionContext) -> None:
        self.events.append(f"{ctx.now:%d} {self.name} start")
        self.entered.set()
        if self.go is not None:
            await self.go.wait()
        assert ctx.journal is not None
        entry = TraceEntry(cycle_id=ctx.cycle_id, role="assistant", at=ctx.now, content="buy")
        try:
            ctx.journal.append_journal(ctx.cycle_id, [entry], CycleUsage(tokens_in=7))
        except ClaimLost as exc:
            self.refused.append(exc)
        try:
            await ctx.tools.place_order(self.symbol, "buy", shares=self.shares, reason="test")
        except ClaimLost as exc:
            self.refused.append(exc)
            raise
        self.events.append(f"{ctx.now:%d} {self.name} end")


def _account(ledger: Ledger) -> int:
    agent_id = ledger.ensure_agent("trader", "test", FIRST)
    return ledger.open_account(agent_id, "crypto", "USDT", Decimal(10000), FIRST)


def _rows(engine: Engine, table: str, cycle_id: int) -> int:
    tables = {"order": ORDER_TABLE, "fill": FILL_TABLE, "trace": TRACE_TABLE}
    chosen = tables[table]
    if table == "fill":
        query = (
            select(func.count())
            .select_from(FILL_TABLE.join(ORDER_TABLE, FILL_TABLE.c.order_id == ORDER_TABLE.c.id))
            .where(ORDER_TABLE.c.cycle_id == cycle_id)
        )
    else:
        query = select(func.count()).select_from(chosen).where(chosen.c.cycle_id == cycle_id)
    with engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


def _cycles(engine: Engine) -> list[tuple[datetime, str, str]]:
    query = select(CYCLE_TABLE.c.slot_at, CYCLE_TABLE.c.status, CYCLE_TABLE.c.claimed_by)
    with engine.connect() as connection:
        rows = connection.execute(query.order_by(CYCLE_TABLE.c.slot_at)).all()
    return [(row.slot_at, row.status, row.claimed_by) for row in rows]


async def _wait(event: asyncio.Event, what: str) -> None:
    try:
        await asyncio.wait_for(event.wait(), WITHIN_S)
    except TimeoutError:
        raise AssertionError(f"not within {WITHIN_S}s: {what}") from None


def test_a_daemon_that_lost_its_claim_writes_nothing_more_for_the_cycle(
    daemons: tuple[Daemon, Daemon, SimulatedClock],
) -> None:
    slow, peer, clock = daemons
    account_id = _account(slow.ledger)
    events: list[str] = []

    async def scenario() -> None:
        go_slow, go_next = asyncio.Event(), asyncio.Event()
        stale = Trader("trader", "ETH/USDT", events, go=go_slow)
        running = asyncio.create_task(
            slow.runner.run_slot("crypto", FIRST, [(account_id, stale)], clock.now())
        )
        await _wait(stale.entered, "the slow daemon's agent starts")
        # Its lease runs out (its renewals stopped: a frozen loop, a lost connection)...
        clock.set(FIRST + LEASE + timedelta(minutes=5))
        # ... and the peer takes the cycle over and completes it, buying BTC instead.
        taken = await peer.runner.run_slot(
            "crypto", FIRST, [(account_id, Trader("trader", "BTC/USDT", events))], clock.now()
        )
        (outcome,) = taken.outcomes
        assert outcome.status is CycleStatus.DONE
        # The peer runs the account's next slot; the stale agent wakes up in the middle of it.
        clock.set(SECOND)
        nxt = Trader("trader", "BTC/USDT", events, go=go_next)
        following = asyncio.create_task(
            peer.runner.run_slot("crypto", SECOND, [(account_id, nxt)], clock.now())
        )
        await _wait(nxt.entered, "the peer's next cycle starts")
        go_slow.set()
        report = await running
        go_next.set()
        (after,) = (await following).outcomes
        assert after.status is CycleStatus.DONE
        (lost,) = report.outcomes
        assert lost.status is None  # not run to its end here: the claim was the peer's
        # Its journal turn and its order were both refused.
        assert [exc.held_by for exc in stale.refused] == ["slow", "slow"]

    asyncio.run(scenario())
    first = slow.ledger.find_cycle(account_id, FIRST)
    assert first is not None
    assert (first.status, first.claimed_by) == (CycleStatus.DONE, "peer")
    # The stale run's ETH order never reached the ledger: the cycle has the peer's order only.
    orders = peer.ledger.cycle_orders(first.cycle_id)
    assert [order.symbol for order in orders] == ["BTC/USDT"]
    assert _rows(peer.engine, "fill", first.cycle_id) == 1
    # One journal turn, the peer's, with the peer's usage only.
    assert [entry.content for entry in peer.ledger.traces(first.cycle_id)] == ["buy"]
    assert peer.ledger.cycle_usage(first.cycle_id).tokens_in == 7
    state = peer.ledger.account_state(account_id, SECOND + DAY)
    assert set(state.positions) == {"BTC/USDT"}
    assert _cycles(peer.engine) == [(FIRST, "done", "peer"), (SECOND, "done", "peer")]
    report = verify_ledger(peer.engine)
    assert report.ok, report.breaches


def test_the_next_slot_waits_for_an_earlier_cycle_still_held(
    daemons: tuple[Daemon, Daemon, SimulatedClock],
) -> None:
    slow, peer, clock = daemons
    account_id = _account(slow.ledger)
    events: list[str] = []

    async def scenario() -> None:
        go_slow = asyncio.Event()
        held = Trader("trader", "ETH/USDT", events, go=go_slow)
        running = asyncio.create_task(
            slow.runner.run_slot("crypto", FIRST, [(account_id, held)], clock.now())
        )
        await _wait(held.entered, "the slow daemon's agent starts")
        # The slow daemon still holds its claim (renewed), when the next slot rings at the peer.
        clock.set(SECOND - timedelta(minutes=1))
        assert slow.runner.renew_leases(clock.now()) == set()
        clock.set(SECOND)
        nxt = Trader("trader", "BTC/USDT", events)
        following = asyncio.create_task(
            peer.runner.run_slot("crypto", SECOND, [(account_id, nxt)], clock.now())
        )
        await asyncio.sleep(20 * WAIT_S)
        assert not nxt.entered.is_set(), "the next cycle ran while the earlier one was held"
        go_slow.set()
        (done,) = (await running).outcomes
        (after,) = (await following).outcomes
        assert (done.status, after.status) == (CycleStatus.DONE, CycleStatus.DONE)

    asyncio.run(scenario())
    assert events == ["06 trader start", "06 trader end", "07 trader start", "07 trader end"]
    assert _cycles(peer.engine) == [(FIRST, "done", "slow"), (SECOND, "done", "peer")]
    state = peer.ledger.account_state(account_id, SECOND + DAY)
    assert set(state.positions) == {"ETH/USDT", "BTC/USDT"}
    report = verify_ledger(peer.engine)
    assert report.ok, report.breaches


def test_the_next_slot_interrupts_an_earlier_cycle_whose_lease_ended(
    daemons: tuple[Daemon, Daemon, SimulatedClock],
) -> None:
    slow, peer, clock = daemons
    account_id = _account(slow.ledger)
    events: list[str] = []

    async def scenario() -> None:
        go_slow = asyncio.Event()
        stale = Trader("trader", "ETH/USDT", events, go=go_slow)
        running = asyncio.create_task(
            slow.runner.run_slot("crypto", FIRST, [(account_id, stale)], clock.now())
        )
        await _wait(stale.entered, "the slow daemon's agent starts")
        # Nobody took the abandoned cycle over before the next slot rang: the next claim ends it.
        clock.set(SECOND)
        nxt = Trader("trader", "BTC/USDT", events)
        (after,) = (
            await peer.runner.run_slot("crypto", SECOND, [(account_id, nxt)], clock.now())
        ).outcomes
        assert after.status is CycleStatus.DONE
        # Too late for a take-over of the earlier slot: its account has moved on.
        assert peer.ledger.claim_cycle(account_id, FIRST, "peer", SECOND + LEASE, SECOND) is None
        go_slow.set()
        (lost,) = (await running).outcomes
        assert lost.status is None
        assert [exc.held_by for exc in stale.refused] == ["slow", "slow"]

    asyncio.run(scenario())
    first = peer.ledger.find_cycle(account_id, FIRST)
    assert first is not None
    assert (first.status, first.claimed_by) == (CycleStatus.INTERRUPTED, "slow")
    assert _rows(peer.engine, "order", first.cycle_id) == 0
    assert _rows(peer.engine, "trace", first.cycle_id) == 0
    assert peer.ledger.cycle_usage(first.cycle_id).tokens_in == 0
    state = peer.ledger.account_state(account_id, SECOND + DAY)
    assert set(state.positions) == {"BTC/USDT"}
    assert _cycles(peer.engine) == [(FIRST, "interrupted", "slow"), (SECOND, "done", "peer")]
    report = verify_ledger(peer.engine)
    assert report.ok, report.breaches
