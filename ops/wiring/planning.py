"""Building a run from `openbell.toml`: what `openbell run`, `cycle`, `replay` and `demo` run.

This module owns the translation of the config into a `LivePlan` (`live_plan`) or a `ReplayPlan`
(`replay_plan`, run by `replay_from_config` with a progress bar), each market through the same
builder (`market_plan`), so a replay and the live daemon enrol the very same agents on the very
same universes under the very same rules. Live and replay differ by one argument, the daemon's
clock: a replay has none and never touches the network.

One `[markets.<name>]` section becomes a `MarketPlan`: its universe (a bundled one by name, a
universe file by its path, or the listed symbols), its rules (the market's defaults with the costs
of its `[markets.<name>.costs]` table), its benchmark, the agents enrolled in it (a baseline, an LLM
agent built by `llm_agents`, its key read from the environment, or a Python plug-in agent loaded by
`agents.plugins`) and its source (`make_source`). `replay:PATH` reads the bar files at PATH (and,
where PATH is a directory, the news and fundamentals reports in its `news/` and `fundamentals/`, as
`openbell data download` leaves them), and `bundled` every bar file bundled with openbell for the
market, as they are; both fill orders from their bars, with the market's `corporate_actions` file,
if any (only over raw bars). A live source, `yfinance`, `akshare` or `ccxt:EXCHANGE`, is the adapter
in `openbell.markets.adapters` (bound to the daemon clock's `now`; yfinance and akshare also serve
the market's corporate actions, and yfinance its fundamentals); an adapter that cannot be imported,
or any live source while `OPENBELL_OFFLINE` is set, becomes a source that answers every read with
`DataUnavailable`, so the daemon keeps running and records the market's cycles as skipped
(`data_unavailable`). In a replay a live source stands for the dataset bundled with openbell (the
daily files only for a daily cadence), with the bundled corporate actions over raw bars unless the
market names a file.

A universe used outside the dates its file vouches for (its `coverage`: `crypto10` is AI-Trader's
pick of coins from 2025-11-01, `sse50` the constituents from 2025-09-30 until the index's December
2025 review) would trade a list where nobody knew it, a survivorship bias. The daemon warns at
every start (`universe_outside_coverage`); a replay window outside it is refused with one line
naming the market, unless `allow_outside_coverage` (the `--allow-outside-coverage` flag, or the
market's config key) accepts it; then the replay runs, and the same sentence is logged as a
warning and repeated under the summary. A universe whose members are not all in the replay's data
(a DJIA-20 replay over five of its stocks) is refused the same way unless `allow_partial_coverage`
(`--allow-partial-coverage`, or the market's key) accepts it (`replay_checks.py`); an allowed
replay's warnings are recorded in the ledger for `openbell report`. `--from-cache URL` replays
what the cache of the store at URL recorded (`cache_replay.py`). A replay window is whole UTC
dates, `start` through `end` inclusive; the ledger is migrated to the schema head once the
replay holds its claim on it.

Start-up is most of a short replay, so this module imports only what every run needs: the module
of an agent kind (the LLM client and its modes, the factor model and lightgbm, strategy code and
its jail, rating, plug-in and outside agents with the MCP hub) when the config enrols one, the web
app when the live daemon serves it, rich's progress bar when it is shown
(`tests/acceptance/test_start_imports.py` lists what a replay of baselines must not import).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import structlog

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import Agent
from openbell.daemon.clock import Clock
from openbell.daemon.plan import DEFAULT_BATCH_SLOTS, LEASE_S, LivePlan, MarketPlan, ReplayPlan
from openbell.daemon.replay import Progress as ProgressCallback
from openbell.daemon.replay import ReplayReport, run_replay
from openbell.markets.barfile import BarSet, bundled_names_for, read_bars, read_bundled
from openbell.markets.corporate_action_files import bundled_actions, read_actions
from openbell.markets.corporate_actions import CorporateActionSource, RecordedActions
from openbell.markets.domain import Bar, Instrument, NewsItem, Quote
from openbell.markets.errors import ConfigError, DataUnavailable
from openbell.markets.fundamentals import (
    FundamentalsReport,
    FundamentalsSource,
    LiveFundamentals,
    RecordedFundamentals,
)
from openbell.markets.importers.download_folder import read_research
from openbell.markets.price_limits import with_limit_buffer
from openbell.markets.replay_source import ReplaySource, bar_files
from openbell.markets.rules import MarketRules, rules_for, with_costs, with_shorting
from openbell.markets.sources import MarketDataSource, SourceIdentity, SymbolFilter
from openbell.markets.universes import MARKET_CURRENCY, Universe, load_universe
from openbell.ops.config.schema import (
    AnyAgentConfig,
    CommandAgentConfig,
    FactorModelAgentConfig,
    LlmAgentConfig,
    MarketConfig,
    McpAgentConfig,
    OpenbellConfig,
    PairNeutralAgentConfig,
    PythonAgentConfig,
    RandomAgentConfig,
    RatingAgentConfig,
    StrategyCodeAgentConfig,
)
from openbell.ops.config.secrets import redactor_for
from openbell.ops.wiring.replay_checks import ReplayChecks, check_replay, record_warnings
from openbell.ops.wiring.sandboxing import Containment, containment_for

if TYPE_CHECKING:
    from openbell.agents.outside.hub import CycleHub
    from openbell.daemon.http import WebFactory
    from openbell.ops.evaluation.attribution.ledger_inputs import AttributionChoice
    from openbell.ops.wiring.recorded_answers import Answering

log = structlog.stdlib.get_logger(__name__)

#: Set (to anything but "" or "0") to keep the daemon off the network: every live source (yfinance,
#: akshare, ccxt) is replaced by one that answers `DataUnavailable`. For tests and dry runs; the
#: acceptance tests set it so that no test ever reaches a vendor's endpoint.
OFFLINE_ENV = "OPENBELL_OFFLINE"


# -- the parts of a market ---------------------------------------------------------------------


def attribution_choice(config: OpenbellConfig, as_of: date) -> AttributionChoice:
    """The attribution `config`'s `[attribution]` asks for: its style set, and with
    `cross_section = "universe"` each configured market's universe (`universe_for` at `as_of`)."""
    from openbell.ops.evaluation.attribution.exposures import STYLE_SETS
    from openbell.ops.evaluation.attribution.ledger_inputs import AttributionChoice

    settings = config.attribution
    universes = (
        {
            name: universe_for(name, section, as_of)
            for name, section in config.markets.configured().items()
        }
        if settings.cross_section == "universe"
        else {}
    )
    return AttributionChoice(styles=STYLE_SETS[settings.styles], universes=universes)


