"""`openbell probe deanon`: can an agent's model name the stock and the date of a masked series?

This module owns the `probe` command group. `probe deanon --agent NAME --market M [--level L]`
builds the probe of `openbell.ops.deanon` from the config: the market's universe and rules, its
recorded bars (a `replay:PATH` source's files, else the bars bundled with openbell), the agent's
masking seed and `rebase_prices`, and the agent's own OpenAI-compatible endpoint and model (its key
from the variable `api_key_env` names). Every level is probed when `--level` is not given. It
prints a table (or `--format json`) and writes nothing: no ledger is opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    Market,
    help_without_command,
    load_command_config,
)

if TYPE_CHECKING:
    from openbell.ops.config import LlmAgentConfig, OpenbellConfig
    from openbell.ops.deanon import ProbeReport, ProbeSetup

probe_app = typer.Typer(
    help="Probe what an agent's model can tell from what it is shown.", rich_markup_mode=None
)


class Level(StrEnum):
    """Values of `--level`: the masking levels."""

    bright = "bright"
    stock_blind = "stock-blind"
    date_blind = "date-blind"
    blinded = "blinded"


class ProbeFormat(StrEnum):
    """Values of `--format` of `probe deanon`."""

    table = "table"
    json = "json"


@probe_app.callback(invoke_without_command=True)
def _probe(ctx: typer.Context) -> None:
    """Probe what an agent's model can tell from what it is shown."""
    help_without_command(ctx)


