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
    (coverage, warning, partial) = summary[1:]
    assert coverage == (
        "coverage: markets.crypto crypto10 8/10 members (2 without data), "
        "3 sessions 2021-01-01..2021-01-03"
    )
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
    (replayed, coverage) = result.stdout.splitlines()
    assert replayed.startswith("replayed 2 slots")
    assert coverage == (
        "coverage: markets.crypto crypto10 10/10 members, 2 sessions 2025-11-01..2025-11-02"
    )
    assert "universe_outside_coverage" not in result.stderr


# A universe whose members are not all in the data (issue 15, item 6): the bundled US bars hold 5
# of the DJIA-20's stocks, so a DJIA-20 replay states its coverage and refuses, or with
# --allow-partial-coverage warns in the summary, the log and `openbell report`.


DJIA20_LACKS = (
    "markets.us: universe djia20 has data for 5 of its 20 members (25.0%) in this replay's window "
    "(3 sessions, 2025-07-01..2025-07-03); no data for GS, HD, V, SHW, CAT, MCD, UNH, AXP, TRV, "
    "CRM and 5 more"
)
PARTIAL_HINT = (
    "; bring their bars (openbell data import FILE), narrow the universe or the window, or pass "
    "--allow-partial-coverage (or set allow_partial_coverage = true in [markets.{market}]) to "
    "replay the members with data anyway"
)
ALLOWED = ": replayed anyway, trading each only while it has bars"


def test_a_replay_of_a_universe_partly_without_data_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, "us", "djia20")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"openbell: error: {DJIA20_LACKS}{PARTIAL_HINT.format(market='us')}"
    )
    assert_one_error_line(result, "markets.us", "djia20", "5 of its 20 members")
    assert result.stdout == ""
    assert cycles(tmp_path) == 0


def test_allowed_partial_coverage_warns_in_the_summary_and_the_report(tmp_path: Path) -> None:
    config = write_config(tmp_path, "us", "djia20")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args, "--allow-partial-coverage")
    assert result.returncode == 0, result.stderr
    (replayed, coverage, warning) = result.stdout.splitlines()
    assert replayed.startswith("replayed 3 slots")
    assert coverage == (
        "coverage: markets.us djia20 5/20 members (15 without data), "
        "3 sessions 2025-07-01..2025-07-03"
    )
    assert warning == f"WARNING: {DJIA20_LACKS}{ALLOWED}"
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


def test_a_replay_of_a_fully_covered_universe_states_its_coverage(tmp_path: Path) -> None:
    config = tmp_path / "openbell.toml"
    write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace('universe = "djia20"', 'universe = ["AAPL", "MSFT"]'), encoding="utf-8"
    )
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-03"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    (replayed, coverage) = result.stdout.splitlines()
    assert replayed.startswith("replayed 3 slots")
    assert coverage == (
        "coverage: markets.us us-configured 2/2 members, 3 sessions 2025-07-01..2025-07-03"
    )
    assert "universe_partial_coverage" not in result.stderr


# Bars that stop (or start) inside the window: a member (or the benchmark) whose bars begin more
# than two sessions after the window's first session, or end more than two before its last, is
# partial, named with its first and last bar, and refused (or allowed) as a member without data.

SSE50_LACKS = (
    "markets.cn: universe sse50 has data for 50 of its 50 members (100.0%) in this replay's "
    "window (30 sessions, 2025-10-09..2025-11-19); partial data for its benchmark 000016.SH "
    "(bars 2025-10-09..2025-11-07)"
)


def test_a_benchmark_whose_bars_stop_inside_the_window_is_refused(tmp_path: Path) -> None:
    """The bundled SSE-50 index bars end on 2025-11-07; the stocks' on 2025-11-19."""
    config = write_config(tmp_path, "cn", "sse50")
    args = ["replay", "--config", str(config), "--start", "2025-10-09", "--end", "2025-11-19"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"openbell: error: {SSE50_LACKS}{PARTIAL_HINT.format(market='cn')}"
    )
    assert result.stdout == ""
    assert cycles(tmp_path) == 0

    allowed = openbell(tmp_path, *args, "--allow-partial-coverage")
    assert allowed.returncode == 0, allowed.stderr
    (replayed, coverage, warning) = allowed.stdout.splitlines()
    assert replayed.startswith("replayed 30 slots")
    assert coverage == (
        "coverage: markets.cn sse50 50/50 members, benchmark 000016.SH partial, "
        "30 sessions 2025-10-09..2025-11-19"
    )
    assert warning == f"WARNING: {SSE50_LACKS}{ALLOWED}"

    within = tmp_path / "within"
    within.mkdir()
    shorter = write_config(within, "cn", "sse50")
    args = ["replay", "--config", str(shorter), "--start", "2025-10-09", "--end", "2025-11-11"]
    inside = openbell(within, *args)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.splitlines()[1:] == [
        (
            "coverage: markets.cn sse50 50/50 members, benchmark 000016.SH covered, "
            "24 sessions 2025-10-09..2025-11-11"
        )
    ]  # its last bar two sessions before the window's last: within the slack


