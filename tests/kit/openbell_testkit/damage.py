"""Damage done to a SQLite ledger file on purpose, page by page, for the fault tests.

`pages_of` finds the pages a table or index occupies (SQLite's `dbstat` table), `scramble_pages`
overwrites pages with seeded random bytes, and `break_schema_text` puts bytes that are not UTF-8
into one table's `CREATE` statement in `sqlite_master`, so that SQLite's own message about the
schema cannot be decoded. Each first folds the WAL into the file (`wal_checkpoint(TRUNCATE)`), so
the bytes changed are the ones read.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path


def settle(path: Path) -> int:
    """Fold the WAL into the file; the file's page size."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    connection.close()
    return size


def pages_of(path: Path, *names: str) -> list[int]:
    """The pages (1-based) of the tables and indexes named, in order."""
    with sqlite3.connect(path) as connection:
        marks = ",".join("?" * len(names))
        rows = connection.execute(
            f"SELECT pageno FROM dbstat WHERE name IN ({marks}) ORDER BY pageno",  # noqa: S608
            names,
        ).fetchall()
    connection.close()
    return [int(row[0]) for row in rows]


def indexes_of(path: Path, table: str) -> list[str]:
    """The names of `table`'s indexes (its automatic unique ones included)."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
        ).fetchall()
    connection.close()
    return [str(row[0]) for row in rows]


def scramble_pages(path: Path, pages: list[int], *, seed: int = 30) -> None:
    """Overwrite each of `pages` whole with random bytes (seeded)."""
    size = settle(path)
    chance = random.Random(seed)
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(chance.randbytes(size))


def break_schema_text(path: Path, table: str) -> None:
    """Replace the space in `CREATE TABLE <table> (` in the file's schema with a byte that is not
    UTF-8: the statement no longer parses, and SQLite's message, which quotes it, cannot be
    decoded (`UnicodeDecodeError` from Python's sqlite3)."""
    settle(path)
    data = bytearray(path.read_bytes())
    needle = f"CREATE TABLE {table} (".encode()
    at = data.find(needle)
    if at < 0:
        raise ValueError(f"no CREATE TABLE {table} in {path}")
    data[at + len("CREATE")] = 0xFF
    path.write_bytes(bytes(data))
