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
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, localcontext
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, overload

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from openbell.markets.domain import MARKETS, Bar
from openbell.markets.errors import BarFileError, ConfigError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

#: Version of the layout below; a reader refuses files of another version.
FORMAT_VERSION: Final = "1"
INTERVALS: Final = frozenset({"1h", "1d"})
LABELS: Final = frozenset({"start", "end"})
ADJUSTMENTS: Final = frozenset({"raw", "adjusted", "forward-adjusted", "unknown"})

_PREFIX: Final = "openbell."
_DECIMAL_COLUMNS: Final = ("open", "high", "low", "close", "volume")
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
    memory by the size of its files). The values are made from their unscaled integers when each
    fits an int64 (`_decimals`)."""

    __slots__ = ("_blocks", "_column", "_len", "_unit", "_unscaled")

    def __init__(self, column: Any) -> None:
        self._column = column.combine_chunks()
        self._len = len(self._column)
        self._blocks: dict[int, list[Decimal]] = {}
        # The values as integers times `_unit`, when they all fit an int64 (None: pyarrow's way).
        self._unscaled, self._unit = _unscaled(self._column)

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
            return self._values(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("decimal column index out of range")
        number, offset = divmod(index, COLUMN_BLOCK)
        block = self._blocks.get(number)
        if block is None:
            lo = number * COLUMN_BLOCK
            block = self._blocks[number] = self._values(slice(lo, lo + COLUMN_BLOCK))
            if len(self._blocks) > COLUMN_BLOCKS_KEPT:  # the block made first goes
                del self._blocks[next(iter(self._blocks))]
        return block[offset]

    def _values(self, rows: slice) -> list[Decimal]:
        if self._unscaled is None:
            return list(self._column[rows].to_pylist())
        return _scaled(self._unscaled[rows], self._unit)


def _unscaled(values: Any) -> tuple[npt.NDArray[np.int64] | None, Decimal]:
    """A decimal128 array's unscaled integers and the unit they count (`1E-scale`), when it has
    no null, its scale is not negative and every value fits an int64; else None (and 1)."""
    kind = values.type
    if not pa.types.is_decimal128(kind) or kind.scale < 0 or values.null_count:
        return None, Decimal(1)
    low, high = _words(values)
    if not np.array_equal(high, low >> 63):
        return None, Decimal(1)
    return low, Decimal(f"1E-{kind.scale}")


def _scaled(unscaled: npt.NDArray[np.int64], unit: Decimal) -> list[Decimal]:
    """`n * unit` for each `n` of `unscaled`: the `Decimal`s pyarrow's `to_pylist` makes of a
    decimal128 array's values, the same digits and exponent (the unit's, so trailing zeros are kept
    to the column's scale), made about thirty times as fast as pyarrow does (through text). The
    products are exact (an int64 has at most 19 digits; the context traps `Inexact` regardless)."""
    with localcontext(_EXACT):
        return list(map(unit.__rmul__, unscaled.tolist()))


#: A context in which a product of an int64 and a power of ten is never rounded.
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact])


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
    # A view of the timestamps' own int64 buffer: not `to_numpy()` (pyarrow's conversions to numpy
    # import pandas, most of a second) nor a cast (which imports `pyarrow.compute`). The column has
    # no nulls (`_index` refuses them), so every slot is a value.
    values = table.column(column).combine_chunks()
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
    """Check row invariants and return each symbol's row range with the start/end in µs.

    Every check is made on whole columns at once; the first bad row (symbol, for the order of the
    symbols) in the file is the one named, the same whichever check finds it."""
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
    if not symbols:
        return {}, starts, ends
    named = np.array(symbols, dtype=object)  # compared as Python compares them
    # The first row of each run of one symbol, and the runs' symbols.
    firsts = np.flatnonzero(np.concatenate(([True], named[1:] != named[:-1])))
    runs = named[firsts].tolist()
    lasts = [*firsts[1:].tolist(), len(symbols)]
    # Within a run: a start not after the one before, a bar starting before the one before ends.
    same = np.ones(len(symbols) - 1, dtype=bool)
    same[firsts[1:] - 1] = False
    unsorted = same & (starts[1:] <= starts[:-1])
    overlapping = same & (starts[1:] < ends[:-1])
    # A run's symbol after a later one: unsorted, or a symbol that came before (while the runs
    # before it increase, a symbol seen before is below the last one).
    out_of_order = np.concatenate(([False], named[firsts[1:]] < named[firsts[:-1]]))
    run_of_row = np.repeat(np.arange(len(runs)), np.diff(np.append(firsts, len(symbols))))[1:]
    bad = np.zeros(len(runs), dtype=bool)
    bad[run_of_row[unsorted | overlapping]] = True
    flagged = np.flatnonzero(bad | out_of_order)
    if flagged.size:
        run = int(flagged[0])
        lo, hi, symbol = int(firsts[run]), lasts[run], runs[run]
        if out_of_order[run]:
            raise BarFileError(f"{name}: rows not sorted by symbol at row {lo} ({symbol})")
        if unsorted[lo : hi - 1].any():
            raise BarFileError(f"{name}: {symbol} has unsorted or duplicate start_at")
        raise BarFileError(f"{name}: {symbol} has overlapping bars")
    ranges = {symbol: (int(lo), hi) for symbol, lo, hi in zip(runs, firsts, lasts, strict=True)}
    return ranges, starts, ends


def _check_prices(table: Any, name: str, symbols: Sequence[str]) -> None:
    """Refuse the first row whose prices no trade could print, naming its file and bar: a price
    that is not positive, a high below the low, a low..high range that does not hold the open and
    the close, or a negative volume (the checks `Bar` makes, done on the whole file at once)."""
    col = _price_columns(table, name)
    highest = np.maximum(col["open"], col["close"])
    lowest = np.minimum(col["open"], col["close"])
    checks: list[tuple[npt.NDArray[np.bool_], str]] = [
        (np.asarray(col[price] <= 0, dtype=bool), f"{price} {{{price}}} is not positive")
        for price in ("open", "high", "low", "close")
    ]
    checks += [
        (np.asarray(col["high"] < col["low"], dtype=bool), "high {high} is below low {low}"),
        (
            np.asarray((col["low"] > lowest) | (col["high"] < highest), dtype=bool),
            "low {low} .. high {high} does not hold open {open} and close {close}",
        ),
        (np.asarray(col["volume"] < 0, dtype=bool), "volume {volume} is negative"),
    ]
    bad = np.flatnonzero(functools.reduce(np.logical_or, (mask for mask, _ in checks)))
    if not len(bad):
        return
    row = int(bad[0])
    problem = next(text for mask, text in checks if mask[row])
    values = {column: table.column(column)[row].as_py() for column in _DECIMAL_COLUMNS}
    start_at = _EPOCH + timedelta(microseconds=int(_micros(table.slice(row, 1), "start_at")[0]))
    raise BarFileError(
        f"{name}: bar {symbols[row]} at {start_at.isoformat()} (row {row}): "
        + problem.format(**values)
    )


def _price_columns(table: Any, name: str) -> dict[str, npt.NDArray[Any]]:
    """The decimal columns at one scale, the finest of them, for exact comparisons.

    As integers (each value times ten to that scale) when every price fits an int64, read from
    the columns' own 128-bit buffers; the volume, only ever compared with zero, by its sign where
    it is already at that scale. Else the `Decimal`s of the columns cast to that scale, a cast
    that refuses a value the scale puts out of range (pyarrow's compute functions would do it all
    at once, but importing `pyarrow.compute` costs a command about 30 ms, more than the checks).
    """
    places = max(table.schema.field(column).type.scale for column in _DECIMAL_COLUMNS)
    exact: dict[str, npt.NDArray[Any]] = {}
    for column in _DECIMAL_COLUMNS:
        values = table.column(column).combine_chunks()
        low, high = _words(values)
        factor = 10 ** (places - int(values.type.scale))
        limit = _INT64_MAX // factor
        fits = factor <= _INT64_MAX and not np.any((low > limit) | (low < -limit))
        if fits and np.array_equal(high, low >> 63):
            exact[column] = low * np.int64(factor) if factor > 1 else low
        elif column == "volume" and factor == 1:  # the cast would leave it as it is
            exact[column] = np.where(high < 0, -1, np.where((high | low) != 0, 1, 0))
        else:
            break
    else:
        return exact
    common = pa.decimal128(_PRECISION, places)
    try:
        cast = {column: table.column(column).cast(common) for column in _DECIMAL_COLUMNS}
    except pa.ArrowInvalid as exc:
        raise BarFileError(f"{name}: a price or volume is out of range: {exc}") from exc
    return {column: np.array(values.to_pylist(), dtype=object) for column, values in cast.items()}


_INT64_MAX: Final = int(np.iinfo(np.int64).max)


def _words(values: Any) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The low and high 64-bit words of a decimal128 array's unscaled integers (little-endian
    two's complement: a value fits an int64 when its high word only repeats the low's sign)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    words = np.frombuffer(
        values.buffers()[1], dtype="<i8", count=2 * len(values), offset=values.offset * 16
    ).astype(np.int64)
    return words[0::2], words[1::2]


def bundled_names() -> tuple[str, ...]:
    """Names of the bar files bundled under `openbell/markets/data/bars/`, such as "us-1h"."""
    folder = resources.files("openbell.markets").joinpath("data", "bars")
    names = (entry.name for entry in folder.iterdir() if entry.name.endswith(".parquet"))
    return tuple(sorted(name.removesuffix(".parquet") for name in names))


def symbol_bounds(path: Path) -> tuple[str, str] | None:
    """The least and the greatest symbol of the bar file at `path`, read from its footer's
    statistics without reading its bars: the file holds no symbol outside them. None when a row
    group keeps no such statistics (or the file has no rows), or the file cannot be read (its
    reader then says why)."""
    try:
        with pq.ParquetFile(path) as file:
            meta = file.metadata
            column = file.schema_arrow.get_field_index("symbol")
            if column < 0 or meta.num_row_groups == 0:
                return None
            bounds: list[tuple[str, str]] = []
            for group in range(meta.num_row_groups):
                stats = meta.row_group(group).column(column).statistics
                if stats is None or not stats.has_min_max:
                    return None
                bounds.append((str(stats.min), str(stats.max)))
    except (OSError, pa.ArrowException):
        return None
    return min(low for low, _ in bounds), max(high for _, high in bounds)


def bundled_path(name: str) -> Traversable:
    """The bundled bar file `name`; an unknown name raises `ConfigError` listing the known."""
    known = bundled_names()
    if name not in known:
        raise ConfigError(f"no bundled bar file {name!r}; bundled: {', '.join(known)}")
    return resources.files("openbell.markets").joinpath("data", "bars", f"{name}.parquet")


@functools.cache
def bundled_symbol_bounds(name: str) -> tuple[str, str] | None:
    """`symbol_bounds` of the bundled bar file `name` (package data: read once per process)."""
    with resources.as_file(bundled_path(name)) as path:
        return symbol_bounds(path)


def may_hold(name: str, symbols: Collection[str]) -> bool:
    """Whether the bundled bar file `name` may hold one of `symbols`: False only when its footer
    shows every one of them outside its symbols' bounds (`symbol_bounds`)."""
    bounds = bundled_symbol_bounds(name)
    if bounds is None:
        return True
    low, high = bounds
    return any(low <= symbol <= high for symbol in symbols)


def bundled_names_for(market: str, symbols: Collection[str] | None = None) -> tuple[str, ...]:
    """The bundled bar files of `market` ("us-1h", "us-1d", ...); with `symbols`, those that may
    hold one of them (`may_hold`), or all of them where none may."""
    every = tuple(name for name in bundled_names() if name.startswith(f"{market}-"))
    if not symbols:
        return every
    return tuple(name for name in every if may_hold(name, symbols)) or every


def read_bundled(name: str) -> BarSet:
    """Read a bundled bar file by name; an unknown name raises `ConfigError` listing the known."""
    with resources.as_file(bundled_path(name)) as path:
        return read_bars(path)
