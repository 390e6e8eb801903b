"""`openbell experiment`: the config's `[experiment]` grid run as one replay, then its cells and
paired differences printed (tables, or `--json`).

This module owns the command's options and output; `ops.experiment` expands, runs and measures
(docs/guide/experiment.md). The replay's summary line goes to stderr, so stdout holds the tables
or the JSON document alone. Errors follow the CLI's contract: one line on stderr, exit 2 for a
config without `[experiment]` or with a grid that cannot run, an existing replay of the window
without `--resume`; exit 3 (`EX_AGENT_FAILED`) when some run's cycles all failed (the
measures are not printed: a run that did nothing is no variant).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, TextIO, cast

import typer

from openbell.ops.cli.history import EX_AGENT_FAILED, CurrentStderr, LogLevel
from openbell.ops.cli.options import (
    DEFAULT_CONFIG,
    ConfigOption,
    CreateOption,
    ProgressOption,
    WritingDbOption,
    check_before_writing,
    load_command_config,
    print_tables,
)


def experiment_command(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the measures as one JSON document.")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue an experiment that was cut off (finished cycles are not rerun), or "
            "measure a finished one again.",
        ),
    ] = False,
    progress: ProgressOption = None,
    log_level: Annotated[
        LogLevel,
        typer.Option(
            "--log-level", help="Log level on stderr while replaying.", case_sensitive=False
        ),
    ] = LogLevel.warning,
    create: CreateOption = False,
    db: WritingDbOption = None,
) -> None:
    """Run the [experiment] grid of the config: models x prompts x modes x seeds, one replay.

    Every LLM entry named in models runs with every prompt file of prompts (added to its system
    prompt) and every decision mode of modes, once per seed (sent as the request's seed), each
    run its own agent MODEL.PROMPT.MODE.seedK trading the experiment's market, all in one replay
    of start..end on the same bars and slots. Then, per cell, the mean return and Sharpe over
    the seeds; and for each two cells that differ in one axis (each value against the axis's
    first), the paired difference: the mean per-slot return difference over seeds and slots,
    its stationary-bootstrap interval, a sign-flip p-value (Holm-adjusted across the
    comparisons) and whether it is distinguishable from zero (the interval excludes 0 and p is
    at most 1 - confidence). Prompt files are read relative to the config file. --db writes
    another ledger than the config's.
    """
    from openbell.ops.experiment.grid import expand
    from openbell.ops.experiment.measure import analyse, run_experiment
    from openbell.ops.experiment.output import experiment_record, experiment_tables
    from openbell.store.db import make_engine

    path = config or ctx.find_root().params.get("config") or DEFAULT_CONFIG
    loaded = load_command_config(
        ctx, config, db=db, writes=True, level=log_level.value,
        stream=cast(TextIO, CurrentStderr()),
    )  # fmt: skip
    grid = expand(loaded, Path(path).absolute().parent)
    check_before_writing(loaded.store.url, create=create)
    report = run_experiment(
        loaded,
        grid,
        resume=resume,
        show_progress=sys.stderr.isatty() if progress is None else progress,
    )
    typer.echo(report.summary(), err=True)
    if report.failing:
        raise typer.Exit(EX_AGENT_FAILED)
    engine = make_engine(loaded.store.url)
    try:
        result = analyse(engine, grid)
    finally:
        engine.dispose()
    if as_json:
        sys.stdout.write(json.dumps(experiment_record(result), indent=2) + "\n")
    else:
        print_tables(experiment_tables(result), sys.stdout)
