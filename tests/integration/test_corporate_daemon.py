"""The cycle runner applying corporate actions as the live daemon drives it, on a real ledger.

Live, a quote at the open can still be the previous close: the split then waits for a price of the
ex-date (the session's close) so quantities and prices change together. A failed fetch of the
actions is logged and retried at the next slot or close, and nothing is lost. On an ex-date the
previous close the price limits use is the exchange's ex-date reference price.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine
from structlog.testing import capture_logs

from openbell.agents.protocol import DecisionContext
from openbell.daemon.clock import SimulatedClock
from openbell.daemon.ex_dates import ActionApplier
from openbell.daemon.plan import MarketPlan, build_desk, build_desks
from openbell.daemon.runner import CycleRunner
from openbell.markets.calendars import calendar_for
from openbell.markets.corporate_actions import (
    ActionKind,
    CorporateAction,
    CorporateActionSource,
    RecordedActions,
)
from openbell.markets.domain import Bar, Instrument, Quote, utc
from openbell.markets.errors import DataUnavailable
from openbell.markets.gateway import MarketSnapshot
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.sources import ForwardingSource
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.verify import verify_ledger
from openbell_testkit.store import INSTRUMENTS, fill_for, make_order

XNYS = calendar_for("XNYS")
# AAPL's raw daily bars around its 2020 split (open, high, low, close), as Yahoo reports them.
AAPL = {
    date(2020, 8, 27): ("508.57", "509.94", "495.33", "500.04"),
    date(2020, 8, 28): ("504.05", "505.77", "498.31", "499.23"),
    date(2020, 8, 31): ("127.58", "131.00", "126.00", "129.04"),
    date(2020, 9, 1): ("132.76", "134.80", "130.53", "134.18"),
}
SESSIONS = sorted(AAPL)
# A session before the first one rung, so AAPL has a bar ended by the first slot and is offered
# there (its prices enter no figure the tests check).
PRIOR = {date(2020, 8, 26): ("504.72", "507.97", "500.33", "506.09")}
EX = date(2020, 8, 31)
SPLIT = CorporateAction(
    symbol="AAPL",
    kind=ActionKind.SPLIT,
    ex_date=EX,
    ex_at=XNYS.session_open(EX),
    currency="USD",
    source="yfinance",
    ratio=Decimal(4),
)


def _bars() -> list[Bar]:
    out = []
    for day, (open_, high, low, close) in (PRIOR | AAPL).items():
        session = XNYS.session(day)
        out.append(
            Bar(
                symbol="AAPL",
                start_at=session.open_at,
                end_at=session.close_at,
                open=Decimal(open_),
                high=Decimal(high),
                low=Decimal(low),
                close=Decimal(close),
                volume=Decimal(1000),
            )
        )
    return out


class OpenQuotesAreYesterdays(ForwardingSource):
    """A live vendor at the bell: the quote at a session's open is still the previous close."""

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return await self._source.quote(symbols, at - timedelta(microseconds=1))


class Flaky:
    """An action source that fails its first `failures` calls, like a vendor having a bad day."""

    def __init__(self, source: CorporateActionSource, failures: int) -> None:
        self._source = source
        self.failures = failures
        self.calls = 0

    @property
    def name(self) -> str:
        return self._source.name

    @property
    def market(self) -> str:
        return self._source.market

    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]:
        self.calls += 1
        if self.calls <= self.failures:
            raise DataUnavailable("Yahoo answered 503")
        return await self._source.actions(symbols, first, last)


class BuyOnce:
    name = "holder"
    kind = "test"

    def __init__(self) -> None:
        self.bought = False

    async def decide(self, ctx: DecisionContext) -> None:
        if not self.bought:
            await ctx.tools.place_order("AAPL", "buy", shares=Decimal(10), reason="hold")
            self.bought = True
        await ctx.tools.finish("holding")