def universe_for(name: str, market: MarketConfig, as_of: date) -> Universe:
    """The universe of market `name`: the bundled one or the file it names, or its listed symbols;
    with the market's `benchmark` in place of the file's when one is configured (what
    `buy_and_hold` trades: the CSI 300 index fund for `benchmark = "000300.SH"`, or for a CSI 300
    universe file that names it)."""
    if isinstance(market.universe, str):
        found = load_universe(market.universe)
        if market.benchmark is None or market.benchmark in found:
            return found
        return replace(found, benchmark=market.benchmark)
    currency = MARKET_CURRENCY[name]
    return Universe(
        name=f"{name}-configured",
        market=name,
        as_of=as_of,
        instruments=tuple(
            Instrument(symbol=symbol, market=name, currency=currency) for symbol in market.universe
        ),
        source="openbell.toml",
    )


def rules_for_market(name: str, market: MarketConfig) -> MarketRules:
    """The rules of market `name`: its defaults with the costs, price-limit buffer and shorting
    numbers its config sets in their place."""
    costs = market.costs
    rules = with_costs(
        rules_for(name),
        commission_bps=costs.commission_bps,
        commission_min=costs.commission_min,
        stamp_duty_sell_bps=costs.stamp_duty_sell_bps,
        transfer_fee_bps=costs.transfer_fee_bps,
        slippage_bps=costs.slippage_bps,
        min_notional=costs.min_notional,
    )
    rules = with_limit_buffer(rules, market.limit_buffer_pct)
    shorting = market.shorting
    if shorting is None:
        return rules
    return with_shorting(
        rules,
        borrow_fee_bps_per_year=shorting.borrow_fee_bps_per_year,
        initial_margin=shorting.initial_margin,
        maintenance_margin=shorting.maintenance_margin,
    )


