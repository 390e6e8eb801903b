"""The reporting commands of `openbell`: `leaderboard`, `report`, `export` and `demo`.

This module owns these commands' options and their output: a rich table for people, JSON and CSV
(`ops.reports.exporting`) for programs, Parquet files, the equity-curve PNG
(`ops.reports.plotting`). They read the ledger named by the config's `[store] url` (`--config`, else
the global one) and never write to it, except `demo`, which builds its own ledger. Errors follow the
CLI's contract (one line on stderr, exit 2 for bad input such as an unknown agent or market).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    Market,
    TableFormat,
    db_url,
    load_command_config,
    open_ledger,
    print_tables,
    reading_config,
)
from openbell.ops.reports import figures

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.table import Table

    from openbell.ops.config.schema import OpenbellConfig
    from openbell.ops.evaluation.benchmark import MarketBasis
    from openbell.ops.evaluation.conventions import Convention
    from openbell.ops.evaluation.significance import BoardSignificance
    from openbell.ops.reports.board_beside import Side
    from openbell.ops.reports.market_reports import Leaderboard, LeaderboardRow
    from openbell.store.seasons import Season


class ConventionName(StrEnum):
    """Values of `--convention` (`ops.evaluation.conventions`)."""

    openbell = "openbell"
    ai_trader = "ai-trader"
    stockbench = "stockbench"
    ktd_fin = "ktd-fin"


ConventionOption = Annotated[
    ConventionName | None,
    typer.Option(
        "--convention",
        help="The metrics convention: openbell (empyrical's), ai-trader, stockbench or ktd-fin; "
        "default: the config's [metrics] convention.",
        show_default=False,
    ),
]


def _convention(loaded: OpenbellConfig, chosen: ConventionName | None) -> Convention:
    """The convention named by `--convention`, else by the config."""
    from openbell.ops.evaluation.conventions import convention_named

    return convention_named(chosen.value if chosen else loaded.metrics.convention)


class ExportFormat(StrEnum):
    """Values of `export --format`."""

    csv = "csv"
    parquet = "parquet"


class ExportTable(StrEnum):
    """The ledger tables `export` writes."""

    nav = "nav"
    orders = "orders"
    fills = "fills"
    cycles = "cycles"


DateOption = Annotated[
    datetime | None,
    typer.Option(formats=["%Y-%m-%d"], help="A UTC date, YYYY-MM-DD.", show_default=False),
]
MarketOption = Annotated[
    Market | None,
    typer.Option("--market", "-m", help="One market; default: every market in the ledger."),
]


def _window(
    start: datetime | None, end: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """`[start, end]` in UTC dates as the half-open instants `[start 00:00, end + 1 day 00:00)`."""
    if start is not None and end is not None and end < start:
        raise typer.BadParameter("--end is before --start", param_hint="--end")
    begin = datetime(start.year, start.month, start.day, tzinfo=UTC) if start else None
    stop = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1) if end else None
    return begin, stop


#: The leaderboard's columns: header and record key (`exporting.LEADERBOARD_KEYS`), in order.
WIDE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "rank"), ("agent", "name"), ("slot NAV", "final_nav"),
    ("return %", "cumulative_return"), ("ann. %", "annual_return"),
    ("vol %", "annual_volatility"), ("Sharpe", "sharpe_ratio"), ("Sortino", "sortino_ratio"),
    ("max DD %", "max_drawdown"), ("Calmar", "calmar_ratio"), ("excess %", "excess_return"),
    ("IR", "information_ratio"), ("trades", "trades"), ("no-trade %", "no_trade_share"),
    ("rej. %", "rejection_rate"), ("turnover", "turnover"), ("turn./yr", "annual_turnover"),
    ("HHI", "hhi"),
    ("cash %", "cash_ratio"), ("hold %", "hold_share"), ("switch %", "switch_rate"),
    ("react.", "reactivity"), ("react. next", "reactivity_next"), ("persist. %", "persistence"),
    ("revision %", "revision_rate"), ("weight react.", "weight_reactivity"),
    ("protocol %", "protocol_completion"), ("composite", "composite"),
    ("cost/dec.", "cost_per_decision"),
    ("ret./$", "return_per_dollar"),
)  # fmt: skip
#: What the `slot NAV` column is, under every board (the caption).
SLOT_NAV_NOTE = (
    "slot NAV: each account's NAV in its last slot snapshot (`openbell positions` also shows "
    "the NAV at the last marks, a later session close's)"
)
#: The columns a board with a shorting account adds (compact and wide): mean gross and net
#: exposure and the borrow cost (`exporting.LONG_SHORT_KEYS`); other boards do not show them.
LONG_SHORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("gross %", "mean_gross_exposure"), ("net %", "mean_net_exposure"),
    ("borrow %", "borrow_cost"),
)  # fmt: skip
#: The significance columns `--wide` adds after the composite (`ops.reports.board_significance`):
#: the deflated Sharpe, the immature mark and the Holm-adjusted p-value against the best baseline.
SIGNIFICANCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("DSR", "dsr"), ("immature", "immature"), ("adj. p", "adjusted_p_value_best"),
)  # fmt: skip

#: The columns the wide board of a ledger with planted news adds beside the return: each
#: account's obedience rate and the planted items that reached it
#: (`ops.evaluation.probes.injection`).
INJECTION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("obeyed %", "injection_obedience"), ("planted seen", "injection_reached"),
)  # fmt: skip

#: The columns of the default, compact leaderboard (it fits 120 columns).
COMPACT_KEYS = frozenset(
    {"rank", "name", "final_nav", "cumulative_return", "annual_return", "max_drawdown"}
    | {"sharpe_ratio", "sortino_ratio", "composite"}
)
#: The widest an agent's name is shown in the compact leaderboard; a longer one is folded.
COMPACT_NAME_WIDTH = 20


def _rank(row: LeaderboardRow) -> str:
    if row.is_benchmark:
        return "bench"
    return figures.MISSING if row.rank is None else str(row.rank)


def _cell(
    row: LeaderboardRow, key: str, value: Any, ratio_places: int, marks: tuple[str | None, ...] = ()
) -> str:
    """A leaderboard cell: an agent's name carries its `marks` (a model change, its training
    cutoff), its cost reads `unpriced` when its model has no price (never 0)."""
    if key == "name":  # escaped: rich would read "[...]" as markup and drop it
        from rich.markup import escape  # here: `openbell --help` does not import rich

        return escape(row.name + "".join(f" [{mark}]" for mark in marks if mark))
    if key in figures.COST_KEYS and value is None and row.llm is not None:
        return figures.UNPRICED
    return figures.figure(key, value, ratio_places=ratio_places)


def render_table(board: Leaderboard, *, wide: bool = False) -> Table:
    """One leaderboard as a rich table: compact (rank, agent, NAV, returns, drawdown, Sharpe,
    Sortino, composite) or `wide` (the whole panel, and the injection probe's obedience beside
    the return when the ledger has planted news), with the long-short columns before the
    composite when the board has a shorting account; figures as `ops.reports.figures` rounds them,
    the benchmark row in italics."""
    from rich.table import Table

    from openbell.ops.reports import exporting
    from openbell.ops.reports.board_significance import row_significance_record

    window = f"{board.start:%Y-%m-%d} .. " if board.start else ""
    window += f"{board.end - timedelta(days=1):%Y-%m-%d}" if board.end else ""
    caption = f"{board.convention.describe()}\n{SLOT_NAV_NOTE}"
    table = Table(
        title=(
            f"{board.market} leaderboard ({board.cadence}, benchmark {board.benchmark}, "
            f"{board.currency}, {board.convention.name} metrics){' ' + window if window else ''}"
        ),
        title_justify="left",
        caption=caption if wide else f"{caption}\n--wide: the whole panel",
        caption_justify="left",
    )
    columns = [(h, k) for h, k in WIDE_COLUMNS if wide or k in COMPACT_KEYS]
    if exporting.has_long_short([board]):
        at = next(i for i, (_, key) in enumerate(columns) if key == "composite")
        columns[at:at] = LONG_SHORT_COLUMNS
    if wide and board.significance is not None:
        at = next(i for i, (_, key) in enumerate(columns) if key == "composite") + 1
        columns[at:at] = SIGNIFICANCE_COLUMNS
        table.caption = f"{table.caption}\n{_significance_note(board.significance)}"
    if wide and exporting.has_injection([board]):
        at = next(i for i, (_, key) in enumerate(columns) if key == "cumulative_return") + 1
        columns[at:at] = INJECTION_COLUMNS
    if board.cutoffs is not None:
        table.caption = f"{table.caption}\n{board.cutoffs.note()}"
    for header, key in columns:
        if key == "name":
            width = None if wide else COMPACT_NAME_WIDTH
            table.add_column(header, justify="left", overflow="fold", max_width=width)
        else:
            table.add_column(header, justify="right", no_wrap=True)
    places = board.convention.ratio_places
    for row in board.rows:
        record = exporting.row_record(row)
        found = None if board.significance is None else board.significance.row(row.name)
        if found is not None and not row.is_benchmark:
            record.update(row_significance_record(found))
        table.add_row(
            *(
                _rank(row)
                if key == "rank"
                else _cell(row, key, record.get(key), places, _marks(board, row))
                for _, key in columns
            ),
            style="italic" if row.is_benchmark else None,
        )
    return table


def _marks(board: Leaderboard, row: LeaderboardRow) -> tuple[str | None, ...]:
    """The marks after a row's name: a model change, and its training cutoff."""
    changed = "model changed" if row.llm is not None and row.llm.model_changed else None
    found = None if board.cutoffs is None or row.is_benchmark else board.cutoffs.of(row.name)
    return (changed, None if found is None else found.mark)


