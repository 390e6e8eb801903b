"""Reading an archive's tables back, and what of them no link covers.

`load_tables` reads every table of an archive (`tables/<table>.parquet`) as rows of exact values;
`all_records` builds the record of every cycle from them (`store.digests.cycle_records`), and
`row_digests` lists every archived row with its own digest and the linked cycle whose record
holds it, if any (the agents and accounts, corporate actions, borrow fees, close snapshots and
their marks, and the rows of a cycle without a link are in none). Export and verify use the same
functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from openbell.markets.errors import ReportError
from openbell.ops.seasons.archive.parquet import read_table
from openbell.store.archive import ARCHIVE_TABLES, column_kinds
from openbell.store.digests import CycleRecord, cycle_records, plain_row, row_digest, row_key

Tables = Mapping[str, Sequence[Mapping[str, Any]]]


def load_tables(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Every archived table's rows; `ReportError` naming a missing file."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in ARCHIVE_TABLES:
        path = directory / "tables" / f"{table}.parquet"
        if not path.is_file():
            raise ReportError(f"{directory} holds no {path.relative_to(directory)}")
        out[table] = read_table(path, column_kinds(table))
    return out


def all_records(tables: Tables) -> dict[int, CycleRecord]:
    """The record of every archived cycle, by id."""
    return cycle_records(
        cycles=tables["cycle"],
        orders=tables["order"],
        fills=tables["fill"],
        margin_calls=tables["margin_call"],
        traces=tables["trace"],
        snapshots=tables["nav_snapshot"],
        marks=tables["nav_mark"],
    )


def row_digests(
    tables: Tables, records: Mapping[int, CycleRecord] | None = None
) -> Iterator[tuple[str, str, int | None, str]]:
    """`(table, row id, linked cycle, digest)` of every archived row but the links themselves:
    the row's own digest (`store.digests.row_digest` of all its columns) and the cycle whose
    linked record holds it (None: no link covers it)."""
    found = all_records(tables) if records is None else records
    owner: dict[tuple[str, str], int] = {}
    for link in tables["cycle_digest"]:
        record = found.get(int(link["cycle_id"]))
        if record is not None:
            for listed in record.row_digests():
                owner[(listed.table, listed.row_id)] = record.cycle_id
    for table in ARCHIVE_TABLES:
        if table == "cycle_digest":
            continue
        for row in tables[table]:
            key = row_key(table, row)
            yield (table, key, owner.get((table, key)), row_digest(plain_row(row)))


def duplicate(tables: Tables) -> tuple[str, str] | None:
    """The first (table, row id) that a table holds twice (a copy made of two), else None."""
    for table, rows in tables.items():
        seen: set[str] = set()
        for row in rows:
            key = row_key(table, row)
            if key in seen:
                return table, key
            seen.add(key)
    return None
