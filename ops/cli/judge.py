"""`openbell judge AGENT --market M [--judge NAME]`: FIDES' say-to-do judge over a strategy-code
agent's stored strategies.

This module owns the command. It asks the judge (`--judge NAME`, a `[judges.NAME]` table of the
config, else the agent's `judge` key) for a verdict on every strategy the agent's account in
the market has stored, in the order they were written, and stores each verdict with the judge's
model name (`ops/evaluation/concordance/judge.py`); it prints one line per strategy (its say-to-do
gap and the four checks). Nothing is run again: the verdict reads the stored rationale and code.
Judging again with another model is the paper's judge swap: `openbell report` then shows the newest
verdict, with every judge's score beside it. A strategy the judge gave no usable answer on is
left unjudged and said so (exit 1); a judge that cannot be reached ends the command (exit 1)
after the verdicts stored so far.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    ExistingWritingDbOption,
    Market,
    load_command_config,
    open_ledger,
)

if TYPE_CHECKING:
    from openbell.ops.config.schema import JudgeConfig, OpenbellConfig


def judge_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The strategy-code agent's name.")],
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="The [judges.NAME] table to ask (default: the agent's `judge` key).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    db: ExistingWritingDbOption = None,
) -> None:
    """Judge whether each stored strategy of AGENT's code does what its rationale says (FIDES'
    say-to-do gap), and store the verdicts; `openbell report` shows them."""
    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import LlmRefused, LlmUnavailable, ReportError
    from openbell.ops.config.model_endpoints import endpoint_of
    from openbell.ops.config.secrets import redactor_for
    from openbell.ops.evaluation.concordance.judge import judge_strategies, verdict_line
    from openbell.ops.evaluation.concordance.record import STRATEGY_CODE_KIND
    from openbell.store import queries
    from openbell.store.ledger import Ledger

    loaded = load_command_config(ctx, config, db=db)
    name, chosen = _judge_of(loaded, agent, judge)
    engine = open_ledger(loaded, writable=True)
    try:
        account = next(
            (a for a in queries.accounts(engine, market.value) if a.agent_name == agent), None
        )
        if account is None:
            raise ReportError(f"agent {agent!r} has no account in market {market.value!r}")
        if account.agent_kind != STRATEGY_CODE_KIND:
            raise ReportError(
                f"agent {agent!r} is of kind {account.agent_kind!r}: only strategy_code agents' "
                "strategies are judged"
            )
        ledger = Ledger(engine)
        strategies = ledger.strategies(account.account_id)
        client, _prices = endpoint_of(chosen, os.environ)
        redactor = redactor_for(loaded, os.environ).with_secrets([client.config.api_key])
        try:
            done = asyncio.run(
                judge_strategies(
                    ledger,
                    client,
                    strategies,
                    now=SystemClock().now(),
                    max_retries=chosen.max_retries,
                    redactor=redactor,
                )
            )
        except (LlmUnavailable, LlmRefused) as exc:
            sys.stderr.write(f"openbell: error: judge {name!r}: {exc}\n")
            raise typer.Exit(1) from None
    finally:
        engine.dispose()
    if not done:
        sys.stdout.write(f"{agent} has no strategy to judge in {market.value}\n")
    for index, judged in enumerate(done, start=1):
        sys.stdout.write(verdict_line(index, judged) + "\n")
    if any(judged.judgement is None for judged in done):
        raise typer.Exit(1)


def _judge_of(loaded: OpenbellConfig, agent: str, judge: str | None) -> tuple[str, JudgeConfig]:
    """The judge to ask: `judge`, else the configured agent's `judge` key; `ConfigError` when
    neither names a `[judges.NAME]` table."""
    from openbell.markets.errors import ConfigError
    from openbell.ops.config.schema import StrategyCodeAgentConfig

    if judge is None:
        entry = next((a for a in loaded.agents if a.name == agent), None)
        judge = entry.judge if isinstance(entry, StrategyCodeAgentConfig) else None
    if judge is None:
        raise ConfigError(
            f'no judge for {agent!r}: pass --judge NAME or set judge = "NAME" in its entry'
        )
    found = (loaded.judges or {}).get(judge)
    if found is None:
        known = ", ".join(sorted(loaded.judges or {})) or "none"
        raise ConfigError(f"judge {judge!r} is not configured ([judges.{judge}]); known: {known}")
    return judge, found
