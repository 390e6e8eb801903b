"""`openbell db upgrade` and `openbell ledger verify`: the ledger database's schema and invariants.

`db upgrade` applies the schema migrations to the config's `[store]` database; `ledger verify`
checks every ledger invariant and exits 1 on a breach.
"""

from __future__ import annotations

import sys

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    help_without_command,
    load_command_config,
    load_config_logged,
    open_ledger,
    upgrade_logged,
)

db_app = typer.Typer(help="Manage the ledger database schema.", rich_markup_mode=None)
ledger_app = typer.Typer(help="Check the paper-trading ledger.", rich_markup_mode=None)


@db_app.callback(invoke_without_command=True)
def _db(ctx: typer.Context) -> None:
    """Manage the ledger database schema."""
    help_without_command(ctx)


@ledger_app.callback(invoke_without_command=True)
def _ledger(ctx: typer.Context) -> None:
    """Check the paper-trading ledger."""
    help_without_command(ctx)


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Apply the schema migrations to the [store] database, up to this version's head."""
    loaded = load_config_logged(ctx, config, sys.stderr)
    revision = upgrade_logged(loaded.store.url)
    typer.echo(f"database at revision {revision}")


@ledger_app.command("verify")
def ledger_verify(ctx: typer.Context, config: ConfigOption = None, db: DbOption = None) -> None:
    """Check every ledger invariant: print a summary (exit 0), or each breach (exit 1)."""
    from openbell.store.verify import verify_ledger

    engine = open_ledger(load_command_config(ctx, config, db=db))
    try:
        report = verify_ledger(engine)
    finally:
        engine.dispose()
    if report.ok:
        typer.echo(report.summary())
        return
    for line in report.lines():
        typer.echo(line)
    typer.echo(report.summary())
    raise typer.Exit(1)
