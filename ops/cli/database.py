"""`openbell db upgrade` and `openbell ledger verify`: the ledger database's schema and invariants.

`db upgrade` applies the schema migrations to the config's `[store]` database; `ledger verify`
checks the database's integrity and the ledger invariants (since the daemon's last verification,
or every row with `--full`), read-only, and exits 1 on a breach, 2 on a damaged database.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    WritingDbOption,
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
def db_upgrade(ctx: typer.Context, config: ConfigOption = None, db: WritingDbOption = None) -> None:
    """Apply the schema migrations to the [store] database (or --db), up to this version's head."""
    loaded = load_config_logged(ctx, config, sys.stderr, db=db)
    revision = upgrade_logged(loaded.store.url)
    typer.echo(f"database at revision {revision}")


@ledger_app.command("verify")
def ledger_verify(
    ctx: typer.Context,
    config: ConfigOption = None,
    db: DbOption = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Check every row, not only those written since the daemon's last verification.",
        ),
    ] = False,
) -> None:
    """Check the database and every ledger invariant: print a summary (exit 0), or each breach
    (exit 1); a damaged database is one `database:` error line (exit 2).

    The ledger is opened read-only. SQLite's integrity_check (on Postgres: the indexes and
    constraints the ledger relies on) runs first; then the invariants are checked on the rows
    written since the daemon last verified the ledger (its stored checkpoints), or on every row
    with --full, or when no usable checkpoint is stored. A breach found since the checkpoints is
    confirmed by a full check.
    """
    from openbell.store.integrity import check_integrity
    from openbell.store.verify import verify
    from openbell.store.verify.checkpoints import load_checkpoints

    engine = open_ledger(load_command_config(ctx, config, db=db), quick_check=False)
    try:
        check_integrity(engine, thorough=True)
        since = None if full else load_checkpoints(engine)[0]
        report = verify(engine, since).report
    finally:
        engine.dispose()
    if report.ok:
        typer.echo(report.summary())
        return
    for line in report.lines():
        typer.echo(line)
    typer.echo(report.summary())
    raise typer.Exit(1)
