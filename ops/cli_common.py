"""What the `openbell` command modules share: the `--config` and `--market` options, and loading a
command's config with logging set up on stderr.

`cli.py` owns the app and its global options (`--config`, `--log-format`); the command modules
registered on it (`cli_replay`, `cli_reports`, `cli_trace`) read those through `load_command_config`
so that a command's own `--config` wins over the global one, which wins over `./openbell.toml`.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import typer
from sqlalchemy import Engine

from openbell.ops.config import OpenbellConfig, load_config
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


class Market(StrEnum):
    """Values of `--market`."""

    us = "us"
    cn = "cn"
    crypto = "crypto"


def load_command_config(
    ctx: typer.Context,
    config: Path | None,
    *,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
) -> OpenbellConfig:
    """The config of this command (`--config`, else the global one, else ./openbell.toml), with
    logging configured on `stream` (default stderr) at `level` (default the config's) in `fmt`
    (default the global --log-format, else the config's)."""
    root = ctx.find_root().params
    loaded = load_config(config or root.get("config") or Path("openbell.toml"))
    chosen = fmt or str(root.get("log_format") or loaded.log.format)
    configure_logging(
        "console" if chosen == "console" else "json",
        level or loaded.log.level,
        stream if stream is not None else sys.stderr,
        third_party_level=loaded.log.third_party_level,
    )
    return loaded


def open_ledger(loaded: OpenbellConfig) -> Engine:
    """An engine on the config's ledger, refused unless its schema is at this version's head."""
    engine = make_engine(loaded.store.url)
    try:
        check_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine
