"""The CSI 300 as a market's benchmark, through the real CLI: its daily bars imported with
`openbell data import`, `benchmark = "000300.SH"` in `[markets.cn]`, a replay of the bundled SSE-50
members, then the leaderboard.

openbell bundles no CSI 300 bars, so the test writes a small series of its own (made up here,
not the index's prices) for the window. The replay's coverage line names the benchmark;
buy-and-hold holds the CSI 300 index fund; the leaderboard's benchmark row is 000300.SH, valued
at each slot's open; and the information ratio is KTD-Fin's, the annualised mean of the daily
excess return over the CSI 300 divided by its annualised standard deviation (checked on the cash
account, whose excess return is minus the index's).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from datetime import date
from pathlib import Path

import pytest

from openbell.markets.calendars import calendar_for
from openbell_testkit.cli import openbell

START, END = date(2025, 9, 30), date(2025, 11, 19)

CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.cn]
universe = "sse50"
cadence = "daily"
source = "replay:bundled,{bars}"
initial_cash = "1000000"
benchmark = "000300.SH"

[[agents]]
name = "csi300-buy-and-hold"
kind = "buy_and_hold"
markets = ["cn"]

[[agents]]
name = "cash"
kind = "cash"
markets = ["cn"]
"""


def index_opens() -> dict[date, int]:
    """The made-up opens of the CSI 300 series, by session, from 2025-09-01 to 2025-11-28."""
    days = calendar_for("XSHG").sessions_between(date(2025, 9, 1), date(2025, 11, 28))
    return {day: 4500 + 7 * i + (i % 3) * 11 - (i % 5) * 6 for i, day in enumerate(days)}


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    workdir = tmp_path_factory.mktemp("csi300")
    rows = ["symbol,time,open,high,low,close,volume"]
    for day, opened in index_opens().items():
        close = opened + 4
        rows.append(f"000300.SH,{day},{opened},{close + 3},{opened - 3},{close},120000000")
    (workdir / "csi300.csv").write_text("\n".join(rows) + "\n")
    imported = openbell(
        workdir,
        *("data", "import", "csi300.csv", "--market", "cn", "--interval", "1d"),
        *("--label", "start", "--tz", "Asia/Shanghai", "--out", "bars"),
    )
    assert imported.returncode == 0, imported.stderr
    assert "wrote 59 cn 1d bars" in imported.stdout
    config = workdir / "openbell.toml"
    config.write_text(
        CONFIG.format(db=(workdir / "ledger.db").as_posix(), bars=(workdir / "bars").as_posix())
    )
    result = openbell(
        workdir,
        *("replay", "--config", str(config), "--start", str(START), "--end", str(END)),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    return workdir, config, result.stdout


def test_the_replay_covers_the_csi300_benchmark(replayed: tuple[Path, Path, str]) -> None:
    assert "sse50 50/50 members, benchmark 000300.SH covered, 31 sessions" in replayed[2]


def test_buy_and_hold_holds_the_csi300_index_fund(replayed: tuple[Path, Path, str]) -> None:
    workdir, config, _ = replayed
    result = openbell(
        workdir,
        "positions",
        "--agent",
        "csi300-buy-and-hold",
        "--config",
        str(config),
        "-f",
        "json",
    )
    assert result.returncode == 0, result.stderr
    (account,) = json.loads(result.stdout)["accounts"]
    assert [p["symbol"] for p in account["positions"]] == ["000300.SH"]


def test_the_leaderboard_measures_against_the_csi300(replayed: tuple[Path, Path, str]) -> None:
    workdir, config, _ = replayed
    result = openbell(workdir, "leaderboard", "--config", str(config), "-f", "json")
    assert result.returncode == 0, result.stderr
    (board,) = json.loads(result.stdout)["leaderboards"]
    assert board["benchmark"] == "000300.SH"
    rows = {row["name"]: row for row in board["rows"]}
    opens = [o for day, o in index_opens().items() if START <= day <= END]
    assert len(opens) == 31
    bench = rows["benchmark:000300.SH"]
    assert bench["is_benchmark"]
    assert bench["cumulative_return"] == pytest.approx(opens[-1] / opens[0] - 1, rel=1e-12)
    # KTD-Fin's IR: annualised mean daily excess return over its annualised std (252 days)
    index = [b / a - 1 for a, b in itertools.pairwise(opens)]
    excess = [0.0 - r for r in index]  # the cash account's
    expected = statistics.fmean(excess) * 252 / (statistics.stdev(excess) * math.sqrt(252))
    assert rows["cash"]["information_ratio"] == pytest.approx(expected, rel=1e-9)
    assert rows["csi300-buy-and-hold"]["information_ratio"] is not None
    assert rows["csi300-buy-and-hold"]["rank"] == 1
