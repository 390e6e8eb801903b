"""The history commands of `openbell`: `replay` and `data import`.

This module owns these commands' options and output. `replay` runs the configured markets' agents
over recorded bars on a simulated clock (`ops.wiring.planning`), with a progress bar on stderr and
one summary line on stdout; `data import` rebuilds canonical bar files from a copy of the AI-Trader
data or from a generic OHLCV file, and `data import-news` / `import-fundamentals` record a user's
news and fundamentals files in the store's cache, for `replay --from-cache`. Errors follow the CLI's
contract: one line on stderr, exit 2 for bad input (dates, an unknown market, an existing replay
without `--resume`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, cast

import typer

from openbell.markets.errors import ConfigError
from openbell.ops.cli.options import (
    ConfigOption,
    CreateOption,
    ListenOption,
    Market,
    ProgressOption,
    SeasonOption,
    WritingDbOption,
    check_before_writing,
    collect_garbage,
    help_without_command,
    load_command_config,
    with_overrides,
)

if TYPE_CHECKING:
    from openbell.ops.config.schema import OpenbellConfig
    from openbell.ops.wiring.recorded_answers import Swap
    from openbell.store.cache import SqlBarCache

#: Where `data import` writes by default; `source = "replay:./var/data/bars"` reads it.
DEFAULT_BARS_DIR = Path("var/data/bars")
#: The exit code of a replay in which some agent's cycles failed and none was done: the replay
#: ran to its end, but did nothing for that agent (sysexits has no better word; 1 and 2 are the
#: CLI's own, see `app.py`).
EX_AGENT_FAILED = 3


class LogLevel(StrEnum):
    """Values of `replay --log-level`."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


StartOption = Annotated[
    datetime | None,
    typer.Option(
        "--start",
        formats=["%Y-%m-%d"],
        help="First session date (UTC), YYYY-MM-DD; with --season, the season's.",
        show_default=False,
    ),
]
EndOption = Annotated[
    datetime | None,
    typer.Option(
        "--end",
        formats=["%Y-%m-%d"],
        help="Last session date (UTC), YYYY-MM-DD, included; with --season, the season's.",
        show_default=False,
    ),
]
SeasonFromOption = Annotated[
    str | None,
    typer.Option(
        "--season-from",
        metavar="STORE_URL",
        help="With --season: read the season from this store (a SQLite file or a URL) and open "
        "it, the same manifest, in the ledger written, to re-run it there.",
        show_default=False,
    ),
]

data_app = typer.Typer(help="Build replay datasets.", rich_markup_mode=None)


class CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time, so that log lines printed while the
    progress bar runs go through its redirection and appear above it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _load(
    ctx: typer.Context,
    config: Path | None,
    level: LogLevel,
    db: str | None = None,
    listen: str | None = None,
) -> OpenbellConfig:
    """The command's config (its ledger `db` and HTTP address `listen` when given), logging on
    the stderr of the moment (under the progress bar)."""
    return load_command_config(
        ctx,
        config,
        db=db,
        listen=listen,
        writes=True,
        level=level.value,
        stream=cast(TextIO, CurrentStderr()),
    )


