"""Building a replay from `openbell.toml`: what `openbell replay` (and `openbell demo`) runs.

This module owns the translation of the config into a `ReplayPlan`: for each configured market (or
the one asked for) its recorded data (a `replay:PATH` source reads the bar files at PATH; a live
source, `yfinance`, `akshare` or `ccxt:...`, stands for the dataset bundled with openbell, so a
replay never touches the network), its corporate actions (the market's `corporate_actions` file,
else the bundled one for a bundled daily replay; only on raw bars), its universe (a bundled one by
name, or the listed symbols), its rules (with the configured costs), its benchmark, and the agents
enrolled in it (LLM agents built by `llm_agents`, their keys read from the environment). The window
is whole UTC dates, `start` through `end` inclusive. The ledger is migrated to the schema head
once the replay holds its claim on it. It also draws the progress bar.

A window outside the dates a universe file vouches for (its `coverage`: `crypto10` is AI-Trader's
pick of coins from 2025-11-01, `sse50` the constituents from 2025-09-30 until the index's December
2025 review) would trade that list where nobody knew it, a survivorship bias: it is refused with
one line naming the market, unless `allow_outside_coverage` (the `--allow-outside-coverage` flag,
or the market's config key) accepts it; then the replay runs, and the same sentence is logged as a
`universe_outside_coverage` warning and repeated under the summary.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta

import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from openbell.daemon.replay import Progress as ProgressCallback
from openbell.daemon.replay import ReplayMarket, ReplayPlan, ReplayReport, run_replay
from openbell.markets.barfile import bundled_names
from openbell.markets.corporate_action_files import bundled_actions, read_actions
from openbell.markets.corporate_actions import RecordedActions
from openbell.markets.errors import ConfigError
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Universe
from openbell.ops.config import AnyAgentConfig, MarketConfig, OpenbellConfig
from openbell.ops.secrets import redactor_for
from openbell.ops.wiring import agent_for, rules_for_market, universe_for

log = structlog.stdlib.get_logger(__name__)


def replay_from_config(
    config: OpenbellConfig,
    *,
    start: date,
    end: date,
    market: str | None,
    resume: bool,
    show_progress: bool,
    allow_outside_coverage: bool = False,
) -> ReplayReport:
    """Replay the sessions from `start` through `end` (UTC dates) of the configured markets (or
    just `market`) with their agents, into the config's ledger.

    Raises `ConfigError` for an empty or reversed window, a market not configured, a market
    without agents, a universe used outside its coverage without `allow_outside_coverage` (here
    or in the market's config) or an LLM agent whose key variable is not set, and `OperatorError`
    for a ledger that another replay (or, on SQLite, a daemon) is writing or that already has
    cycles in the window without `resume`.
    """
    if end < start:
        raise ConfigError(f"--end {end.isoformat()} is before --start {start.isoformat()}")
    configured = config.markets.configured()
    if market is not None and market not in configured:
        raise ConfigError(
            f"market {market!r} is not configured; configured: {', '.join(configured)}"
        )
    chosen = [market] if market is not None else list(configured)
    markets = tuple(
        _replay_market(name, configured[name], config.agents_in(name), start)
        for name in chosen
        if config.agents_in(name)
    )
    if not markets:
        raise ConfigError(f"no agent is enrolled in {' or '.join(chosen)}: nothing to replay")
    warnings = []
    for replayed in markets:
        doubt = _outside_coverage(replayed.market, replayed.universe, start, end)
        if doubt is None:
            continue
        if not (allow_outside_coverage or configured[replayed.market].allow_outside_coverage):
            raise ConfigError(
                f"{doubt}; replay inside those dates, or pass --allow-outside-coverage (or set "
                f"allow_outside_coverage = true in [markets.{replayed.market}]) to run it anyway"
            )
        coverage = replayed.universe.coverage
        log.warning(
            "universe_outside_coverage",
            market=replayed.market,
            universe=replayed.universe.name,
            start=start.isoformat(),
            end=end.isoformat(),
            coverage_from=_iso(None if coverage is None else coverage.from_date),
            coverage_until=_iso(None if coverage is None else coverage.until_date),
            message=doubt,
        )
        warnings.append(doubt)
    plan = ReplayPlan(
        store_url=config.store.url,
        start_at=datetime.combine(start, time(0), tzinfo=UTC),
        end_at=datetime.combine(end + timedelta(days=1), time(0), tzinfo=UTC),
        markets=markets,
        resume=resume,
        run_id=f"replay:{socket.gethostname()}:{os.getpid()}",
        redactor=redactor_for(config, os.environ),
        migrate=True,
    )
    with _progress_bar(show_progress) as progress:
        report = run_replay(plan, progress=progress)
    return replace(report, warnings=tuple(warnings))


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


def _outside_coverage(name: str, universe: Universe, start: date, end: date) -> str | None:
    """What is wrong with replaying `universe` from `start` through `end`, in one sentence; None
    when its file vouches for every date of the window."""
    coverage = universe.coverage
    if coverage is None or universe.covers(start, end):
        return None
    vouched = coverage.describe()
    if coverage.from_date is not None and start < coverage.from_date:
        window = f"this replay starts on {start.isoformat()}"
    else:
        window = f"this replay ends on {end.isoformat()}"
    return (
        f"markets.{name}: universe {universe.name} vouches for its members only {vouched}, and "
        f"{window}: trading its list at dates the file cannot vouch for is a survivorship bias"
    )


def _replay_market(
    name: str, market: MarketConfig, agents: tuple[AnyAgentConfig, ...], start: date
) -> ReplayMarket:
    source = (
        ReplaySource.from_paths(name, [market.source_arg])
        if market.source_kind == "replay"
        else ReplaySource.from_bundled(name, names=_bundled_files(name, market.cadence))
    )
    universe = universe_for(name, market, start)
    if not set(universe.symbols) & source.symbols():
        raise ConfigError(
            f"markets.{name}: {source.name} has no bars of any symbol of universe {universe.name}"
        )
    return ReplayMarket(
        market=name,
        source=source,
        universe=universe,
        cadence=market.cadence,
        initial_cash=market.initial_cash,
        agents=tuple(agent_for(agent, name) for agent in agents),
        benchmarks=market.benchmarks,
        slot_times=market.slot_times,
        rules=rules_for_market(name, market),
        actions=_replay_actions(name, market, source),
    )


def _replay_actions(
    name: str, market: MarketConfig, source: ReplaySource
) -> RecordedActions | None:
    """The corporate actions a replay of market `name` applies: its `corporate_actions` file, else
    the bundled file for a bundled replay of raw bars (the A-share dividends), else none. Bars that
    are not all raw already have the actions in their prices: a configured file is refused there.
    """
    raw = source.adjustments == {"raw"}
    if market.corporate_actions is not None:
        if not raw:
            raise ConfigError(
                f"markets.{name}.corporate_actions: {source.name} serves "
                f"{', '.join(sorted(source.adjustments))} bars, not only raw ones, so its prices "
                "already account for corporate actions; a replay applies them to raw bars only"
            )
        return read_actions(market.corporate_actions, name)
    if market.source_kind == "replay" or not raw:
        return None
    return bundled_actions(name)


@contextmanager
def _progress_bar(show: bool) -> Iterator[ProgressCallback | None]:
    """A rich progress bar on stderr fed by `progress(done, total)`; None when not shown."""
    if not show:
        yield None
        return
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


def _bundled_files(market: str, cadence: str) -> list[str]:
    """The bundled bar files a replay of `market` at `cadence` reads.

    A daily replay leaves the hourly files out: fills take the first open of the finest loaded
    interval, and the bundled hourly bars are adjusted while the daily ones are raw, so mixing them
    would price a daily account's fills and marks on a different basis than its history.
    """
    names = [name for name in bundled_names() if name.startswith(f"{market}-")]
    if cadence == "daily":
        names = [name for name in names if not name.endswith("-1h")]
    return names
