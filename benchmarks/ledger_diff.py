"""Whether two SQLite ledgers hold the same rows: the guard of a change to the replay's writes.

Every table and every column is compared, but the cycles' `claimed_by` (it names the run), each
table's rows sorted, so two replays of the same plan by two versions of openbell compare equal
when they wrote the same ledger row for row, whatever order their batches inserted in. It prints
one line per table that differs (its row counts and the first rows that differ) and a verdict;
the exit status is 1 when they differ. Not a test: run it by hand,
`.venv/bin/python benchmarks/ledger_diff.py LEDGER_A LEDGER_B`.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import Any

#: Columns that name the run that wrote a row, not what it wrote: (table, column).
RUN_COLUMNS = frozenset({("cycle", "claimed_by")})

Rows = list[tuple[Any, ...]]


def dump(path: Path) -> dict[str, tuple[list[str], Rows]]:
    """Each table of the ledger at `path`: its columns compared and its rows, sorted."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        found = {}
        for table in tables:
            columns = [
                row[1]
                for row in connection.execute(f'PRAGMA table_info("{table}")')
                if (table, row[1]) not in RUN_COLUMNS
            ]
            listed = ", ".join(f'"{column}"' for column in columns)
            rows = connection.execute(f'SELECT {listed} FROM "{table}"').fetchall()  # noqa: S608  (names read from the schema)
            found[table] = (columns, sorted(rows, key=repr))
        return found
    finally:
        connection.close()


def differences(
    first: dict[str, tuple[list[str], Rows]], second: dict[str, tuple[list[str], Rows]]
) -> list[str]:
    """A line for each table whose columns or rows differ between the two dumps."""
    lines = []
    for table in sorted(first.keys() | second.keys()):
        if first.get(table) == second.get(table):
            continue
        columns_a, rows_a = first.get(table, ([], []))
        columns_b, rows_b = second.get(table, ([], []))
        lines.append(
            f"{table}: {len(rows_a)} rows against {len(rows_b)}"
            + ("" if columns_a == columns_b else f"; columns {columns_a} against {columns_b}")
        )
        for row_a, row_b in zip(rows_a, rows_b, strict=False):
            if row_a != row_b:
                lines.append(f"  first differing rows: {row_a!r}\n                  and: {row_b!r}")
                break
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args()
    first, second = dump(args.first), dump(args.second)
    lines = differences(first, second)
    rows = sum(len(rows) for _, rows in first.values())
    for line in lines:
        print(line)
    print(f"{len(first)} tables, {rows} rows: " + ("they differ" if lines else "identical"))
    sys.exit(1 if lines else 0)


if __name__ == "__main__":
    main()