def agent_for(
    agent: AnyAgentConfig,
    market: str,
    environ: Mapping[str, str] | None = None,
    *,
    hub: CycleHub | None = None,
    containment: Containment | None = None,
    answering: Answering | None = None,
) -> Agent:
    """The agent of one `[[agents]]` entry, trading `market`; an outside agent's cycles are
    opened on `hub` (the run's one MCP server's; a new one when None). A strategy-code or command
    agent is contained as `containment` says (`sandboxing.py`; default: jailed). An LLM agent is
    answered from `answering`'s recorded answers unless it is swapped (`recorded_answers.py`), as
    are a strategy-code agent's writer and a rating agent (not its judge)."""
    # Each kind's module is imported when the config uses that kind: a replay of baselines never
    # loads the LLM client, the MCP hub, the strategy-code sandbox or lightgbm (issue 29).
    if isinstance(agent, LlmAgentConfig):
        from openbell.agents.modes.hedge import HedgeEnforced
        from openbell.agents.pairs import PairEnforced
        from openbell.ops.wiring.llm_agents import build_llm_agent

        built = build_llm_agent(
            agent,
            os.environ if environ is None else environ,
            None if answering is None else answering.for_agent(agent.name),
            None if answering is None else answering.book.keys,
        )
        if agent.mode == "hedge":
            return HedgeEnforced(agent=built)
        return PairEnforced(agent=built, pairs=agent.pairs) if agent.mode == "pair" else built
    if isinstance(agent, FactorModelAgentConfig):
        from openbell.agents.factor_model import FactorModel

        return FactorModel(
            name=agent.name,
            market=market,
            top_k=agent.top_k,
            retrain_sessions=agent.retrain_sessions,
            train_sessions=agent.train_sessions,
            label_sessions=agent.label_sessions,
            seed=agent.seed,
        )
    if isinstance(agent, PairNeutralAgentConfig):
        return build_agent(
            agent.kind,
            agent.name,
            market=market,
            pairs=agent.pairs,
            sessions=agent.momentum_sessions,
        )
    if isinstance(agent, StrategyCodeAgentConfig):
        from openbell.ops.wiring.strategy_agents import build_strategy_code_agent

        return build_strategy_code_agent(
            agent,
            os.environ if environ is None else environ,
            containment,
            None if answering is None else answering.for_agent(agent.name),
        )
    if isinstance(agent, RatingAgentConfig):
        from openbell.ops.wiring.rating_agents import build_rating_agent

        return build_rating_agent(
            agent,
            os.environ if environ is None else environ,
            None if answering is None else answering.for_agent(agent.name),
        )
    if isinstance(agent, PythonAgentConfig):
        from openbell.agents.plugins import load_plugin

        return load_plugin(agent.name, agent.entry, agent.options)
    if isinstance(agent, CommandAgentConfig):
        from openbell.agents.outside.hub import CycleHub
        from openbell.ops.wiring.outside_agents import build_command_agent

        return build_command_agent(
            agent,
            hub if hub is not None else CycleHub(),
            os.environ if environ is None else environ,
            containment,
        )
    if isinstance(agent, McpAgentConfig):
        from openbell.agents.aliases import seed_of
        from openbell.agents.masking import masker_for
        from openbell.agents.outside.agent import McpAgent
        from openbell.agents.outside.hub import CycleHub, OutsideBudgets

        return McpAgent(
            name=agent.name,
            hub=hub if hub is not None else CycleHub(),
            budgets=OutsideBudgets(
                max_tool_calls=agent.max_tool_calls, max_wall_s=agent.max_wall_s
            ),
            masker=masker_for(
                agent.masking, seed=seed_of(agent.masking_seed), rebase=agent.rebase_prices
            ),
        )
    seed = agent.seed if isinstance(agent, RandomAgentConfig) else None
    return build_agent(agent.kind, agent.name, market=market, seed=seed)