def replay(
    ctx: typer.Context,
    start: StartOption = None,
    end: EndOption = None,
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
    create: CreateOption = False,
    progress: ProgressOption = None,
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
    allow_partial_coverage: Annotated[
        bool,
        typer.Option(
            "--allow-partial-coverage",
            help="Replay a universe whose members do not all have data in the window, trading "
            "those that have, with a warning (in the summary and in `openbell report`), instead "
            "of refusing.",
        ),
    ] = False,
    from_cache: Annotated[
        str | None,
        typer.Option(
            "--from-cache",
            metavar="STORE_URL",
            help="Replay what the cache of this store recorded (a live daemon's ledger, or a store "
            "news and fundamentals were imported into): its bars, quotes, news and fundamentals, "
            "each shown from when the live agents saw it.",
            show_default=False,
        ),
    ] = None,
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
    answers: Annotated[
        str | None,
        typer.Option(
            "--answers",
            metavar="LEDGER|SEASON",
            help="Answer the LLM agents from the model exchanges recorded in this ledger (a "
            "SQLite file or a database URL), with no endpoint, no key and no cost: a re-run of "
            "that replay writes the same orders, fills, NAV and cycles. A request it did not "
            "record fails its cycle. Use a fresh --db. With --season NAME --season-from LEDGER, "
            "--answers NAME takes the season's answers from that LEDGER.",
            show_default=False,
        ),
    ] = None,
    swap_model: Annotated[
        list[str] | None,
        typer.Option(
            "--swap-model",
            metavar="NAME=MODEL[@BASE_URL]",
            help="With --answers: agent NAME asks MODEL (at its own endpoint, or BASE_URL) instead "
            "of taking its recorded answers, on the same recorded inputs; the other agents replay "
            "their answers. Repeatable.",
            show_default=False,
        ),
    ] = None,
    db: WritingDbOption = None,
    listen: ListenOption = None,
    season: SeasonOption = None,
    season_from: SeasonFromOption = None,
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
    it; the replay then warns in the log and under the summary. A universe whose members do not
    all have bars in the window is refused the same way unless --allow-partial-coverage (or
    allow_partial_coverage = true) accepts it. --from-cache STORE_URL replays what that store's
    cache recorded (a live week, as its agents saw it) into the config's ledger; a market of which
    it holds no bar reads its own bar files with the cache's news and fundamentals. --seeds N
    repeats the agents N times (the random baseline's seed, an LLM's request seed) as one group of
    runs. --db writes another ledger than the config's and --listen serves the outside agents'
    /mcp elsewhere than [http] listen, so a replay can run beside a live daemon. --season NAME
    replays the ledger's season NAME (`openbell season open`) over its window with the config
    stored with it; --season-from STORE_URL first copies that season's manifest from another
    store, to re-run it in a fresh ledger (docs/guide/seasons.md). --answers LEDGER re-runs a
    replay of the same config and window from the model answers LEDGER recorded, with no model
    server (--season NAME --season-from LEDGER --answers NAME: the season, from the answers that
    ledger recorded); --swap-model NAME=MODEL has agent NAME decide again with another model.

    Exit 0 when the replay ran; 3 (`EX_AGENT_FAILED`) when it ran but some agent's cycles all
    failed (none done): a `FAILED: agent NAME in MARKET: ...` line per such agent under the
    summary gives the first failure's cause; 2 for what an operator must fix first.
    """
    from openbell.ops.wiring.planning import replay_from_config

    # Now that the replay's modules are imported (`app.COLLECTS_AFTER_IMPORTS`).
    frozen = collect_garbage()
    if season is None:
        if season_from is not None:
            raise typer.BadParameter("needs --season NAME", param_hint="--season-from")
        first, last = _required_window(start, end)
        loaded = _load(ctx, config, log_level, db, listen)
    else:
        if market is not None or seeds is not None or from_cache is not None:
            raise typer.BadParameter(
                "a season replays all its markets and agents once, from their recorded bars: "
                "drop --market, --seeds and --from-cache",
                param_hint="--season",
            )
        if answers == season and season_from is None:
            raise typer.BadParameter(
                "--answers SEASON re-runs the season from the ledger that recorded it: name that "
                "ledger with --season-from, and write a fresh --db",
                param_hint="--answers",
            )
        loaded, first, last = _season_load(ctx, season, config, log_level, db, listen, season_from)
        _check_season_window(start, end, first, last)
    check_before_writing(loaded.store.url, create=create)
    if answers is not None and answers == season:
        answers = season_from  # the ledger that recorded the season (checked above)
    answering = None
    swaps: list[Swap] = []
    if swap_model and answers is None:
        raise ConfigError("--swap-model needs --answers LEDGER: it re-decides recorded cycles")
    if answers is not None:
        from openbell.ops.wiring.recorded_answers import (
            answering_of,
            load_answers,
            parse_swap,
            swapped_config,
        )

        swaps = [parse_swap(value) for value in swap_model or ()]
        loaded = swapped_config(loaded, swaps)
        book = load_answers(answers)
        answering = answering_of(book, swaps, seeds)
        typer.echo(
            f"answering from {len(book)} recorded exchanges of {answers}"
            + "".join(f"; {swap.describe()}" for swap in swaps),
            err=True,
        )
    report = replay_from_config(
        loaded,
        start=first,
        end=last,
        market=None if market is None else market.value,
        resume=resume,
        show_progress=sys.stderr.isatty() if progress is None else progress,
        allow_outside_coverage=allow_outside_coverage,
        seeds=seeds,
        allow_partial_coverage=allow_partial_coverage,
        from_cache=from_cache,
        answering=answering,
        frozen=frozen,
        **({} if batch_slots is None else {"batch_slots": batch_slots}),
    )
    typer.echo(report.summary())
    for swap in swaps:
        typer.echo(f"swapped: {swap.describe()}; the other LLM agents took their recorded answers")
    if report.failing:
        raise typer.Exit(EX_AGENT_FAILED)


def _required_window(start: datetime | None, end: datetime | None) -> tuple[date, date]:
    if start is None:
        raise typer.BadParameter("is required without --season", param_hint="--start")
    if end is None:
        raise typer.BadParameter("is required without --season", param_hint="--end")
    return start.date(), end.date()


def _season_load(
    ctx: typer.Context,
    name: str,
    config: Path | None,
    level: LogLevel,
    db: str | None,
    listen: str | None,
    season_from: str | None,
) -> tuple[OpenbellConfig, date, date]:
    """The config of the season `name` (see `seasons.season_run_config`) and its window."""
    from openbell.markets.errors import SeasonError
    from openbell.ops.cli.seasons import season_run_config

    loaded, found = season_run_config(
        ctx,
        name,
        config,
        db=db,
        stream=cast(TextIO, CurrentStderr()),
        level=level.value,
        copy_from=season_from,
    )
    if found.end_on is None:
        raise SeasonError(
            f"season {name!r} is open-ended: a replay season needs an end (open it with --end)"
        )
    return with_overrides(loaded, listen=listen), found.start_on, found.end_on


def _check_season_window(
    start: datetime | None, end: datetime | None, first: date, last: date
) -> None:
    if start is not None and start.date() != first:
        raise typer.BadParameter(f"the season starts on {first}", param_hint="--start")
    if end is not None and end.date() != last:
        raise typer.BadParameter(f"the season ends on {last}", param_hint="--end")


@data_app.command("import")
def data_import(
    source: Annotated[
        Path,
        typer.Argument(
            help="A copy of the AI-Trader data (a folder: one folder per commit), or an OHLCV "
            "file (.csv or .parquet: symbol, time, open, high, low, close, volume).",
            exists=True,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help='Directory for the bar files; use it with source = "replay:DIR".',
        ),
    ] = DEFAULT_BARS_DIR,
    market: Annotated[
        Market | None, typer.Option("--market", "-m", help="An OHLCV file's market.")
    ] = None,
    interval: Annotated[
        str | None, typer.Option("--interval", help="An OHLCV file's bar interval: 1d or 1h.")
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="An OHLCV file's bar-label convention: start (a row's time is its bar's start) "
            "or end (its end).",
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz", help="The IANA zone of an OHLCV file's naive times (America/New_York, UTC...)."
        ),
    ] = None,
    adjustment: Annotated[
        str,
        typer.Option(
            "--adjustment", help="What an OHLCV file's prices are: raw, adjusted, ... or unknown."
        ),
    ] = "unknown",
) -> None:
    """Build canonical bar files from a copy of the AI-Trader data (see PROVENANCE.md) or from
    an OHLCV file.

    The bundled bars are package data and are not overwritten: the files go to --out (default
    ./var/data/bars), which a market reads with source = "replay:./var/data/bars". An OHLCV file
    needs --market, --interval and --label, and --tz when its times carry no zone; nothing is
    guessed, and a bad row (missing column, naive time without --tz, duplicate bar, non-positive
    price) refuses the file with its row number.
    """
    if source.is_file():
        _import_ohlcv(source, out, market, interval, label, tz, adjustment)
        return
    from openbell.markets.importers.ai_trader import build_dataset

    report = build_dataset(source, out)
    typer.echo(report.summary())
    typer.echo(f"wrote {len(report.bars_written)} bar files to {out}")


def _import_ohlcv(
    source: Path,
    out: Path,
    market: Market | None,
    interval: str | None,
    label: str | None,
    tz: str | None,
    adjustment: str,
) -> None:
    from openbell.markets.errors import SourceFormatError
    from openbell.markets.importers.ohlcv import OhlcvLayout, import_ohlcv

    if market is None or interval is None or label is None:
        missing = [
            flag
            for flag, value in (("--market", market), ("--interval", interval), ("--label", label))
            if value is None
        ]
        raise SourceFormatError(
            f"{source.name}: an OHLCV file needs {', '.join(missing)} (nothing about its layout "
            "is guessed: --label says whether a row's time is its bar's start or end)"
        )
    layout = OhlcvLayout(
        market=market.value, interval=interval, label=label, timezone=tz, adjustment=adjustment
    )
    written, count = import_ohlcv(source, layout, out)
    typer.echo(f"wrote {count} {market.value} {interval} bars to {written}")


StoreOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="The store to record into: a SQLite file or a database URL; replaces the config's "
        "[store] url, and needs no config file.",
        show_default=False,
    ),
]


@data_app.command("import-news")
def data_import_news(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(
            help="A news file (.jsonl or .parquet): symbol, published_at, title[, url, source].",
            exists=True,
            dir_okay=False,
        ),
    ],
    tz: Annotated[
        str | None, typer.Option("--tz", help="The IANA zone of naive published_at times.")
    ] = None,
    config: ConfigOption = None,
    db: StoreOption = None,
) -> None:
    """Record a news file in the store's cache: a replay --from-cache of this store shows each
    item from its publication time."""
    from openbell.markets.importers.research_files import read_news

    items = read_news(source, timezone=tz)
    with _cache(ctx, config, db) as (cache, now):
        cache.put_news(source=f"import:{source.name}", items=items, fetched_at=now)
    typer.echo(f"recorded {len(items)} news items from {source.name}")


@data_app.command("import-fundamentals")
def data_import_fundamentals(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(
            help="A fundamentals file (.jsonl or .parquet): symbol, period_end, published_at, "
            "currency and the figures.",
            exists=True,
            dir_okay=False,
        ),
    ],
    tz: Annotated[
        str | None, typer.Option("--tz", help="The IANA zone of naive published_at times.")
    ] = None,
    config: ConfigOption = None,
    db: StoreOption = None,
) -> None:
    """Record a fundamentals file in the store's cache: a replay --from-cache of this store serves
    each report from its publication time."""
    from openbell.markets.importers.research_files import read_reports
    from openbell.markets.recorded import KnownReport

    reports = read_reports(source, timezone=tz)
    known = [KnownReport(report=report, known_at=report.published_at) for report in reports]
    with _cache(ctx, config, db) as (cache, now):
        cache.put_reports(source=f"import:{source.name}", reports=known, fetched_at=now)
    typer.echo(f"recorded {len(reports)} fundamentals reports from {source.name}")


@contextmanager
def _cache(
    ctx: typer.Context, config: Path | None, db: str | None
) -> Iterator[tuple[SqlBarCache, datetime]]:
    """The cache of the store (`db`, else the config's), migrated to the head, and the time of
    the import."""
    from openbell.daemon.clock import SystemClock
    from openbell.store.cache import SqlBarCache
    from openbell.store.db import make_engine
    from openbell.store.migrate import upgrade

    loaded = load_command_config(ctx, config, db=db)
    upgrade(loaded.store.url)
    engine = make_engine(loaded.store.url)
    try:
        yield SqlBarCache(engine), SystemClock().now()
    finally:
        engine.dispose()


@data_app.callback(invoke_without_command=True)
def _data(ctx: typer.Context) -> None:
    """Build replay datasets."""
    help_without_command(ctx)
