"""Building the live daemon from `openbell.toml`: what `openbell run` and `openbell cycle` run.

This module owns the source factory and the translation of the config into a `LivePlan`. A market's
`source` names its live data: `yfinance`, `akshare` and `ccxt:EXCHANGE` become the adapters in
`openbell.markets.adapters` (bound to the daemon clock's `now`; yfinance and akshare also
serve the market's corporate actions); `replay:PATH` becomes a `ReplaySource` over the bar files at
PATH, which fills orders from its bars as replay does (for tests and demonstrations on a fake
clock), with the market's `corporate_actions` file, if any. A live adapter that cannot be imported
becomes a source that answers every read with `DataUnavailable`, so the daemon keeps running and
records the market's cycles as skipped (`data_unavailable`) instead of failing to start. Universes
and agents come from `wiring`, the very ones a replay uses, under the same rules (with the
configured costs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import NamedTuple

import structlog

from openbell.agents.broker import FillPrice
from openbell.daemon.clock import Clock
from openbell.daemon.live_plan import LEASE_S, LiveMarket, LivePlan
from openbell.markets.corporate_action_files import read_actions
from openbell.markets.corporate_actions import CorporateActionSource
from openbell.markets.domain import Bar, NewsItem, Quote
from openbell.markets.errors import ConfigError, DataUnavailable
from openbell.markets.fundamentals import FundamentalsSource, LiveFundamentals
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import MarketDataSource
from openbell.markets.universes import MARKET_CURRENCY, Universe
from openbell.ops.config import MarketConfig, OpenbellConfig
from openbell.ops.secrets import redactor_for
from openbell.ops.wiring import agent_for, rules_for_market, universe_for

log = structlog.stdlib.get_logger(__name__)


class UnavailableSource:
    """A source whose every read raises `DataUnavailable`: an adapter that could not load, or any
    live source while `OPENBELL_OFFLINE` is set."""

    def __init__(self, name: str, market: str, why: str) -> None:
        self._name = name
        self._market = market
        self._why = why

    @property
    def name(self) -> str:
        return self._name

    @property
    def market(self) -> str:
        return self._market

    @property
    def intervals(self) -> tuple[str, ...]:
        return ("1h", "1d")

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        raise DataUnavailable(self._why)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        raise DataUnavailable(self._why)

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        raise DataUnavailable(self._why)


#: Set (to anything but "" or "0") to keep the daemon off the network: every live source (yfinance,
#: akshare, ccxt) is replaced by one that answers `DataUnavailable`. For tests and dry runs; the
#: acceptance tests set it so that no test ever reaches a vendor's endpoint.
OFFLINE_ENV = "OPENBELL_OFFLINE"


class LiveSource(NamedTuple):
    """What a market's `source` config becomes: the data source, its fill price (a replay
    source fills from its bars; None: the latest fetched price), its fundamentals source
    (None: `get_fundamentals` refuses) and its source of corporate actions (None: none applied)."""

    source: MarketDataSource
    fill_price: FillPrice | None = None
    fundamentals: FundamentalsSource | None = None
    actions: CorporateActionSource | None = None


def make_source(
    name: str,
    market: MarketConfig,
    clock: Clock,
    universe: Sequence[str],
    *,
    environ: Mapping[str, str] = os.environ,
) -> LiveSource:
    """The data source of market `name`, with its fill price and fundamentals where it has them.

    Only yfinance serves fundamentals: its `Ticker.info` snapshots, reported as published when
    fetched. yfinance and akshare serve their corporate actions; a replay source applies the
    market's `corporate_actions` file, if any (and only over raw bars).
    """
    kind, arg = market.source_kind, market.source_arg
    if kind == "replay":
        replay = ReplaySource.from_paths(name, [arg])
        actions = None
        if market.corporate_actions is not None:
            if replay.adjustments != {"raw"}:
                raise ConfigError(
                    f"markets.{name}.corporate_actions: {replay.name} serves "
                    f"{', '.join(sorted(replay.adjustments))} bars, not only raw ones"
                )
            actions = read_actions(market.corporate_actions, name)
        return LiveSource(replay, replay.first_price_at_or_after, actions=actions)
    if environ.get(OFFLINE_ENV, "") not in ("", "0"):
        why = f"{OFFLINE_ENV} is set: the {market.source} source is not contacted"
        log.warning("source_offline", market=name, source=market.source)
        return LiveSource(UnavailableSource(market.source, name, why))
    try:
        if kind == "yfinance":
            from openbell.markets.adapters.yfinance import YahooSource

            yahoo = YahooSource(now=clock.now, universe=universe)
            fundamentals = LiveFundamentals(
                yahoo.fundamentals, name=yahoo.name, currency=MARKET_CURRENCY[name]
            )
            return LiveSource(yahoo, fundamentals=fundamentals, actions=yahoo)
        if kind == "akshare":
            from openbell.markets.adapters.akshare import AkshareSource

            akshare = AkshareSource(now=clock.now, universe=universe)
            return LiveSource(akshare, actions=akshare)
        from openbell.markets.adapters.ccxt import CcxtSource

        return LiveSource(CcxtSource.create(arg or "binance", now=clock.now))
    except ImportError as exc:
        why = f"the {market.source} adapter cannot be loaded: {exc}"
        log.error("source_unavailable", market=name, source=market.source, error_message=why)
        return LiveSource(UnavailableSource(market.source, name, why))


def _warn_outside_coverage(market: str, universe: Universe, today: date) -> None:
    """Say, at every start, that a universe file no longer (or not yet) vouches for today's
    members: the daemon trades the file's list, which may have changed since (survivorship)."""
    coverage = universe.coverage
    if coverage is None or universe.covers(today, today):
        return
    log.warning(
        "universe_outside_coverage",
        market=market,
        universe=universe.name,
        today=today.isoformat(),
        coverage_from=None if coverage.from_date is None else coverage.from_date.isoformat(),
        coverage_until=None if coverage.until_date is None else coverage.until_date.isoformat(),
        message=(
            f"markets.{market}: universe {universe.name} vouches for its members only "
            f"{coverage.describe()}; today is {today}: the daemon trades a list that may have "
            "changed since; update the universe file or give the members in the config"
        ),
    )