OHLCV_HEADER = "symbol,time,open,high,low,close,volume\n"
JULY = tuple(
    f"2025-07-{day}"
    for day in ("01", "02", "03", "07", "08", "09", "10", "11", "14", "15", "16", "17", "18")
)


def import_bars(tmp_path: Path, rows: dict[str, tuple[str, ...]]) -> Path:
    """Daily US bars of each symbol on the dates given, imported with the real CLI."""
    source = tmp_path / "bars.csv"
    lines = [f"{symbol},{day},10,11,9,10,100" for symbol, days in rows.items() for day in days]
    source.write_text(OHLCV_HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "bars"
    flags = ["--market", "us", "--interval", "1d", "--label", "start", "--tz", "America/New_York"]
    done = openbell(tmp_path, "data", "import", str(source), "--out", str(out), *flags)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ({"KO": JULY, "PEP": JULY[:7]}, "PEP (bars 2025-07-01..2025-07-10)"),  # stops on the 10th
        ({"KO": JULY, "PEP": JULY[3:]}, "PEP (bars 2025-07-07..2025-07-18)"),  # starts 3 late
        ({"KO": JULY, "PEP": JULY[5:6]}, "PEP (bars 2025-07-09..2025-07-09)"),  # a single bar
    ],
    ids=["stops-early", "starts-late", "one-bar"],
)
def test_a_member_whose_bars_cover_part_of_the_window_is_refused_and_named(
    tmp_path: Path, rows: dict[str, tuple[str, ...]], said: str
) -> None:
    out = import_bars(tmp_path, rows)
    config = write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8").replace(
        'universe = "djia20"', 'universe = ["KO", "PEP"]'
    )
    config.write_text(text.replace('"yfinance"', f'"replay:{out.as_posix()}"'), encoding="utf-8")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-18"]
    lacks = (
        "markets.us: universe us-configured has data for 1 of its 2 members (50.0%) in this "
        f"replay's window (13 sessions, 2025-07-01..2025-07-18); partial data for {said}"
    )
    refused = openbell(tmp_path, *args)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == (
        f"openbell: error: {lacks}{PARTIAL_HINT.format(market='us')}"
    )
    assert cycles(tmp_path) == 0
    allowed = openbell(tmp_path, *args, "--allow-partial-coverage")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.splitlines()[1:] == [
        (
            "coverage: markets.us us-configured 1/2 members (1 partial), "
            "13 sessions 2025-07-01..2025-07-18"
        ),
        f"WARNING: {lacks}{ALLOWED}",
    ]


def test_a_member_two_sessions_short_at_each_end_is_covered(tmp_path: Path) -> None:
    out = import_bars(tmp_path, {"KO": JULY, "PEP": JULY[2:-2]})
    config = write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8").replace(
        'universe = "djia20"', 'universe = ["KO", "PEP"]'
    )
    config.write_text(text.replace('"yfinance"', f'"replay:{out.as_posix()}"'), encoding="utf-8")
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-18"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "coverage: markets.us us-configured 2/2 members, 13 sessions 2025-07-01..2025-07-18"
    ]


DJIA_WITHOUT_BUNDLED_BARS = (
    *("GS", "HD", "V", "SHW", "CAT", "MCD", "UNH", "AXP"),
    *("TRV", "CRM", "JPM", "IBM", "BA", "PG", "JNJ"),
)


def test_imported_bars_complete_the_bundled_ones_to_cover_djia20(tmp_path: Path) -> None:
    # `replay:bundled,DIR`: openbell's own daily files (5 of DJIA-20's members) and the user's
    # imported bars of the other 15 (from June on, so that each has a bar ended by the first slot,
    # where equal_weight buys what is offered), read as one source.
    days = ("2025-06-26", "2025-06-27", "2025-06-30", *JULY)
    out = import_bars(tmp_path, dict.fromkeys(DJIA_WITHOUT_BUNDLED_BARS, days))
    config = write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace('"yfinance"', f'"replay:bundled,{out.as_posix()}"'), encoding="utf-8"
    )
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-18"]
    result = openbell(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "coverage: markets.us djia20 20/20 members, 13 sessions 2025-07-01..2025-07-18"
    ]
    with sqlite3.connect(tmp_path / "ledger.db") as connection:
        bought = {row[0] for row in connection.execute("SELECT DISTINCT symbol FROM fill")}
    assert bought == {"MSFT", "AMGN", "HON", "AMZN", "AAPL", *DJIA_WITHOUT_BUNDLED_BARS}


def test_bars_of_a_symbol_in_both_the_bundled_files_and_an_import_are_refused(
    tmp_path: Path,
) -> None:
    out = import_bars(tmp_path, {"AAPL": JULY, "GS": JULY})
    config = write_config(tmp_path, "us", "djia20")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace('"yfinance"', f'"replay:bundled,{out.as_posix()}"'), encoding="utf-8"
    )
    args = ["replay", "--config", str(config), "--start", "2025-07-01", "--end", "2025-07-18"]
    refused = openbell(tmp_path, *args)
    assert refused.returncode == 2
    assert_one_error_line(refused, "AAPL 1d bars are loaded twice")
    assert cycles(tmp_path) == 0
