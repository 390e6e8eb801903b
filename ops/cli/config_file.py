"""`openbell init` and `openbell config check`: writing a default config file and checking one.

`init` refuses to overwrite a file unless `--force` (exit 1); `config check` prints what the file
configures (exit 0), or every problem in it, one line each (exit 2, `app.main`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from openbell.markets.errors import ConfigError
from openbell.ops.cli.options import PROG, ConfigOption, global_options, help_without_command

config_app = typer.Typer(help="Check the config file.", rich_markup_mode=None)


@config_app.callback(invoke_without_command=True)
def _config(ctx: typer.Context) -> None:
    """Check the config file."""
    help_without_command(ctx)


def init(
    ctx: typer.Context,
    config: ConfigOption = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a default config: SQLite under ./var/, all three markets, baseline agents only.

    The file needs no API key. Refuses to overwrite an existing file unless --force is given.
    """
    from openbell.ops.config import default_config_text

    path = config or global_options(ctx).config
    if path.exists() and not force:
        typer.echo(f"{PROG}: error: {path} already exists; pass --force to overwrite it", err=True)
        raise typer.Exit(1)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(default_config_text(), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    typer.echo(f"wrote {path}")


@config_app.command("check")
def config_check(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Validate the config file: print what it configures (exit 0), or every problem in it, one
    line each naming the key (exit 2)."""
    from openbell.ops.config import load_config

    path = config or global_options(ctx).config
    loaded = load_config(path)
    markets = ", ".join(loaded.markets.configured())
    agents = len(loaded.agents)
    typer.echo(f"{path}: ok (markets {markets}; {agents} agent{'' if agents == 1 else 's'})")
