"""A CSI 300 universe file through the real CLI: two CSIndex member lists imported with `openbell
data import-universe`, the index's daily bars with `openbell data import`, `universe = "PATH"` in
`[markets.cn]` (no `benchmark` key: the file names 000300.SH), replays, the leaderboard and the
attribution on the universe's members of each day.

openbell bundles neither the CSI 300's member lists nor its bars, and none could be fetched here,
so the lists are CSIndex's recorded sheet (`000300cons.xlsx`) rewritten with members of the
bundled A-share bars (illustrative lists in CSIndex's shape, not the index's), and the index
series is made up, as in `test_csi300_benchmark_cli.py`. The second list, of 2025-11-03, drops
601899.SH and adds 600900.SH: a replay sees the first list before that day and the second after.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from datetime import date
from pathlib import Path

import openpyxl
import pytest

from openbell.markets.calendars import calendar_for
from openbell_testkit.cli import openbell

SHEET = Path(__file__).parents[1] / "resources" / "vendors" / "eastmoney" / "000300cons.xlsx"
FIRST = (
    ("600519", "贵州茅台"),
    ("601318", "中国平安"),
    ("600036", "招商银行"),
    ("601899", "紫金矿业"),
    ("601166", "兴业银行"),
    ("600276", "恒瑞医药"),
    ("600030", "中信证券"),
    ("601398", "工商银行"),
    ("601288", "农业银行"),
    ("600887", "伊利股份"),
)
SECOND = (*[m for m in FIRST if m[0] != "601899"], ("600900", "长江电力"))
START, END = date(2025, 10, 9), date(2025, 11, 19)

CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.cn]
universe = "{universe}"
cadence = "daily"
source = "replay:bundled,{bars}"
initial_cash = "3000000"

[attribution]
cross_section = "universe"

[[agents]]
name = "csi300-buy-and-hold"
kind = "buy_and_hold"
markets = ["cn"]

[[agents]]
name = "equal-weight"
kind = "equal_weight"
markets = ["cn"]

[[agents]]
name = "cash"
kind = "cash"
markets = ["cn"]

[[agents]]
name = "lightgbm"
kind = "factor_model"
markets = ["cn"]
"""


def member_sheet(path: Path, published: str, members: tuple[tuple[str, str], ...]) -> Path:
    """CSIndex's recorded CSI 300 sheet with its rows replaced by `members` (all Shanghai
    listings), published on `published` (YYYYMMDD)."""
    book = openpyxl.load_workbook(SHEET)
    sheet = book.active
    assert sheet is not None
    template = [cell.value for cell in sheet[2]]
    sheet.delete_rows(2, sheet.max_row)
    for code, name in members:
        row = list(template)
        row[0], row[4], row[5] = int(published), int(code), name
        row[6], row[7], row[8] = "", "上海证券交易所", "Shanghai Stock Exchange"
        sheet.append(row)
    book.save(path)
    return path


def index_opens() -> dict[date, int]:
    """The made-up opens of the CSI 300 series, by session, from 2025-09-01 to 2025-11-28."""
    days = calendar_for("XSHG").sessions_between(date(2025, 9, 1), date(2025, 11, 28))
    return {day: 4500 + 5 * i + (i % 4) * 9 - (i % 3) * 7 for i, day in enumerate(days)}