class UnavailableSource(SourceIdentity):
    """A source whose every read raises `DataUnavailable`: an adapter that could not load, or any
    live source while `OPENBELL_OFFLINE` is set."""

    def __init__(self, name: str, market: str, why: str) -> None:
        super().__init__(name, market, ("1h", "1d"))
        self._why = why

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        raise DataUnavailable(self._why)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        raise DataUnavailable(self._why)

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        raise DataUnavailable(self._why)


class MarketSource(NamedTuple):
    """What a market's `source` config becomes: the data source, its fundamentals source (None:
    `get_fundamentals` refuses) and its source of corporate actions (None: none applied)."""

    source: MarketDataSource
    fundamentals: FundamentalsSource | None = None
    actions: CorporateActionSource | None = None


def make_source(
    name: str,
    market: MarketConfig,
    clock: Clock | None,
    universe: Sequence[str],
    *,
    environ: Mapping[str, str] = os.environ,
    from_cache: str | None = None,
) -> MarketSource:
    """The data source of market `name`, with its fundamentals and corporate actions where it has
    them; see the module docstring. `clock` None: a replay, where a live source stands for the
    bundled dataset, or (`from_cache`, a store URL) for what that store's cache recorded."""
    if clock is None and from_cache is not None:
        from openbell.ops.wiring.cache_replay import cache_source

        cached = cache_source(name, [*universe, *market.benchmarks], from_cache)
        if cached.source is not None:
            return MarketSource(cached.source, fundamentals=cached.fundamentals)
        news = [known.item for known in cached.news]
        recorded = _recorded_source(name, market, news)
        return MarketSource(
            recorded,
            fundamentals=cached.fundamentals,
            actions=_recorded_actions(name, market, recorded),
        )
    if clock is None or market.source_kind in ("replay", "bundled"):
        news, reports = _folder_research(market)
        recorded = _recorded_source(name, market, news)
        return MarketSource(
            recorded,
            fundamentals=RecordedFundamentals.of(reports) if reports else None,
            actions=_recorded_actions(name, market, recorded),
        )
    if environ.get(OFFLINE_ENV, "") not in ("", "0"):
        why = f"{OFFLINE_ENV} is set: the {market.source} source is not contacted"
        log.warning("source_offline", market=name, source=market.source)
        return MarketSource(UnavailableSource(market.source, name, why))
    try:
        if market.source_kind == "yfinance":
            from openbell.markets.adapters.yfinance import YahooSource

            yahoo = YahooSource(now=clock.now, universe=universe)
            fundamentals = LiveFundamentals(
                yahoo.fundamentals, name=yahoo.name, currency=MARKET_CURRENCY[name]
            )
            return MarketSource(yahoo, fundamentals=fundamentals, actions=yahoo)
        if market.source_kind == "akshare":
            from openbell.markets.adapters.akshare import AkshareSource

            akshare = AkshareSource(now=clock.now, universe=universe)
            return MarketSource(akshare, actions=akshare)
        from openbell.markets.adapters.ccxt import CcxtSource

        return MarketSource(CcxtSource.create(market.source_arg or "binance", now=clock.now))
    except ImportError as exc:
        why = f"the {market.source} adapter cannot be loaded: {exc}"
        log.error("source_unavailable", market=name, source=market.source, error_message=why)
        return MarketSource(UnavailableSource(market.source, name, why))


