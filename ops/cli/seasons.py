"""`openbell season`: open, list, close a season, and write its methods card.

This module owns the `season` command group (`season_app`) and what `run --season` and
`replay --season` share (`season_run_config`). `season open NAME --config FILE --start DATE
[--end DATE] [--db LEDGER]` builds the manifest of the config (`ops.seasons.manifest`) and
records it, hashed, with the config's text in the ledger (migrated to the head first), before the
window's first slot: a ledger with cycles inside the window is refused. `season close NAME`
closes it, `season list` lists the ledger's seasons, `season card NAME [--out FILE]` writes its
methods card (`ops.seasons.card`) as Markdown. Commands of other modules join the group through
`season_app.command(...)` in `app.py`, as `data` takes `data download`. The open time is the
clock's (the hidden `--fake-clock` stands in for it in tests).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from openbell.ops.cli.daemon import FakeClockOption, command_clock
from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    TableFormat,
    WritingDbOption,
    check_before_writing,
    command_log,
    configure_logging_for,
    global_options,
    help_without_command,
    load_command_config,
    open_ledger,
    upgrade_logged,
    with_store_url,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from openbell.ops.config.schema import OpenbellConfig
    from openbell.store.seasons import Season

season_app = typer.Typer(
    help="Seasons: a config fixed by a hashed manifest before the first slot.",
    rich_markup_mode=None,
)

_DATE_FORMATS = ["%Y-%m-%d"]


@season_app.callback(invoke_without_command=True)
def _season(ctx: typer.Context) -> None:
    """Seasons: a config fixed by a hashed manifest before the first slot."""
    help_without_command(ctx)


def _config_path(ctx: typer.Context, config: Path | None) -> Path:
    """The config file of this command: its own --config, else the global one."""
    return config or global_options(ctx).config


@season_app.command("open")
def open_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The season's name.", show_default=False)],
    start: Annotated[
        datetime,
        typer.Option("--start", formats=_DATE_FORMATS, help="First UTC date.", show_default=False),
    ],
    end: Annotated[
        datetime | None,
        typer.Option(
            "--end",
            formats=_DATE_FORMATS,
            help="Last UTC date, included; default: open-ended (a replay season needs one).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    db: WritingDbOption = None,
    fake_clock: FakeClockOption = None,
) -> None:
    """Open the season NAME: write the manifest of the config (markets, universes with their
    coverage, costs and rules, agents, ranking rule and metrics convention, code version, data
    sources, hashed) and the config's text into the ledger, before the window's first slot."""
    from openbell.ops.config.schema import load_config_text
    from openbell.ops.seasons.code_version import code_version
    from openbell.ops.seasons.opening import new_season
    from openbell.store.db import make_engine
    from openbell.store.seasons import open_season

    path = _config_path(ctx, config)
    loaded = load_command_config(ctx, path, db=db, writes=True)
    text = _read_text(path)
    # The manifest is built from the very text stored with the season.
    from_text = load_config_text(text, shown=str(path), base=path.absolute().parent)
    season = new_season(
        from_text,
        name=name,
        start=start.date(),
        end=None if end is None else end.date(),
        config_text=text,
        config_path=path,
        code=code_version(),
        now=command_clock(fake_clock).now(),
    )
    check_before_writing(loaded.store.url, create=False)
    upgrade_logged(loaded.store.url)
    engine = make_engine(loaded.store.url)
    try:
        open_season(engine, season)
    finally:
        engine.dispose()
    command_log().info("season_opened", season=name, manifest_sha256=season.manifest_sha256)
    typer.echo(f"season {name} opened: manifest sha256 {season.manifest_sha256}")


def _read_text(path: Path) -> str:
    from openbell.markets.errors import ConfigError

    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


@season_app.command("close")
def close_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The season's name.", show_default=False)],
    config: ConfigOption = None,
    db: DbOption = None,
    fake_clock: FakeClockOption = None,
) -> None:
    """Close the season NAME: its config can then change only in a new season."""
    from openbell.store.seasons import close_season

    loaded = load_command_config(ctx, config, db=db)
    engine = open_ledger(loaded, writable=True)
    try:
        season = close_season(engine, name, command_clock(fake_clock).now())
    finally:
        engine.dispose()
    closed = season.closed_at or datetime.min.replace(tzinfo=UTC)
    typer.echo(f"season {name} closed at {closed:%Y-%m-%d %H:%M} UTC")


@season_app.command("list")
def list_command(
    ctx: typer.Context,
    fmt: Annotated[
        TableFormat, typer.Option("--format", "-f", help="table, json or csv.")
    ] = TableFormat.table,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """List the ledger's seasons: window, open or closed, manifest hash."""
    from openbell.store.seasons import seasons

    loaded = load_command_config(ctx, config, db=db)
    engine = open_ledger(loaded)
    try:
        found = seasons(engine)
    finally:
        engine.dispose()
    _print_seasons(found, fmt, sys.stdout)


def _print_seasons(found: list[Season], fmt: TableFormat, stream: TextIO) -> None:
    import csv
    import json

    from openbell.ops.seasons.opening import season_record

    records = [season_record(season) for season in found]
    if fmt is TableFormat.json:
        stream.write(json.dumps({"seasons": records}, indent=2) + "\n")
        return
    if fmt is TableFormat.csv:
        writer = csv.DictWriter(
            stream,
            fieldnames=["name", "start", "end", "opened_at", "closed_at", "manifest_sha256"],
            lineterminator="\n",
        )
        writer.writeheader()
        writer.writerows(records)
        return
    if not records:
        stream.write("no seasons in the ledger\n")
        return
    for record in records:
        state = "open" if record["closed_at"] is None else f"closed {record['closed_at']}"
        stream.write(
            f"{record['name']}  {record['start']} .. {record['end'] or 'open-ended'}  {state}  "
            f"sha256 {record['manifest_sha256']}\n"
        )


