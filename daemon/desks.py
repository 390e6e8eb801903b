"""Wiring a market for the cycle runner: its desk, its accounts, and live fill prices.

This module owns what replay and the live daemon share when they set a market up: `build_desk`
(a point-in-time gateway over the market's source and a paper broker on the ledger, under the
market's rules, and the applier of its corporate actions), `open_accounts` (one account per
enrolled agent with the market's initial cash, idempotently) and `LatestQuotes`, the live broker's
fill price: a source decorator that remembers the last quote it fetched for each symbol, so an
order placed at `t` fills at the latest price fetched at `t` (DESIGN §4). Replay fills from its
recorded bars instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal

from openbell.agents.broker import FillPrice, PaperBroker
from openbell.agents.protocol import Agent
from openbell.daemon.ex_dates import ActionApplier
from openbell.daemon.runner import MarketDesk
from openbell.markets.calendars import calendar_for
from openbell.markets.corporate_actions import CorporateActionSource
from openbell.markets.domain import Quote
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.rules import MarketRules
from openbell.markets.sources import ForwardingSource, MarketDataSource
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger


def build_desk(
    *,
    source: MarketDataSource,
    universe: Universe,
    rules: MarketRules,
    ledger: Ledger,
    fill_price: FillPrice,
    price_source: str,
    benchmarks: tuple[str, ...] = (),
    fundamentals: FundamentalsSource | None = None,
    actions: CorporateActionSource | None = None,
) -> MarketDesk:
    """The desk of `source`'s market: gateway, broker, universe, rules, fundamentals and the
    applier of its corporate actions (when it has a source of them)."""
    calendar = calendar_for(rules.calendar_id)
    applier = None
    if actions is not None:
        applier = ActionApplier(source=actions, ledger=ledger, rules=rules, calendar=calendar)
    return MarketDesk(
        market=source.market,
        gateway=PointInTimeGateway(source),
        broker=PaperBroker(
            ledger=ledger,
            rules=rules,
            calendar=calendar,
            fill_price=fill_price,
            price_source=price_source,
        ),
        universe=universe,
        rules=rules,
        benchmarks=benchmarks,
        fundamentals=fundamentals,
        actions=applier,
    )


def open_accounts(
    ledger: Ledger,
    market: str,
    rules: MarketRules,
    initial_cash: Decimal,
    agents: Sequence[Agent],
    now: datetime,
) -> list[tuple[int, Agent]]:
    """(account id, agent) of each agent in `market`, opening the accounts that do not exist."""
    opened = []
    for agent in agents:
        agent_id = ledger.ensure_agent(agent.name, agent.kind, now)
        account_id = ledger.open_account(agent_id, market, rules.currency, initial_cash, now)
        opened.append((account_id, agent))
    return opened


class LatestQuotes(ForwardingSource):
    """`source`, remembering the last quote fetched per symbol; `fill_price` reads them back."""

    def __init__(self, source: MarketDataSource) -> None:
        super().__init__(source)
        self._latest: dict[str, Quote] = {}

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        found = await self._source.quote(symbols, at)
        for symbol, quote in found.items():
            known = self._latest.get(symbol)
            if known is None or known.at <= quote.at:
                self._latest[symbol] = quote
        return found

    def fill_price(self, symbol: str, at: datetime) -> Quote | None:
        """The latest quote of `symbol` fetched so far, if it is not stamped after `at`."""
        quote = self._latest.get(symbol)
        return quote if quote is not None and quote.at <= at else None