def _recorded_source(
    name: str, market: MarketConfig, news: Sequence[NewsItem] = ()
) -> ReplaySource:
    """The recorded bars market `name` reads, with `news`: its `replay:PATH` files, the bundled
    ones, or (for a live source, in a replay) the bundled ones of its cadence."""
    if market.source_kind == "replay":
        return ReplaySource(
            market=name,
            barsets=replay_barsets(name, market),
            news=news,
            name=market.source,
        )
    if market.source_kind == "bundled":
        return ReplaySource.from_bundled(name, news=news)
    return ReplaySource.from_bundled(
        name, names=replay_bundled_names(name, market.cadence), news=news
    )


def _folder_research(market: MarketConfig) -> tuple[list[NewsItem], list[FundamentalsReport]]:
    """The news and fundamentals reports of a `replay:DIR[,DIR...]` source's directories (their
    `news/` and `fundamentals/`, as `openbell data download` writes them or a user puts files
    there: `download_folder.read_research`), each shown from its publication time; none for
    another source."""
    news: list[NewsItem] = []
    reports: list[FundamentalsReport] = []
    if market.source_kind != "replay":
        return news, reports
    for part in (part.strip() for part in market.source_arg.split(",")):
        if part and part != "bundled" and Path(part).is_dir():
            found_news, found_reports = read_research(Path(part))
            news += found_news
            reports += found_reports
    return news, reports


def replay_barsets(name: str, market: MarketConfig) -> list[BarSet]:
    """The bar sets of market `name`'s `replay:PATH[,PATH...]` source, in order: each path's bar
    files (a directory's `*.parquet`), the word `bundled` standing for openbell's own files of the
    market at its cadence, so that imported bars complete the bundled ones (a symbol's bars of one
    interval in two of them is a `ConfigError`)."""
    barsets: list[BarSet] = []
    for part in (part.strip() for part in market.source_arg.split(",")):
        if not part:
            raise ConfigError(f"markets.{name}: source {market.source!r} names an empty path")
        if part == "bundled":
            barsets.extend(
                read_bundled(file) for file in replay_bundled_names(name, market.cadence)
            )
        else:
            barsets.extend(read_bars(path) for path in bar_files([part]))
    return barsets


def replay_bundled_names(market: str, cadence: str) -> list[str]:
    """The bundled bar files a replay of `market` at `cadence` from a live source reads.

    A daily replay leaves the hourly files out: fills take the first open of the finest loaded
    interval, and the bundled hourly bars are adjusted while the daily ones are raw, so mixing them
    would price a daily account's fills and marks on a different basis than its history.
    """
    names = list(bundled_names_for(market))
    if cadence == "daily":
        names = [name for name in names if not name.endswith("-1h")]
    return names


def _recorded_actions(
    name: str, market: MarketConfig, source: ReplaySource
) -> RecordedActions | None:
    """The corporate actions applied over the recorded bars of market `name`: its
    `corporate_actions` file, else the bundled file when a live source stands for the bundled raw
    bars (the A-share dividends), else none. Bars that are not all raw already have the actions in
    their prices: a configured file is refused there.
    """
    raw = source.adjustments == {"raw"}
    if market.corporate_actions is not None:
        if not raw:
            raise ConfigError(
                f"markets.{name}.corporate_actions: {source.name} serves "
                f"{', '.join(sorted(source.adjustments))} bars, not only raw ones, so its prices "
                "already account for corporate actions; they apply to raw bars only"
            )
        return read_actions(market.corporate_actions, name)
    if market.source_kind in ("replay", "bundled") or not raw:
        return None
    return bundled_actions(name)