@probe_app.command("deanon")
def deanon_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", "-a", help="An LLM agent of the config.")],
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    level: Annotated[
        Level | None,
        typer.Option("--level", "-l", help="One masking level; default: all four."),
    ] = None,
    trials: Annotated[int, typer.Option(min=1, max=10_000, help="Series per level.")] = 40,
    lookback: Annotated[int, typer.Option(min=1, max=1000, help="Bars in each series.")] = 20,
    interval: Annotated[
        str | None,
        typer.Option(help="1d or 1h; default: the market's cadence.", show_default=False),
    ] = None,
    tolerance_days: Annotated[
        int, typer.Option(min=0, help="A date within this many days counts as recovered.")
    ] = 3,
    seed: Annotated[int, typer.Option(help="Seeds the draw of symbols and windows.")] = 0,
    rebase: Annotated[
        bool | None,
        typer.Option(
            "--rebase/--no-rebase",
            help="Rebase prices at the masked levels; default: the agent's rebase_prices.",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Questions open at once.")] = 4,
    fmt: Annotated[
        ProbeFormat, typer.Option("--format", "-f", help="table or json.")
    ] = ProbeFormat.table,
    config: ConfigOption = None,
) -> None:
    """Show the agent's model masked price series as its get_bars tool would, ask it to name the
    stock and the date, and report its recovery rates against chance, per masking level."""
    from openbell.agents.masking import MaskingLevel
    from openbell.ops.deanon import probe_record

    loaded = load_command_config(ctx, config)
    found = _llm_agent(loaded, agent, market.value)
    setup = _setup(loaded, found, market.value, interval, lookback, trials, seed, tolerance_days,
                   rebase)  # fmt: skip
    levels = [MaskingLevel(level.value)] if level is not None else list(MaskingLevel)
    report = asyncio.run(_probe_with(found, setup, levels, concurrency))
    if fmt is ProbeFormat.json:
        record = probe_record(report, agent=found.name, model=found.model)
        typer.echo(json.dumps(record, indent=2))
        return
    print_probe(report, found.name, found.model)


def _llm_agent(loaded: OpenbellConfig, name: str, market: str) -> LlmAgentConfig:
    from openbell.markets.errors import NoSuchAgent
    from openbell.ops.config import LlmAgentConfig

    enrolled = loaded.agents_in(market)
    chosen = next((agent for agent in enrolled if agent.name == name), None)
    if chosen is None:
        known = sorted(a.name for a in enrolled if isinstance(a, LlmAgentConfig))
        raise NoSuchAgent(
            f"no agent {name!r} in market {market!r} of the config; its LLM agents: "
            f"{', '.join(known) or 'none'}"
        )
    if not isinstance(chosen, LlmAgentConfig):
        raise NoSuchAgent(
            f"agent {name!r} is of kind {chosen.kind!r}; the probe asks a model, so it needs an "
            'agent of kind = "llm"'
        )
    return chosen


def _setup(
    loaded: OpenbellConfig,
    agent: LlmAgentConfig,
    market: str,
    interval: str | None,
    lookback: int,
    trials: int,
    seed: int,
    tolerance_days: int,
    rebase: bool | None,
) -> ProbeSetup:
    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import ConfigError
    from openbell.markets.replay_source import ReplaySource
    from openbell.ops.deanon import ProbeSetup
    from openbell.ops.planning import replay_barsets, rules_for_market, universe_for

    section = loaded.markets.configured()[market]
    if rebase is None:
        rebase = agent.rebase_prices
    chosen = interval or ("1d" if section.cadence == "daily" else "1h")
    source = (
        ReplaySource(market=market, barsets=replay_barsets(market, section), name=section.source)
        if section.source_kind == "replay"
        else ReplaySource.from_bundled(market)
    )
    if chosen not in source.intervals:
        raise ConfigError(
            f"{source.name} has no {chosen} bars; it serves {', '.join(source.intervals)}"
        )
    try:
        return ProbeSetup(
            market=market,
            universe=universe_for(market, section, SystemClock().now().date()),
            rules=rules_for_market(market, section),
            source=source,
            interval=chosen,
            lookback=lookback,
            trials=trials,
            seed=seed,
            tolerance_days=tolerance_days,
            masking_seed=0 if agent.masking_seed is None else agent.masking_seed,
            rebase=rebase,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


async def _probe_with(
    agent: LlmAgentConfig, setup: ProbeSetup, levels: list[Any], concurrency: int
) -> ProbeReport:
    from openbell.agents.llm.client import ChatClient, ClientConfig
    from openbell.markets.errors import ConfigError
    from openbell.ops.config import resolve_secret
    from openbell.ops.deanon import run_probe

    key = None if agent.api_key_env is None else resolve_secret(agent.api_key_env, os.environ)
    client = ChatClient(
        ClientConfig(
            base_url=agent.base_url,
            model=agent.model,
            api_key=key,
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            extra_headers=dict(agent.extra_headers),
            extra_body=dict(agent.extra_body),
        )
    )
    async with client.connect() as chat:

        async def ask(messages: list[dict[str, Any]]) -> str:
            answer = await chat.complete(messages)
            return answer.completion.content

        try:
            return await run_probe(setup, levels, ask, concurrency=concurrency)
        except ValueError as exc:  # no symbol with enough bars
            raise ConfigError(str(exc)) from exc


def print_probe(report: ProbeReport, agent: str, model: str) -> None:
    """`report` as a table for a person, on stdout."""
    from rich.table import Table

    from openbell.ops.cli.options import print_tables
    from openbell.ops.deanon import ALPHA, Recovery

    def rate(found: Recovery) -> str:
        shown = " (shown)" if found.shown else ""
        return f"{found.hits}/{found.trials} {found.rate:.0%}{shown}"

    def verdict(found: Recovery) -> str:
        return "above chance" if found.above_chance else "chance"

    table = Table(
        title=(
            f"De-anonymisation probe: {agent} ({model}), {report.market} {report.interval}, "
            f"{report.trials} series of {report.lookback} bars per level"
        ),
        caption=(
            f"chance: symbol 1/{report.symbols}; date within {report.tolerance_days} days, a "
            f"uniform guess over {report.days} dates; above chance: p < {ALPHA}; "
            f"(shown): the level shows it; seed {report.seed}"
        ),
    )
    for column in ("level", "prices", "symbol", "chance", "p", "", "date", "chance", "p", " "):
        table.add_column(
            column, justify="left" if column in ("level", "prices", "", " ") else "right"
        )
    table.add_column("errors", justify="right")
    for result in report.levels:
        table.add_row(
            result.level.value,
            "rebased" if result.rebased else "real",
            rate(result.symbol),
            f"{result.symbol.chance:.1%}",
            f"{result.symbol.p_value:.2g}",
            verdict(result.symbol),
            rate(result.date),
            f"{result.date.chance:.1%}",
            f"{result.date.p_value:.2g}",
            verdict(result.date),
            str(result.errors + result.unanswered),
        )
    print_tables([table], sys.stdout)
