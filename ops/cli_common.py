"""What the `openbell` command modules share: the `--config`, `--db` and `--market` options, and
loading a command's config with logging set up on stderr.

`cli.py` owns the app and its global options (`--config`, `--log-format`); the command modules
registered on it (`cli_replay`, `cli_reports`, `cli_trace`, `cli_positions`) read those through
`load_command_config` so that a command's own `--config` wins over the global one, which wins over
`./openbell.toml`. A command that reads a ledger takes `--db`: a SQLite file or a database URL
that replaces the config's `[store] url`; with `--db` and no config file named, `./openbell.toml`
is read if it exists and not needed otherwise. Tables for people are printed by `print_tables`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

from openbell.markets.errors import ConfigError
from openbell.ops import secrets
from openbell.ops.config import OpenbellConfig, StoreConfig, load_config
from openbell.ops.logs import configure_logging
from openbell.store.db import check_schema, make_engine

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


class Market(StrEnum):
    """Values of `--market`."""

    us = "us"
    cn = "cn"
    crypto = "crypto"


def load_command_config(
    ctx: typer.Context,
    config: Path | None,
    *,
    db: str | None = None,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
) -> OpenbellConfig:
    """The config of this command (`--config`, else the global one, else ./openbell.toml) with its
    store replaced by `db` (`--db`), and logging configured on `stream` (default stderr) at `level`
    (default the config's) in `fmt` (default the global --log-format, else the config's), and its
    secrets masked in all the process prints (`secrets.activate`).

    With `db` and no config file named (neither option nor `$OPENBELL_CONFIG`), a missing
    ./openbell.toml means the defaults; the result then configures no market and serves only to
    read the ledger.
    """
    root_ctx = ctx.find_root()
    root = root_ctx.params
    path = config or root.get("config") or Path("openbell.toml")
    source = root_ctx.get_parameter_source("config")  # typer's own click: compare by name
    named = config is not None or (source is not None and source.name != "DEFAULT")
    if db is None:
        loaded = load_config(path)
    else:
        url = db_url(db)
        loaded = with_store_url(
            load_config(path) if named or path.exists() else reading_config(url), url
        )
    chosen = fmt or str(root.get("log_format") or loaded.log.format)
    configure_logging(
        "console" if chosen == "console" else "json",
        level or loaded.log.level,
        stream if stream is not None else sys.stderr,
        third_party_level=loaded.log.third_party_level,
    )
    secrets.activate(loaded, os.environ)
    return loaded


def db_url(db: str) -> str:
    """The store URL of `--db`: a URL as given, a SQLite file (which must exist) as its URL."""
    if "://" in db:
        return db
    path = Path(db)
    if not path.is_file():
        raise ConfigError(f"--db {db}: no such file")
    return f"sqlite:///{path.as_posix()}"


def with_store_url(loaded: OpenbellConfig, url: str) -> OpenbellConfig:
    """`loaded` reading and writing the ledger at `url`; `ConfigError` for a URL of no known kind
    (not repeated: it may carry a password)."""
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
    return OpenbellConfig.model_construct(store=StoreConfig.model_construct(url=url))


def open_ledger(loaded: OpenbellConfig) -> Engine:
    """An engine on the config's ledger for a one-shot command (each query bounded by the
    config's statement timeout), refused unless its schema is at this version's head."""
    engine = make_engine(loaded.store.url, statement_timeout_s=loaded.store.statement_timeout_s)
    try:
        check_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def print_tables(tables: Sequence[Table], stream: TextIO) -> None:
    """Print `tables` for a person: as wide as the terminal (or `$COLUMNS`), but never narrower
    than a table, so no cell is ever cut (a terminal narrower than a table wraps its lines)."""
    console = Console(file=stream, soft_wrap=False, highlight=False)
    unlimited = console.options.update_width(_UNLIMITED)
    needed = max(console.measure(table, options=unlimited).maximum for table in tables)
    if needed > console.width:
        console = Console(file=stream, width=needed, soft_wrap=False, highlight=False)
    for table in tables:
        console.print(table)


_UNLIMITED = 100_000
