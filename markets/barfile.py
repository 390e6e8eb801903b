"""The canonical bar file: one Parquet file of `Bar`s of one market and one interval.

This module owns the on-disk format that every bar dataset of openbell uses (the bundled replay
data, imports of vendor files, caches): the exact columns, the key-value metadata that says what the
bars mean (interval, the market time zone and label convention of the source, adjustment, source and
provenance), the checks done on read, and `BarSet`, the cheap columnar view a replay source queries
by symbol and time. Prices and volumes are stored as Parquet `decimal128(38, scale)`, one scale per
column (the most decimal places any value of that column has in the file), never as float64: the
values read back are exactly the Decimals that were written (numerically equal; trailing zeros are
padded to the column scale), and unlike decimal strings the column stays numeric, so Parquet keeps
min/max statistics, zstd compresses it well and pyarrow builds `Decimal`s without parsing text.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from openbell.markets.domain import MARKETS, Bar
from openbell.markets.errors import BarFileError, ConfigError

#: Version of the layout below; a reader refuses files of another version.
FORMAT_VERSION: Final = "1"
INTERVALS: Final = frozenset({"1h", "1d"})
LABELS: Final = frozenset({"start", "end"})
ADJUSTMENTS: Final = frozenset({"raw", "adjusted", "forward-adjusted", "unknown"})

_PREFIX: Final = "openbell."
_PRICE_COLUMNS: Final = ("open", "high", "low", "close")
_DECIMAL_COLUMNS: Final = (*_PRICE_COLUMNS, "volume")
_COLUMNS: Final = ("symbol", "start_at", "end_at", *_DECIMAL_COLUMNS)
_META_FIELDS: Final = (
    "market",
    "interval",
    "timezone",
    "label",
    "adjustment",
    "source",
    "provenance",
)
_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_PRECISION: Final = 38
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: A `decimal128` value as Arrow stores it: its unscaled value, a 128-bit two's complement integer
#: in little-endian order (low 64 bits unsigned, then the high 64 bits, which carry the sign).
_DECIMAL128: Final = np.dtype([("low", "<u8"), ("high", "<i8")])


@dataclass(frozen=True, slots=True, kw_only=True)
class BarFileMeta:
    """What the bars of one file mean. Stored as `openbell.<field>` Parquet key-value metadata.

    `timezone` is the IANA zone the vendor stamped its bars in and `label` whether a vendor stamp
    marked the `start` or the `end` of its bar (a daily date names the session that starts then:
    `start`); both are provenance only, the bars themselves are always UTC `[start_at, end_at)`.
    `provenance` names the source files and commits.
    """

    market: str
    interval: str
    timezone: str
    label: str
    adjustment: str
    source: str
    provenance: str

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("market", self.market, MARKETS),
            ("interval", self.interval, INTERVALS),
            ("label", self.label, LABELS),
            ("adjustment", self.adjustment, ADJUSTMENTS),
        ):
            if value not in allowed:
                raise ValueError(f"bar file {name} must be one of {sorted(allowed)}, got {value!r}")
        for name in ("timezone", "source", "provenance"):
            if not getattr(self, name):
                raise ValueError(f"bar file {name} must not be empty")

    def to_metadata(self) -> dict[bytes, bytes]:
        """The Parquet key-value metadata for this meta, format version included."""
        pairs = {"format_version": FORMAT_VERSION}
        pairs.update({name: getattr(self, name) for name in _META_FIELDS})
        return {(_PREFIX + k).encode(): v.encode() for k, v in pairs.items()}


@dataclass(frozen=True, slots=True)
class BarSet:
    """The bars of one file, kept columnar; `Bar`s are built only for the rows asked for.

    Rows are sorted by `(symbol, start_at)` and a symbol's bars never overlap, so a time query is a
    binary search. `bars(symbol, end_by=t)` is what is observable at `t`: bars with `end_at <= t`.
    """

    path: str
    meta: BarFileMeta
    _table: Any = field(repr=False)
    _ranges: Mapping[str, tuple[int, int]] = field(repr=False)
    _starts_us: npt.NDArray[np.int64] = field(repr=False)
    _ends_us: npt.NDArray[np.int64] = field(repr=False)

    def __len__(self) -> int:
        return len(self._starts_us)

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbols in the file, sorted."""
        return tuple(self._ranges)

    def count(self, symbol: str) -> int:
        """How many bars `symbol` has (zero when absent)."""
        lo, hi = self._ranges.get(symbol, (0, 0))
        return hi - lo

    def bars(
        self,
        symbol: str | None = None,
        *,
        start_from: datetime | None = None,
        end_by: datetime | None = None,
    ) -> tuple[Bar, ...]:
        """Bars of `symbol` (all when None) with `start_at >= start_from` and `end_at <= end_by`."""
        names = self.symbols if symbol is None else (symbol,)
        out: list[Bar] = []
        for name in names:
            lo, hi = self._ranges.get(name, (0, 0))
            if start_from is not None:
                lo += int(np.searchsorted(self._starts_us[lo:hi], _to_us(start_from), "left"))
            if end_by is not None:
                hi = lo + int(np.searchsorted(self._ends_us[lo:hi], _to_us(end_by), "right"))
            if hi > lo:
                out.extend(_materialise(self._table.slice(lo, hi - lo)))
        return tuple(out)

    def rows(self, symbol: str, lo: int, hi: int) -> tuple[Bar, ...]:
        """`symbol`'s bars `lo .. hi - 1`, oldest first (positions among its own bars)."""
        first, last = self._ranges.get(symbol, (0, 0))
        lo, hi = first + max(lo, 0), min(first + hi, last)
        return tuple(_materialise(self._table.slice(lo, hi - lo))) if hi > lo else ()

    def __iter__(self) -> Iterator[Bar]:
        return iter(_materialise(self._table))

    def prices(self, symbol: str) -> BarPrices:
        """The starts, ends, opens and closes of `symbol`'s bars (empty when absent), without
        building a `Bar`: what a quote needs."""
        lo, hi = self._ranges.get(symbol, (0, 0))
        rows = self._table.slice(lo, hi - lo)
        return BarPrices(
            starts_us=self._starts_us[lo:hi].tolist(),
            ends_us=self._ends_us[lo:hi].tolist(),
            opens=DecimalColumn(rows.column("open")),
            closes=DecimalColumn(rows.column("close")),
        )


