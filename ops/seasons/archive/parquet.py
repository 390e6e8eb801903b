"""An archive's tables as Parquet files: one file per ledger table, every stored column.

Types: a decimal is its exact stored text (`string`: no Arrow decimal holds every ledger value
without a scale), an instant `timestamp[us, UTC]`, a date `date32`, an integer `int64`, a boolean
`bool`, text `string`. `read_table` gives the rows back as mappings of exact values (`Decimal`,
aware UTC `datetime`), what the record's digest and the figures are computed from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

from openbell.markets.errors import ReportError
from openbell.store.archive import ColumnKind, Value

#: Rows per Parquet row group written at a time.
_BATCH: Final = 5000


def _arrow_type(kind: ColumnKind) -> Any:
    import pyarrow as pa

    return {
        "decimal": pa.string(),
        "instant": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
        "integer": pa.int64(),
        "boolean": pa.bool_(),
        "text": pa.string(),
    }[kind]


def write_table(
    path: Path,
    columns: Sequence[str],
    kinds: Mapping[str, ColumnKind],
    rows: Iterable[Sequence[Value]],
) -> int:
    """Write `rows` (tuples in the order of `columns`) to the Parquet file `path`; how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(name, _arrow_type(kinds[name])) for name in columns])
    decimal = [kinds[name] == "decimal" for name in columns]
    written = 0
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[Sequence[Value]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= _BATCH:
                writer.write_table(_arrow(schema, batch, decimal))
                written += len(batch)
                batch = []
        if batch or not written:
            writer.write_table(_arrow(schema, batch, decimal))
            written += len(batch)
    return written


def _arrow(schema: Any, rows: Sequence[Sequence[Value]], decimal: Sequence[bool]) -> Any:
    import pyarrow as pa

    arrays = []
    for index, field in enumerate(schema):
        values = [row[index] for row in rows]
        if decimal[index]:
            values = [None if value is None else str(value) for value in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_table(path: Path, kinds: Mapping[str, ColumnKind]) -> list[dict[str, Any]]:
    """The rows of the Parquet file `path` as mappings of exact values; `ReportError` naming the
    file and column when a column is missing or a decimal is not one."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path.name}: not a readable Parquet file ({exc})") from exc
    missing = [name for name in kinds if name not in table.column_names]
    if missing:
        raise ReportError(f"{path.name}: no column {missing[0]!r}")
    columns: dict[str, list[Any]] = {}
    for name, kind in kinds.items():
        values = table.column(name).to_pylist()
        if kind == "decimal":
            values = [_decimal(path, name, value) for value in values]
        elif kind == "instant":
            values = [None if value is None else value.astimezone(UTC) for value in values]
        columns[name] = values
    names = list(kinds)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _decimal(path: Path, column: str, value: str | None) -> Decimal | None:
    if value is None:
        return None
    try:
        found = Decimal(value)
    except InvalidOperation:
        raise ReportError(f"{path.name}: {column} holds {value!r}, not a decimal") from None
    if not found.is_finite():
        raise ReportError(f"{path.name}: {column} holds {value!r}, not a finite decimal")
    return found
