"""The cycle runner on a real ledger (SQLite and Postgres) over in-memory crypto bars.

Claims are unique, a failing agent fails only its own cycle, a slot without data is skipped (and so
is the cycle of an agent that did not take it, which is still valued), every cycle leaves a slot NAV
snapshot and every session a close one (at the NAV `get_portfolio` showed
the agent at that slot), a cycle a dead run left half done is completed without a second fill or a
second snapshot, and a slot report counts its cycles' rejected orders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import OperationalError
from structlog.testing import capture_logs

from openbell.agents.baselines import RULE_BASELINES, build_agent
from openbell.agents.broker import PaperBroker
from openbell.agents.protocol import Agent, DecisionContext
from openbell.agents.toolbox import Toolbox
from openbell.agents.tools import FinishOut, PortfolioOut, ToolError
from openbell.daemon.runner import CycleRunner, MarketDesk
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Instrument, utc
from openbell.markets.errors import CycleSkipped, LedgerBreach
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell.store.tables import CycleRow, FillRow, NavSnapshotRow

DAY = timedelta(days=1)
FIRST = utc(2025, 1, 6)  # the first slot; the data has three daily bars per coin from here
HISTORY = FIRST - DAY  # and one bar before, so each coin has a bar ended by the first slot
PRICES = {"BTC/USDT": ("50000", "51000", "52000"), "ETH/USDT": ("3000", "3100", "3200")}
LEASE = timedelta(minutes=15)


def _bars(prices: Mapping[str, tuple[str, ...]] = PRICES) -> list[Bar]:
    bars = []
    for symbol, opens in prices.items():
        first = Decimal(opens[0])
        bars.append(
            Bar(
                symbol=symbol,
                start_at=HISTORY,
                end_at=FIRST,
                open=first,
                high=first,
                low=first,
                close=first,
                volume=Decimal(1000),
            )
        )
        for index, text in enumerate(opens):
            price = Decimal(text)
            bars.append(
                Bar(
                    symbol=symbol,
                    start_at=FIRST + index * DAY,
                    end_at=FIRST + (index + 1) * DAY,
                    open=price,
                    high=price + 100,
                    low=price - 100,
                    close=price + 50,
                    volume=Decimal(1000),
                )
            )
    return bars


def _desk(ledger: Ledger, prices: Mapping[str, tuple[str, ...]] = PRICES) -> MarketDesk:
    source = ReplaySource(market="crypto", bars={"1d": _bars(prices)})
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


class Killed(BaseException):
    """Stands in for SIGKILL: not an `Exception`, so nothing in the runner catches it."""


@dataclass
class Buyer:
    """Buys `shares` of `symbol` each cycle; then raises `error`, if any, like a buggy agent."""

    name: str
    symbol: str = "BTC/USDT"
    shares: Decimal = Decimal("0.01")
    error: BaseException | None = None
    kind: str = "test"

    async def decide(self, ctx: DecisionContext) -> None:
        await ctx.tools.place_order(self.symbol, "buy", shares=self.shares, reason="test")
        if self.error is not None:
            raise self.error
        await ctx.tools.finish("bought")


@dataclass
class Watcher:
    """Buys `shares` of `symbol` each cycle, then keeps the NAV `get_portfolio` shows it."""

    name: str
    symbol: str = "BTC/USDT"
    shares: Decimal = Decimal("0.013")
    kind: str = "test"
    shown: list[Decimal] = field(default_factory=list)

    async def decide(self, ctx: DecisionContext) -> None:
        await ctx.tools.place_order(self.symbol, "buy", shares=self.shares, reason="test")
        portfolio = await ctx.tools.get_portfolio()
        assert isinstance(portfolio, PortfolioOut), portfolio
        self.shown.append(portfolio.nav)
        await ctx.tools.finish("bought")


def _runner(
    ledger: Ledger,
    run_id: str = "run-a",
    *,
    take_over: bool = False,
    prices: Mapping[str, tuple[str, ...]] = PRICES,
) -> CycleRunner:
    return CycleRunner(
        ledger=ledger,
        desks={"crypto": _desk(ledger, prices)},
        run_id=run_id,
        lease=LEASE,
        take_over_claimed=take_over,
    )


def _accounts(ledger: Ledger, *agents: Agent) -> list[tuple[int, Agent]]:
    out = []
    for agent in agents:
        agent_id = ledger.ensure_agent(agent.name, agent.kind, FIRST)
        account_id = ledger.open_account(agent_id, "crypto", "USDT", Decimal(10000), FIRST)
        out.append((account_id, agent))
    return out


def _count(engine: Engine, table: type[CycleRow | FillRow | NavSnapshotRow]) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def _status(ledger: Ledger, account_id: int, at: datetime) -> CycleStatus:
    found = ledger.find_cycle(account_id, at)
    assert found is not None
    return found.status


def test_each_cycle_is_claimed_once_across_runners(ledger: Ledger, engine: Engine) -> None:
    accounts = _accounts(ledger, Buyer("alice"), Buyer("bob"))
    first, second = _runner(ledger, "run-a"), _runner(ledger, "run-b")

    async def both() -> list[int]:
        reports = await asyncio.gather(
            first.run_slot("crypto", FIRST, accounts, FIRST),
            second.run_slot("crypto", FIRST, accounts, FIRST),
        )
        return [report.count(CycleStatus.DONE) for report in reports]

    assert sum(asyncio.run(both())) == 2
    again = asyncio.run(first.run_slot("crypto", FIRST, accounts, FIRST + timedelta(hours=1)))
    assert again.count(None) == 2
    assert _count(engine, CycleRow) == 2
    assert _count(engine, FillRow) == 2


def test_a_failing_agent_fails_only_its_own_cycle(ledger: Ledger) -> None:
    (broken, _), (fine, _) = accounts = _accounts(
        ledger, Buyer("broken", error=RuntimeError("agent bug")), Buyer("fine")
    )
    with capture_logs() as logs:
        report = asyncio.run(_runner(ledger).run_slot("crypto", FIRST, accounts, FIRST))
    assert [outcome.status for outcome in report.outcomes] == [
        CycleStatus.FAILED,
        CycleStatus.DONE,
    ]
    failed = [line for line in logs if line["event"] == "cycle_failed"]
    assert len(failed) == 1
    assert failed[0]["agent"] == "broken"
    assert failed[0]["error_class"] == "RuntimeError"
    assert failed[0]["error_message"] == "agent bug"
    assert {"cycle_id", "market", "slot_at"} <= set(failed[0])
    # Both accounts are valued at the slot; the failed one's fill stands (it happened).
    for account_id in (broken, fine):
        snapshot = ledger.find_nav_snapshot(account_id, FIRST, SnapshotKind.SLOT)
        assert snapshot is not None
        assert snapshot.marks["BTC/USDT"].price == Decimal(50000)


def test_an_operator_error_of_an_agent_fails_its_cycle_and_pauses_its_account(
    ledger: Ledger,
) -> None:
    """`Action.PAUSE`: the cycle is recorded failed, the slot's other agent runs, and the paused
    account is left out of the runner's later slots (once logged `account_paused`)."""
    accounts = _accounts(
        ledger, Buyer("breach", error=LedgerBreach("cash went negative")), Buyer("fine")
    )
    (breach, _), (fine, _) = accounts
    runner = _runner(ledger)
    with capture_logs() as logs:
        first = asyncio.run(runner.run_slot("crypto", FIRST, accounts, FIRST))
        second = asyncio.run(runner.run_slot("crypto", FIRST + DAY, accounts, FIRST + DAY))
    assert _status(ledger, breach, FIRST) is CycleStatus.FAILED
    assert _status(ledger, fine, FIRST) is CycleStatus.DONE
    assert (first.count(CycleStatus.FAILED), first.count(CycleStatus.DONE)) == (1, 1)
    assert [outcome.account_id for outcome in second.outcomes] == [fine]
    assert ledger.find_cycle(breach, FIRST + DAY) is None
    assert set(runner.paused) == {breach}
    [paused] = [line for line in logs if line["event"] == "account_paused"]
    assert (paused["agent"], paused["reason"]) == ("breach", "LedgerBreach")


