"""`openbell season export` and `openbell season verify`: a season's archive, and its check from
the archive alone (docs/guide/season-archive.md).

`export_command` and `verify_command` are plain command functions that the seasons' group
(`ops.cli.seasons.season_app`: `open`, `close`, `list`, `card`) adds. `export NAME` archives the
ledger's season NAME: the accounts with a cycle in its window (their whole chains, so every link
verifies), its stored manifest as it is (its sha256 is the season's), and the leaderboards
published over its window. A ledger with no season at all is archived whole under the NAME
given, with the ledger's minimal manifest (`ops.seasons.archive.export.ledger_manifest`).
`verify` reads only the archive's files, never a database: exit 0 when every link, head, row and
figure matches, 1 (with the first mismatch on stderr, named by table, row, account and slot) when
one does not, 2 for a directory that is not an archive.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from openbell.ops.cli.options import ConfigOption, DbOption, load_command_config, open_ledger

DirectoryArgument = Annotated[
    Path, typer.Argument(help="The archive's directory.", file_okay=False, show_default=False)
]


def export_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The season's name (the archive's name).")],
    directory: DirectoryArgument,
    figures: Annotated[
        bool,
        typer.Option(
            "--figures/--no-figures",
            help="Publish the live leaderboard's figures in the archive (figures.json).",
        ),
    ] = True,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Write the archive of season NAME into DIRECTORY (new or empty): its accounts' rows of every
    ledger table as Parquet, the season's manifest, the chains' heads and the leaderboards'
    figures over its window. A ledger without seasons is archived whole, with a minimal
    manifest."""
    from openbell.daemon.clock import SystemClock
    from openbell.ops.cli.app import installed_version
    from openbell.ops.evaluation.conventions import convention_named
    from openbell.ops.reports.market_reports import leaderboards
    from openbell.ops.seasons.archive.export import export_archive, ledger_manifest, manifest_text
    from openbell.ops.seasons.archive.figures import published_figures
    from openbell.ops.wiring.market_benchmarks import configured_bases
    from openbell.store.archive import ledger_accounts
    from openbell.store.db import shown_ledger
    from openbell.store.season_facts import cycle_outcomes
    from openbell.store.seasons import season_named, seasons

    loaded = load_command_config(ctx, config, db=db)
    engine = open_ledger(loaded)
    try:
        window: tuple[datetime | None, datetime | None] = (None, None)
        if seasons(engine):
            season = season_named(engine, name)
            window = (season.start_at, season.end_at)
            accounts = sorted({row.account_id for row in cycle_outcomes(engine, *window)})
            manifest = season.manifest.encode("ascii")
        else:
            accounts = ledger_accounts(engine)
            manifest = manifest_text(
                ledger_manifest(
                    name,
                    engine,
                    accounts,
                    ledger=shown_ledger(loaded.store.url),
                    version=installed_version(),
                )
            )
        published = None
        if figures and accounts:
            convention = convention_named(loaded.metrics.convention)
            boards = leaderboards(
                engine, None, *window, bases=configured_bases(loaded), convention=convention
            )
            published = published_figures(boards)
        summary = export_archive(
            engine,
            directory,
            name=name,
            manifest=manifest,
            account_ids=accounts,
            published=published,
            exported_at=SystemClock().now(),
        )
    finally:
        engine.dispose()
    rows = sum(summary.rows.values())
    typer.echo(
        f"season {name}: {rows} rows of {len(summary.rows)} tables, {len(summary.heads)} chain "
        f"heads, manifest sha256 {summary.manifest_sha256} -> {directory}"
    )


def verify_command(
    directory: DirectoryArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Check the archive in DIRECTORY from its files alone: recompute every digest of every
    account's chain and every leaderboard figure, and name the first record that does not
    match (exit 1)."""
    from openbell.ops.seasons.archive.verify import verify_archive

    verdict = verify_archive(directory)
    if as_json:
        document = {
            "name": verdict.name,
            "ok": verdict.ok,
            "links": verdict.links,
            "accounts": verdict.accounts,
            "rows": verdict.rows,
            "mismatch": None if verdict.mismatch is None else str(verdict.mismatch),
            "figures": verdict.figures,
        }
        typer.echo(json.dumps(document, indent=2, sort_keys=True, default=str))
    if verdict.mismatch is not None:
        print(f"openbell: season verify: {verdict.mismatch}", file=sys.stderr)
        raise typer.Exit(1)
    if not as_json:
        figures = sum(len(board["rows"]) for board in verdict.figures.values())
        typer.echo(
            f"season {verdict.name}: verified {verdict.links} links of {verdict.accounts} "
            f"accounts, {verdict.rows} rows, the figures of {figures} accounts"
        )