def _run(ledger: Ledger, *, stale_open: bool, actions: CorporateActionSource) -> int:
    """Ring every slot and close of the four sessions, live-style; the account's id."""
    replay = ReplaySource(market="us", bars={"1d": _bars()})
    source = OpenQuotesAreYesterdays(replay) if stale_open else replay
    rules = rules_for("us")
    desk = build_desk(
        source=source,
        universe=Universe(
            name="aapl",
            market="us",
            as_of=SESSIONS[0],
            instruments=(Instrument(symbol="AAPL", market="us", currency="USD"),),
        ),
        rules=rules,
        ledger=ledger,
        fill_price=replay.first_price_at_or_after,
        price_source="test",
        actions=actions,
    )
    runner = CycleRunner(
        ledger=ledger, desks={"us": desk}, run_id="live", lease=timedelta(minutes=15)
    )
    agent = BuyOnce()
    agent_id = ledger.ensure_agent(agent.name, agent.kind, utc(2020, 8, 1))
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal(10000), utc(2020, 8, 1))
    first = 1 if stale_open else 0  # a stale quote at the first open has nothing to show
    for day in SESSIONS[first:]:
        session = XNYS.session(day)
        asyncio.run(runner.run_slot("us", session.open_at, [(account_id, agent)], session.open_at))
        asyncio.run(runner.write_close_snapshots("us", session.close_at, [account_id]))
    return account_id


def _navs(ledger: Ledger, account_id: int) -> list[Decimal]:
    out = []
    for day in SESSIONS:
        session = XNYS.session(day)
        for at, kind in (
            (session.open_at, SnapshotKind.SLOT),
            (session.close_at, SnapshotKind.CLOSE),
        ):
            found = ledger.find_nav_snapshot(account_id, at, kind)
            if found is not None:
                out.append(found.nav)
    return out


def test_a_stale_open_quote_defers_the_split_to_the_close(ledger: Ledger, engine: Engine) -> None:
    actions = RecordedActions(market="us", actions=[SPLIT], name="recorded")
    account_id = _run(ledger, stale_open=True, actions=actions)
    ex_session = XNYS.session(EX)
    at_open = ledger.find_nav_snapshot(account_id, ex_session.open_at, SnapshotKind.SLOT)
    at_close = ledger.find_nav_snapshot(account_id, ex_session.close_at, SnapshotKind.CLOSE)
    assert at_open is not None
    assert at_close is not None
    # At the open the quote is Friday's 499.23 close: still 10 shares, valued cum-split.
    assert (at_open.marks["AAPL"].quantity, at_open.marks["AAPL"].price) == (
        Decimal(10),
        Decimal("499.23"),
    )
    # At the close the split is applied and valued at the ex-date's close.
    assert (at_close.marks["AAPL"].quantity, at_close.marks["AAPL"].price) == (
        Decimal(40),
        Decimal("129.04"),
    )
    navs = _navs(ledger, account_id)
    assert min(later / earlier for earlier, later in itertools.pairwise(navs)) > Decimal("0.97")
    assert verify_ledger(engine).ok


def test_a_failed_fetch_is_logged_and_retried_and_nothing_is_lost(
    ledger: Ledger, engine: Engine
) -> None:
    flaky = Flaky(RecordedActions(market="us", actions=[SPLIT], name="recorded"), failures=3)
    with capture_logs() as logs:
        account_id = _run(ledger, stale_open=False, actions=flaky)
    failed = [entry for entry in logs if entry["event"] == "corporate_actions_unavailable"]
    assert len(failed) == 3
    assert failed[0]["error_message"] == "Yahoo answered 503"
    # Fetches: day 1 close (fails: bought that day), day 2 slot and close (fail), ex-date slot (ok).
    applied = [entry for entry in logs if entry["event"] == "corporate_action_applied"]
    assert [entry["at"] for entry in applied] == [XNYS.session_open(EX)]
    state = ledger.account_state(account_id, XNYS.session_close(SESSIONS[-1]))
    assert state.positions["AAPL"].quantity == Decimal(40)
    assert verify_ledger(engine).ok