#: How many values of a `DecimalColumn` are made `Decimal`s at once, when one of them is read.
COLUMN_BLOCK: Final = 64
#: How many blocks of values a `DecimalColumn` keeps (a replay reads its way along a column: the
#: blocks it left behind are made again only if read again).
COLUMN_BLOCKS_KEPT: Final = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class BarPrices:
    """One symbol's bars of a `BarSet` as columns, oldest first: start and end in µs since the
    epoch, open and close (the Decimals its `Bar`s would carry)."""

    starts_us: list[int]
    ends_us: list[int]
    opens: Sequence[Decimal]
    closes: Sequence[Decimal]


class DecimalColumn(Sequence[Decimal]):
    """A decimal column of a bar file, its values made `Decimal`s when first read, a block of
    `COLUMN_BLOCK` at a time, of which the `COLUMN_BLOCKS_KEPT` made last are kept: a quote reads
    one price of a symbol's thousands, and making them all costs more than the whole quote, while
    a replay reads its way along them (keeping every block it passed grew a year-long replay's
    memory by the size of its files)."""

    __slots__ = ("_blocks", "_column", "_len")

    def __init__(self, column: Any) -> None:
        self._column = column.combine_chunks()
        self._len = len(self._column)
        self._blocks: dict[int, list[Decimal]] = {}

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Decimal: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Decimal]: ...
    def __getitem__(self, index: int | slice) -> Decimal | Sequence[Decimal]:
        try:  # the common read: a value of a block kept (a negative index or a slice goes on)
            return self._blocks[index // COLUMN_BLOCK][index % COLUMN_BLOCK]  # type: ignore[operator]
        except (KeyError, TypeError, IndexError):
            pass
        if isinstance(index, slice):
            return list(self._column[index].to_pylist())
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("decimal column index out of range")
        number, offset = divmod(index, COLUMN_BLOCK)
        block = self._blocks.get(number)
        if block is None:
            lo = number * COLUMN_BLOCK
            block = self._blocks[number] = self._column[lo : lo + COLUMN_BLOCK].to_pylist()
            if len(self._blocks) > COLUMN_BLOCKS_KEPT:  # the block made first goes
                del self._blocks[next(iter(self._blocks))]
        return block[offset]


def _to_us(value: datetime) -> int:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()}: pass an aware one")
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _materialise(table: Any) -> list[Bar]:
    cols = {name: table.column(name).to_pylist() for name in ("symbol", *_DECIMAL_COLUMNS)}
    for name in ("start_at", "end_at"):  # via µs so the datetimes carry `datetime.UTC`
        cols[name] = [_EPOCH + timedelta(microseconds=us) for us in _micros(table, name).tolist()]
    return [
        Bar(
            symbol=symbol,
            start_at=start_at,
            end_at=end_at,
            open=open_,
            high=high,
            low=low,
            close=close,
            volume=volume,
        )
        for symbol, start_at, end_at, open_, high, low, close, volume in zip(
            *(cols[name] for name in _COLUMNS), strict=True
        )
    ]


