"""`openbell data import` on recorded AI-Trader excerpts writes bar files a replay can read."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from openbell.markets.barfile import read_bars
from openbell.markets.domain import utc
from openbell_testkit.cli import openbell

EXCERPTS = Path(__file__).parents[1] / "resources" / "ai_trader"


def test_data_import_writes_readable_bar_files(tmp_path: Path) -> None:
    out = tmp_path / "bars"

    done = openbell(tmp_path, "data", "import", str(EXCERPTS), "--out", str(out))

    assert done.returncode == 0, done.stderr
    written = sorted(path.name for path in out.glob("*.parquet"))
    assert "us-1h.parquet" in written
    assert "cn-1h.parquet" in written
    us_hourly = read_bars(out / "us-1h.parquet")
    assert us_hourly.meta.label == "start"
    # The US hourly excerpt labels bars by their start in New York: 14:00 EST is 19:00Z.
    bar = next(b for b in us_hourly.bars("AAPL") if b.start_at == utc(2025, 11, 10, 19))
    assert bar.end_at == utc(2025, 11, 10, 20)
    assert bar.open == Decimal("269.9950")
    assert f"wrote {len(written)} bar files" in done.stdout


def test_data_import_of_a_missing_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = openbell(tmp_path, "data", "import", str(tmp_path / "absent"))

    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


OHLCV = (
    "symbol,time,open,high,low,close,volume\n"
    "KO,2025-07-01,70.00,70.80,69.50,70.50,1000\n"
    "KO,2025-07-02,70.50,71.20,70.10,71.00,900\n"
    "KO,2025-07-03,71.00,71.50,70.60,71.40,600\n"
)


def test_an_ohlcv_file_is_imported_and_replayed(tmp_path: Path) -> None:
    source = tmp_path / "ko.csv"
    source.write_text(OHLCV, encoding="utf-8")
    out = tmp_path / "bars"
    flags = ["--market", "us", "--interval", "1d", "--label", "start", "--tz", "America/New_York"]
    done = openbell(tmp_path, "data", "import", str(source), "--out", str(out), *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote 3 us 1d bars to {out / 'ko.parquet'}"
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n\n'
        f'[markets.us]\nuniverse = ["KO"]\ncadence = "daily"\nsource = "replay:{out.as_posix()}"\n'
        'initial_cash = "100000"\n\n'
        '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["us"]\n',
        encoding="utf-8",
    )
    replayed = openbell(
        tmp_path, "replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.startswith("replayed 3 slots")
    assert "WARNING" not in replayed.stdout


def test_an_ohlcv_file_without_its_label_convention_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "ko.csv"
    source.write_text(OHLCV, encoding="utf-8")
    done = openbell(tmp_path, "data", "import", str(source), "--market", "us", "--interval", "1d")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "ko.csv: an OHLCV file needs --label" in line
    assert not (tmp_path / "var").exists()
