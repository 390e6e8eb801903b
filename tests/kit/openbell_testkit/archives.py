"""A season's archive as a test reads and damages it: its Parquet tables, and one byte changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def archive_rows(archive: Path, table: str) -> pa.Table:
    """The archive's table `table`, as its Parquet file holds it."""
    return pq.read_table(archive / "tables" / f"{table}.parquet")


def flip_byte(archive: Path, table: str, column: str, index: int) -> dict[str, Any]:
    """Change one byte of the text of `column` in row `index` of `table` (a digit moves by one,
    any other character's lowest bit flips), as the Parquet file holds it; that row."""
    found = archive_rows(archive, table)
    values = found.column(column).to_pylist()
    text: str = values[index]
    at = (
        next(i for i, char in enumerate(text) if char.isdigit() and i > 0)
        if any(c.isdigit() for c in text[1:])
        else 0
    )
    char = text[at]
    changed = str((int(char) + 1) % 10) if char.isdigit() else chr(ord(char) ^ 1)
    values[index] = text[:at] + changed + text[at + 1 :]
    assert values[index] != text
    position = found.schema.get_field_index(column)
    found = found.set_column(position, found.schema.field(position), pa.array(values, pa.string()))
    pq.write_table(found, archive / "tables" / f"{table}.parquet")
    flipped: dict[str, Any] = found.slice(index, 1).to_pylist()[0]
    return flipped
