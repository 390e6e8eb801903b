"""`openbell init` and `openbell config check`: writing a default config file and checking one.

`init` refuses to overwrite a file unless `--force` (exit 1); `config check` prints what the file
configures (exit 0), or every problem in it, one line each (exit 2, `app.main`): the file's own,
then what `run` and `replay` would stop on (`ops.wiring.config_checks`: unset key variables,
plug-ins that do not import, missing programs, no jail), then, with `--online`, models that cannot
be reached.
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
    from openbell.ops.config.schema import default_config_text

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
def config_check(
    ctx: typer.Context,
    config: ConfigOption = None,
    online: Annotated[
        bool,
        typer.Option(
            "--online",
            help="Also ask each model endpoint (base_url, with its key) for its model list.",
        ),
    ] = False,
) -> None:
    """Validate the config file and resolve what `run` and `replay` would: print what it
    configures (exit 0), or every problem, one line each (exit 2).

    Beyond the file itself, each agent is built as a run builds it: an api_key_env whose
    variable is unset, a python plug-in that cannot be imported or made, a command whose program
    is missing, or a jailed agent where no jail runs is a problem. Nothing is sent anywhere unless
    --online, which asks each distinct model endpoint for /models once: one that cannot be
    connected to, does not answer, or refuses the key is a problem.
    """
    import os

    from openbell.markets.errors import InvalidConfig
    from openbell.ops.config.schema import load_config
    from openbell.ops.wiring.config_checks import endpoints, reach_models, resolution_problems

    path = config or global_options(ctx).config
    loaded = load_config(path)
    problems = [f"{path}: {line}" for line in resolution_problems(loaded, os.environ)]
    reached: list[str] = []
    if online:
        import httpx

        with httpx.Client() as http:
            reached, unreached = reach_models(endpoints(loaded), os.environ, http)
        problems += [f"{path}: {line}" for line in unreached]
    if problems:
        raise InvalidConfig(problems)
    markets = ", ".join(loaded.markets.configured())
    agents = len(loaded.agents)
    typer.echo(f"{path}: ok (markets {markets}; {agents} agent{'' if agents == 1 else 's'})")
    for line in reached:
        typer.echo(f"  {line}")
