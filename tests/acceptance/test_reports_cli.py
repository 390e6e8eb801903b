"""The real `openbell leaderboard`, `report` and `export` commands on a prepared SQLite ledger."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from openbell.ops.reports.exporting import LEADERBOARD_KEYS
from openbell.store.db import make_engine
from openbell.store.exports import EXPORTS
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.cli import assert_one_error_line
from openbell_testkit.cli import openbell as run_openbell
from openbell_testkit.reports import build_ledger

TIMEOUT_S = 120
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `openbell.toml` pointing at a prepared ledger (openbell_testkit.reports)."""
    root = tmp_path_factory.mktemp("cli")
    url = f"sqlite:///{root / 'var' / 'ledger.db'}"
    upgrade(url)
    engine = make_engine(url)
    build_ledger(Ledger(engine))
    engine.dispose()
    (root / "openbell.toml").write_text(
        f'[store]\nurl = "{url}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n',
        encoding="utf-8",
    )
    return root


def openbell(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_openbell(cwd, *args, timeout_s=TIMEOUT_S)


def test_leaderboard_json_covers_every_market_with_a_benchmark_row(workdir: Path) -> None:
    result = openbell(workdir, "leaderboard", "--format", "json")
    assert result.returncode == 0, result.stderr
    boards = json.loads(result.stdout)["leaderboards"]
    assert [board["market"] for board in boards] == ["us", "crypto"]
    assert [board["benchmark"] for board in boards] == ["QQQ", "CD5"]
    us = boards[0]
    assert (us["cadence"], us["periods_per_year"], us["currency"]) == ("daily", 252.0, "USD")
    assert us["convention"]["name"] == "openbell"
    assert us["convention"]["std"] == "sample"
    for board in boards:
        for row in board["rows"]:
            assert tuple(row) == LEADERBOARD_KEYS
        bench = [row for row in board["rows"] if row["is_benchmark"]]
        assert len(bench) == 1
        assert bench[0]["rank"] is None
    assert sorted(row["rank"] for row in us["rows"] if not row["is_benchmark"]) == [1, 2, 3]
    alpha = next(row for row in us["rows"] if row["agent"] == "alpha")
    assert alpha["final_nav"] == "10080.00"
    assert alpha["cumulative_return"] == pytest.approx(0.008)


def test_leaderboard_csv_and_table(workdir: Path) -> None:
    result = openbell(
        workdir,
        "leaderboard",
        "-m",
        "us",
        "--start",
        "2025-10-01",
        "--end",
        "2025-10-08",
        "-f",
        "csv",
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert tuple(rows[0]) == ("market", "convention", *LEADERBOARD_KEYS)
    assert len(rows) == 1 + 4
    assert {row[3] for row in rows[1:]} == {"alpha", "beta", "gamma", "benchmark:QQQ"}
    assert {row[1] for row in rows[1:]} == {"openbell"}
    table = openbell(workdir, "leaderboard", "--market", "us")
    assert table.returncode == 0, table.stderr
    assert "us leaderboard" in table.stdout
    assert "openbell metrics" in table.stdout
    assert "metrics: openbell convention (empyrical's definitions)" in table.stdout
    for name in ("alpha", "beta", "gamma", "benchmark:QQQ", "Sortino"):
        assert name in table.stdout
    wide = openbell(workdir, "leaderboard", "--market", "us", "--wide")
    assert wide.returncode == 0, wide.stderr
    for name in ("alpha", "beta", "gamma", "benchmark:QQQ", "Sortino", "HHI"):
        assert name in wide.stdout


def test_report_json_and_plot(workdir: Path) -> None:
    png = workdir / "alpha.png"
    result = openbell(workdir, "report", "alpha", "--market", "us", "--json", "--plot", str(png))
    assert result.returncode == 0, result.stderr
    panel = json.loads(result.stdout)
    assert (panel["agent"], panel["market"], panel["benchmark"], panel["forecasts"]) == (
        "alpha",
        "us",
        "QQQ",
        1,
    )
    for key in ("sharpe_ratio", "calmar_ratio", "information_ratio", "turnover", "hhi"):
        assert key in panel
    assert panel["convention"]["name"] == "openbell"
    assert panel["brier_score"] == pytest.approx(0.04)
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000
    text = openbell(workdir, "report", "gamma", "-m", "us")
    assert text.returncode == 0, text.stderr
    assert "expected_calibration_error" in text.stdout
    assert "metrics: openbell convention" in text.stdout
    measured = openbell(
        workdir, "report", "alpha", "-m", "us", "--json", "--convention", "ai-trader"
    )
    assert measured.returncode == 0, measured.stderr
    assert json.loads(measured.stdout)["convention"]["std"] == "population"


def test_report_attribution_table_and_json(workdir: Path) -> None:
    result = openbell(workdir, "report", "gamma", "-m", "us", "--attribution", "--json")
    assert result.returncode == 0, result.stderr
    panel = json.loads(result.stdout)
    found = panel["attribution"]
    assert (found["agent"], found["cadence"], found["interval"]) == ("gamma", "daily", "1d")
    assert found["periods_count"] == len(found["periods"]) == 5
    parts = found["parts"]
    summed = parts["market"] + sum(parts["styles"].values()) + parts["selection"]
    assert summed + parts["trading"] == pytest.approx(found["total"], abs=1e-12)
    assert found["total"] == pytest.approx(panel["cumulative_return"], abs=1e-12)
    # gamma holds AAPL over periods 1 and 2 only, marked at the builder's prices, not the
    # bundled bars': what the bars' returns do not explain is trading's.
    held = [period for period in found["periods"] if period["invested"] > 0]
    assert [period["start_at"][:10] for period in held] == ["2025-10-02", "2025-10-03"]
    table = openbell(workdir, "report", "gamma", "-m", "us", "--attribution")
    assert table.returncode == 0, table.stderr
    assert "gamma in us: factor attribution over 5 daily periods" in table.stdout
    for part in ("market", "selection", "trading", "total", "Carino"):
        assert part in table.stdout


def test_report_attribution_takes_its_cross_section_and_styles_from_the_config(
    workdir: Path,
) -> None:
    text = (workdir / "openbell.toml").read_text(encoding="utf-8")
    configured = workdir / "ktd.toml"
    configured.write_text(
        text + '\n[attribution]\ncross_section = "universe"\nstyles = "ktd-fin"\n',
        encoding="utf-8",
    )
    args = ("report", "gamma", "-m", "us", "--attribution")
    result = openbell(workdir, *args, "--json", "--config", str(configured))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["attribution"]
    assert found["cross_section"] == "members of universe nasdaq100 at each date"
    assert found["styles"][:2] == ["momentum", "reversal"]
    assert "beta" not in found["styles"]
    assert len(found["styles"]) == 9
    # The bundled US bars carry no amount, and five months of them no 52-week high.
    assert set(found["skipped"]) == {"amount_variability", "high_52w"}
    parts = found["parts"]
    summed = parts["market"] + sum(parts["styles"].values()) + parts["selection"]
    assert summed + parts["trading"] == pytest.approx(found["total"], abs=1e-12)
    table = openbell(workdir, *args, "--config", str(configured))
    assert table.returncode == 0, table.stderr
    assert "cross-section: members of universe nasdaq100 at each date" in table.stdout
    assert "amount_variability: the bars carry no traded amount" in table.stdout


def test_export_csv_to_stdout_and_parquet_to_a_file(workdir: Path) -> None:
    result = openbell(workdir, "export", "nav", "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert tuple(rows[0]) == EXPORTS["nav"].columns
    assert len(rows) == 1 + 21
    out = workdir / "orders.parquet"
    result = openbell(workdir, "export", "orders", "-f", "parquet", "--out", str(out), "-m", "us")
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    assert tuple(table.column_names) == EXPORTS["orders"].columns
    assert table.num_rows == 4  # alpha 1, gamma 3 (the crypto order is filtered out)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("report", "nobody", "--market", "us"), ("nobody",)),
        (("leaderboard", "--market", "cn"), ("no accounts", "cn")),
        (("leaderboard", "--market", "mars"), ("mars",)),
        (("export", "fills", "--format", "parquet"), ("--out",)),
        (
            ("report", "alpha", "-m", "us", "--attribution", "--start", "2025-10-08"),
            ("fewer than two", "alpha"),
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    result = openbell(workdir, *args)
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result, *words)
