"""Builders for the agent tests: an arena (ledger, replay data, gateway, broker) and cycle runs."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from openbell.agents.broker import PaperBroker
from openbell.agents.protocol import Agent, DecisionContext
from openbell.agents.toolbox import Toolbox
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Instrument, utc
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.gateway import MarketSnapshot, PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import MarketRules, rules_for
from openbell.markets.universes import MARKET_CURRENCY, Universe, load_universe
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus

D = Decimal
DAY = timedelta(days=1)
#: Session opens in the bundled data: a US daily/hourly slot, an A-share one, a crypto one.
US_OPEN = utc(2025, 10, 1, 13, 30)
CN_OPEN = utc(2025, 10, 10, 1, 30)
CRYPTO_DAY = utc(2025, 11, 1)
INITIAL_CASH = {"us": D(10000), "cn": D(100000), "crypto": D(10000)}
#: The lease of an arena's claims (`Arena.claim`).
ARENA_LEASE = timedelta(days=3650)


@functools.cache
def bundled(market: str) -> ReplaySource:
    """The bundled replay data of `market`, read once per test process."""
    return ReplaySource.from_bundled(market)


def small_universe(market: str, *symbols: str) -> Universe:
    """A test universe of `symbols` in `market`."""
    return Universe(
        name="test",
        market=market,
        as_of=utc(2025, 1, 1).date(),
        instruments=tuple(
            Instrument(symbol=symbol, market=market, currency=MARKET_CURRENCY[market])
            for symbol in symbols
        ),
    )


def daily_bars(symbol: str, closes: Sequence[Decimal], first: datetime) -> list[Bar]:
    """UTC-day bars of `symbol` opening at the previous close and closing at `closes`."""
    bars = []
    previous = closes[0]
    for index, close in enumerate(closes):
        start = first + index * DAY
        bars.append(
            Bar(
                symbol=symbol,
                start_at=start,
                end_at=start + DAY,
                open=previous,
                high=max(previous, close),
                low=min(previous, close),
                close=close,
                volume=D(1000),
            )
        )
        previous = close
    return bars


@dataclass
class Arena:
    """One account of one agent in one market, over replay data, on a real ledger."""

    ledger: Ledger
    source: ReplaySource
    gateway: PointInTimeGateway
    broker: PaperBroker
    universe: Universe
    rules: MarketRules
    account_id: int

    def claim(self, slot_at: datetime) -> int:
        """The cycle of the account at `slot_at`, claimed (or found, when it already is). Its
        lease outlasts any test's clock: a claim of a later slot interrupts an earlier cycle only
        once that one's lease has ended, and a test may come back to an earlier slot's cycle
        (hypothesis draws the slots in any order)."""
        claimed = self.ledger.claim_cycle(
            self.account_id, slot_at, "test", slot_at + ARENA_LEASE, slot_at
        )
        if claimed is not None:
            return claimed
        found = self.ledger.find_cycle(self.account_id, slot_at)
        assert found is not None
        return found.cycle_id

    async def toolbox(
        self,
        now: datetime,
        *,
        cycle_id: int | None = None,
        kind: type[Toolbox] = Toolbox,
        fundamentals: FundamentalsSource | None = None,
        trusted: bool = False,
    ) -> Toolbox:
        """A toolbox for the account's cycle at `now`, over the slot's snapshot (`trusted`: as
        the runner makes one for a rule baseline)."""
        symbols = list(self.universe.symbols)
        if self.universe.benchmark is not None:
            symbols.append(self.universe.benchmark)
        snapshot: MarketSnapshot = await self.gateway.snapshot(symbols, now)
        return kind(
            ledger=self.ledger,
            broker=self.broker,
            gateway=self.gateway.at(now),
            snapshot=snapshot,
            universe=self.universe,
            rules=self.rules,
            account_id=self.account_id,
            cycle_id=self.claim(now) if cycle_id is None else cycle_id,
            now=now,
            fundamentals=fundamentals,
            trusted=trusted,
        )

    def context(self, agent: Agent, tools: Toolbox) -> DecisionContext:
        return DecisionContext(
            now=tools.now,
            market=self.rules.market,
            agent_name=agent.name,
            account_id=self.account_id,
            cycle_id=self.claim(tools.now),
            universe=tools.universe,
            rules=self.rules,
            tools=tools,
            roster=self.universe,
        )

    async def run(self, agent: Agent, now: datetime) -> Toolbox:
        """One whole cycle of `agent` at `now`, finished as done."""
        tools = await self.toolbox(now)
        await agent.decide(self.context(agent, tools))
        self.ledger.finish_cycle(self.claim(now), CycleStatus.DONE, now)
        return tools

    def holdings(self, now: datetime) -> dict[str, Decimal]:
        """Symbol -> quantity held, from the ledger."""
        state = self.ledger.account_state(self.account_id, now)
        return {symbol: position.quantity for symbol, position in state.positions.items()}

    def cash(self, now: datetime) -> Decimal:
        return self.ledger.account_state(self.account_id, now).cash.amount


def make_arena(
    ledger: Ledger,
    market: str,
    *,
    universe: Universe | None = None,
    bars: Mapping[str, Sequence[Bar]] | None = None,
    cash: Decimal | None = None,
    agent: str = "agent",
    allow_short: bool = False,
) -> Arena:
    """An arena over the bundled data of `market` (or over `bars`), with the market's universe;
    its account may short with `allow_short`."""
    rules = rules_for(market)
    source = bundled(market) if bars is None else ReplaySource(market=market, bars=bars)
    opened_at = utc(2000, 1, 1)
    agent_id = ledger.ensure_agent(agent, "test", opened_at)
    account_id = ledger.open_account(
        agent_id,
        market,
        rules.currency,
        cash or INITIAL_CASH[market],
        opened_at,
        allow_short=allow_short,
    )
    return Arena(
        ledger=ledger,
        source=source,
        gateway=PointInTimeGateway(source),
        broker=PaperBroker(
            ledger=ledger,
            rules=rules,
            calendar=calendar_for(rules.calendar_id),
            fill_price=source.first_price_at_or_after,
        ),
        universe=universe or load_universe(rules.universe),
        rules=rules,
        account_id=account_id,
    )
