"""The history commands of `openbell`: `replay` and `data import`.

This module owns these commands' options and output. `replay` runs the configured markets' agents
over recorded bars on a simulated clock (`ops.planning`), with a progress bar on stderr and one
summary line on stdout; `data import` rebuilds canonical bar files from a copy of the AI-Trader
data. Errors follow the CLI's contract: one line on stderr, exit 2 for bad input (dates, an
unknown market, an existing replay without `--resume`).
"""

from __future__ import annotations

import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, cast

import typer

from openbell.ops.cli.options import ConfigOption, Market, help_without_command, load_command_config

if TYPE_CHECKING:
    from openbell.ops.config import OpenbellConfig

#: Where `data import` writes by default; `source = "replay:./var/data/bars"` reads it.
DEFAULT_BARS_DIR = Path("var/data/bars")


class LogLevel(StrEnum):
    """Values of `replay --log-level`."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


StartOption = Annotated[
    datetime,
    typer.Option(
        "--start",
        formats=["%Y-%m-%d"],
        help="First session date (UTC), YYYY-MM-DD.",
        show_default=False,
    ),
]
EndOption = Annotated[
    datetime,
    typer.Option(
        "--end",
        formats=["%Y-%m-%d"],
        help="Last session date (UTC), YYYY-MM-DD, included.",
        show_default=False,
    ),
]

data_app = typer.Typer(help="Build replay datasets.", rich_markup_mode=None)


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time, so that log lines printed while the
    progress bar runs go through its redirection and appear above it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _load(ctx: typer.Context, config: Path | None, level: LogLevel) -> OpenbellConfig:
    """The command's config, logging on the stderr of the moment (under the progress bar)."""
    return load_command_config(
        ctx, config, level=level.value, stream=cast(TextIO, _CurrentStderr())
    )


def replay(
    ctx: typer.Context,
    start: StartOption,
    end: EndOption,
    config: ConfigOption = None,
    market: Annotated[
        Market | None,
        typer.Option("--market", "-m", help="Replay only this market; default: all configured."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue a replay that was cut off: finished cycles are not rerun."
        ),
    ] = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Show a progress bar on stderr; default: when stderr is a terminal.",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[
        LogLevel,
        typer.Option(
            "--log-level", help="Log level on stderr while replaying.", case_sensitive=False
        ),
    ] = LogLevel.warning,
    allow_outside_coverage: Annotated[
        bool,
        typer.Option(
            "--allow-outside-coverage",
            help="Replay a universe outside the dates its file vouches for (survivorship bias), "
            "with a warning, instead of refusing.",
        ),
    ] = False,
    batch_slots: Annotated[
        int | None,
        typer.Option(
            "--batch-slots",
            min=1,
            help="Write the ledger in one transaction per this many slots at most (and at least "
            "once a second); a replay cut off resumes from the last one written. Default: 500.",
            show_default=False,
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            min=1,
            max=100,
            help="Run every agent N times (seeds 1..N, each as agent NAME.seedK) as one group; "
            "the leaderboard then shows each agent's mean and interval over the seeds.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay recorded history through the agents, on a simulated clock, into the ledger.

    Every configured market (or --market) rings at the starts of its recorded bars (daily: 1d bars,
    hourly: 1h bars) from --start through --end; every agent enrolled in it gets its cycle.
    Market data never comes from the network: a market with source = "replay:PATH" reads the bar
    files at PATH (for example "replay:./var/data/bars", written by `openbell data import`); any
    live source (yfinance, akshare, ccxt:...) replays the dataset bundled with openbell. LLM
    agents call their configured endpoint, with the key from their api_key_env variable. A ledger
    that already has cycles in the window is refused: pass --resume to finish a replay that was
    cut off, or use a fresh database. A window outside the dates a universe file vouches for
    (crypto10 from 2025-11-01, sse50 from 2025-09-30 until 2025-12-15, ...) is refused unless
    --allow-outside-coverage (or allow_outside_coverage = true in the market's section) accepts
    it; the replay then warns in the log and under the summary. --seeds N repeats the agents N
    times (the random baseline's seed, an LLM's request seed) as one group of runs.
    """
    from openbell.ops.planning import replay_from_config

    loaded = _load(ctx, config, log_level)
    report = replay_from_config(
        loaded,
        start=start.date(),
        end=end.date(),
        market=None if market is None else market.value,
        resume=resume,
        show_progress=sys.stderr.isatty() if progress is None else progress,
        allow_outside_coverage=allow_outside_coverage,
        seeds=seeds,
        **({} if batch_slots is None else {"batch_slots": batch_slots}),
    )
    typer.echo(report.summary())


@data_app.command("import")
def data_import(
    source_dir: Annotated[
        Path,
        typer.Argument(
            help="A copy of the AI-Trader data: one folder per commit (c8b24a0/, ...).",
            exists=True,
            file_okay=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help='Directory for the bar files; use it with source = "replay:DIR".',
        ),
    ] = DEFAULT_BARS_DIR,
) -> None:
    """Build canonical bar files from a copy of the AI-Trader data (see PROVENANCE.md).

    The bundled bars are package data and are not overwritten: the files go to --out (default
    ./var/data/bars), which a market reads with source = "replay:./var/data/bars".
    """
    from openbell.markets.importers.ai_trader import build_dataset

    report = build_dataset(source_dir, out)
    typer.echo(report.summary())
    typer.echo(f"wrote {len(report.bars_written)} bar files to {out}")


@data_app.callback(invoke_without_command=True)
def _data(ctx: typer.Context) -> None:
    """Build replay datasets."""
    help_without_command(ctx)