def _micros(table: Any, column: str) -> npt.NDArray[np.int64]:
    # A view of the int64 buffer, not `to_numpy()`: pyarrow's conversions to numpy import pandas
    # (most of a second). The column has no nulls (`_index` refuses them), so every slot is a value.
    # `view`, not `cast`: the column is timestamp[us] (`_check_columns`), whose values are the µs,
    # and a cast imports `pyarrow.compute` (see `_check_prices`).
    values = table.column(column).combine_chunks().view(pa.int64())
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(
        values.buffers()[1], dtype=np.int64, count=len(values), offset=values.offset * 8
    )


def _scale(values: Sequence[Decimal]) -> int:
    places = 0
    for value in values:
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and -exponent > places:
            places = -exponent
    return places


def write_bars(path: Path, bars: Sequence[Bar], meta: BarFileMeta) -> None:
    """Write `bars` (any order) to `path` as a zstd Parquet bar file, refusing duplicate bars."""
    ordered = sorted(bars, key=lambda bar: (bar.symbol, bar.start_at))
    arrays: list[Any] = [
        pa.array([bar.symbol for bar in ordered], type=pa.string()),
        pa.array([bar.start_at for bar in ordered], type=_TIMESTAMP),
        pa.array([bar.end_at for bar in ordered], type=_TIMESTAMP),
    ]
    for name in _DECIMAL_COLUMNS:
        values = [getattr(bar, name) for bar in ordered]
        arrays.append(pa.array(values, type=pa.decimal128(_PRECISION, _scale(values))))
    table = pa.Table.from_arrays(arrays, names=list(_COLUMNS))
    table = table.replace_schema_metadata(meta.to_metadata())
    _index(table, str(path))  # the same checks a reader makes, before anything is written
    pq.write_table(table, path, compression="zstd", compression_level=9)


def read_bars(path: Path) -> BarSet:
    """Read and check a bar file. Any departure from the format raises `BarFileError`."""
    name = str(path)
    try:
        # `ParquetFile`, not `pq.read_table`: the latter goes through `pyarrow.dataset`, which
        # imports pandas (most of a second) for a table that never becomes a DataFrame. One
        # thread: a bar file is small, and a thread pool costs more than it saves.
        with pq.ParquetFile(path) as file:
            table = file.read(use_threads=False)
    except (OSError, pa.ArrowException) as exc:
        raise BarFileError(f"{name}: cannot read bar file: {exc}") from exc
    meta = _read_meta(table.schema.metadata or {}, name)
    _check_columns(table.schema, name)
    ranges, starts_us, ends_us = _index(table, name)
    return BarSet(
        path=name,
        meta=meta,
        _table=table,
        _ranges=ranges,
        _starts_us=starts_us,
        _ends_us=ends_us,
    )