def test_a_slot_without_data_is_skipped(ledger: Ledger, engine: Engine) -> None:
    accounts = _accounts(ledger, Buyer("alice"))
    before = HISTORY - DAY  # no bar has started or ended: nothing is priced
    with capture_logs() as logs:
        report = asyncio.run(_runner(ledger).run_slot("crypto", before, accounts, before))
    assert report.count(CycleStatus.SKIPPED) == 1
    assert _status(ledger, accounts[0][0], before) is CycleStatus.SKIPPED
    assert [line["reason"] for line in logs if line["event"] == "cycle_skipped"] == [
        "data_unavailable"
    ]
    assert _count(engine, FillRow) == 0
    assert _count(engine, NavSnapshotRow) == 0


@dataclass
class Absent:
    """An agent that does not take its cycle, as an outside agent no client came to."""

    name: str
    kind: str = "mcp"

    async def decide(self, ctx: DecisionContext) -> None:
        raise CycleSkipped("agent_absent")


def test_an_agent_that_does_not_take_its_cycle_is_skipped_and_still_valued(
    ledger: Ledger, engine: Engine
) -> None:
    accounts = _accounts(ledger, Absent("away"), Buyer("here"))
    (away, _), (here, _) = accounts
    with capture_logs() as logs:
        report = asyncio.run(_runner(ledger).run_slot("crypto", FIRST, accounts, FIRST))
    assert [outcome.status for outcome in report.outcomes] == [
        CycleStatus.SKIPPED,
        CycleStatus.DONE,
    ]
    with engine.connect() as connection:
        reason = connection.execute(
            select(CycleRow.reason).where(CycleRow.account_id == away)
        ).scalar_one()
    assert reason == "agent_absent"
    assert [
        (line["agent"], line["reason"]) for line in logs if line["event"] == "cycle_skipped"
    ] == [("away", "agent_absent")]
    # The account exists at the slot: it is valued there like any other.
    for account_id in (away, here):
        assert ledger.find_nav_snapshot(account_id, FIRST, SnapshotKind.SLOT) is not None


