"""Writing a season's archive: its ledger rows as Parquet, its manifest, its chains' heads and its
published figures, in one directory (layout: docs/guide/season-archive.md).

`export_archive` writes `tables/<table>.parquet` for every table of `store.archive.ARCHIVE_TABLES`
(the scope's accounts only), `manifest.json` (the season's manifest, or the ledger's minimal one:
`ledger_manifest`), `figures.json` (the live leaderboards' figures, when given) and, last,
`heads.json`: the record format, the manifest's sha256, each account's last link, and the sha256
of `tables/row_digests.parquet`, the digest of every archived row (with the linked cycle that
holds it), computed from the files just written, as `verify` reads them: it lets verify name the
row that changed where a link no longer matches, and checks the rows no link covers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine

from openbell.markets.errors import ReportError
from openbell.ops.seasons.archive.parquet import write_table
from openbell.ops.seasons.archive.reading import load_tables, row_digests
from openbell.store.archive import (
    ARCHIVE_TABLES,
    ColumnKind,
    archive_rows,
    chain_heads,
    column_kinds,
    ledger_accounts,
)
from openbell.store.digests import RECORD_FORMAT, canonical

#: The archive's files.
MANIFEST: Final = "manifest.json"
HEADS: Final = "heads.json"
FIGURES: Final = "figures.json"
TABLES: Final = "tables"
ROW_DIGESTS: Final = "row_digests"
ROW_DIGEST_KINDS: Final[dict[str, ColumnKind]] = {
    "table": "text",
    "row_id": "text",
    "cycle_id": "integer",
    "digest": "text",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveSummary:
    """What an export wrote: rows per table, the accounts' heads, the manifest's sha256."""

    directory: Path
    rows: dict[str, int]
    heads: dict[int, tuple[int, str]]
    manifest_sha256: str
    rows_listed: int


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


def manifest_text(manifest: Mapping[str, Any]) -> bytes:
    """A manifest built here (`ledger_manifest`) as the archive writes it: indented JSON, sorted
    keys."""
    return _json(manifest)


def export_archive(
    engine: Engine,
    directory: Path,
    *,
    name: str,
    manifest: bytes,
    account_ids: Collection[int] | None = None,
    published: Mapping[str, Any] | None = None,
    exported_at: datetime,
) -> ArchiveSummary:
    """Write the archive of `account_ids` (None: every account) into `directory` (created; it
    must be empty or new: `ReportError` otherwise), with `manifest` written as it is given (a
    season's stored manifest keeps its sha256)."""
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
    (directory / MANIFEST).write_bytes(manifest)
    if published is not None:
        (directory / FIGURES).write_bytes(_json(published))
    accounts = ledger_accounts(engine) if account_ids is None else sorted(account_ids)
    heads = chain_heads(engine, accounts)
    listed = list(row_digests(load_tables(directory)))
    path = tables / f"{ROW_DIGESTS}.parquet"
    write_table(path, list(ROW_DIGEST_KINDS), ROW_DIGEST_KINDS, listed)
    manifest_sha256 = hashlib.sha256(manifest).hexdigest()
    document = {
        "format": RECORD_FORMAT,
        "name": name,
        "exported_at": exported_at.isoformat(),
        "manifest_sha256": manifest_sha256,
        "row_digests_sha256": listed_digest(listed),
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
        rows_listed=len(listed),
    )


def listed_digest(rows: Sequence[tuple[str, str, int | None, str]]) -> str:
    """The sha256 of the rows' list: of the canonical JSON of its `[table, row id, cycle id,
    digest]`s, in order."""
    return hashlib.sha256(canonical([list(row) for row in rows])).hexdigest()


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode()
