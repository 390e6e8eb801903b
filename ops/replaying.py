"""Building a replay from `openbell.toml`: what `openbell replay` (and `openbell demo`) runs.

This module owns the translation of the config into a `ReplayPlan`: for each configured market (or
the one asked for) its recorded data (a `replay:PATH` source reads the bar files at PATH; a live
source, `yfinance`, `akshare` or `ccxt:...`, stands for the dataset bundled with openbell, so a
replay never touches the network), its universe (a bundled one by name, or the listed symbols), its
benchmark, and the agents enrolled in it (LLM agents built by `llm_agents`, their keys read from
the environment). The window is whole UTC dates, `start` through `end` inclusive. The ledger is
migrated to the schema head once the replay holds its claim on it. It also draws the progress bar.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta

import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from openbell.daemon.replay import Progress as ProgressCallback
from openbell.daemon.replay import ReplayMarket, ReplayPlan, ReplayReport, run_replay
from openbell.markets.barfile import bundled_names
from openbell.markets.errors import ConfigError
from openbell.markets.replay import ReplaySource
from openbell.ops.config import AnyAgentConfig, MarketConfig, OpenbellConfig
from openbell.ops.wiring import agent_for, universe_for

log = structlog.stdlib.get_logger(__name__)


def replay_from_config(
    config: OpenbellConfig,
    *,
    start: date,
    end: date,
    market: str | None,
    resume: bool,
    show_progress: bool,
) -> ReplayReport:
    """Replay the sessions from `start` through `end` (UTC dates) of the configured markets (or
    just `market`) with their agents, into the config's ledger.

    Raises `ConfigError` for an empty or reversed window, a market not configured, a market
    without agents or an LLM agent whose key variable is not set, and `OperatorError` for a ledger
    that another replay (or, on SQLite, a daemon) is writing or that already has cycles in the
    window without `resume`.
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
    plan = ReplayPlan(
        store_url=config.store.url,
        start_at=datetime.combine(start, time(0), tzinfo=UTC),
        end_at=datetime.combine(end + timedelta(days=1), time(0), tzinfo=UTC),
        markets=markets,
        resume=resume,
        run_id=f"replay:{socket.gethostname()}:{os.getpid()}",
        migrate=True,
    )
    with _progress_bar(show_progress) as progress:
        return run_replay(plan, progress=progress)


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
    )


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