def live_plan(
    config: OpenbellConfig,
    clock: Clock,
    *,
    markets: Sequence[str] | None = None,
    agents: Sequence[str] | None = None,
    stop_grace_s: float = 30.0,
    heartbeat_s: float = 60.0,
    lease_s: float = LEASE_S,
    http: bool = True,
) -> LivePlan:
    """The live plan of the configured markets (or `markets`) and their agents (or `agents`).

    Raises `ConfigError` naming a market that is not configured, an agent that is not, or an
    agent asked for that is enrolled in none of the markets.
    """
    configured = config.markets.configured()
    chosen = list(configured) if markets is None else list(markets)
    for name in chosen:
        if name not in configured:
            raise ConfigError(f"market {name!r} is not configured; configured: {list(configured)}")
    for wanted in agents or ():
        _check_enrolled(config, wanted, chosen)
    today = clock.now().date()
    live = []
    for name in chosen:
        market = configured[name]
        enrolled = [a for a in config.agents_in(name) if agents is None or a.name in agents]
        if not enrolled:
            continue
        universe = universe_for(name, market, today)
        _warn_outside_coverage(name, universe, today)
        live_source = make_source(name, market, clock, universe.symbols)
        live.append(
            LiveMarket(
                market=name,
                source=live_source.source,
                universe=universe,
                cadence=market.cadence,
                initial_cash=market.initial_cash,
                agents=tuple(agent_for(agent, name) for agent in enrolled),
                benchmarks=market.benchmarks,
                slot_times=market.slot_times,
                rules=rules_for_market(name, market),
                fill_price=live_source.fill_price,
                fundamentals=live_source.fundamentals,
                actions=live_source.actions,
            )
        )
    if not live:
        raise ConfigError(f"no agent is enrolled in {' or '.join(chosen)}: nothing to run")
    return LivePlan(
        store_url=config.store.url,
        markets=tuple(live),
        http_listen=(config.http.host, config.http.port) if http else None,
        http_allow_remote=config.http.allow_remote,
        stop_grace_s=stop_grace_s,
        heartbeat_s=heartbeat_s,
        redactor=redactor_for(config, os.environ),
        lease_s=lease_s,
    )


def _check_enrolled(config: OpenbellConfig, name: str, markets: Sequence[str]) -> None:
    found = [agent for agent in config.agents if agent.name == name]
    if not found:
        names = ", ".join(agent.name for agent in config.agents) or "none"
        raise ConfigError(f"no agent named {name!r} is configured; configured agents: {names}")
    if not set(found[0].markets) & set(markets):
        raise ConfigError(
            f"agent {name!r} is not enrolled in {' or '.join(markets)}; "
            f"its markets: {', '.join(found[0].markets)}"
        )