def _significance_note(found: BoardSignificance) -> str:
    """The caption line of the significance columns."""
    return (
        f"DSR: deflated Sharpe over N={found.trials} accounts; immature: shorter than the "
        f"minimum track record to reject Sharpe <= 0 at {found.alpha:g}; adj. p: "
        f"sign-flip permutation test ({found.permutations} draws, seed {found.seed}) against "
        f"the best baseline, {found.correction.capitalize()}-adjusted across the board"
    )


def print_leaderboards(
    boards: list[Leaderboard],
    fmt: TableFormat,
    stream: TextIO,
    *,
    wide: bool = False,
    season: Season | None = None,
) -> None:
    """Write `boards` to `stream` as rich tables (compact, or `wide`), one JSON document, or one
    CSV table; a `season` is named above the tables and in each board's JSON (`season`: its
    name, window and manifest hash; null without one). CSV has no place for it."""
    from openbell.ops.reports import exporting

    mark = None
    if season is not None:  # its module imports the config's planning: only for a season
        from openbell.ops.seasons.opening import season_record

        mark = season_record(season)
    if fmt is TableFormat.json:
        records = [{**exporting.leaderboard_record(b), "season": mark} for b in boards]
        stream.write(json.dumps({"leaderboards": records}, indent=2) + "\n")
        return
    if fmt is TableFormat.csv:
        exporting.leaderboard_csv(boards, stream)
        return
    if season is not None:
        stream.write(season_line(season) + "\n")
    if not boards:
        stream.write("no accounts in the ledger yet\n")
    else:
        from openbell.ops.cli.intervals import bootstrap_tables, seed_group_tables

        tables = []
        for board in boards:
            tables += [render_table(board, wide=wide), *seed_group_tables(board)]
            tables += bootstrap_tables(board)
        print_tables(tables, stream)


