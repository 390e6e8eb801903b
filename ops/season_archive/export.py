"""Writing a season's archive: its ledger rows as Parquet, its manifest, its chains' heads and its
published figures, in one directory (layout: docs/guide/season-archive.md).

`export_archive` writes `tables/<table>.parquet` for every table of `store.archive.ARCHIVE_TABLES`
(the scope's accounts only), `manifest.json` (the season's manifest, or the ledger's minimal one:
`ledger_manifest`), `figures.json` (the live leaderboards' figures, when given) and, last,
`heads.json`: the record format, the manifest's sha256, each account's last link, and the digest
of every archived row that no link covers (`tables/unchained.parquet`), computed from the files
just written, as `verify` reads them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine

from openbell.markets.errors import ReportError
from openbell.ops.season_archive.parquet import write_table
from openbell.ops.season_archive.reading import load_tables, unchained_rows
from openbell.store.archive import (
    ARCHIVE_TABLES,
    archive_rows,
    chain_heads,
    column_kinds,
    ledger_accounts,
)
from openbell.store.digests import RECORD_FORMAT

#: The archive's files.
MANIFEST: Final = "manifest.json"
HEADS: Final = "heads.json"
FIGURES: Final = "figures.json"
TABLES: Final = "tables"
UNCHAINED: Final = "unchained"
UNCHAINED_KINDS: Final = {"table": "text", "row_id": "text", "digest": "text"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveSummary:
    """What an export wrote: rows per table, the accounts' heads, the manifest's sha256."""

    directory: Path
    rows: dict[str, int]
    heads: dict[int, tuple[int, str]]
    manifest_sha256: str
    unchained: int


def ledger_manifest(
    name: str, engine: Engine, accounts: Collection[int], *, ledger: str, version: str
) -> dict[str, Any]:
    """The minimal manifest of an archive of a ledger without a season: its name, the ledger it
    came from (`ledger`, its URL shown without a password), the openbell version, and its
    accounts (agent, kind, market, currency, initial cash) from the archived rows."""
    agents = {row[0]: row for row in archive_rows(engine, "agent", accounts)}
    listed = []
    for row in archive_rows(engine, "account", accounts):
        values = dict(zip(ARCHIVE_TABLES["account"], row, strict=True))
        agent = dict(zip(ARCHIVE_TABLES["agent"], agents[values["agent_id"]], strict=True))
        listed.append(
            {
                "account_id": values["id"],
                "agent": agent["name"],
                "kind": agent["kind"],
                "market": values["market"],
                "currency": values["currency"],
                "initial_cash": str(values["initial_cash"]),
            }
        )
    return {
        "kind": "ledger",
        "name": name,
        "ledger": ledger,
        "openbell_version": version,
        "accounts": listed,
        "note": "no season manifest: the whole ledger's accounts, as they are",
    }


def export_archive(
    engine: Engine,
    directory: Path,
    *,
    name: str,
    manifest: Mapping[str, Any],
    account_ids: Collection[int] | None = None,
    published: Mapping[str, Any] | None = None,
    exported_at: datetime,
) -> ArchiveSummary:
    """Write the archive of `account_ids` (None: every account) into `directory` (created; it
    must be empty or new: `ReportError` otherwise)."""
    if directory.exists() and any(directory.iterdir()):
        raise ReportError(f"{directory} is not empty: an archive is written into a new directory")
    tables = directory / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    rows = {
        table: write_table(
            tables / f"{table}.parquet",
            columns,
            column_kinds(table),
            archive_rows(engine, table, account_ids),
        )
        for table, columns in ARCHIVE_TABLES.items()
    }
    manifest_bytes = _json(manifest)
    (directory / MANIFEST).write_bytes(manifest_bytes)
    if published is not None:
        (directory / FIGURES).write_bytes(_json(published))
    accounts = ledger_accounts(engine) if account_ids is None else sorted(account_ids)
    heads = chain_heads(engine, accounts)
    loaded = load_tables(directory)
    unchained = sorted(unchained_rows(loaded))
    write_table(
        tables / f"{UNCHAINED}.parquet",
        list(UNCHAINED_KINDS),
        UNCHAINED_KINDS,  # type: ignore[arg-type]
        unchained,
    )
    manifest_sha256 = hashlib.sha256(manifest_bytes).hexdigest()
    document = {
        "format": RECORD_FORMAT,
        "name": name,
        "exported_at": exported_at.isoformat(),
        "manifest_sha256": manifest_sha256,
        "unchained_sha256": _unchained_digest(unchained),
        "rows": rows,
        "heads": [
            {"account_id": account_id, "seq": seq, "digest": digest}
            for account_id, (seq, digest) in sorted(heads.items())
        ],
    }
    (directory / HEADS).write_bytes(_json(document))
    return ArchiveSummary(
        directory=directory,
        rows=rows,
        heads=heads,
        manifest_sha256=manifest_sha256,
        unchained=len(unchained),
    )


def _unchained_digest(rows: list[tuple[str, str, str]]) -> str:
    """The sha256 of the unchained rows' list (canonical JSON of `[table, row id, digest]`s)."""
    from openbell.store.digests import canonical

    return hashlib.sha256(canonical([list(row) for row in sorted(rows)])).hexdigest()


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode()
