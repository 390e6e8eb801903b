"""A generic OHLCV file (CSV or Parquet) as a bar file: conventions stated, bad input refused.

Issue 15, item 6: users bring the bars the bundled data lacks. Nothing about the file is guessed:
the label convention is always given, the zone whenever its times are naive; a bad row refuses
the whole file with its row number.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openbell.markets.barfile import read_bars
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.ohlcv import OhlcvLayout, import_ohlcv, parse_ohlcv
from openbell.markets.replay_source import ReplaySource

HEADER = "symbol,time,open,high,low,close,volume\n"


def csv_file(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "bars.csv"
    path.write_text(header + "".join(f"{row}\n" for row in rows), encoding="utf-8")
    return path


def daily(**overrides: str) -> OhlcvLayout:
    values = {"market": "us", "interval": "1d", "label": "start", "timezone": "America/New_York"}
    values.update(overrides)
    return OhlcvLayout(**values)  # type: ignore[arg-type]


def test_daily_rows_become_their_sessions_and_round_trip_exactly(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path,
        "KO,2025-07-02,70.10,70.55,69.90,70.3312,1000",
        "KO,2025-07-03,70.3,71,70.2,70.9,800",  # the early close before Independence Day
        "PG,2025-07-02,150,151,149.5,150.25,2500",
    )
    written, count = import_ohlcv(path, daily(), tmp_path / "out")
    assert count == 3
    barset = read_bars(written)
    assert barset.meta.market == "us"
    assert (barset.meta.label, barset.meta.timezone) == ("start", "America/New_York")
    (first, early) = barset.bars("KO")
    assert (first.start_at, first.end_at) == (
        datetime(2025, 7, 2, 13, 30, tzinfo=UTC),
        datetime(2025, 7, 2, 20, 0, tzinfo=UTC),
    )
    assert early.end_at == datetime(2025, 7, 3, 17, 0, tzinfo=UTC)
    assert first.close == Decimal("70.3312")
    source = ReplaySource.from_paths("us", [tmp_path / "out"])
    assert source.symbols("1d") == {"KO", "PG"}


@pytest.mark.parametrize(
    ("label", "stamp", "start_hour"),
    [("start", "2025-07-02T10:30:00", 14), ("end", "2025-07-02T10:30:00", 13)],
)
def test_hourly_bars_follow_the_stated_label(
    tmp_path: Path, label: str, stamp: str, start_hour: int
) -> None:
    path = csv_file(tmp_path, f"KO,{stamp},70,71,69,70.5,10")
    (bar,) = parse_ohlcv(path, daily(interval="1h", label=label))
    assert bar.start_at == datetime(2025, 7, 2, start_hour, 30, tzinfo=UTC)
    assert (bar.end_at - bar.start_at).total_seconds() == 3600


def test_an_end_labelled_daily_row_names_the_session_it_closes(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "KO,2025-07-02T16:00:00-04:00,70,71,69,70.5,10")
    (bar,) = parse_ohlcv(path, daily(label="end", timezone=None))
    assert bar.start_at == datetime(2025, 7, 2, 13, 30, tzinfo=UTC)


def test_times_with_an_offset_need_no_zone_and_crypto_days_are_utc(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "BTC/USDT,2025-07-02T00:00:00+00:00,1,2,0.5,1.5,3")
    (bar,) = parse_ohlcv(path, OhlcvLayout(market="crypto", interval="1d", label="start"))
    assert (bar.start_at, bar.end_at) == (
        datetime(2025, 7, 2, tzinfo=UTC),
        datetime(2025, 7, 3, tzinfo=UTC),
    )


def test_a_parquet_file_with_aware_times_and_float_prices(tmp_path: Path) -> None:
    path = tmp_path / "bars.parquet"
    table = pa.table(
        {
            "symbol": ["KO"],
            "time": pa.array([datetime(2025, 7, 2, 14, 30, tzinfo=UTC)], pa.timestamp("us", "UTC")),
            "open": [70.1],
            "high": [70.9],
            "low": [69.8],
            "close": [70.2],
            "volume": [100],
            "vendor_note": ["ignored"],
        }
    )
    pq.write_table(table, path)
    (bar,) = parse_ohlcv(path, OhlcvLayout(market="us", interval="1h", label="start"))
    assert bar.start_at == datetime(2025, 7, 2, 14, 30, tzinfo=UTC)
    assert bar.open == Decimal("70.1")


@pytest.mark.parametrize(
    ("rows", "header", "layout", "said"),
    [
        (["KO,2025-07-02,70,71,69,70.5"], "symbol,time,open,high,low,close\n", {}, "volume"),
        (["KO,2025-07-02,70,71,69,70.5,10"], HEADER, {"timezone": None}, "--tz"),
        (
            ["KO,2025-07-02,70,71,69,70.5,10", "KO,2025-07-02,70,71,69,70.6,11"],
            HEADER,
            {},
            "row 3: duplicate bar",
        ),
        (["KO,2025-07-02,70,71,0,70.5,10"], HEADER, {}, "row 2: low 0 is not a positive price"),
        (["KO,2025-07-02,70,71,69,-70.5,10"], HEADER, {}, "close -70.5 is not a positive"),
        (["KO,2025-07-02,70,71,69,70.5,-1"], HEADER, {}, "volume -1 is negative"),
        (["KO,2025-07-02,70,69,71,70.5,1"], HEADER, {}, "do not hold open and close"),
        (["KO,2025-07-02,70,71,69,n/a,1"], HEADER, {}, "close 'n/a' is not a number"),
        (["KO,2025-07-05,70,71,69,70.5,1"], HEADER, {}, "2025-07-05 is not a us session"),
        (["KO,yesterday,70,71,69,70.5,1"], HEADER, {}, "is not an ISO 8601 time"),
    ],
    ids=[
        "missing-column",
        "naive-without-tz",
        "duplicate",
        "zero-price",
        "negative-price",
        "negative-volume",
        "high-below-low",
        "not-a-number",
        "not-a-session",
        "bad-time",
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    tmp_path: Path, rows: list[str], header: str, layout: dict[str, str | None], said: str
) -> None:
    path = csv_file(tmp_path, *rows, header=header)
    with pytest.raises(SourceFormatError, match=said) as caught:
        import_ohlcv(path, daily(**layout), tmp_path / "out")  # type: ignore[arg-type]
    assert "bars.csv" in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"label": "middle"}, "--label"),
        ({"timezone": "Mars/Olympus"}, "--tz"),
        ({"interval": "5m"}, "--interval"),
    ],
)
def test_a_layout_must_be_stated_in_full(overrides: dict[str, str], said: str) -> None:
    with pytest.raises(SourceFormatError, match=said):
        daily(**overrides)
