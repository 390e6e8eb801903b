"""What the `openbell` command modules share: the global options' values, the `--config`, `--db`
and `--market` options, and loading a command's config with logging set up.

`app.py` owns the app and its global options (`--config`, `--log-format`), which it leaves in the
root context as `GlobalOptions`, and the process's `CommandState` (the stop request, whether
logging is set up). The command modules read them through `load_config_logged` and
`load_command_config`, so that a command's own `--config` wins over the global one, which wins
over `./openbell.toml`. A command that reads a ledger takes `--db`: a SQLite file or a database URL
that replaces the config's `[store] url`; with `--db` and no config file named, `./openbell.toml`
is read if it exists and not needed otherwise. Tables for people are printed by `print_tables`.

This module, like every command module, imports at its top only what building the app needs
(typer and the options' types), so that `openbell --help` starts fast; what a command runs on
(config, store, rich) is imported when it runs, and annotated under `TYPE_CHECKING`.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from openbell.daemon.stopping import StopRequest
from openbell.markets.errors import ConfigError

if TYPE_CHECKING:
    from rich.table import Table
    from sqlalchemy import Engine
    from structlog.stdlib import BoundLogger

    from openbell.ops.config.schema import HttpConfig, OpenbellConfig

PROG = "openbell"
DEFAULT_CONFIG = Path("openbell.toml")
#: The name the command line logs under (its lines' `logger`).
LOGGER_NAME = "openbell.ops.cli"

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file for this command (overrides the global --config).",
        show_default=False,
        dir_okay=False,
    ),
]


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=(
            "The ledger to read: a SQLite file, or a database URL (sqlite:///PATH, "
            "postgresql+psycopg://USER@HOST/DB); replaces the config's [store] url, and needs no "
            "config file."
        ),
        show_default=False,
    ),
]


ExistingWritingDbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=(
            "The ledger to read and to store this command's results in: an existing SQLite "
            "file, or a database URL (sqlite:///PATH, postgresql+psycopg://USER@HOST/DB); "
            "replaces the config's [store] url."
        ),
        show_default=False,
    ),
]


WritingDbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=(
            "The ledger to write: a SQLite file (made if missing), or a database URL "
            "(sqlite:///PATH, postgresql+psycopg://USER@HOST/DB); replaces the config's [store] "
            "url, so an experiment can run beside a daemon that holds the configured ledger."
        ),
        show_default=False,
    ),
]

SeasonOption = Annotated[
    str | None,
    typer.Option(
        "--season",
        help="Run the season NAME of the ledger (`openbell season open`): the config stored with "
        "it (a --config given too must build the same manifest, else it is refused, naming the "
        "differing fields).",
        show_default=False,
    ),
]

ListenOption = Annotated[
    str | None,
    typer.Option(
        "--listen",
        help="HOST:PORT to serve HTTP (and /mcp) on instead of the config's [http] listen "
        "(port 0: any free port), so it can run beside a daemon that holds that port.",
        show_default=False,
    ),
]


class Market(StrEnum):
    """Values of `--market`."""

    us = "us"
    cn = "cn"
    crypto = "crypto"


class TableFormat(StrEnum):
    """Values of `--format` of the commands that print tables: for people, or JSON or CSV."""

    table = "table"
    json = "json"
    csv = "csv"


class LogFormat(StrEnum):
    """Values of `--log-format`."""

    json = "json"
    console = "console"


@dataclass(frozen=True)
class GlobalOptions:
    """The global options' values, the root context's object."""

    config: Path
    log_format: LogFormat | None


@dataclass
class CommandState:
    """The running command's stop request, whether its logging is set up, and its ledger as the
    operator named it (what a `database:` error line names)."""

    logging_ready: bool = False
    stop: StopRequest = field(default_factory=StopRequest)
    ledger: str | None = None


#: The state of the command this process runs (`app.main` sets its stop request).
state = CommandState()


def collect_garbage() -> bool:
    """Turn the cyclic garbage collector back on, if start-up left it off (`ops/entry.py`); what
    start-up built is moved out of its way first (`gc.freeze`), as it lives as long as the process.
    A command that imports what it runs on when it runs calls this once those imports are done
    (`app.COLLECTS_AFTER_IMPORTS`): building their classes would trigger hundreds of collections
    that find nothing to free (about 0.06 s of a 7-day replay's start-up). Whether it froze
    objects (the replay then need not count them: `daemon.replay.run_replay`)."""
    if gc.isenabled():
        return False
    gc.freeze()
    gc.enable()
    return True


def command_log() -> BoundLogger:
    """The command line's logger."""
    import structlog

    return structlog.stdlib.get_logger(LOGGER_NAME)


def help_without_command(ctx: typer.Context) -> None:
    """A group called without a command prints its help and exits 2, as a usage error does."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


def global_options(ctx: typer.Context) -> GlobalOptions:
    """The global options of the command line `ctx` belongs to."""
    found = ctx.find_object(GlobalOptions)
    return found if found is not None else GlobalOptions(config=DEFAULT_CONFIG, log_format=None)


def load_config_logged(
    ctx: typer.Context,
    config: Path | None,
    log_stream: TextIO,
    *,
    db: str | None = None,
    listen: str | None = None,
) -> OpenbellConfig:
    """Load the config file (`config`, else the global --config) and configure logging from it
    (and from --log-format) on `log_stream`; its ledger replaced by `db` (`--db`, a file made if
    missing) and its HTTP address by `listen` (`--listen`)."""
    from openbell.ops.config import secrets
    from openbell.ops.config.schema import load_config
    from openbell.ops.logs.rendering import configure_logging

    options = global_options(ctx)
    loaded = with_overrides(load_config(config or options.config), db=db, listen=listen)
    fmt = options.log_format.value if options.log_format else loaded.log.format
    configure_logging(
        fmt, loaded.log.level, log_stream, third_party_level=loaded.log.third_party_level
    )
    state.logging_ready = True
    secrets.activate(loaded, os.environ)
    note_ledger(loaded)
    return loaded


def note_ledger(loaded: OpenbellConfig) -> None:
    """Remember the command's ledger as the operator named it, for a `database:` error line."""
    from openbell.store.db import shown_ledger

    try:
        state.ledger = shown_ledger(loaded.store.url)
    except ConfigError:
        state.ledger = None


def load_command_config(
    ctx: typer.Context,
    config: Path | None,
    *,
    db: str | None = None,
    listen: str | None = None,
    writes: bool = False,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
) -> OpenbellConfig:
    """The config of this command (`--config`, else the global one, else ./openbell.toml) with its
    store replaced by `db` (`--db`) and its HTTP address by `listen` (`--listen`), and logging
    configured on `stream` (default stderr) at `level` (default the config's) in `fmt` (default
    the global --log-format, else the config's), and its secrets masked in all the process prints
    (`secrets.activate`).

    A command that only reads (`writes` False) given `db` and no config file named (neither
    option nor `$OPENBELL_CONFIG`) treats a missing ./openbell.toml as the defaults; the result
    then configures no market and serves only to read the ledger, and its `db` file must exist.
    A command that `writes` needs its config file, and makes a missing `db` file.
    """
    from openbell.ops.config.schema import load_config

    root_ctx = ctx.find_root()
    root = root_ctx.params
    path = config or root.get("config") or Path("openbell.toml")
    source = root_ctx.get_parameter_source("config")  # typer's own click: compare by name
    named = config is not None or (source is not None and source.name != "DEFAULT")
    if db is None or writes:
        loaded = with_overrides(load_config(path), db=db, listen=listen)
    else:
        url = db_url(db)
        loaded = with_store_url(
            load_config(path) if named or path.exists() else reading_config(url), url
        )
        loaded = with_overrides(loaded, listen=listen) if listen is not None else loaded
    configure_logging_for(ctx, loaded, level=level, fmt=fmt, stream=stream)
    return loaded


def configure_logging_for(
    ctx: typer.Context,
    loaded: OpenbellConfig,
    *,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Set up a command's logging from `loaded` as `load_command_config` does (on `stream`,
    default stderr, at `level`, default the config's, in `fmt`, default the global
    --log-format, else the config's), mask its secrets and note its ledger."""
    from openbell.ops.config import secrets
    from openbell.ops.logs.rendering import configure_logging

    root = ctx.find_root().params
    chosen = fmt or str(root.get("log_format") or loaded.log.format)
    configure_logging(
        "console" if chosen == "console" else "json",
        level or loaded.log.level,
        stream if stream is not None else sys.stderr,
        third_party_level=loaded.log.third_party_level,
    )
    secrets.activate(loaded, os.environ)
    note_ledger(loaded)


def db_url(db: str, *, must_exist: bool = True) -> str:
    """The store URL of `--db`: a URL as given, a SQLite file (which must exist, unless the
    command makes it: `must_exist` False) as its URL."""
    if "://" in db:
        return db
    path = Path(db)
    if must_exist and not path.is_file():
        raise ConfigError(f"--db {db}: no such file")
    if path.is_dir():
        raise ConfigError(f"--db {db}: a directory, not a SQLite file")
    return f"sqlite:///{path.as_posix()}"


def with_overrides(
    loaded: OpenbellConfig, *, db: str | None = None, listen: str | None = None
) -> OpenbellConfig:
    """`loaded` writing the ledger `db` (`--db`: a SQLite file made if missing, or a URL) and
    serving on `listen` (`--listen`), where given."""
    if db is not None:
        loaded = with_store_url(loaded, db_url(db, must_exist=False))
    if listen is not None:
        loaded = loaded.model_copy(update={"http": with_listen(loaded, listen)})
    return loaded


def with_listen(loaded: OpenbellConfig, listen: str | None) -> HttpConfig:
    """The config's `[http]`, its address replaced by `listen` (`--listen`) when given."""
    if listen is None:
        return loaded.http
    from pydantic import ValidationError

    from openbell.ops.config.schema import HttpConfig

    try:
        return HttpConfig.model_validate({**loaded.http.model_dump(), "listen": listen})
    except ValidationError:
        raise ConfigError(
            f'--listen {listen}: should be "HOST:PORT", for example "127.0.0.1:8787"'
        ) from None


def with_store_url(loaded: OpenbellConfig, url: str) -> OpenbellConfig:
    """`loaded` reading and writing the ledger at `url`; `ConfigError` for a URL of no known kind
    (not repeated: it may carry a password)."""
    from pydantic import ValidationError

    from openbell.ops.config.schema import StoreConfig

    try:
        store = StoreConfig.model_validate({**loaded.store.model_dump(), "url": url})
    except ValidationError:
        raise ConfigError(
            "--db: use a SQLite file, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from None
    return loaded.model_copy(update={"store": store})


def reading_config(url: str) -> OpenbellConfig:
    """Defaults with the store at `url` and no market: only for commands that read a ledger (it is
    not validated as a whole, since a config must configure a market)."""
    from openbell.ops.config.schema import OpenbellConfig, StoreConfig

    return OpenbellConfig.model_construct(store=StoreConfig.model_construct(url=url))


def open_ledger(
    loaded: OpenbellConfig, *, writable: bool = False, quick_check: bool = True
) -> Engine:
    """An engine on the config's ledger for a one-shot command (each query bounded by the
    config's statement timeout), refused unless its schema is at this version's head and, on
    SQLite, the file passes SQLite's quick check (`store.integrity`; a command that runs the
    thorough check itself, `ledger verify`, passes `quick_check=False`).

    It reads only (SQLite `mode=ro` and `query_only`, Postgres read-only sessions) unless
    `writable`: a command that reads never changes the file, and a missing file (`SchemaError`)
    or an empty one (0 bytes, `DatabaseDamaged`) is reported, not made a ledger."""
    from openbell.markets.errors import SchemaError
    from openbell.store.db import (
        check_schema,
        make_engine,
        refuse_empty_file,
        shown_ledger,
        sqlite_file,
    )
    from openbell.store.integrity import check_integrity

    path = sqlite_file(loaded.store.url)
    if path is not None and not path.exists():
        raise SchemaError(
            f"database {shown_ledger(loaded.store.url)} does not exist: run `openbell db "
            "upgrade` to make a new ledger there"
        )
    refuse_empty_file(loaded.store.url, "`openbell db upgrade` makes a new ledger in it")
    engine = make_engine(
        loaded.store.url,
        statement_timeout_s=loaded.store.statement_timeout_s,
        read_only=not writable,
    )
    try:
        check_schema(engine)
        if quick_check and engine.dialect.name == "sqlite":
            check_integrity(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def check_before_writing(url: str, *, create: bool) -> None:
    """What `run` and `replay` check of the ledger they will write, before touching it: an empty
    file (0 bytes) named as a ledger is refused unless `create` (`--create`) says to make a new
    ledger in it (a missing file is created as ever); an existing SQLite file must pass SQLite's
    quick check of its pages (`store.integrity`), so nothing is written into a damaged one (its
    schema may be an older revision's, which the command's migrations then bring to the head), and
    one that holds tables but no openbell schema (no `alembic_version`) is refused as not a
    ledger."""
    from openbell.markets.errors import DatabaseDamaged
    from openbell.store.db import make_engine, refuse_empty_file, sqlite_file
    from openbell.store.integrity import check_integrity, foreign_tables

    if not create:
        refuse_empty_file(url, "pass --create to make a new ledger in it")
    path = sqlite_file(url)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return
    engine = make_engine(url, read_only=True)
    try:
        check_integrity(engine, schema=False)
        foreign = foreign_tables(engine)
    finally:
        engine.dispose()
    if foreign:
        raise DatabaseDamaged(
            f"the file holds tables ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''})"
            " but no openbell schema: not an openbell ledger"
        )


ProgressOption = Annotated[
    bool | None,
    typer.Option(
        "--progress/--no-progress",
        help="Show a progress bar on stderr; default: when stderr is a terminal.",
        show_default=False,
    ),
]


CreateOption = Annotated[
    bool,
    typer.Option(
        "--create",
        help="Make a new ledger in the store's SQLite file even if it exists empty (0 bytes); "
        "without it an empty file is refused, as not a ledger.",
    ),
]


def upgrade_logged(url: str) -> str:
    """Migrate the database at `url` to this version's head and log it (`db_upgraded`)."""
    from openbell.store.db import parse_url
    from openbell.store.migrate import upgrade

    revision = upgrade(url)
    shown = parse_url(url).render_as_string(hide_password=True)
    command_log().info("db_upgraded", revision=revision, store_url=shown)
    return revision


def print_tables(tables: Sequence[Table], stream: TextIO) -> None:
    """Print `tables` for a person: as wide as the terminal (or `$COLUMNS`), but never narrower
    than a table, so no cell is ever cut (a terminal narrower than a table wraps its lines)."""
    from rich.console import Console

    console = Console(file=stream, soft_wrap=False, highlight=False)
    unlimited = console.options.update_width(_UNLIMITED)
    needed = max(console.measure(table, options=unlimited).maximum for table in tables)
    if needed > console.width:
        console = Console(file=stream, width=needed, soft_wrap=False, highlight=False)
    for table in tables:
        console.print(table)


_UNLIMITED = 100_000
