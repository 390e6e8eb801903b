"""AI-Trader's Table 1 baseline rows from `openbell leaderboard` itself (issue 25, item 6).

AI-Trader (arXiv 2512.10971, in ../shared/reference/papers/) reports one passive baseline per
market in its Table 1: QQQ (US stocks, hourly, 1 Oct - 7 Nov 2025) CR 1.87 %, SR (its Sortino)
1.51, Vol 17.16 %, MDD -3.94 %; the SSE-50 index (A-shares, daily, the same window) 1.65 %, 2.19,
13.03 %, -2.01 %; CD5 (crypto, daily, 1-14 Nov 2025) -14.30 %, -12.71, 54.93 %, -15.71 %. The
real CLI replays each window on the bundled bars (one `cash` agent, so each market has a board),
and `openbell leaderboard --convention ai-trader` must print those rows to the paper's precision,
in its JSON and in its table; the default convention keeps openbell's own figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openbell_testkit.cli import openbell

TIMEOUT_S = 300

#: market -> (replay and leaderboard window, the paper's CR %, SR, Vol %, MDD %).
TABLE_1 = {
    "us": (("2025-10-01", "2025-11-06"), ("1.87", "1.51", "17.16", "-3.94")),
    "cn": (("2025-10-09", "2025-11-07"), ("1.65", "2.19", "13.03", "-2.01")),
    "crypto": (("2025-11-02", "2025-11-15"), ("-14.30", "-12.71", "54.93", "-15.71")),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ai-trader")
    (root / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{(root / "ledger.db").as_posix()}"\n\n'
        '[metrics]\nconvention = "ai-trader"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "hourly"\nsource = "bundled"\n'
        'initial_cash = "10000"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "100000"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
        'initial_cash = "10000"\n\n'
        '[[agents]]\nname = "cash"\nkind = "cash"\nmarkets = ["us", "cn", "crypto"]\n',
        encoding="utf-8",
    )
    for market, ((start, end), _) in TABLE_1.items():
        done = openbell(
            root,
            "replay",
            "--market",
            market,
            "--start",
            start,
            "--end",
            end,
            timeout_s=TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
    return root


def board(workdir: Path, market: str, *options: str) -> dict[str, object]:
    (start, end), _ = TABLE_1[market]
    args = ("--market", market, "--start", start, "--end", end, "--format", "json", *options)
    done = openbell(workdir, "leaderboard", *args, timeout_s=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["leaderboards"]
    assert isinstance(found, dict)
    return found


def benchmark_row(found: dict[str, object]) -> dict[str, float]:
    rows = found["rows"]
    assert isinstance(rows, list)
    (row,) = [row for row in rows if row["is_benchmark"]]
    return row  # type: ignore[no-any-return]


@pytest.mark.parametrize("market", list(TABLE_1))
def test_the_ai_trader_convention_prints_the_papers_table_1_rows(
    workdir: Path, market: str
) -> None:
    found = board(workdir, market)  # the config's convention
    assert found["convention"]["name"] == "ai-trader"  # type: ignore[index]
    row = benchmark_row(found)
    printed = (
        f"{row['cumulative_return'] * 100:.2f}",
        f"{row['sortino_ratio']:.2f}",
        f"{row['annual_volatility'] * 100:.2f}",
        f"{row['max_drawdown'] * 100:.2f}",
    )
    assert printed == TABLE_1[market][1]
    # The cash account, measured close to close from its initial cash: one more point than the
    # benchmark where the bars hold no close before the window (QQQ's hourly bars start with it).
    (cash,) = [row for row in found["rows"] if row["agent"] == "cash"]  # type: ignore[union-attr]
    assert cash["cumulative_return"] == 0
    assert cash["periods"] == row["periods"] + (1 if market == "us" else 0)


@pytest.mark.parametrize("market", list(TABLE_1))
def test_the_table_shows_the_row_and_names_the_convention(workdir: Path, market: str) -> None:
    (start, end), figures = TABLE_1[market]
    args = ("--market", market, "--start", start, "--end", end, "--wide")
    done = openbell(workdir, "leaderboard", *args, timeout_s=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "ai-trader metrics" in done.stdout
    assert "metrics: ai-trader convention (AI-Trader, arXiv 2512.10971, Table 1)" in done.stdout
    (line,) = [line for line in done.stdout.splitlines() if "benchmark:" in line]
    cells = [cell.strip() for cell in line.split("│")]
    for figure in figures:
        assert figure in cells, (figure, line)


def test_the_default_convention_keeps_openbells_figures(workdir: Path) -> None:
    row = benchmark_row(board(workdir, "us", "--convention", "openbell"))
    # The bundled QQQ priced at the replay's slots (each bar's open), empyrical's formulas:
    # the `openbell` row of benchmarks/ai_trader_table.py.
    assert f"{row['cumulative_return'] * 100:.2f}" == "2.96"
    assert f"{row['sortino_ratio']:.2f}" == "2.66"
    assert f"{row['annual_volatility'] * 100:.2f}" == "14.76"