@season_app.command("card")
def card_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The season's name.", show_default=False)],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the card to this file; default: stdout.", dir_okay=False),
    ] = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Write the methods card of the season NAME as Markdown, from its manifest and the ledger:
    point-in-time controls, universe and coverage, costs and execution timing, cadence, seeds,
    models as answered, budgets and spend, failures and skips, artifacts' hashes."""
    from openbell.ops.seasons.card import methods_card, to_markdown
    from openbell.store.seasons import season_named

    loaded = load_command_config(ctx, config, db=db)
    engine = open_ledger(loaded)
    try:
        text = to_markdown(methods_card(engine, season_named(engine, name)))
    finally:
        engine.dispose()
    if out is None:
        sys.stdout.write(text)
        return
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote the methods card of season {name} to {out}")


# -- what run --season and replay --season share -------------------------------------------------


def _ledger_url(ctx: typer.Context, config: Path | None, db: str | None) -> str:
    """The ledger a season is read from: --db, else the config's [store] url."""
    from openbell.ops.cli.options import db_url
    from openbell.ops.config.schema import load_config

    if db is not None:
        return db_url(db, must_exist=False)
    return load_config(_config_path(ctx, config)).store.url


def _named_config(ctx: typer.Context, config: Path | None) -> Path | None:
    """The config file the operator named (this command's --config, the global one given on
    the command line or in $OPENBELL_CONFIG), or None when only the default applies."""
    if config is not None:
        return config
    root = ctx.find_root()
    source = root.get_parameter_source("config")
    if source is not None and source.name != "DEFAULT":
        return global_options(ctx).config
    return None


def season_run_config(
    ctx: typer.Context,
    name: str,
    config: Path | None,
    *,
    db: str | None,
    stream: TextIO,
    level: str | None = None,
    copy_from: str | None = None,
) -> tuple[OpenbellConfig, Season]:
    """The config the season `name` runs under, writing the ledger `db` (else the config's),
    and the season. The season is read from that ledger (or, with `copy_from`, from that store
    and opened, the same manifest, in the ledger first: a re-run of a replay season); its stored
    config is loaded; a config the operator named is refused unless its manifest is the
    season's; a closed season is refused. A season opened by another openbell version or commit
    runs with a `season_code_changed` warning."""
    from openbell.ops.config.schema import load_config
    from openbell.ops.seasons.code_version import code_version
    from openbell.ops.seasons.opening import (
        check_unchanged,
        code_differences,
        refuse_closed,
        season_config,
    )

    url = _ledger_url(ctx, config, db)
    season = _read_season(url, name, copy_from)
    refuse_closed(season)
    code = code_version()
    named = _named_config(ctx, config)
    if named is not None:
        check_unchanged(season, load_config(named), shown=str(named), code=code)
    loaded = with_store_url(season_config(season), url)
    configure_logging_for(ctx, loaded, stream=stream, level=level)
    for key, (was, running) in code_differences(season, code).items():
        command_log().warning(
            "season_code_changed", season=name, field=key, season_value=was, running=running
        )
    return loaded, season


def _read_season(url: str, name: str, copy_from: str | None) -> Season:
    """The season `name` of the ledger at `url` (migrated to the head); with `copy_from`, read
    from that store and opened, the same record, in the ledger at `url` (made as needed) unless
    it is there already (then it must have the same manifest hash)."""
    from dataclasses import replace

    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import SeasonError
    from openbell.ops.cli.options import db_url
    from openbell.store.db import make_engine, shown_ledger, sqlite_file
    from openbell.store.migrate import upgrade
    from openbell.store.seasons import has_seasons, open_season, season_named, seasons

    original = None
    if copy_from is not None:
        source = make_engine(db_url(copy_from), read_only=True)
        try:
            if not has_seasons(source):
                raise SeasonError(f"no season {name!r} in {copy_from} (it has no seasons)")
            original = season_named(source, name)
        finally:
            source.dispose()
    else:
        path = sqlite_file(url)
        if path is not None and not path.is_file():
            raise SeasonError(
                f"no ledger at {shown_ledger(url)}: open the season there first "
                "(`openbell season open`)"
            )
    check_before_writing(url, create=False)
    upgrade(url)
    engine = make_engine(url)
    try:
        if original is not None:
            here = {found.name: found for found in seasons(engine)}
            if name not in here:
                now = SystemClock().now()
                open_season(engine, replace(original, opened_at=now, closed_at=None))
            elif here[name].manifest_sha256 != original.manifest_sha256:
                raise SeasonError(
                    f"season {name!r} of {shown_ledger(url)} has another manifest than the one "
                    f"of {copy_from} ({here[name].manifest_sha256[:12]}... against "
                    f"{original.manifest_sha256[:12]}...)"
                )
        return season_named(engine, name)
    finally:
        engine.dispose()


def season_of_board(engine: Engine, chosen: str | None) -> Season | None:
    """The season a board names: `chosen` (`SeasonError` if the ledger has none of that name),
    else the ledger's current one (`store.seasons.current_season`), else None."""
    from openbell.store.seasons import current_season, season_named

    return current_season(engine) if chosen is None else season_named(engine, chosen)
