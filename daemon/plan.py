"""What a run trades, live or replayed: its markets' plans, and the desks built from them.

This module owns `MarketPlan`, one market as both the live daemon and replay run it (source,
universe, cadence, rules, agents and their cash, benchmarks, fill price, fundamentals, corporate
actions, grace), the run-level `LivePlan` (the daemon's options) and `ReplayPlan` (the window),
and the wiring of a market for the cycle runner: `build_desks` opens each market's accounts (one
per enrolled agent with the market's initial cash, idempotently: `open_accounts`) and builds its
desk (`build_desk`: a point-in-time gateway over the source and a paper broker on the ledger,
under the market's rules, with the applier of its corporate actions). What differs between live
and replay is an argument of `build_desks`: given the daemon's clock, each source retries within
the slot's grace (`retrying.py`) and, given a cache, a live (not replay) source reads bars through
the store's cache and records every bar and news read in it (`markets.cache.CachingSource`);
without a clock (replay) the desk reads the recorded data directly. A replay source fills orders
from its bars; any other source at the latest price fetched (`LatestQuotes`, DESIGN §4), unless
the plan names a fill price. Grace windows default by cadence: 15 minutes for hourly bells, an
hour for daily ones; live claims are leased for `LEASE_S` (a minute) at a time, renewed while they
run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from openbell.agents.broker import FillPrice, PaperBroker
from openbell.agents.outside.limits import McpLimits
from openbell.agents.protocol import Agent
from openbell.daemon.clock import Clock
from openbell.daemon.events import EventSink
from openbell.daemon.ex_dates import ActionApplier
from openbell.daemon.read_deadline import READ_TIMEOUT_S
from openbell.daemon.retrying import RetryingSource
from openbell.daemon.runner import DECIDE_TIMEOUT_S, MarketDesk
from openbell.daemon.splitting import latest_generation
from openbell.markets.cache import BarCache, CachingSource
from openbell.markets.calendars import calendar_for
from openbell.markets.corporate_actions import CorporateActionSource
from openbell.markets.domain import Quote, check_decimal, check_utc
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.recorded import RecordingFundamentals
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import A_SHARES_NO_SHORTING, MarketRules, rules_for
from openbell.markets.slots import slots_between
from openbell.markets.sources import ForwardingSource, MarketDataSource
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.redact import Redactor

if TYPE_CHECKING:
    from openbell.agents.outside.hub import CycleHub
    from openbell.daemon.health import MarketWatch
    from openbell.daemon.http import WebFactory
    from openbell.daemon.scheduler import MarketBell

DEFAULT_GRACE: Final = {"hourly": timedelta(minutes=15), "daily": timedelta(hours=1)}
#: The bar interval whose starts are the replay slots of each cadence.
CADENCE_INTERVALS: Final = {"daily": "1d", "hourly": "1h"}
#: How long a live daemon's claim holds without being renewed, in clock seconds (DESIGN §3).
LEASE_S: Final = 60.0
#: The most slots a replay batches into one transaction of ledger writes (`daemon/replay.py`).
DEFAULT_BATCH_SLOTS: Final = 500
_CADENCE: Final = {"hourly": timedelta(hours=1), "daily": timedelta(days=1)}


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketPlan:
    """One market of a run, live or replayed: its data, what it trades, its agents and their cash.

    `slot_times` (market-local "HH:MM") replace the cadence's default slots (in replay: the
    dataset's bar starts). `fill_price` None: a replay source fills from its bars, any other at the
    latest price fetched. `fundamentals` None: the `get_fundamentals` tool refuses. `actions` are
    the splits and dividends applied on their ex-dates (None: none are applied); a replay source
    may have them only over bars that are all raw (adjusted prices already account for them).
    `grace` None: the cadence's default. `shorting_agents` names the agents whose accounts may
    short (config `allow_short`; never in cn).
    """

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
    shorting_agents: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.cadence not in DEFAULT_GRACE:
            raise ValueError(f"unknown cadence {self.cadence!r}; known: {sorted(DEFAULT_GRACE)}")
        if self.source.market != self.market or self.universe.market != self.market:
            raise ValueError(f"{self.market}: given another market's source or universe")
        check_decimal("initial_cash", self.initial_cash, positive=True)
        names = [agent.name for agent in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.market}: an agent name appears twice in {names}")
        if unknown := self.shorting_agents - set(names):
            raise ValueError(f"{self.market}: shorting agents {sorted(unknown)} are not agents")
        if self.shorting_agents and self.market == "cn":
            raise ValueError(f"{self.market}: {A_SHARES_NO_SHORTING}")
        if self.grace is not None and self.grace <= timedelta(0):
            raise ValueError(f"{self.market}: grace must be positive, got {self.grace}")
        if self.actions is not None:
            if self.actions.market != self.market:
                raise ValueError(f"{self.market}: given {self.actions.market} corporate actions")
            source = self.source
            if isinstance(source, ReplaySource) and source.adjustments != {"raw"}:
                raise ValueError(
                    f"{self.market}: {source.name} serves "
                    f"{', '.join(sorted(source.adjustments))} bars, not only raw ones: "
                    f"the corporate actions of {self.actions.name} are already in their prices"
                )

    @property
    def market_rules(self) -> MarketRules:
        """The market's rules: the plan's, or the defaults of the market."""
        return self.rules if self.rules is not None else rules_for(self.market)

    @property
    def bell(self) -> MarketBell:
        """When this market rings."""
        from openbell.daemon.scheduler import MarketBell  # live only: a replay never loads it

        grace = self.grace if self.grace is not None else DEFAULT_GRACE[self.cadence]
        return MarketBell(
            market=self.market, cadence=self.cadence, grace=grace, slot_times=self.slot_times
        )

    @property
    def watch(self) -> MarketWatch:
        """What the health board expects of this market."""
        from openbell.daemon.health import MarketWatch  # live only: a replay never loads it

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


def _distinct(markets: Sequence[MarketPlan], run: str) -> None:
    names = [market.market for market in markets]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"a {run} needs distinct markets, got {names}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LivePlan:
    """The daemon's markets and options. `http_listen` None: no HTTP server. `lease_s` is how
    long a claim holds unrenewed (clock seconds): a peer may take a cycle over that long after its
    holder stops, so it should be well inside the shortest grace window."""

    store_url: str
    markets: tuple[MarketPlan, ...]
    http_listen: tuple[str, int] | None = ("127.0.0.1", 8787)
    http_allow_remote: bool = False
    #: Seconds a client has to send a whole request (`daemon/read_deadline.py`).
    http_read_timeout_s: float = READ_TIMEOUT_S
    #: What one token may hold of `/mcp` (`agents/outside/sessions.py`).
    mcp_limits: McpLimits = field(default_factory=McpLimits)
    #: The token the read routes require (`daemon.http`); None: they are open.
    http_read_token: str | None = field(default=None, repr=False)
    #: Builds the routes the ops layer mounts into the server (API, pages, MCP) over the engine.
    web: WebFactory | None = field(default=None, repr=False)
    stop_grace_s: float = 30.0
    heartbeat_s: float = 60.0
    decide_timeout_s: float = DECIDE_TIMEOUT_S
    run_id: str | None = None
    #: Masks the configured secrets in all the ledger stores (`store.db.make_engine`).
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    lease_s: float = LEASE_S
    #: The agents that run untrusted code without their jail (`[sandbox] allow_unsandboxed`),
    #: listed in `/healthz`.
    unsandboxed_agents: tuple[str, ...] = ()
    #: How often (clock seconds) the running daemon verifies the whole ledger; None: never.
    full_verify_every_s: float | None = None
    #: Takes the daemon's events (`daemon.events`: start, stop, slots' ends, health); None: none.
    events: EventSink | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _distinct(self.markets, "live plan")
        if self.stop_grace_s < 0 or self.heartbeat_s <= 0 or self.lease_s <= 0:
            raise ValueError("stop_grace_s must be >= 0, heartbeat_s and lease_s > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPlan:
    """What to replay: the ledger, the window `[start_at, end_at)` and the markets, each over a
    `ReplaySource` (replay never touches the network).

    With `migrate`, the ledger is upgraded to the schema head once the replay holds its claim.
    """

    store_url: str
    start_at: datetime
    end_at: datetime
    markets: tuple[MarketPlan, ...]
    resume: bool = False
    run_id: str = "replay"
    #: Masks the configured secrets in all the ledger stores (`store.db.make_engine`).
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    migrate: bool = False
    #: Where `/mcp` is served while the replay runs, when it has outside agents (port 0: any).
    mcp_listen: tuple[str, int] = ("127.0.0.1", 0)
    mcp_allow_remote: bool = False
    mcp_read_timeout_s: float = READ_TIMEOUT_S
    mcp_limits: McpLimits = field(default_factory=McpLimits)
    #: The most slots whose ledger writes are batched into one transaction (`daemon/replay.py`).
    batch_slots: int = DEFAULT_BATCH_SLOTS

    def __post_init__(self) -> None:
        if self.batch_slots < 1:
            raise ValueError(f"batch_slots must be at least 1, got {self.batch_slots}")
        check_utc("start_at", self.start_at)
        check_utc("end_at", self.end_at)
        if self.end_at <= self.start_at:
            raise ValueError(f"replay window ends at {self.end_at}, before it starts")
        _distinct(self.markets, "replay")
        for market in self.markets:
            if not isinstance(market.source, ReplaySource):
                raise TypeError(f"replay of {market.market} given a live source, not recorded bars")


def build_desks(
    markets: Sequence[MarketPlan],
    ledger: Ledger,
    now: datetime,
    *,
    clock: Clock | None = None,
    cache: BarCache | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> tuple[dict[str, MarketDesk], dict[str, list[tuple[int, Agent]]]]:
    """The desks of `markets` and their (account, agent) lists, accounts opened at `now`.

    With the daemon's `clock`, every source retries within the market's grace on it and, with a
    `cache` too, every live (not replay) source reads bars through the cache and records the bars,
    news and quotes it fetches in it, stamped with `clock.now`, and the fundamentals reports
    served are recorded there too (`markets.recorded`), for a cache replay. Without a clock
    (replay), the desks read the sources directly. `stopping` tells the retries that the daemon
    stops (they give up at once).
    """
    if cache is not None and clock is None:
        raise ValueError("a cache records reads stamped by the daemon's clock: give the clock")
    desks: dict[str, MarketDesk] = {}
    accounts: dict[str, list[tuple[int, Agent]]] = {}
    for market in markets:
        rules = market.market_rules
        source = market.source
        if clock is not None:
            if cache is not None and not isinstance(source, ReplaySource):
                source = CachingSource(source, cache, now=clock.now)
            source = RetryingSource(source, clock=clock, grace=market.bell.grace, stopping=stopping)
        fundamentals = market.fundamentals
        if fundamentals is not None and cache is not None and clock is not None:
            fundamentals = RecordingFundamentals(fundamentals, cache, now=clock.now)
        fill_price = market.fill_price
        if fill_price is None and isinstance(market.source, ReplaySource):
            fill_price = market.source.first_price_at_or_after
        if fill_price is None:
            latest = LatestQuotes(source)
            source, fill_price = latest, latest.fill_price
        desks[market.market] = build_desk(
            source=source,
            universe=market.universe,
            rules=rules,
            ledger=ledger,
            fill_price=fill_price,
            price_source=market.source.name,
            benchmarks=market.benchmarks,
            fundamentals=fundamentals,
            actions=market.actions,
        )
        accounts[market.market] = open_accounts(
            ledger,
            market.market,
            rules,
            market.initial_cash,
            market.agents,
            now,
            shorting_agents=market.shorting_agents,
        )
    return desks, accounts


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
    *,
    shorting_agents: Collection[str] = (),
) -> list[tuple[int, Agent]]:
    """(account id, agent) of each agent in `market`, opening the accounts that do not exist;
    the accounts of `shorting_agents` may short (where `rules` have shorting). An agent whose
    account was split (`splitting.py`) trades its latest generation's account."""
    opened = []
    for agent in agents:
        agent_id = ledger.ensure_agent(agent.name, agent.kind, now)
        account_id = ledger.open_account(
            agent_id,
            market,
            rules.currency,
            initial_cash,
            now,
            allow_short=agent.name in shorting_agents and rules.shorting is not None,
        )
        opened.append(latest_generation(ledger, account_id, agent, market))
    return opened


class LatestQuotes(ForwardingSource):
    """`source`, remembering the last quote fetched per symbol; `fill_price` reads them back, so an
    order placed at `t` fills at the latest price fetched at `t` (DESIGN §4)."""

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


def outside_hub(markets: Sequence[MarketPlan]) -> CycleHub | None:
    """The one `CycleHub` the plan's outside agents open their cycles on (their `hub`), or None
    when the plan has no outside agent. Raises `ValueError` when they were given several."""
    held = [agent.hub for market in markets for agent in market.agents if hasattr(agent, "hub")]
    if not held:  # no outside agent: the MCP machinery is not imported
        return None
    from openbell.agents.outside.hub import CycleHub

    hubs = {id(hub): hub for hub in held if isinstance(hub, CycleHub)}
    if len(hubs) > 1:
        raise ValueError("the outside agents of one run must share one CycleHub")
    return next(iter(hubs.values()), None)