def test_nav_snapshots_at_each_slot_and_session_close(ledger: Ledger) -> None:
    accounts = _accounts(ledger, Buyer("alice"), Buyer("cash", shares=Decimal(0)))
    (alice, _), (cash, _) = accounts
    runner = _runner(ledger)
    for index in range(2):
        slot_at = FIRST + index * DAY
        asyncio.run(runner.run_slot("crypto", slot_at, accounts, slot_at))
        close_at = slot_at + DAY
        assert asyncio.run(runner.write_close_snapshots("crypto", close_at, [alice, cash])) == 2
        assert asyncio.run(runner.write_close_snapshots("crypto", close_at, [alice, cash])) == 0
    slot = ledger.find_nav_snapshot(alice, FIRST + DAY, SnapshotKind.SLOT)
    close = ledger.find_nav_snapshot(alice, FIRST + 2 * DAY, SnapshotKind.CLOSE)
    assert slot is not None
    assert close is not None
    assert slot.marks["BTC/USDT"].quantity == Decimal("0.02")
    assert slot.marks["BTC/USDT"].price == Decimal(51000)  # the open of the slot's bar
    assert close.marks["BTC/USDT"].price == Decimal(51050)  # the close of the bar ended by then
    assert close.nav == close.cash + Decimal("0.02") * Decimal(51050)
    flat = ledger.find_nav_snapshot(cash, FIRST + 2 * DAY, SnapshotKind.CLOSE)
    assert flat is not None
    assert flat.nav == Decimal(10000)


def test_the_nav_an_agent_is_shown_is_the_nav_stored_for_its_slot(ledger: Ledger) -> None:
    # 0.013 BTC at 50000.123456789 is worth 650.001604938257 USDT: more places than USDT's 8.
    prices = {"BTC/USDT": ("50000.123456789", "51000.987654321"), "ETH/USDT": ("3000", "3100")}
    watcher = Watcher("watcher")
    accounts = _accounts(ledger, watcher)
    account_id = accounts[0][0]
    runner = _runner(ledger, prices=prices)
    stored = []
    for index in range(2):
        slot_at = FIRST + index * DAY
        asyncio.run(runner.run_slot("crypto", slot_at, accounts, slot_at))
        snapshot = ledger.find_nav_snapshot(account_id, slot_at, SnapshotKind.SLOT)
        assert snapshot is not None
        assert snapshot.marks["BTC/USDT"].price == Decimal(prices["BTC/USDT"][index])
        stored.append(snapshot.nav)
    assert watcher.shown == stored
    assert all(nav == nav.quantize(Decimal("1e-8")) for nav in stored)


