"""What the live daemon runs: its markets (source, universe, cadence, agents, grace) and options.

This module owns `LiveMarket` and `LivePlan`, the live counterparts of the replay's plan, and
`build_live_desks`, which opens each market's accounts and builds its desk through the wiring replay
uses (`desks.py`), with the source wrapped to read bars through the store's cache and record every
bar and news read in it (`markets.cache.CachingSource`; live sources only, a replay source's data
is already on disk), to retry within the slot's grace (`retrying.py`) and, unless a fill price is
given (a replay source fills from its bars), to remember the latest prices for the broker
(`desks.LatestQuotes`), and gives the desk the market's source of corporate actions. Grace
windows default by cadence: 15 minutes for hourly bells, an hour for daily ones; claims are leased
for `LEASE_S` (a minute) at a time, renewed while they run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from openbell.agents.broker import FillPrice
from openbell.agents.protocol import Agent
from openbell.daemon.clock import Clock
from openbell.daemon.desks import LatestQuotes, build_desk, open_accounts
from openbell.daemon.health import MarketWatch
from openbell.daemon.retrying import RetryingSource
from openbell.daemon.runner import DECIDE_TIMEOUT_S, MarketDesk
from openbell.daemon.scheduler import MarketBell
from openbell.markets.cache import BarCache, CachingSource
from openbell.markets.corporate_actions import CorporateActionSource
from openbell.markets.domain import check_decimal
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import MarketRules, rules_for
from openbell.markets.slots import slots_between
from openbell.markets.sources import MarketDataSource
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.redact import Redactor

DEFAULT_GRACE: Final = {"hourly": timedelta(minutes=15), "daily": timedelta(hours=1)}
#: How long a live daemon's claim holds without being renewed, in clock seconds (DESIGN §3).
LEASE_S: Final = 60.0
_CADENCE: Final = {"hourly": timedelta(hours=1), "daily": timedelta(days=1)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveMarket:
    """One market of the live daemon. `fill_price` None: fill at the latest fetched price.
    `fundamentals` None: the `get_fundamentals` tool refuses. `actions` None: no corporate
    actions are applied (crypto; a replay source without an actions file)."""

    market: str
    source: MarketDataSource
    universe: Universe
    cadence: str
    initial_cash: Decimal
    agents: tuple[Agent, ...]
    benchmarks: tuple[str, ...] = ()
    slot_times: tuple[str, ...] | None = None
    rules: MarketRules | None = None
    fill_price: FillPrice | None = None
    grace: timedelta | None = None
    fundamentals: FundamentalsSource | None = None
    actions: CorporateActionSource | None = None

    def __post_init__(self) -> None:
        if self.cadence not in DEFAULT_GRACE:
            raise ValueError(f"unknown cadence {self.cadence!r}; known: {sorted(DEFAULT_GRACE)}")
        if self.source.market != self.market or self.universe.market != self.market:
            raise ValueError(f"{self.market}: given another market's source or universe")
        check_decimal("initial_cash", self.initial_cash, positive=True)
        if self.grace is not None and self.grace <= timedelta(0):
            raise ValueError(f"{self.market}: grace must be positive, got {self.grace}")
        if self.actions is not None and self.actions.market != self.market:
            raise ValueError(f"{self.market}: given {self.actions.market} corporate actions")

    @property
    def market_rules(self) -> MarketRules:
        return self.rules if self.rules is not None else rules_for(self.market)

    @property
    def bell(self) -> MarketBell:
        """When this market rings."""
        grace = self.grace if self.grace is not None else DEFAULT_GRACE[self.cadence]
        return MarketBell(
            market=self.market, cadence=self.cadence, grace=grace, slot_times=self.slot_times
        )

    @property
    def watch(self) -> MarketWatch:
        """What the health board expects of this market."""
        return MarketWatch(cadence=_CADENCE[self.cadence], grace=self.bell.grace)

    def _slots(self, start_at: datetime, end_at: datetime) -> list[datetime]:
        try:
            return slots_between(
                self.market, self.cadence, start_at, end_at, slot_times=self.slot_times
            )
        except CalendarOutOfRange:
            return []

    def is_slot(self, at: datetime) -> bool:
        """Whether `at` is one of this market's slots."""
        return self._slots(at, at + timedelta(microseconds=1)) == [at]

    def latest_slot(self, at: datetime) -> datetime | None:
        """The latest slot at or before `at` within the last week, or None."""
        found = self._slots(at - timedelta(days=7), at + timedelta(microseconds=1))
        return found[-1] if found else None

    def next_slot(self, at: datetime) -> datetime | None:
        """The first slot after `at` within the next two weeks, or None."""
        found = self._slots(at + timedelta(microseconds=1), at + timedelta(days=14))
        return found[0] if found else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LivePlan:
    """The daemon's markets and options. `http_listen` None: no HTTP endpoint. `lease_s` is how
    long a claim holds unrenewed (clock seconds): a peer may take a cycle over that long after its
    holder stops, so it should be well inside the shortest grace window."""

    store_url: str
    markets: tuple[LiveMarket, ...]
    http_listen: tuple[str, int] | None = ("127.0.0.1", 8787)
    http_allow_remote: bool = False
    stop_grace_s: float = 30.0
    heartbeat_s: float = 60.0
    decide_timeout_s: float = DECIDE_TIMEOUT_S
    run_id: str | None = None
    #: Masks the configured secrets in all the ledger stores (`store.db.make_engine`).
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    lease_s: float = LEASE_S

    def __post_init__(self) -> None:
        names = [market.market for market in self.markets]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a live plan needs distinct markets, got {names}")
        if self.stop_grace_s < 0 or self.heartbeat_s <= 0 or self.lease_s <= 0:
            raise ValueError("stop_grace_s must be >= 0, heartbeat_s and lease_s > 0")


def build_live_desks(
    markets: Sequence[LiveMarket],
    ledger: Ledger,
    clock: Clock,
    now: datetime,
    *,
    cache: BarCache | None = None,
) -> tuple[dict[str, MarketDesk], dict[str, list[tuple[int, Agent]]]]:
    """The desks of `markets` and their (account, agent) lists, accounts opened at `now`.

    With a `cache`, every live (not replay) source reads bars through it and records the bars and
    news it fetches in it, stamped with `clock.now`.
    """
    desks: dict[str, MarketDesk] = {}
    accounts: dict[str, list[tuple[int, Agent]]] = {}
    for market in markets:
        rules = market.market_rules
        read: MarketDataSource = market.source
        if cache is not None and not isinstance(read, ReplaySource):
            read = CachingSource(read, cache, now=clock.now)
        retrying = RetryingSource(read, clock=clock, grace=market.bell.grace)
        source: MarketDataSource = retrying
        fill_price = market.fill_price
        if fill_price is None:
            latest = LatestQuotes(retrying)
            source, fill_price = latest, latest.fill_price
        desks[market.market] = build_desk(
            source=source,
            universe=market.universe,
            rules=rules,
            ledger=ledger,
            fill_price=fill_price,
            price_source=market.source.name,
            benchmarks=market.benchmarks,
            fundamentals=market.fundamentals,
            actions=market.actions,
        )
        accounts[market.market] = open_accounts(
            ledger, market.market, rules, market.initial_cash, market.agents, now
        )
    return desks, accounts