def _read_meta(raw: Mapping[bytes, bytes], name: str) -> BarFileMeta:
    found = {
        key.decode()[len(_PREFIX) :]: value.decode()
        for key, value in raw.items()
        if key.startswith(_PREFIX.encode())
    }
    missing = [key for key in ("format_version", *_META_FIELDS) if key not in found]
    if missing:
        keys = ", ".join(_PREFIX + key for key in missing)
        raise BarFileError(f"{name}: not an openbell bar file, metadata missing: {keys}")
    if found["format_version"] != FORMAT_VERSION:
        raise BarFileError(
            f"{name}: bar file format version {found['format_version']!r}, "
            f"this openbell reads {FORMAT_VERSION!r}"
        )
    try:
        return BarFileMeta(**{key: found[key] for key in _META_FIELDS})
    except ValueError as exc:
        raise BarFileError(f"{name}: bad metadata: {exc}") from exc


def _check_columns(schema: Any, name: str) -> None:
    names = list(schema.names)
    if names != list(_COLUMNS):
        raise BarFileError(f"{name}: columns {names}, expected exactly {list(_COLUMNS)}")
    problems = []
    if not pa.types.is_string(schema.field("symbol").type):
        problems.append("symbol must be string")
    for column in ("start_at", "end_at"):
        if schema.field(column).type != _TIMESTAMP:
            problems.append(f"{column} must be timestamp[us, tz=UTC]")
    for column in _DECIMAL_COLUMNS:
        if not pa.types.is_decimal128(schema.field(column).type):
            problems.append(f"{column} must be decimal128")
    if problems:
        raise BarFileError(f"{name}: wrong column types: {'; '.join(problems)}")