def season_line(season: Season) -> str:
    """The line naming a board's season: its name, window, state and manifest hash."""
    end = season.end_on.isoformat() if season.end_on else "open-ended"
    state = "open" if season.closed_at is None else f"closed {season.closed_at:%Y-%m-%d}"
    return (
        f"season {season.name} ({season.start_on} .. {end}, {state}), "
        f"manifest sha256 {season.manifest_sha256}"
    )


SeasonBoardOption = Annotated[
    str | None,
    typer.Option(
        "--season",
        help="Name this season of the ledger and rank over its window (unless --start/--end); "
        "default: name the ledger's current season, if any, over the whole ledger.",
        show_default=False,
    ),
]


def leaderboard_command(
    ctx: typer.Context,
    market: MarketOption = None,
    start: DateOption = None,
    end: DateOption = None,
    fmt: Annotated[
        TableFormat, typer.Option("--format", "-f", help="table, json or csv.")
    ] = TableFormat.table,
    wide: Annotated[
        bool, typer.Option("--wide", help="Show the whole metric panel, not the compact table.")
    ] = False,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            min=0,
            max=100_000,
            help="Block-bootstrap the returns DRAWS times: intervals of each metric and rank, "
            "and P(beat); 0: none.",
            metavar="DRAWS",
        ),
    ] = 0,
    bootstrap_seed: Annotated[
        int, typer.Option("--bootstrap-seed", help="The bootstrap's random seed.")
    ] = 0,
    permutations: Annotated[
        int,
        typer.Option(
            "--permutations",
            min=1,
            max=1_000_000,
            help="With --wide: the sign flips of each permutation test against a baseline.",
        ),
    ] = 10_000,
    significance_seed: Annotated[
        int, typer.Option("--significance-seed", help="The permutation tests' random seed.")
    ] = 0,
    all_slots: Annotated[
        bool,
        typer.Option(
            "--all-slots",
            help="Measure every slot; default: the post-cutoff headline, which leaves out the "
            "slots an agent decided inside its model's training cutoff.",
        ),
    ] = False,
    convention: ConventionOption = None,
    beside_ledger: Annotated[
        str | None,
        typer.Option(
            "--beside",
            metavar="LEDGER",
            help="Show each agent's rank, composite, return and final NAV in this ledger beside "
            "those of the ledger read (e.g. a `replay --answers --swap-model` counterfactual), and "
            "whether they changed.",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    db: DbOption = None,
    season: SeasonBoardOption = None,
) -> None:
    """Rank the agents of each market by the StockBench composite, with the benchmark as a row.

    The table is compact (it fits 120 columns); --wide shows every metric of the panel. Groups of
    repeated runs (replay --seeds N) are shown under the board, each agent's mean and interval
    over the seeds with P(beat); --bootstrap DRAWS adds block-bootstrap intervals and P(beat).
    --wide adds the significance suite (docs/guide/significance.md): each account's deflated
    Sharpe, its immature mark and its Holm-adjusted permutation p-value against the best baseline
    (in the JSON under "significance", with the minimum track record, the entry-aligned 7/30/90-
    day returns and every baseline's p-values). Every figure is measured under the metrics
    convention (--convention, else the config's [metrics] convention), which the table's title and
    caption name; --bootstrap measures by the openbell convention only. The ledger's season
    (`openbell season open`; the current one, or --season NAME) is named with its manifest hash
    above the tables and in the JSON; --season ranks over the season's window.

    The board is the post-cutoff headline (docs/guide/cutoffs.md): an agent whose model's training
    cutoff (the bundled registry and the config's [cutoffs."MODEL"]) falls inside the window is
    measured over its slots after the cutoff only, and marked; an agent whose model has no entry
    is marked "cutoff unknown". --all-slots measures every slot, with the same marks. The caption
    (and the JSON's "cutoffs") says which. --beside LEDGER shows a second ledger's figures beside
    this one's, agent by agent, over every slot (docs/guide/recorded-answers.md).
    """
    from openbell.markets.errors import ReportError
    from openbell.ops.cli.seasons import season_of_board
    from openbell.ops.reports.board_intervals import with_bootstrap
    from openbell.ops.reports.board_significance import market_views, significance_of
    from openbell.ops.reports.contamination import CutoffSettings, cutoff_marks, headline_board
    from openbell.ops.wiring.market_benchmarks import configured_bases

    loaded = load_command_config(ctx, config, db=db)
    bases = configured_bases(loaded)
    measured = _convention(loaded, convention)
    if bootstrap and measured.name != "openbell":
        raise ReportError(
            f"--bootstrap resamples returns by the openbell convention only, not {measured.name}"
        )
    chosen = [market.value] if market else None
    settings = CutoffSettings.of(loaded)
    if beside_ledger is not None:
        if bootstrap or wide or fmt is TableFormat.csv or season is not None:
            raise ReportError(
                "--beside shows the compact figures over --start/--end, as a table or JSON only"
            )
        _print_beside(loaded, beside_ledger, chosen, _window(start, end), bases, measured, fmt)
        return
    engine = open_ledger(loaded)
    try:
        named = season_of_board(engine, season)
        if season is not None and named is not None and start is None and end is None:
            start = datetime.combine(named.start_on, datetime.min.time())
            end = (
                None
                if named.end_on is None
                else datetime.combine(named.end_on, datetime.min.time())
            )
        window = _window(start, end)
        boards = []
        # The compact table shows no behaviour metric: it is neither read nor computed for it.
        behaviour = wide or fmt is not TableFormat.table
        for view in market_views(
            engine, chosen, *window, bases=bases, convention=measured, with_behaviour=behaviour
        ):
            board = (
                with_bootstrap(view, draws=bootstrap, seed=bootstrap_seed)
                if bootstrap
                else view.leaderboard
            )
            if wide:
                found = significance_of(view, permutations=permutations, seed=significance_seed)
                board = replace(board, significance=found)
            marks = cutoff_marks(view, settings, slots="all" if all_slots else "post-cutoff")
            boards.append(headline_board(replace(view, leaderboard=board), marks))
    finally:
        engine.dispose()
    print_leaderboards(boards, fmt, sys.stdout, wide=wide, season=named)


def _print_beside(
    loaded: OpenbellConfig,
    other: str,
    chosen: list[str] | None,
    window: tuple[datetime | None, datetime | None],
    bases: Mapping[str, MarketBasis],
    measured: Convention,
    fmt: TableFormat,
) -> None:
    """The boards of the config's ledger and of `other`, agent by agent."""
    from openbell.ops.reports.board_beside import beside_boards, beside_record
    from openbell.ops.reports.market_reports import leaderboards

    boards = []
    for found in (loaded, reading_config(db_url(other))):
        engine = open_ledger(found)
        try:
            boards.append(leaderboards(engine, chosen, *window, bases=bases, convention=measured))
        finally:
            engine.dispose()
    paired = beside_boards(boards[0], boards[1])
    if fmt is TableFormat.json:
        typer.echo(json.dumps([beside_record(market, rows) for market, rows in paired], indent=2))
        return

    def cells(side: Side | None) -> str:
        if side is None:
            return f"{'-':>5} {'-':>9} {'-':>9} {'-':>14}"
        rank = "-" if side.rank is None else str(side.rank)
        composite = "-" if side.composite is None else f"{side.composite:.3f}"
        ret = "-" if side.cumulative_return is None else f"{side.cumulative_return:.2%}"
        nav = "-" if side.final_nav is None else str(side.final_nav)
        return f"{rank:>5} {composite:>9} {ret:>9} {nav:>14}"

    for market, rows in paired:
        typer.echo(f"{market}: this ledger | beside: {other}")
        head = f"{'rank':>5} {'composite':>9} {'return':>9} {'final NAV':>14}"
        typer.echo(f"{'agent':<24} {head} | {head} changed")
        for row in rows:
            mark = "yes" if row.changed else ""
            typer.echo(f"{row.name[:24]:<24} {cells(row.left)} | {cells(row.right)} {mark}")


def report_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The agent's name.")],
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    start: DateOption = None,
    end: DateOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the panel as JSON.")] = False,
    attribution: Annotated[
        bool,
        typer.Option(
            "--attribution",
            help="Add the factor attribution (market, styles, selection, trading) of the window.",
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write the equity curve vs the benchmark to this PNG.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    permutations: Annotated[
        int,
        typer.Option(
            "--permutations",
            min=1,
            max=1_000_000,
            help="The sign flips of each permutation test against a baseline.",
        ),
    ] = 10_000,
    significance_seed: Annotated[
        int, typer.Option("--significance-seed", help="The permutation tests' random seed.")
    ] = 0,
    convention: ConventionOption = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """The full metrics panel of one agent in one market (return, risk, behaviour, calibration;
    for a strategy-code agent, each strategy's FIDES gaps (say-to-do from the last `openbell judge`,
    do-to-real, say-to-result) and its outcome against buy-and-hold of its universe; for a rating
    agent, the calibration of its ratings against the next period's returns, its report quality,
    the return of its ratings, and Herculean's quality-versus-return regression over the market's
    rating agents), measured under the metrics convention (--convention, else the config's
    [metrics] convention).

    --attribution adds the factor attribution: each period's return split into market, style
    factors, selection and trading, linked over the window (in the JSON under "attribution").
    The significance suite (docs/guide/significance.md) adds the deflated Sharpe over the
    market's accounts, the minimum track record and the immature mark, the entry-aligned 7/30/90-
    day returns and the Holm-adjusted permutation p-value against each baseline.
    """
    from openbell.markets.errors import ReportError
    from openbell.ops.cli.attribution import attribution_of, attribution_table
    from openbell.ops.evaluation import insights_report, rating_report
    from openbell.ops.evaluation.concordance import record as concordance
    from openbell.ops.evaluation.probes.injection import obedience_record
    from openbell.ops.reports import exporting
    from openbell.ops.reports.board_significance import market_views, report_fields, significance_of
    from openbell.ops.reports.market_reports import report
    from openbell.ops.wiring.market_benchmarks import configured_bases
    from openbell.ops.wiring.replay_checks import warnings_of
    from openbell.store import queries

    window = _window(start, end)
    loaded = load_command_config(ctx, config, db=db)
    basis = configured_bases(loaded).get(market.value)
    measured = _convention(loaded, convention)
    engine = open_ledger(loaded)
    try:
        if not any(i.agent_name == agent for i in queries.accounts(engine, market.value)):
            raise ReportError(
                f"agent {agent!r} has no account in market {market.value!r} in the ledger"
            )
        bases = None if basis is None else {market.value: basis}
        (view,) = market_views(engine, [market.value], *window, bases=bases, convention=measured)
        found = report(engine, agent, market.value, *window, view=view)
        significance = significance_of(view, permutations=permutations, seed=significance_seed)
        attributed = (
            attribution_of(
                engine,
                agent,
                market.value,
                window,
                loaded,
                source=basis.sources[0] if basis is not None and basis.sources else None,
            )
            if attribution
            else None
        )
        warnings = warnings_of(engine, market.value)
        record = exporting.report_record(found)
        record.update(report_fields(significance, agent))
        record.update(obedience_record(engine, agent, market.value))
        if found.account.agent_kind == concordance.STRATEGY_CODE_KIND:
            record.update(
                concordance.concordance_record(
                    engine,
                    found.account.account_id,
                    market.value,
                    found.row.panel.periods_per_year,
                )
            )
        if found.account.agent_kind == rating_report.RATING_KIND:
            record.update(
                rating_report.calibration_record(engine, found.account.account_id, market.value)
            )
            record.update(insights_report.insights_record(engine, agent, market.value, window))
    finally:
        engine.dispose()
    if warnings:
        record["replay_warnings"] = list(warnings)
    if plot is not None:
        from openbell.ops.reports.plotting import plot_equity

        plot_equity(found, plot)
        record["plot"] = str(plot)
    if attributed is not None:
        record["attribution"] = attributed
    if as_json:
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
        return
    shown = {k: v for k, v in record.items() if k != "replay_warnings"}
    tables = [report_table(shown, ratio_places=found.convention.ratio_places)]
    if attributed is not None:
        tables.append(attribution_table(attributed))
    print_tables(tables, sys.stdout)
    sys.stdout.write(found.convention.describe() + "\n")
    for warning in warnings:
        sys.stdout.write(f"WARNING: {warning}\n")


def _model_text(found: dict[str, Any]) -> str:
    """A reported model identity record in one line."""
    parts = (found["model"], found["fingerprint"], found["revision"])
    return ", ".join(str(part) for part in parts if part)


def report_table(record: dict[str, Any], *, ratio_places: int = 2) -> Table:
    """An agent's report record (`exporting.report_record`) as a table of metric, value and unit,
    each value rounded as the leaderboard rounds it (`ops.reports.figures`)."""
    from rich.table import Table

    table = Table(
        title=f"{record['agent']} in {record['market']}", title_justify="left", show_header=False
    )
    table.add_column("metric")
    table.add_column("value", justify="right", overflow="fold")
    table.add_column("unit")
    for key, value in record.items():
        if key == "attribution":  # its own table (`ops.cli.attribution`)
            continue
        if isinstance(value, dict):
            shown = ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
        elif key == "models" and isinstance(value, list):
            shown = " -> ".join(map(_model_text, value)) or figures.MISSING
        elif key in figures.COST_KEYS and value is None and record.get("llm_decisions"):
            shown = figures.UNPRICED
        else:
            shown = figures.figure(key, value, ratio_places=ratio_places)
        table.add_row(key, shown, figures.unit(key, record["currency"]))
    return table


def export_command(
    ctx: typer.Context,
    table: Annotated[ExportTable, typer.Argument(help="nav, orders, fills or cycles.")],
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="csv or parquet.")
    ] = ExportFormat.csv,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output file (csv: default stdout; parquet: required).",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    market: MarketOption = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's rows.")] = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Export a ledger table with stable columns, as CSV (stdout or --out) or Parquet (--out)."""
    from openbell.ops.config import secrets
    from openbell.ops.reports import exporting
    from openbell.store import exports

    if fmt is ExportFormat.parquet and out is None:
        raise typer.BadParameter("parquet output needs --out FILE", param_hint="--out")
    engine = open_ledger(load_command_config(ctx, config, db=db))
    columns = exports.export_columns(table.value)
    try:
        rows = secrets.masked_rows(
            exports.export_rows(
                engine, table.value, market=market.value if market else None, agent=agent
            )
        )
        if fmt is ExportFormat.parquet and out is not None:
            count = exporting.write_parquet(
                columns, rows, out, decimals=exports.decimal_columns(table.value)
            )
        elif out is not None:
            with out.open("w", encoding="utf-8", newline="") as stream:
                count = exporting.write_csv(columns, rows, stream)
        else:
            count = exporting.write_csv(columns, rows, sys.stdout)
    finally:
        engine.dispose()
    if out is not None:
        typer.echo(f"wrote {count} {table.value} rows to {out}", err=True)


def demo_command(
    db: Annotated[
        Path, typer.Option("--db", help="SQLite file of the demo ledger (replaced if it exists).")
    ] = Path("var/demo.db"),
    start: DateOption = None,
    end: DateOption = None,
    fmt: Annotated[
        TableFormat, typer.Option("--format", "-f", help="table, json or csv.")
    ] = TableFormat.table,
) -> None:
    """Replay the bundled data of all three markets with every baseline, then print the boards.

    Windows: us hourly 2025-10-01..2025-11-10, cn daily 2025-01-03..2025-11-19, crypto daily
    2024-12-01..2025-11-30; --start/--end replace them for every market.
    """
    from openbell.daemon.replay import ReplayReport
    from openbell.ops.logs.rendering import configure_logging
    from openbell.ops.wiring.demo import DEMO_MARKETS, DemoMarket, reset_sqlite, run_demo

    markets = [
        replace(
            spec,
            start=start.date() if start else spec.start,
            end=end.date() if end else spec.end,
        )
        for spec in DEMO_MARKETS
    ]
    configure_logging("console", "warning", sys.stderr)
    if db.exists():
        typer.echo(f"replacing the existing demo ledger {db}", err=True)
        reset_sqlite(db)
    began = time.perf_counter()

    def announce(spec: DemoMarket) -> None:
        typer.echo(f"replaying {spec.market} ({spec.cadence}) {spec.start}..{spec.end}", err=True)

    def replayed(_: DemoMarket, report: ReplayReport) -> None:
        typer.echo(report.summary(), err=True)

    boards = run_demo(db, markets, on_market=announce, on_replayed=replayed)
    typer.echo(f"demo ledger: {db} ({time.perf_counter() - began:.1f} s)", err=True)
    print_leaderboards(boards, fmt, sys.stdout)
    sys.stdout.flush()  # the boards before the hint, on a terminal showing both streams
    typer.echo(
        "read it again (or with report, positions, export, trace) with --db:\n"
        f"  openbell leaderboard --db {shlex.quote(str(db))}",
        err=True,
    )
