"""The canonical bar file: exact round trip, time queries, and every malformed file refused."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openbell.markets.barfile import BarFileMeta, read_bars, symbol_bounds, write_bars
from openbell.markets.domain import Bar, utc
from openbell.markets.errors import BarFileError

HOUR = timedelta(hours=1)


def make_meta(**overrides: str) -> BarFileMeta:
    fields = {
        "market": "crypto",
        "interval": "1h",
        "timezone": "UTC",
        "label": "start",
        "adjustment": "raw",
        "source": "test",
        "provenance": "tests/unit/test_barfile.py",
    }
    fields.update(overrides)
    return BarFileMeta(**fields)


def make_bar(symbol: str = "BTC/USDT", hour: int = 0, **overrides: object) -> Bar:
    start_at = utc(2025, 11, 10, hour)
    fields: dict[str, object] = {
        "symbol": symbol,
        "start_at": start_at,
        "end_at": start_at + HOUR,
        "open": Decimal("106236.39000"),
        "high": Decimal("106555.32"),
        "low": Decimal("106151.9"),
        "close": Decimal("106394.68000"),
        "volume": Decimal(2),
    }
    fields.update(overrides)
    return Bar(**fields)  # type: ignore[arg-type]


def test_round_trip_is_exact(tmp_path: Path) -> None:
    bars = [
        make_bar("ETH/USDT", 1, volume=Decimal("312.80146741")),
        make_bar("BTC/USDT", 1, open=Decimal("0.00000001"), low=Decimal("0.00000001")),
        make_bar("BTC/USDT", 0, volume=Decimal("171978677.00")),
    ]
    path = tmp_path / "bars.parquet"
    write_bars(path, bars, make_meta())
    read = read_bars(path)
    assert read.meta == make_meta()
    assert read.symbols == ("BTC/USDT", "ETH/USDT")
    assert list(read) == sorted(bars, key=lambda bar: (bar.symbol, bar.start_at))
    assert read.bars("ETH/USDT")[0].volume == Decimal("312.80146741")
    assert all(bar.start_at.utcoffset() == timedelta(0) for bar in read)


def test_symbol_bounds_come_from_the_footer_and_only_from_it(tmp_path: Path) -> None:
    bars = [make_bar("SOL/USDT"), make_bar("ADA/USDT"), make_bar("XRP/USDT", 1)]
    path = tmp_path / "bars.parquet"
    write_bars(path, bars, make_meta())
    assert symbol_bounds(path) == ("ADA/USDT", "XRP/USDT")
    # Without statistics in the footer the bounds are unknown (a reader then reads the file).
    table = pq.read_table(path)
    bare = tmp_path / "bare.parquet"
    pq.write_table(table, bare, write_statistics=False)
    assert symbol_bounds(bare) is None
    assert symbol_bounds(tmp_path / "missing.parquet") is None


def test_time_queries_use_half_open_bars(tmp_path: Path) -> None:
    path = tmp_path / "bars.parquet"
    write_bars(path, [make_bar(hour=h) for h in range(5)], make_meta())
    read = read_bars(path)
    observable = read.bars("BTC/USDT", end_by=utc(2025, 11, 10, 3))
    assert [bar.start_at.hour for bar in observable] == [0, 1, 2]
    window = read.bars(start_from=utc(2025, 11, 10, 1), end_by=utc(2025, 11, 10, 3, 30))
    assert [bar.start_at.hour for bar in window] == [1, 2]
    assert read.bars("XRP/USDT") == ()
    assert read.count("BTC/USDT") == 5
    assert len(read) == 5


def test_duplicate_bars_are_refused_on_write(tmp_path: Path) -> None:
    with pytest.raises(BarFileError, match="duplicate"):
        write_bars(tmp_path / "bars.parquet", [make_bar(), make_bar()], make_meta())


def test_overlapping_bars_are_refused_on_write(tmp_path: Path) -> None:
    long_bar = make_bar(hour=0, end_at=utc(2025, 11, 10, 2))
    with pytest.raises(BarFileError, match="overlapping"):
        write_bars(tmp_path / "bars.parquet", [long_bar, make_bar(hour=1)], make_meta())


def test_meta_refuses_unknown_values() -> None:
    with pytest.raises(ValueError, match="interval"):
        make_meta(interval="5m")
    with pytest.raises(ValueError, match="adjustment"):
        make_meta(adjustment="split-only")


# Malformed files are written with pyarrow directly, the way a foreign tool would.


def good_table(tmp_path: Path) -> pa.Table:
    path = tmp_path / "good.parquet"
    write_bars(path, [make_bar(hour=0), make_bar(hour=1)], make_meta())
    return pq.read_table(path)


def test_missing_metadata_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bare.parquet"
    pq.write_table(good_table(tmp_path).replace_schema_metadata(None), path)
    with pytest.raises(BarFileError, match=r"bare\.parquet.*openbell\.format_version"):
        read_bars(path)


def test_one_missing_key_is_named(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    metadata = dict(table.schema.metadata)
    del metadata[b"openbell.adjustment"]
    path = tmp_path / "partial.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    with pytest.raises(BarFileError, match=r"openbell\.adjustment"):
        read_bars(path)


def test_other_format_version_is_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    metadata = {**table.schema.metadata, b"openbell.format_version": b"2"}
    path = tmp_path / "v2.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    with pytest.raises(BarFileError, match="version"):
        read_bars(path)


def test_extra_column_is_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    path = tmp_path / "extra.parquet"
    pq.write_table(table.append_column("amount", pa.array(["1", "2"])), path)
    with pytest.raises(BarFileError, match=r"extra\.parquet.*columns"):
        read_bars(path)


def test_float_prices_are_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    index = table.schema.get_field_index("close")
    floats = table.set_column(index, "close", table.column("close").cast(pa.float64()))
    path = tmp_path / "float.parquet"
    pq.write_table(floats, path)
    with pytest.raises(BarFileError, match="close must be decimal128"):
        read_bars(path)


def test_unsorted_rows_are_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    path = tmp_path / "unsorted.parquet"
    pq.write_table(table.take([1, 0]), path)
    with pytest.raises(BarFileError, match=r"unsorted\.parquet.*unsorted or duplicate"):
        read_bars(path)


def test_duplicate_rows_are_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    path = tmp_path / "dup.parquet"
    pq.write_table(table.take([0, 0]), path)
    with pytest.raises(BarFileError, match="unsorted or duplicate"):
        read_bars(path)


def test_symbols_out_of_order_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "symbols.parquet"
    write_bars(path, [make_bar("BTC/USDT"), make_bar("ETH/USDT")], make_meta())
    pq.write_table(pq.read_table(path).take([1, 0]), path)
    with pytest.raises(BarFileError, match="not sorted by symbol"):
        read_bars(path)


def test_bar_ending_before_it_starts_is_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    starts = table.column("start_at")
    path = tmp_path / "empty.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("end_at"), "end_at", starts), path)
    with pytest.raises(BarFileError, match="ends at or before it starts"):
        read_bars(path)


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bars.parquet"
    path.write_text("symbol,start_at\n", encoding="utf-8")
    with pytest.raises(BarFileError, match=r"bars\.parquet.*cannot read"):
        read_bars(path)


def test_meta_with_a_bad_value_in_the_file_is_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    metadata = {**table.schema.metadata, b"openbell.interval": b"1w"}
    path = tmp_path / "weekly.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    with pytest.raises(BarFileError, match="interval"):
        read_bars(path)


#: Prices no trade could print, each set on the second bar (open 106236.39, high 106555.32,
#: low 106151.9, close 106394.68; the columns have different scales), and the words naming it.
IMPOSSIBLE = {
    "zero open": ("open", "0", "open 0.00000 is not positive"),
    "negative close": ("close", "-5", "close -5.00000 is not positive"),
    "zero low": ("low", "0", "low 0.0 is not positive"),
    "high below low": ("high", "106000", "high 106000.00 is below low 106151.9"),
    "low above the open": ("low", "106300", "low 106300.0 .. high 106555.32 does not hold open"),
    "high below the close": ("high", "106300", "high 106300.00 does not hold open 106236.39000"),
    "negative volume": ("volume", "-1", "volume -1 is negative"),
}


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_impossible_prices_are_refused_naming_the_file_and_bar(tmp_path: Path, case: str) -> None:
    assert_second_bar_refused(tmp_path, good_table(tmp_path), *IMPOSSIBLE[case])


def assert_second_bar_refused(
    folder: Path, table: pa.Table, column: str, value: str, words: str
) -> None:
    """Set the second bar's `column` to `value`: reading the file refuses that bar with `words`."""
    values = table.column(column).to_pylist()
    values[1] = Decimal(value)
    index = table.schema.get_field_index(column)
    path = folder / "impossible.parquet"
    typed = pa.array(values, type=table.schema.field(column).type)
    pq.write_table(table.set_column(index, column, typed), path)
    with pytest.raises(BarFileError) as refused:
        read_bars(path)
    assert str(refused.value).startswith(
        f"{path}: bar BTC/USDT at 2025-11-10T01:00:00+00:00 (row 1): "
    )
    assert words in str(refused.value)


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_prices_past_an_int64_are_checked_exactly_too(tmp_path: Path, case: str) -> None:
    """A first bar's high of 2^64 does not fit the integers the checks compare (whose low 64 bits
    are all zero): a file with it reads, and with a bad second bar the same row is refused with
    the same words."""
    table = good_table(tmp_path)
    highs = table.column("high").to_pylist()
    highs[0] = Decimal(2**64)
    index = table.schema.get_field_index("high")
    table = table.set_column(index, "high", pa.array(highs, type=table.schema.field("high").type))
    fine = tmp_path / "huge.parquet"
    pq.write_table(table, fine)
    assert read_bars(fine).bars()[0].high == Decimal(2**64)
    assert_second_bar_refused(tmp_path, table, *IMPOSSIBLE[case])


