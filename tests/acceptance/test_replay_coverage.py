"""`openbell replay` and the window a universe file vouches for (issue 9, item 4).

`crypto10` is AI-Trader's pick of coins from 2025-11-01: a 2021 replay with it is refused with one
line and exit 2, since it would trade 2025's winners in 2021 (survivorship bias). The flag
`--allow-outside-coverage` (or `allow_outside_coverage = true` in the market's section) runs it,
with a warning in the log and in the summary. `sse50` is vouched for until its December 2025
review, so a window past it is refused too; a window inside the coverage runs without a warning.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from openbell_testkit.cli import assert_one_error_line, openbell


def write_config(tmp_path: Path, market: str, universe: str, extra: str = "") -> Path:
    source = {"crypto": "ccxt:binance", "cn": "akshare", "us": "yfinance"}[market]
    path = tmp_path / "openbell.toml"
    path.write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n\n'
        f'[markets.{market}]\nuniverse = "{universe}"\ncadence = "daily"\nsource = "{source}"\n'
        f'initial_cash = "100000"\n{extra}\n'
        f'[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["{market}"]\n',
        encoding="utf-8",
    )
    return path


def cycles(tmp_path: Path) -> int:
    db = tmp_path / "ledger.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "cycle" not in tables:
            return 0
        return int(connection.execute("SELECT count(*) FROM cycle").fetchone()[0])


@pytest.mark.parametrize(
    ("market", "universe", "start", "end", "said"),
    [
        ("crypto", "crypto10", "2021-01-01", "2021-01-03", ["from 2025-11-01", "2021-01-01"]),
        ("cn", "sse50", "2025-08-01", "2025-08-08", ["from 2025-09-30", "2025-08-01"]),
        ("cn", "sse50", "2025-12-01", "2025-12-19", ["until 2025-12-15", "2025-12-19"]),
    ],
    ids=["crypto10-2021", "sse50-before", "sse50-after-review"],
)
def test_a_replay_outside_its_universes_coverage_is_refused(
    tmp_path: Path, market: str, universe: str, start: str, end: str, said: list[str]
) -> None:
    config = write_config(tmp_path, market, universe)
    result = openbell(tmp_path, "replay", "--config", str(config), "--start", start, "--end", end)
    assert result.returncode == 2
    assert_one_error_line(
        result, f"markets.{market}", universe, *said, "survivorship", "--allow-outside-coverage"
    )
    assert result.stdout == ""
    assert cycles(tmp_path) == 0


@pytest.mark.parametrize("how", ["flag", "config"])
def test_allowed_outside_its_coverage_a_replay_warns_in_the_log_and_summary(
    tmp_path: Path, how: str
) -> None:
    extra = "allow_outside_coverage = true\nallow_partial_coverage = true\n"
    config = write_config(tmp_path, "crypto", "crypto10", extra if how == "config" else "")
    flag = ["--allow-outside-coverage", "--allow-partial-coverage"] if how == "flag" else []
    args = ["replay", "--config", str(config), "--start", "2021-01-01", "--end", "2021-01-03"]
    result = openbell(tmp_path, *args, *flag)
    assert result.returncode == 0, result.stderr
    summary = result.stdout.splitlines()
    assert summary[0].startswith("replayed 3 slots")
    (warning, partial) = summary[1:]
    assert warning.startswith("WARNING: markets.crypto: universe crypto10")
    assert "from 2025-11-01" in warning
    assert "survivorship" in warning
    # SUI did not trade in 2021 and the bundled LINK bars start later: said, not silent.
    assert partial.startswith("WARNING: markets.crypto: universe crypto10 has data for 8 of its 10")
    assert "SUI/USDT" in partial
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    (event,) = [line for line in logged if line["event"] == "universe_outside_coverage"]
    assert (event["level"], event["market"], event["universe"]) == ("warning", "crypto", "crypto10")
    assert event["coverage_from"] == "2025-11-01"
    assert cycles(tmp_path) == 3


def test_a_replay_inside_its_coverage_has_no_warning(tmp_path: Path) -> None:
    config = write_config(tmp_path, "crypto", "crypto10")
    args = ["replay", "--config", str(config), "--start", "2025-11-01", "--end", "2025-11-02"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("replayed 2 slots")
    assert len(result.stdout.splitlines()) == 1
    assert "universe_outside_coverage" not in result.stderr


# A universe whose members are not all in the data (issue 15, item 6): the bundled US bars hold 5
# of the DJIA-20's stocks, so a DJIA-20 replay states its coverage and refuses, or with
# --allow-partial-coverage warns in the summary, the log and `openbell report`.


def test_a_replay_of_a_universe_partly_without_data_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, "us", "djia20")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 2
    line = assert_one_error_line(
        result, "markets.us", "djia20", "5 of its 20 members", "--allow-partial-coverage"
    )
    assert "no data for" in line
    assert "AAPL" not in line.split("no data for")[1].split(";")[0]
    assert result.stdout == ""
    assert cycles(tmp_path) == 0


def test_allowed_partial_coverage_warns_in_the_summary_and_the_report(tmp_path: Path) -> None:
    config = write_config(tmp_path, "us", "djia20")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args, "--allow-partial-coverage")
    assert result.returncode == 0, result.stderr
    (_, warning) = result.stdout.splitlines()
    assert warning.startswith("WARNING: markets.us: universe djia20 has data for 5 of its 20")
    assert warning.endswith("only those with data are traded")
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    (event,) = [line for line in logged if line["event"] == "universe_partial_coverage"]
    assert (event["market"], event["universe"]) == ("us", "djia20")
    report = openbell(tmp_path, "report", "equal-weight", "--market", "us", "--config", str(config))
    assert report.returncode == 0, report.stderr
    assert warning in report.stdout.splitlines()
    as_json = openbell(
        tmp_path, "report", "equal-weight", "--market", "us", "--json", "--config", str(config)
    )
    assert json.loads(as_json.stdout)["replay_warnings"] == [warning.removeprefix("WARNING: ")]


def test_a_replay_of_a_fully_covered_universe_has_no_coverage_warning(tmp_path: Path) -> None:
    config = tmp_path / "openbell.toml"
    write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace('universe = "djia20"', 'universe = ["AAPL", "MSFT"]'), encoding="utf-8"
    )
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    assert "universe_partial_coverage" not in result.stderr
