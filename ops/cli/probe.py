"""`openbell probe deanon`: can attackers name the stock, date, sector and board of a masked tool
result? `openbell probe recall`: does an agent's model recall the bars before its training cutoff?

This module owns the `probe` command group. `probe recall --agent NAME --market M [--dates N]
[--cutoff DATE]` asks the agent's model about the next bar on each side of its cutoff
(`openbell.ops.evaluation.probes.recall`; the cutoff from the registry, `ops.config.cutoffs`, unless
given). `probe deanon --market M [--agent NAME] [--attacker
NAME ...] [--level L] [--payload bars|quotes|news|ktd]` builds the probe of
`openbell.ops.evaluation.probes.deanon` from the config: the market's universe and rules, its
recorded bars (a `replay:PATH` source's files, else the bars bundled with openbell), the masking
seed and `rebase_prices` of `--agent` (default: seed 0, rebasing as each level's default), and the
attackers: every `--attacker` names a model of the config (an LLM, strategy-code or rating agent of
any market, or a `[judges.NAME]` table; its OpenAI-compatible endpoint and model, its key from the
variable `api_key_env` names); without one, the attacker is `--agent`'s own model. `--sectors PATH`
gives each symbol's gold sector (a TOML table `"SYMBOL" = "SECTOR"`). Every level is probed when
`--level` is not given. It prints a table per attacker (or `--format json`) and writes nothing: no
ledger is opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tomllib
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    Market,
    help_without_command,
    load_command_config,
)

if TYPE_CHECKING:
    from openbell.agents.llm.client import ChatClient
    from openbell.ops.config.schema import LlmAgentConfig, OpenbellConfig
    from openbell.ops.evaluation.probes.deanon import ProbeReport, ProbeSetup

probe_app = typer.Typer(
    help="Probe what an agent's model can tell from what it is shown.", rich_markup_mode=None
)


class Level(StrEnum):
    """Values of `--level`: the masking levels."""

    bright = "bright"
    stock_blind = "stock-blind"
    date_blind = "date-blind"
    blinded = "blinded"


class PayloadChoice(StrEnum):
    """Values of `--payload`: the tool result shown."""

    bars = "bars"
    quotes = "quotes"
    news = "news"
    ktd = "ktd"


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
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="An LLM agent of the market: its masking, and its model when "
            "no --attacker is given.",
            show_default=False,
        ),
    ] = None,
    attackers: Annotated[
        list[str] | None,
        typer.Option(
            "--attacker",
            "-A",
            help="A model of the config by its agent's or judge's name (repeat for several).",
            show_default=False,
        ),
    ] = None,
    level: Annotated[
        Level | None,
        typer.Option("--level", "-l", help="One masking level; default: all four."),
    ] = None,
    payload: Annotated[
        PayloadChoice,
        typer.Option(
            help="The tool result shown: bars, quotes, news, or ktd (KTD-Fin's three tools)."
        ),
    ] = PayloadChoice.bars,
    trials: Annotated[int, typer.Option(min=1, max=10_000, help="Trials per level.")] = 200,
    lookback: Annotated[int, typer.Option(min=1, max=1000, help="Bars in each series.")] = 20,
    interval: Annotated[
        str | None,
        typer.Option(help="1d or 1h; default: the market's cadence.", show_default=False),
    ] = None,
    tolerance: Annotated[
        int, typer.Option(min=0, help="A date within this many trading days counts as hit.")
    ] = 7,
    sectors: Annotated[
        Path | None,
        typer.Option(
            help='A TOML file of gold sectors, "SYMBOL" = "SECTOR".',
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
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
    """Show attackers a masked payload as the agent's tool would, ask each for the top-5
    tickers, the date, the sector and the board, and report their recovery rates (Wilson 95 %
    intervals) against chance, per masking level."""
    from openbell.agents.masking import MaskingLevel
    from openbell.markets.errors import ConfigError
    from openbell.ops.evaluation.probes.deanon import probe_record

    loaded = load_command_config(ctx, config)
    found = None if agent is None else _llm_agent(loaded, agent, market.value)
    names = list(dict.fromkeys(attackers or ([] if found is None else [found.name])))
    if not names:
        raise ConfigError("name an attacker with --attacker, or an agent with --agent")
    clients = {name: _attacker(loaded, name) for name in names}
    gold = {} if sectors is None else _sectors(sectors)
    setup = _setup(loaded, found, market.value, interval, lookback, trials, seed, tolerance,
                   rebase, payload.value, gold)  # fmt: skip
    levels = [MaskingLevel(level.value)] if level is not None else list(MaskingLevel)
    reports = asyncio.run(_probe_with(clients, setup, levels, concurrency))
    models = {name: client.config.model for name, client in clients.items()}
    if fmt is ProbeFormat.json:
        record = probe_record(reports)
        for entry in record["attackers"]:
            entry["model"] = models[entry["attacker"]]
        if found is not None:
            record = {"agent": found.name, **record}
        typer.echo(json.dumps(record, indent=2))
        return
    print_probe(reports, models)


@probe_app.command("recall")
def recall_command(
    ctx: typer.Context,
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="An LLM agent of the market: its model is asked.")
    ],
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    dates: Annotated[
        int, typer.Option(min=1, max=5000, help="Questions on each side of the cutoff.")
    ] = 40,
    lookback: Annotated[int, typer.Option(min=1, max=1000, help="Bars shown a question.")] = 20,
    interval: Annotated[
        str | None,
        typer.Option(help="1d or 1h; default: the market's cadence.", show_default=False),
    ] = None,
    cutoff: Annotated[
        str | None,
        typer.Option(
            "--cutoff",
            help='The model\'s training cutoff, "YYYY-MM-DD" or "YYYY-MM"; default: the '
            "registry's entry of the agent's model.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seeds the draw of the questions.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Questions open at once.")] = 4,
    fmt: Annotated[
        ProbeFormat, typer.Option("--format", "-f", help="table or json.")
    ] = ProbeFormat.table,
    config: ConfigOption = None,
) -> None:
    """Ask the agent's model for the next bar's direction and size on dates before and after its
    training cutoff, unmasked and masked, and report the hit rates (exact Clopper-Pearson 95 %
    intervals) against chance, with a verdict (docs/guide/recall-probe.md)."""
    from openbell.markets.errors import ConfigError
    from openbell.ops.config.cutoffs import ModelCutoff
    from openbell.ops.evaluation.probes.recall import recall_lines, recall_record, run_recall

    loaded = load_command_config(ctx, config)
    found = _llm_agent(loaded, agent, market.value)
    if cutoff is not None:
        try:
            entry = ModelCutoff(model=found.model, stated=cutoff, source="--cutoff")
        except ValueError as exc:
            raise ConfigError(f"--cutoff: {exc}") from None
    else:
        known = loaded.cutoff_registry().find(found.model)
        if known is None:
            raise ConfigError(
                f"the training cutoff of model {found.model!r} is unknown: add a "
                f'[cutoffs."{found.model}"] table (cutoff, source) to the config, or pass --cutoff'
            )
        entry = known
    setup = _setup(loaded, found, market.value, interval, lookback, 1, seed, 0, True, "bars", {})
    client = _llm_client(found)

    async def probe() -> Any:
        async with client.connect() as chat:

            async def ask(messages: list[dict[str, Any]]) -> str:
                answer = await chat.complete(messages)
                return str(answer.completion.content)

            try:
                return await run_recall(
                    setup, entry, ask, model=found.model, dates=dates, concurrency=concurrency
                )
            except ValueError as exc:  # no question on one side of the cutoff
                raise ConfigError(str(exc)) from exc

    report = asyncio.run(probe())
    if fmt is ProbeFormat.json:
        typer.echo(json.dumps(recall_record(report, agent=found.name), indent=2))
        return
    for line in recall_lines(report):
        typer.echo(line)


def _sectors(path: Path) -> dict[str, str]:
    """The gold sectors of a TOML file of `"SYMBOL" = "SECTOR"` pairs."""
    from openbell.markets.errors import ConfigError

    try:
        with path.open("rb") as file:
            found = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the sectors: {exc}") from None
    bad = sorted(key for key, value in found.items() if not isinstance(value, str) or not value)
    if bad:
        raise ConfigError(f"{path}: a sector must be a non-empty string; not for {bad[:3]}")
    return {str(key): str(value) for key, value in found.items()}


def _attacker(loaded: OpenbellConfig, name: str) -> ChatClient:
    """The chat client of the model named `name`: an LLM, strategy-code or rating agent of any
    market, or a judge."""
    from openbell.markets.errors import NoSuchAgent
    from openbell.ops.config.model_endpoints import endpoint_of
    from openbell.ops.config.schema import (
        LlmAgentConfig,
        RatingAgentConfig,
        StrategyCodeAgentConfig,
    )

    for configured in loaded.agents:
        if configured.name != name:
            continue
        if isinstance(configured, LlmAgentConfig):
            return _llm_client(configured)
        if isinstance(configured, StrategyCodeAgentConfig | RatingAgentConfig):
            return endpoint_of(configured, os.environ)[0]
        raise NoSuchAgent(
            f"agent {name!r} is of kind {configured.kind!r}, which asks no model; an attacker "
            "is an llm, strategy_code or rating agent, or a judge"
        )
    judge = loaded.judges.get(name)
    if judge is not None:
        return endpoint_of(judge, os.environ)[0]
    known = sorted(
        [a.name for a in loaded.agents if isinstance(a, LlmAgentConfig | StrategyCodeAgentConfig
                                                     | RatingAgentConfig)] + list(loaded.judges)
    )  # fmt: skip
    raise NoSuchAgent(
        f"no model named {name!r} in the config; its models: {', '.join(known) or 'none'}"
    )


def _llm_client(agent: LlmAgentConfig) -> ChatClient:
    from openbell.agents.llm.client import ChatClient, ClientConfig
    from openbell.ops.config.schema import resolve_secret

    key = None if agent.api_key_env is None else resolve_secret(agent.api_key_env, os.environ)
    return ChatClient(
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


def _llm_agent(loaded: OpenbellConfig, name: str, market: str) -> LlmAgentConfig:
    from openbell.markets.errors import NoSuchAgent
    from openbell.ops.config.schema import LlmAgentConfig

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
    agent: LlmAgentConfig | None,
    market: str,
    interval: str | None,
    lookback: int,
    trials: int,
    seed: int,
    tolerance: int,
    rebase: bool | None,
    payload: str,
    sectors: Mapping[str, str],
) -> ProbeSetup:
    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import ConfigError
    from openbell.markets.replay_source import ReplaySource
    from openbell.ops.evaluation.probes.deanon import ProbeSetup
    from openbell.ops.wiring.planning import replay_barsets, rules_for_market, universe_for

    configured = loaded.markets.configured()
    if market not in configured:
        raise ConfigError(f"market {market!r} is not configured (no [markets.{market}] section)")
    section = configured[market]
    if rebase is None and agent is not None:
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
    masking_seed = 0 if agent is None or agent.masking_seed is None else agent.masking_seed
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
            tolerance=tolerance,
            masking_seed=masking_seed,
            rebase=rebase,
            payload=payload,
            sectors=dict(sectors),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


async def _probe_with(
    clients: Mapping[str, ChatClient], setup: ProbeSetup, levels: list[Any], concurrency: int
) -> tuple[ProbeReport, ...]:
    from contextlib import AsyncExitStack

    from openbell.markets.errors import ConfigError
    from openbell.ops.evaluation.probes.deanon import Ask, run_probes

    async with AsyncExitStack() as stack:
        attackers: dict[str, Ask] = {}
        for name, client in clients.items():
            chat = await stack.enter_async_context(client.connect())

            async def ask(messages: list[dict[str, Any]], chat: Any = chat) -> str:
                answer = await chat.complete(messages)
                return str(answer.completion.content)

            attackers[name] = ask
        try:
            return await run_probes(setup, levels, attackers, concurrency=concurrency)
        except ValueError as exc:  # no symbol with enough bars
            raise ConfigError(str(exc)) from exc


def print_probe(reports: tuple[ProbeReport, ...], models: Mapping[str, str]) -> None:
    """`reports` as a table per attacker for a person, on stdout."""
    from rich.table import Table

    from openbell.ops.cli.options import print_tables
    from openbell.ops.evaluation.probes.deanon_scoring import ALPHA, TARGETS, Recovery

    def cell(found: Recovery | None) -> str:
        if found is None:
            return "-"
        mark = "*" if found.above_chance else ""
        shown = " (shown)" if found.shown else ""
        return (
            f"{found.hits}/{found.trials} {found.rate:.1%} "
            f"[{found.low:.1%}, {found.high:.1%}]{mark}{shown}"
        )

    tables = []
    for report in reports:
        first = report.levels[0]
        skipped = "; ".join(f"{name}: {why}" for name, why in first.skipped.items())
        table = Table(
            title=(
                f"De-anonymisation probe: {report.attacker} ({models[report.attacker]}), "
                f"{report.market} {report.interval} {report.payload}, {report.trials} trials "
                f"of {report.lookback} bars per level"
            ),
            caption=(
                f"rates over answered trials, Wilson 95% intervals; date within "
                f"{report.tolerance} trading days; joint: top-5 ticker and date; chance: top-1 "
                f"1/{report.symbols}, date a uniform guess over {report.days} dates; * above "
                f"chance (p < {ALPHA}); (shown): the level shows it; seed {report.seed}"
                + (f"\nnot scored: {skipped}" if skipped else "")
            ),
        )
        table.add_column("level")
        table.add_column("prices")
        for name in TARGETS:
            table.add_column(name.replace("ticker_", ""), justify="right")
        table.add_column("errors", justify="right")
        for result in report.levels:
            table.add_row(
                result.level.value,
                "rebased" if result.rebased else "real",
                *(cell(result.targets.get(name)) for name in TARGETS),
                str(result.errors + result.unanswered),
            )
        tables.append(table)
    print_tables(tables, sys.stdout)