def _index(
    table: Any, name: str
) -> tuple[dict[str, tuple[int, int]], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Check row invariants and return each symbol's row range with the start/end in µs."""
    for column in _COLUMNS:
        if table.column(column).null_count:
            raise BarFileError(f"{name}: column {column} has nulls")
    symbols: list[str] = table.column("symbol").to_pylist()
    starts = _micros(table, "start_at")
    ends = _micros(table, "end_at")
    empty = np.flatnonzero(ends <= starts)
    if empty.size:
        row = int(empty[0])
        raise BarFileError(f"{name}: row {row} ({symbols[row]}) ends at or before it starts")
    _check_prices(table, name, symbols)
    ranges: dict[str, tuple[int, int]] = {}
    lo = 0
    for row in range(1, len(symbols) + 1):
        if row < len(symbols) and symbols[row] == symbols[lo]:
            continue
        symbol = symbols[lo]
        if symbol in ranges or (ranges and symbol < next(reversed(ranges))):
            raise BarFileError(f"{name}: rows not sorted by symbol at row {lo} ({symbol})")
        if np.any(starts[lo + 1 : row] <= starts[lo : row - 1]):
            raise BarFileError(f"{name}: {symbol} has unsorted or duplicate start_at")
        if np.any(starts[lo + 1 : row] < ends[lo : row - 1]):
            raise BarFileError(f"{name}: {symbol} has overlapping bars")
        ranges[symbol] = (lo, row)
        lo = row
    return ranges, starts, ends


def _check_prices(table: Any, name: str, symbols: Sequence[str]) -> None:
    """Refuse the first row whose prices no trade could print, naming its file and bar: a price
    that is not positive, a high below the low, a low..high range that does not hold the open and
    the close, or a negative volume (the checks `Bar` makes, done on the whole file at once).

    The checks compare the columns' unscaled values as 128-bit integers, in numpy over the
    columns' buffers (`_unscaled`): not with `pyarrow.compute`, whose import alone is about 25 ms
    of every replay's start-up, nor through pyarrow's conversions to numpy, which import pandas.
    The prices are compared with each other at one scale: price columns of different scales are
    first cast to the largest (which imports it). The volume is only compared with zero, at its
    own scale (a bundled file's volumes have fewer places than its prices)."""
    places = max(table.schema.field(column).type.scale for column in _PRICE_COLUMNS)
    common = pa.decimal128(_PRECISION, places)
    try:
        col = {
            column: _unscaled(
                table.column(column)
                if table.schema.field(column).type == common
                else table.column(column).cast(common)
            )
            for column in _PRICE_COLUMNS
        }
    except pa.ArrowInvalid as exc:
        raise BarFileError(f"{name}: a price is out of range: {exc}") from exc
    col["volume"] = _unscaled(table.column("volume"))
    checks: list[tuple[npt.NDArray[np.bool_], str]] = [
        (~_positive(col[price]), f"{price} {{{price}}} is not positive") for price in _PRICE_COLUMNS
    ]
    checks += [
        (_less(col["high"], col["low"]), "high {high} is below low {low}"),
        (
            _less(col["open"], col["low"])
            | _less(col["close"], col["low"])
            | _less(col["high"], col["open"])
            | _less(col["high"], col["close"]),
            "low {low} .. high {high} does not hold open {open} and close {close}",
        ),
        (col["volume"]["high"] < 0, "volume {volume} is negative"),
    ]
    bad = np.flatnonzero(functools.reduce(np.logical_or, (mask for mask, _ in checks)))
    if not bad.size:
        return
    row = int(bad[0])
    problem = next(text for mask, text in checks if mask[row])
    values = {column: table.column(column)[row].as_py() for column in _DECIMAL_COLUMNS}
    start_at = _EPOCH + timedelta(microseconds=int(_micros(table.slice(row, 1), "start_at")[0]))
    raise BarFileError(
        f"{name}: bar {symbols[row]} at {start_at.isoformat()} (row {row}): "
        + problem.format(**values)
    )


def _unscaled(column: Any) -> npt.NDArray[np.void]:
    """The unscaled values of a `decimal128` column without nulls, viewing its buffer."""
    values = column.combine_chunks()
    if not len(values):
        return np.zeros(0, dtype=_DECIMAL128)
    return np.frombuffer(
        values.buffers()[1], dtype=_DECIMAL128, count=len(values), offset=values.offset * 16
    )


def _less(left: npt.NDArray[np.void], right: npt.NDArray[np.void]) -> npt.NDArray[np.bool_]:
    """Where `left` < `right`, as signed 128-bit integers (high words, then the low ones)."""
    less: npt.NDArray[np.bool_] = (left["high"] < right["high"]) | (
        (left["high"] == right["high"]) & (left["low"] < right["low"])
    )
    return less


def _positive(values: npt.NDArray[np.void]) -> npt.NDArray[np.bool_]:
    """Where `values` > 0, as signed 128-bit integers."""
    positive: npt.NDArray[np.bool_] = (values["high"] > 0) | (
        (values["high"] == 0) & (values["low"] > 0)
    )
    return positive


def bundled_names() -> tuple[str, ...]:
    """Names of the bar files bundled under `openbell/markets/data/bars/`, such as "us-1h"."""
    folder = resources.files("openbell.markets").joinpath("data", "bars")
    names = (entry.name for entry in folder.iterdir() if entry.name.endswith(".parquet"))
    return tuple(sorted(name.removesuffix(".parquet") for name in names))


def read_bundled(name: str) -> BarSet:
    """Read a bundled bar file by name; an unknown name raises `ConfigError` listing the known."""
    known = bundled_names()
    if name not in known:
        raise ConfigError(f"no bundled bar file {name!r}; bundled: {', '.join(known)}")
    resource = resources.files("openbell.markets").joinpath("data", "bars", f"{name}.parquet")
    with resources.as_file(resource) as path:
        return read_bars(path)