def market_plan(
    name: str,
    market: MarketConfig,
    agents: Sequence[AnyAgentConfig],
    *,
    clock: Clock | None,
    as_of: date,
    environ: Mapping[str, str] = os.environ,
    hub: CycleHub | None = None,
    from_cache: str | None = None,
    containment: Containment | None = None,
    answering: Answering | None = None,
) -> MarketPlan:
    """The plan of market `name` traded by `agents` (outside agents on `hub`, untrusted ones
    contained as `containment` says), live on `clock` or replayed (`clock` None) from `as_of`
    (from the cache of the store at `from_cache`, if given). Raises `ConfigError` when a replay's
    bars hold no symbol of the universe."""
    universe = universe_for(name, market, as_of)
    made = make_source(
        name, market, clock, universe.symbols, environ=environ, from_cache=from_cache
    )
    source = made.source
    replayed = source if clock is None and isinstance(source, ReplaySource) else None
    if replayed is not None and not set(universe.symbols) & replayed.symbols():
        raise ConfigError(
            f"markets.{name}: {source.name} has no bars of any symbol of universe {universe.name}"
        )
    return MarketPlan(
        market=name,
        source=source,
        universe=universe,
        cadence=market.cadence,
        initial_cash=market.initial_cash,
        agents=tuple(
            agent_for(agent, name, hub=hub, containment=containment, answering=answering)
            for agent in agents
        ),
        shorting_agents=frozenset(agent.name for agent in agents if agent.allow_short),
        benchmarks=market.benchmarks,
        slot_times=market.slot_times,
        rules=rules_for_market(name, market),
        fundamentals=made.fundamentals,
        actions=made.actions,
    )


def outside_hub_for(config: OpenbellConfig) -> CycleHub | None:
    """The one hub the config's outside agents (command and MCP) open their cycles on; None when
    it has none, so that a run without them never imports the MCP machinery."""
    if not any(isinstance(agent, CommandAgentConfig | McpAgentConfig) for agent in config.agents):
        return None
    from openbell.agents.outside.hub import CycleHub

    return CycleHub()


def _enrolled(
    config: OpenbellConfig, markets: Sequence[str] | None, agents: Sequence[str] | None, run: str
) -> list[tuple[str, MarketConfig, tuple[AnyAgentConfig, ...]]]:
    """(name, config, agents) of each chosen market (default: every configured one) with agents
    enrolled (or those of `agents`). Raises `ConfigError` naming a market or an agent that is not
    configured, an agent enrolled in none of the markets, or when no agent is left to `run`."""
    configured = config.markets.configured()
    chosen = list(configured) if markets is None else list(markets)
    for name in chosen:
        if name not in configured:
            raise ConfigError(
                f"market {name!r} is not configured; configured: {', '.join(configured)}"
            )
    for wanted in agents or ():
        _check_enrolled(config, wanted, chosen)
    found = []
    for name in chosen:
        enrolled = tuple(a for a in config.agents_in(name) if agents is None or a.name in agents)
        if enrolled:
            found.append((name, configured[name], enrolled))
    if not found:
        raise ConfigError(f"no agent is enrolled in {' or '.join(chosen)}: nothing to {run}")
    return found


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


# -- live ----------------------------------------------------------------------------------