def replay(workdir: Path, name: str, start: date, end: date) -> tuple[Path, str]:
    config = workdir / f"{name}.toml"
    config.write_text(
        CONFIG.format(
            db=(workdir / f"{name}.db").as_posix(),
            universe=(workdir / "universes" / "csi300.toml").as_posix(),
            bars=(workdir / "bars").as_posix(),
        )
    )
    result = openbell(
        workdir,
        *("replay", "--config", str(config), "--start", str(start), "--end", str(end)),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    return config, result.stdout


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("csi300-universe")
    for published, members in (("20251009", FIRST), ("20251103", SECOND)):
        sheet = member_sheet(workdir / f"000300cons-{published}.xlsx", published, members)
        imported = openbell(
            workdir,
            *("data", "import-universe", sheet.name, "--index", "csi300"),
            *("--out", "universes/csi300.toml"),
        )
        assert imported.returncode == 0, imported.stderr
        (workdir / f"import-{published}.out").write_text(imported.stdout)
    rows = ["symbol,time,open,high,low,close,volume"]
    for day, opened in index_opens().items():
        rows.append(f"000300.SH,{day},{opened},{opened + 9},{opened - 6},{opened + 2},9000000")
    (workdir / "csi300.csv").write_text("\n".join(rows) + "\n")
    imported = openbell(
        workdir,
        *("data", "import", "csi300.csv", "--market", "cn", "--interval", "1d"),
        *("--label", "start", "--tz", "Asia/Shanghai", "--out", "bars"),
    )
    assert imported.returncode == 0, imported.stderr
    return workdir


def positions(workdir: Path, config: Path, agent: str) -> list[str]:
    result = openbell(workdir, "positions", "--agent", agent, "--config", str(config), "-f", "json")
    assert result.returncode == 0, result.stderr
    (account,) = json.loads(result.stdout)["accounts"]
    return sorted(p["symbol"] for p in account["positions"])


def test_the_imports_date_who_joined_and_who_left(workdir: Path) -> None:
    first = (workdir / "import-20251009.out").read_text()
    assert "list of 2025-10-09, 10 members; covers from 2025-10-09 until 2025-12-15" in first
    second = (workdir / "import-20251103.out").read_text()
    assert "list of 2025-11-03, 10 members (1 joined, 1 left)" in second
    assert "joined: 600900.SH\nleft: 601899.SH\n" in second
    assert 'universe = "universes/csi300.toml"' in second


def test_a_replay_sees_each_day_the_list_published_by_then(workdir: Path) -> None:
    config, out = replay(workdir, "whole", START, END)
    assert "csi300 11/11 members, benchmark 000300.SH covered, 30 sessions" in out
    # equal weight buys what it is offered at its first slot: the first list, not 600900.SH
    assert positions(workdir, config, "equal-weight") == sorted(f"{c}.SH" for c, _ in FIRST)
    # the universe file's benchmark is what buy-and-hold holds
    assert positions(workdir, config, "csi300-buy-and-hold") == ["000300.SH"]
    members = {f"{c}.SH" for c, _ in (*FIRST, *SECOND)}
    held = set(positions(workdir, config, "lightgbm"))
    assert held
    assert held <= members
    later, _ = replay(workdir, "later", date(2025, 11, 4), END)
    assert positions(workdir, later, "equal-weight") == sorted(f"{c}.SH" for c, _ in SECOND)


def test_the_leaderboard_measures_against_the_files_benchmark(workdir: Path) -> None:
    config, _ = replay(workdir, "board", START, END)
    result = openbell(workdir, "leaderboard", "--config", str(config), "-f", "json")
    assert result.returncode == 0, result.stderr
    (board,) = json.loads(result.stdout)["leaderboards"]
    assert board["benchmark"] == "000300.SH"
    rows = {row["name"]: row for row in board["rows"]}
    opens = [o for day, o in index_opens().items() if START <= day <= END]
    assert len(opens) == 30
    bench = rows["benchmark:000300.SH"]
    assert bench["cumulative_return"] == pytest.approx(opens[-1] / opens[0] - 1, rel=1e-12)
    index = [b / a - 1 for a, b in itertools.pairwise(opens)]
    excess = [0.0 - r for r in index]  # the cash account's excess return over the index
    expected = statistics.fmean(excess) * 252 / (statistics.stdev(excess) * math.sqrt(252))
    assert rows["cash"]["information_ratio"] == pytest.approx(expected, rel=1e-9)
    # the factor-model baseline trades the file's members and ranks beside CSI 300 buy-and-hold
    assert rows["lightgbm"]["rank"] is not None
    assert rows["csi300-buy-and-hold"]["rank"] is not None
    # the agent's report: its line relative to the same index
    report = openbell(workdir, "report", "cash", "-m", "cn", "--json", "--config", str(config))
    assert report.returncode == 0, report.stderr
    found = json.loads(report.stdout)
    assert found["benchmark"] == "000300.SH"
    assert found["excess_return"] == pytest.approx(-(opens[-1] / opens[0] - 1), rel=1e-9)
    assert found["information_ratio"] == pytest.approx(expected, rel=1e-9)


def test_the_attribution_is_estimated_on_the_universes_members(workdir: Path) -> None:
    config, _ = replay(workdir, "attributed", START, END)
    result = openbell(
        workdir,
        *("report", "equal-weight", "-m", "cn", "--attribution", "--json"),
        *("--config", str(config)),
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["attribution"]
    assert found["cross_section"] == "members of universe csi300 at each date"
    assert found["universe_size"] == 11  # every member of a day, with bars; not the 50 bundled
    parts = found["parts"]
    summed = parts["market"] + sum(parts["styles"].values()) + parts["selection"]
    assert summed + parts["trading"] == pytest.approx(found["total"], abs=1e-12)


def test_an_older_list_and_an_offline_download_are_one_error_line(workdir: Path) -> None:
    before = (workdir / "universes" / "csi300.toml").read_text(encoding="utf-8")
    older = openbell(
        workdir,
        *("data", "import-universe", "000300cons-20251009.xlsx", "--index", "csi300"),
        *("--out", "universes/csi300.toml"),
    )
    assert older.returncode == 2
    refusal = (
        "openbell: error: universe file universes/csi300.toml: the list of 2025-10-09 is older "
        "than the file's last list (2025-11-03); a universe file grows forward only"
    )
    assert older.stderr.splitlines() == [refusal]
    assert (workdir / "universes" / "csi300.toml").read_text(encoding="utf-8") == before
    wrong = openbell(
        workdir, "data", "import-universe", "000300cons-20251009.xlsx", "--index", "sse50"
    )
    assert wrong.returncode == 2
    assert "lists members of 000300, not 000016" in wrong.stderr
    offline = openbell(workdir, "data", "download-universe", "--index", "csi300")
    assert offline.returncode == 2
    assert "OPENBELL_OFFLINE is set: data download-universe reaches the vendor" in offline.stderr
    assert not (workdir / "var").exists()