def test_a_cycle_left_claimed_is_completed_without_a_second_fill_or_snapshot(
    ledger: Ledger, engine: Engine
) -> None:
    accounts = _accounts(ledger, Buyer("alice", error=Killed()))
    account_id = accounts[0][0]
    with pytest.raises(Killed):
        asyncio.run(_runner(ledger, "dead").run_slot("crypto", FIRST, accounts, FIRST))
    # The dead run got as far as the slot's snapshot before it died.
    written = ledger.write_nav_snapshot(
        account_id, FIRST, SnapshotKind.SLOT, {"BTC/USDT": Decimal(50000)}
    )
    assert _status(ledger, account_id, FIRST) is CycleStatus.CLAIMED
    resumed = [(account_id, Buyer("alice"))]
    # Its lease still runs: a live runner leaves the cycle alone; a resumed replay takes it.
    live = asyncio.run(_runner(ledger, "live").run_slot("crypto", FIRST, resumed, FIRST))
    assert live.count(None) == 1
    report = asyncio.run(
        _runner(ledger, "resumed", take_over=True).run_slot("crypto", FIRST, resumed, FIRST)
    )
    assert report.count(CycleStatus.DONE) == 1
    assert report.outcomes[0].taken_over
    assert report.fills == 0  # the order was replayed from the ledger, not filled again
    assert _count(engine, FillRow) == 1
    assert _count(engine, NavSnapshotRow) == 1
    assert ledger.find_nav_snapshot(account_id, FIRST, SnapshotKind.SLOT) == written
    found = ledger.find_cycle(account_id, FIRST)
    assert found is not None
    assert (found.status, found.claimed_by) == (CycleStatus.DONE, "resumed")


@dataclass
class Waiter:
    """Waits in its decision until `go` is set; `entered` says it got there."""

    name: str
    entered: asyncio.Event
    go: asyncio.Event
    kind: str = "test"

    async def decide(self, ctx: DecisionContext) -> None:
        self.entered.set()
        await self.go.wait()
        await ctx.tools.finish("waited")


def test_a_runner_renews_the_claims_it_runs_and_drops_one_it_lost(ledger: Ledger) -> None:
    async def scenario() -> None:
        waiter = Waiter("slow", asyncio.Event(), asyncio.Event())
        ((account_id, _),) = accounts = _accounts(ledger, waiter)
        runner = _runner(ledger)
        slot = asyncio.create_task(runner.run_slot("crypto", FIRST, accounts, FIRST))
        await waiter.entered.wait()
        (cycle_id,) = runner.held
        later = FIRST + timedelta(minutes=10)
        assert runner.renew_leases(later) == set()
        found = ledger.find_cycle(account_id, FIRST)
        assert found is not None
        assert found.lease_until == later + LEASE
        # Its lease ran out (the runner was stuck) and another run took the cycle over.
        assert ledger.take_over_cycle(cycle_id, "run-b", later + 2 * LEASE)
        assert runner.renew_leases(later + LEASE) == {cycle_id}
        report = await slot
        assert report.count(None) == 1  # dropped, not finished by this run
        assert runner.held == frozenset()
        taken = ledger.find_cycle(account_id, FIRST)
        assert taken is not None
        assert (taken.status, taken.claimed_by) == (CycleStatus.CLAIMED, "run-b")

    asyncio.run(scenario())


def test_a_slot_that_stops_releases_the_claims_it_had_not_finished(ledger: Ledger) -> None:
    lost_db = OperationalError("INSERT ...", {}, Exception("server closed the connection"))
    waiter = Waiter("waiting", asyncio.Event(), asyncio.Event())  # cancelled by the other's STOP
    accounts = _accounts(ledger, Buyer("failing", error=lost_db), waiter)
    runner = _runner(ledger)
    failed_at = FIRST + timedelta(minutes=1)
    with pytest.raises(OperationalError):
        asyncio.run(runner.run_slot("crypto", FIRST, accounts, failed_at))
    assert waiter.entered.is_set()
    assert runner.held == frozenset()
    for account_id, _agent in accounts:
        cycle = ledger.find_cycle(account_id, FIRST)
        assert cycle is not None
        assert (cycle.status, cycle.claimed_by) == (CycleStatus.CLAIMED, "run-a")
        assert cycle.lease_until < failed_at
    # Anyone may complete them now, within the slot's grace.
    retried = [(account_id, Buyer(agent.name)) for account_id, agent in accounts]
    report = asyncio.run(_runner(ledger, "run-b").run_slot("crypto", FIRST, retried, failed_at))
    assert report.count(CycleStatus.DONE) == 2