def _web_factory(config: OpenbellConfig, clock: Clock) -> WebFactory:
    """The arena's web parts over an engine, measured under the config's metrics convention, with
    the daemon's health on the arena page (its last-bell panel), and the attribution its
    `[attribution]` picks (its universes as of the clock's date at start)."""
    from openbell.ops.evaluation.conventions import convention_named
    from openbell.ops.reports.contamination import CutoffSettings
    from openbell.ops.web.app import web_parts

    convention = convention_named(config.metrics.convention)
    attribution = attribution_choice(config, clock.now().date())
    # The daemon serving these parts writes the ledger: its pages are live.
    cutoffs = CutoffSettings.of(config)
    return lambda engine, health: web_parts(
        engine,
        convention=convention,
        attribution=attribution,
        live=lambda: True,
        health=health,
        cutoffs=cutoffs,
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

    With `http`, the plan serves the arena's web routes (`ops.web.app.web_parts`) beside
    `/healthz` and `/metrics`, behind the read token of `[http] read_token_env` when it names one.
    Raises `ConfigError` naming a market that is not configured, an agent that is not, an agent
    asked for that is enrolled in none of the markets, or a read token variable that is not set.
    """
    today = clock.now().date()
    plans = []
    hub = outside_hub_for(config)
    containment = containment_for(config, os.environ)
    for name, market, enrolled in _enrolled(config, markets, agents, "run"):
        plan = market_plan(
            name, market, enrolled, clock=clock, as_of=today, hub=hub, containment=containment
        )
        _warn_outside_coverage(name, plan.universe, today)
        plans.append(plan)
    return LivePlan(
        store_url=config.store.url,
        markets=tuple(plans),
        http_listen=(config.http.host, config.http.port) if http else None,
        http_allow_remote=config.http.allow_remote,
        http_read_token=config.http.read_token(os.environ) if http else None,
        http_read_timeout_s=config.http.read_timeout_s,
        mcp_limits=config.mcp.limits(),
        web=_web_factory(config, clock) if http else None,
        stop_grace_s=stop_grace_s,
        heartbeat_s=heartbeat_s,
        redactor=redactor_for(config, os.environ),
        lease_s=lease_s,
        full_verify_every_s=config.store.full_verify_every_h * 3600 or None,
        unsandboxed_agents=unsandboxed(plans),
    )


def unsandboxed(plans: Sequence[MarketPlan]) -> tuple[str, ...]:
    """The names of the agents of `plans` that run untrusted code without their jail."""
    from openbell.agents.outside.command import CommandAgent
    from openbell.agents.strategy_code.agent import StrategyCodeAgent

    return tuple(
        sorted(
            {
                agent.name
                for plan in plans
                for agent in plan.agents
                if isinstance(agent, StrategyCodeAgent | CommandAgent) and not agent.sandboxed
            }
        )
    )


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
        coverage_from=_iso(coverage.from_date),
        coverage_until=_iso(coverage.until_date),
        message=(
            f"markets.{market}: universe {universe.name} vouches for its members only "
            f"{coverage.describe()}; today is {today}: the daemon trades a list that may have "
            "changed since; update the universe file or give the members in the config"
        ),
    )


# -- replay --------------------------------------------------------------------------------


def replay_plan(
    config: OpenbellConfig,
    *,
    start: date,
    end: date,
    market: str | None,
    resume: bool,
    allow_outside_coverage: bool = False,
    allow_partial_coverage: bool = False,
    from_cache: str | None = None,
    batch_slots: int = DEFAULT_BATCH_SLOTS,
    seeds: int | None = None,
    answering: Answering | None = None,
) -> tuple[ReplayPlan, ReplayChecks]:
    """The replay of the sessions from `start` through `end` (UTC dates) of the configured markets
    (or just `market`) with their agents, and its checks: the coverage of each market's universe
    by its data, and the warnings (universes used outside their coverage, universes with members
    or a benchmark without data across the window), each starting `markets.NAME:`. `from_cache`:
    the URL of a store whose cache the markets replay (`ops.wiring.cache_replay`) instead of their
    bar files.

    Raises `ConfigError` for an empty or reversed window, a market not configured, a market
    without agents, a universe used outside its coverage without `allow_outside_coverage` (here
    or in the market's config), a universe with members (or a benchmark) without data across the
    window without `allow_partial_coverage` (here or in the market's config) or an LLM agent
    whose key variable is not set. With `seeds`, every agent runs once per seed as its own agent
    (`ops.wiring.seeds.seeded_config`). With `answering`, the LLM agents are answered from a
    recorded ledger (`recorded_answers.py`; its swaps already applied to `config`).
    """
    if end < start:
        raise ConfigError(f"--end {end.isoformat()} is before --start {start.isoformat()}")
    if seeds is not None:
        from openbell.ops.wiring.seeds import seeded_config

        config = seeded_config(config, seeds)
    chosen = None if market is None else [market]
    enrolled = _enrolled(config, chosen, None, "replay")
    hub = outside_hub_for(config)
    containment = containment_for(config, os.environ)
    markets = tuple(
        market_plan(
            name,
            configured,
            agents,
            clock=None,
            as_of=start,
            hub=hub,
            from_cache=from_cache,
            containment=containment,
            answering=answering,
        )
        for name, configured, agents in enrolled
    )
    start_at = datetime.combine(start, time(0), tzinfo=UTC)
    end_at = datetime.combine(end + timedelta(days=1), time(0), tzinfo=UTC)
    checks = check_replay(
        markets,
        [configured for _, configured, _ in enrolled],
        start=start,
        end=end,
        allow_outside_coverage=allow_outside_coverage,
        allow_partial_coverage=allow_partial_coverage,
    )
    plan = ReplayPlan(
        store_url=config.store.url,
        start_at=start_at,
        end_at=end_at,
        markets=markets,
        resume=resume,
        run_id=f"replay:{socket.gethostname()}:{os.getpid()}",
        redactor=redactor_for(config, os.environ),
        migrate=True,
        mcp_listen=(config.http.host, config.http.port),
        mcp_allow_remote=config.http.allow_remote,
        mcp_read_timeout_s=config.http.read_timeout_s,
        mcp_limits=config.mcp.limits(),
        batch_slots=batch_slots,
    )
    return plan, checks


def replay_from_config(
    config: OpenbellConfig,
    *,
    start: date,
    end: date,
    market: str | None,
    resume: bool,
    show_progress: bool,
    allow_outside_coverage: bool = False,
    allow_partial_coverage: bool = False,
    from_cache: str | None = None,
    batch_slots: int = DEFAULT_BATCH_SLOTS,
    seeds: int | None = None,
    answering: Answering | None = None,
    frozen: bool = False,
) -> ReplayReport:
    """Run `replay_plan` into the config's ledger, with a progress bar on stderr if shown. The
    report carries the checks' coverage and warnings (its summary states them); the warnings are
    also recorded in the ledger, for `openbell report` to repeat. `frozen`: the process has frozen
    objects itself (`run_replay`).

    Raises `ConfigError` as `replay_plan` does, and `OperatorError` for a ledger that another
    replay (or, on SQLite, a daemon) is writing or that already has cycles in the window without
    `resume`. With `seeds`, the runs are recorded as one group (`ops.wiring.seeds`) once the replay
    has created their agents.
    """
    plan, checks = replay_plan(
        config,
        start=start,
        end=end,
        market=market,
        resume=resume,
        allow_outside_coverage=allow_outside_coverage,
        allow_partial_coverage=allow_partial_coverage,
        from_cache=from_cache,
        batch_slots=batch_slots,
        seeds=seeds,
        answering=answering,
    )
    planted = []
    probe = config.probe.injection
    if probe is not None:
        from openbell.ops.evaluation.probes import injection_planting

        planted = injection_planting.plant_in_replay(probe, plan.markets, start, end)
    with _progress_bar(show_progress) as progress:
        report = run_replay(plan, progress=progress, frozen=frozen)
    if planted:
        injection_planting.record(plan.store_url, plan.redactor, planted)
    if checks.warnings:
        record_warnings(plan, checks.warnings)
    if seeds is not None:
        from openbell.ops.wiring.seeds import record_group

        record_group(config, seeds, start=start, end=end)
    return replace(report, coverage=checks.coverage, warnings=checks.warnings)


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


@contextmanager
def _progress_bar(show: bool) -> Iterator[ProgressCallback | None]:
    """A rich progress bar on stderr fed by `progress(done, total)`; None when not shown."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("replay"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("slots"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replay", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
