"""`openbell positions`: what each account holds now, read from the ledger.

This module owns the command and its table: one table per account (agent, market, currency) with a
row per open position (quantity to the market's step, average cost, last mark and when it was
taken, value, weight of the NAV), a `cash` row, a `total (last marks)` row (the NAV at the last
marks: each holding at its newest mark, a slot's or a session close's, stamped with the newest)
and a `NAV at last slot` row (the last slot snapshot's NAV, the leaderboard's final NAV,
stamped), figures rounded as `ops.reports.figures` rounds them; `--format json|csv` writes the exact
records of `ops.reports.exporting`. Reads the ledger only (`store.holdings`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from openbell.markets.errors import NoSuchAccount
from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    Market,
    TableFormat,
    load_command_config,
    open_ledger,
    print_tables,
)
from openbell.ops.reports import figures

if TYPE_CHECKING:
    from rich.table import Table

    from openbell.store.holdings import AccountHoldings


def _weight(account: AccountHoldings, amount: Decimal | None) -> str:
    found = account.weight(amount)
    return figures.percent(None if found is None else float(found))


def positions_table(account: AccountHoldings) -> Table:
    """`account`'s holdings, cash and total as a table for people."""
    from rich.table import Table

    from openbell.markets.rules import rules_for
    from openbell.ops.reports import exporting

    step = rules_for(account.market).quantity_step
    table = Table(
        title=f"{account.agent} in {account.market} ({account.currency})", title_justify="left"
    )
    table.add_column("symbol")
    for header in ("quantity", "avg cost", "last mark", "marked at UTC", "value", "weight %"):
        table.add_column(header, justify="right", no_wrap=True)
    for holding in account.holdings:
        table.add_row(
            holding.symbol,
            figures.quantity(holding.quantity, step),
            figures.price(exporting.avg_cost(holding)),
            figures.price(holding.last_mark),
            _at(holding.marked_at),
            figures.money(holding.value),
            _weight(account, holding.value),
        )
    table.add_row(
        "cash", "", "", "", "", figures.money(account.cash), _weight(account, account.cash)
    )
    nav = account.nav
    table.add_row(
        "total (last marks)",
        "",
        "",
        "",
        _at(account.marked_at),
        figures.money(nav),
        figures.percent(None if nav is None else 1.0),
    )
    if account.slot_nav is not None:
        # The leaderboard's final NAV: named beside the total, which it differs from when a
        # session closed after the last slot.
        slot_nav = figures.money(account.slot_nav)
        table.add_row("NAV at last slot", "", "", "", _at(account.slot_nav_at), slot_nav)
    return table


def _at(instant: datetime | None) -> str:
    return figures.MISSING if instant is None else f"{instant:%Y-%m-%d %H:%M}"


def print_positions(accounts: list[AccountHoldings], fmt: TableFormat, stream: TextIO) -> None:
    """Write `accounts` to `stream` as tables, one JSON document or one CSV table."""
    from openbell.ops.reports import exporting

    if fmt is TableFormat.json:
        document = {"accounts": [exporting.positions_record(account) for account in accounts]}
        stream.write(json.dumps(document, indent=2) + "\n")
    elif fmt is TableFormat.csv:
        exporting.positions_csv(accounts, stream)
    else:
        print_tables([positions_table(account) for account in accounts], stream)


def positions_command(
    ctx: typer.Context,
    market: Annotated[
        Market | None,
        typer.Option("--market", "-m", help="One market; default: every market in the ledger."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent's accounts.")
    ] = None,
    fmt: Annotated[
        TableFormat, typer.Option("--format", "-f", help="table, json or csv.")
    ] = TableFormat.table,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Each account's cash and open positions: quantity, average cost, last mark, value, weight."""
    from openbell.store.holdings import account_holdings

    engine = open_ledger(load_command_config(ctx, config, db=db))
    try:
        found = account_holdings(engine, market=market.value if market else None, agent=agent)
    finally:
        engine.dispose()
    if not found:
        where = f" in market {market.value!r}" if market else ""
        who = f" of agent {agent!r}" if agent else ""
        raise NoSuchAccount(f"no account{who}{where} in the ledger")
    print_positions(found, fmt, sys.stdout)