def test_a_fetch_that_fails_on_the_ex_date_applies_late_and_right(
    ledger: Ledger, engine: Engine
) -> None:
    flaky = Flaky(RecordedActions(market="us", actions=[SPLIT], name="recorded"), failures=4)
    with capture_logs() as logs:
        account_id = _run(ledger, stale_open=False, actions=flaky)
    [applied] = [entry for entry in logs if entry["event"] == "corporate_action_applied"]
    assert applied["at"] == XNYS.session_close(EX)  # the fetch at the ex-date's open failed too
    assert applied["quantity_before"] == Decimal(10)
    state = ledger.account_state(account_id, XNYS.session_close(SESSIONS[-1]))
    assert state.positions["AAPL"].quantity == Decimal(40)
    assert verify_ledger(engine).ok


def test_an_ex_date_slot_measures_limits_from_the_reference_price(ledger: Ledger) -> None:
    calendar = calendar_for("XSHG")
    ex_date = date(2025, 6, 26)
    dividend = CorporateAction(
        symbol="600519.SH",
        kind=ActionKind.CASH_DIVIDEND,
        ex_date=ex_date,
        ex_at=calendar.session_open(ex_date),
        currency="CNY",
        source="akshare",
        cash=Decimal("27.673"),
    )
    applier = ActionApplier(
        source=RecordedActions(market="cn", actions=[dividend], name="recorded"),
        ledger=ledger,
        rules=rules_for("cn"),
        calendar=calendar,
    )
    agent_id = ledger.ensure_agent("holder", "test", utc(2025, 6, 1))
    account_id = ledger.open_account(agent_id, "cn", "CNY", Decimal(200000), utc(2025, 6, 1))
    bought_at = calendar.session_open(date(2025, 6, 24))
    cycle_id = ledger.claim_cycle(
        account_id, bought_at, "run", bought_at + timedelta(hours=1), bought_at
    )
    assert cycle_id is not None
    order = make_order(instrument=INSTRUMENTS["cn"][0], quantity=Decimal(100), placed_at=bought_at)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal("1437.20"))
    )
    slot = MarketSnapshot(
        market="cn",
        at=calendar.session_open(ex_date),
        quotes={},
        previous_closes={"600519.SH": Decimal("1435.86"), "601318.SH": Decimal("56.00")},
    )
    adjusted = asyncio.run(applier.at_slot(slot, [account_id]))
    assert adjusted.previous_closes == {
        "600519.SH": Decimal("1408.19"),  # 1435.86 - 27.673, to the tick
        "601318.SH": Decimal("56.00"),
    }
    # No quote of the ex-date yet, so the dividend itself waits for one.
    assert ledger.account_state(account_id, slot.at).cash.amount == Decimal("56280.00")
    next_day = MarketSnapshot(
        market="cn",
        at=calendar.session_open(date(2025, 6, 27)),
        quotes={},
        previous_closes={"600519.SH": Decimal("1420.00")},
    )
    assert applier.with_reference_prices(next_day) is next_day


def test_the_live_daemon_gives_each_market_its_action_source(ledger: Ledger) -> None:
    actions = RecordedActions(market="us", actions=[SPLIT], name="recorded")
    replay = ReplaySource(market="us", bars={"1d": _bars()})
    markets = [
        MarketPlan(
            market="us",
            source=replay,
            universe=Universe(
                name="aapl",
                market="us",
                as_of=SESSIONS[0],
                instruments=(Instrument(symbol="AAPL", market="us", currency="USD"),),
            ),
            cadence="daily",
            initial_cash=Decimal(10000),
            agents=(BuyOnce(),),
            fill_price=replay.first_price_at_or_after,
            actions=actions,
        )
    ]
    clock = SimulatedClock(XNYS.session_open(SESSIONS[0]))
    desks, _ = build_desks(markets, ledger, clock.now(), clock=clock)
    applier = desks["us"].actions
    assert applier is not None
    assert applier.source is actions
