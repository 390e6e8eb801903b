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
