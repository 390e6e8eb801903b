"""`openbell data import-news` and `import-fundamentals` over Parquet files (issue 15, item 5).

A Parquet file's `published_at` may be a timestamp column with a zone (any zone: it is converted to
UTC), a naive timestamp column (its zone comes from `--tz`, and without `--tz` the import is refused
with the row named) or ISO 8601 text. A fundamentals file's figures are its other columns: decimal,
integer, float or decimal-text columns become exact decimals, a null figure is skipped. A missing
required column is refused with the first row's number. What the commands record is read back from
the store: each item known from its publication time, in UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from subprocess import CompletedProcess
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq

from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine
from openbell_testkit.cli import openbell

NEW_YORK = ZoneInfo("America/New_York")


def store(tmp_path: Path) -> str:
    """The URL of the SQLite store the imports record into (`--db`, no config file)."""
    return f"sqlite:///{(tmp_path / 'ledger.db').as_posix()}"


def imports(tmp_path: Path, command: str, path: Path, *options: str) -> CompletedProcess[str]:
    """`openbell data COMMAND PATH --db STORE OPTIONS`."""
    return openbell(tmp_path, "data", command, str(path), "--db", store(tmp_path), *options)


def naive(*times: str, unit: str = "us") -> pa.Array:
    """A naive timestamp column (no zone in the file) of ISO 8601 `times`."""
    return pa.array(times).cast(pa.timestamp(unit))


def write(path: Path, columns: dict[str, pa.Array | list[object]]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_aware_news_times_in_any_zone_are_recorded_in_utc(tmp_path: Path) -> None:
    url = store(tmp_path)
    news = write(
        tmp_path / "news.parquet",
        {
            "symbol": ["AAPL", None, ""],
            "published_at": pa.array(
                [
                    datetime(2025, 7, 1, 16, 5, tzinfo=NEW_YORK),  # EDT: 20:05Z
                    datetime(2025, 12, 1, 9, 30, tzinfo=NEW_YORK),  # EST: 14:30Z
                    datetime(2025, 7, 2, 1, 0, tzinfo=NEW_YORK),
                ],
                pa.timestamp("us", tz="America/New_York"),
            ),
            "title": ["Apple beats", "Markets open", "Futures flat"],
            "url": ["https://example.com/a", None, None],
        },
    )
    done = imports(tmp_path, "import-news", news)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["recorded 3 news items from news.parquet"]
    engine = make_engine(url, read_only=True)
    try:
        recorded = SqlBarCache(engine).recorded_news(["AAPL"])
    finally:
        engine.dispose()
    seen = [(k.item.symbol, k.item.published_at, k.known_at, k.item.title) for k in recorded]
    assert seen == [
        (
            "AAPL",
            datetime(2025, 7, 1, 20, 5, tzinfo=UTC),
            datetime(2025, 7, 1, 20, 5, tzinfo=UTC),
            "Apple beats",
        ),
        (
            None,
            datetime(2025, 7, 2, 5, 0, tzinfo=UTC),
            datetime(2025, 7, 2, 5, 0, tzinfo=UTC),
            "Futures flat",
        ),
        (
            None,
            datetime(2025, 12, 1, 14, 30, tzinfo=UTC),
            datetime(2025, 12, 1, 14, 30, tzinfo=UTC),
            "Markets open",
        ),
    ]
    assert recorded[0].item.url == "https://example.com/a"


def naive_news(tmp_path: Path) -> Path:
    return write(
        tmp_path / "news.parquet",
        {
            "symbol": ["AAPL"],
            "published_at": naive("2025-07-01T16:05:00"),
            "title": ["Apple beats"],
        },
    )


def test_naive_news_times_need_a_zone(tmp_path: Path) -> None:
    done = imports(tmp_path, "import-news", naive_news(tmp_path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "openbell: error: news.parquet row 1: published_at 2025-07-01 16:05:00 has no zone: state "
        + "it with --tz"
    ]


def test_naive_news_times_are_read_in_the_zone_given(tmp_path: Path) -> None:
    url = store(tmp_path)
    news = naive_news(tmp_path)
    done = imports(tmp_path, "import-news", news, "--tz", "America/New_York")
    assert done.returncode == 0, done.stderr
    engine = make_engine(url, read_only=True)
    try:
        (recorded,) = SqlBarCache(engine).recorded_news(["AAPL"])
    finally:
        engine.dispose()
    assert recorded.item.published_at == datetime(2025, 7, 1, 20, 5, tzinfo=UTC)


def test_fundamentals_figures_are_the_other_columns_exactly(tmp_path: Path) -> None:
    url = store(tmp_path)
    reports = write(
        tmp_path / "fundamentals.parquet",
        {
            "symbol": ["AAPL", "MSFT"],
            "period_end": pa.array([date(2025, 3, 29), date(2025, 3, 31)], pa.date32()),
            "published_at": naive("2025-05-01T16:30:00", "2025-04-30T16:05:00", unit="ms"),
            "currency": ["USD", "USD"],
            "eps": pa.array([Decimal("1.65"), Decimal("3.46")], pa.decimal128(10, 2)),
            "revenue": pa.array([95359000000, 70066000000], pa.int64()),
            "pe_ratio": pa.array([31.2, None], pa.float64()),
            "margin": ["0.467", "0.689"],
        },
    )
    done = imports(tmp_path, "import-fundamentals", reports, "--tz", "America/New_York")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["recorded 2 fundamentals reports from fundamentals.parquet"]
    engine = make_engine(url, read_only=True)
    try:
        recorded = SqlBarCache(engine).recorded_reports(["AAPL", "MSFT"])
    finally:
        engine.dispose()
    by_symbol = {known.report.symbol: known for known in recorded}
    apple, microsoft = by_symbol["AAPL"], by_symbol["MSFT"]
    assert apple.report.published_at == datetime(2025, 5, 1, 20, 30, tzinfo=UTC)
    assert apple.known_at == apple.report.published_at
    assert apple.report.period_end == date(2025, 3, 29)
    assert apple.report.source == "import:fundamentals.parquet"
    assert dict(apple.report.values) == {
        "eps": Decimal("1.65"),
        "revenue": Decimal(95359000000),
        "pe_ratio": Decimal("31.2"),
        "margin": Decimal("0.467"),
    }
    assert "pe_ratio" not in microsoft.report.values  # null: skipped
    assert microsoft.report.values["eps"] == Decimal("3.46")


def test_a_missing_column_is_refused_with_the_row(tmp_path: Path) -> None:
    reports = write(
        tmp_path / "fundamentals.parquet",
        {
            "symbol": ["AAPL"],
            "period_end": pa.array([date(2025, 3, 29)], pa.date32()),
            "published_at": pa.array(
                [datetime(2025, 5, 1, 20, 30, tzinfo=UTC)], pa.timestamp("us", tz="UTC")
            ),
            "eps": ["1.65"],
        },
    )
    done = imports(tmp_path, "import-fundamentals", reports)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "openbell: error: fundamentals.parquet row 1: missing currency"
    ]
    news = write(
        tmp_path / "news.parquet",
        {
            "published_at": pa.array(
                [datetime(2025, 7, 1, 20, 5, tzinfo=UTC), None], pa.timestamp("us", tz="UTC")
            ),
            "title": ["Apple beats", "Undated"],
        },
    )
    done = imports(tmp_path, "import-news", news)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["openbell: error: news.parquet row 2: missing published_at"]