def test_a_slot_report_counts_the_rejected_orders_of_its_cycles(ledger: Ledger) -> None:
    accounts = _accounts(ledger, Buyer("alice"), Buyer("bob", symbol="DOGE/USDT"))
    report = asyncio.run(_runner(ledger).run_slot("crypto", FIRST, accounts, FIRST))
    assert report.count(CycleStatus.DONE) == 2
    assert {outcome.agent: outcome.rejections for outcome in report.outcomes} == {
        "alice": 0,
        "bob": 1,
    }
    assert (report.fills, report.rejections) == (1, 1)


@dataclass
class Counted:
    """A rule baseline's kind (run in the baselines' task): notes the loop's turn count when it
    decides, then buys like `Buyer`."""

    name: str
    turns: list[int]
    seen: list[int] = field(default_factory=list)
    kind: str = "buy_and_hold"

    async def decide(self, ctx: DecisionContext) -> None:
        self.seen.append(self.turns[0])
        await ctx.tools.place_order("BTC/USDT", "buy", shares=Decimal("0.01"), reason="test")
        await ctx.tools.finish("bought")


def test_a_yielding_slot_lets_the_loop_run_between_baselines_and_writes_the_same(
    ledger: Ledger,
) -> None:
    turns = [0]
    still = [Counted(f"still-{index}", turns) for index in range(3)]
    yielding = [Counted(f"yield-{index}", turns) for index in range(3)]

    async def slot(runner: CycleRunner, agents: list[Counted]) -> None:
        running = True

        async def count() -> None:  # another task on the loop: a request being answered
            while running:
                await asyncio.sleep(0)
                turns[0] += 1

        counter = asyncio.get_running_loop().create_task(count())
        report = await runner.run_slot("crypto", FIRST, _accounts(ledger, *agents), FIRST)
        running = False
        await counter
        assert report.count(CycleStatus.DONE) == len(agents)

    asyncio.run(slot(_runner(ledger, "still"), still))
    desks = {"crypto": _desk(ledger)}
    asyncio.run(
        slot(
            CycleRunner(ledger=ledger, desks=desks, run_id="yield", lease=LEASE, yield_every_s=0.0),
            yielding,
        )
    )
    # Not yielding, the baselines decide in one turn of the loop; yielding, the loop turns
    # between each two of them.
    assert len({agent.seen[0] for agent in still}) == 1
    seen = [agent.seen[0] for agent in yielding]
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)
    # And each account's fill and NAV are the same either way.
    for one, other in zip(still, yielding, strict=True):
        one_id, other_id = (
            next(account for account, agent in _accounts(ledger, a) if agent is a)
            for a in (one, other)
        )
        one_nav = ledger.find_nav_snapshot(one_id, FIRST, SnapshotKind.SLOT)
        other_nav = ledger.find_nav_snapshot(other_id, FIRST, SnapshotKind.SLOT)
        assert one_nav is not None
        assert other_nav is not None
        assert (one_nav.cash, one_nav.nav) == (other_nav.cash, other_nav.nav)
        assert ledger.open_positions(one_id) == ledger.open_positions(other_id) != {}


@dataclass
class Imitator:
    """An agent of a rule baseline's kind that is not one: notes whether its toolbox is trusted."""

    name: str
    trusted: list[bool] = field(default_factory=list)
    kind: str = "sma_crossover"

    async def decide(self, ctx: DecisionContext) -> None:
        self.trusted.append(ctx.tools.trusted)
        await ctx.tools.finish("imitated")


def test_only_openbells_rule_baselines_get_a_trusted_toolbox(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_by: dict[str, bool] = {}
    finish = Toolbox.finish

    async def noted(tools: Toolbox, summary: str) -> FinishOut | ToolError:
        finished_by[summary] = tools.trusted
        return await finish(tools, summary)

    monkeypatch.setattr(Toolbox, "finish", noted)
    imitator = Imitator("imitator")
    accounts = _accounts(ledger, build_agent("cash", "cash", market="crypto"), imitator)
    for inline in (False, True):
        runner = CycleRunner(
            ledger=ledger,
            desks={"crypto": _desk(ledger)},
            run_id=f"run-{inline}",
            lease=LEASE,
            inline_cycles=inline,
        )
        at = FIRST + (DAY if inline else timedelta(0))
        report = asyncio.run(runner.run_slot("crypto", at, accounts, at))
        assert report.count(CycleStatus.DONE) == 2
    assert finished_by == {"Holding cash.": True, "imitated": False}
    assert imitator.trusted == [False, False]
    assert type(accounts[0][1]) in RULE_BASELINES