def test_a_price_the_finest_scale_puts_out_of_range_is_refused(tmp_path: Path) -> None:
    table = good_table(tmp_path)
    volumes = table.column("volume").to_pylist()
    volumes[0] = Decimal(10) ** 35
    index = table.schema.get_field_index("volume")
    path = tmp_path / "range.parquet"
    typed = pa.array(volumes, type=pa.decimal128(38, 0))
    pq.write_table(table.set_column(index, "volume", typed), path)
    with pytest.raises(BarFileError, match=r"range\.parquet: a price or volume is out of range"):
        read_bars(path)


def test_a_volume_past_an_int64_is_checked_by_its_sign(tmp_path: Path) -> None:
    """At the file's finest scale a volume is only compared with zero, however large it is."""
    table = good_table(tmp_path)
    index = table.schema.get_field_index("volume")
    huge = pa.array([Decimal(2**64), Decimal(2**64)], type=pa.decimal128(38, 5))
    fine = tmp_path / "huge.parquet"
    pq.write_table(table.set_column(index, "volume", huge), fine)
    assert [bar.volume for bar in read_bars(fine).bars()] == [Decimal(2**64)] * 2
    negative = pa.array([Decimal(2**64), Decimal(-(2**64))], type=pa.decimal128(38, 5))
    path = tmp_path / "negative.parquet"
    pq.write_table(table.set_column(index, "volume", negative), path)
    with pytest.raises(
        BarFileError, match=r"\(row 1\): volume -18446744073709551616\.00000 is neg"
    ):
        read_bars(path)
