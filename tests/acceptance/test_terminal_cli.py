"""The real `openbell` command for a person at a terminal: fitting tables, `--db`, `positions`,
every config error at once, rounded figures, and a baseline cycle's orders in `trace`."""

from __future__ import annotations

import itertools
import json
import re
import statistics
import subprocess
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openbell.markets.domain import utc
from openbell.markets.replay_source import ReplaySource
from openbell.ops.config.schema import default_config_text
from openbell.ops.reports import figures
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.cli import clean_env
from openbell_testkit.cli import openbell as run_openbell
from openbell_testkit.llm import (
    CN_STOCK,
    PROTOCOL_COMPLETE,
    PROTOCOL_ENDINGS,
    PROTOCOL_MAX_TOOL_CALLS,
    PROTOCOL_MAX_TURNS,
    ScriptedModel,
    protocol_script,
    serve_script,
)
from openbell_testkit.reports import AAPL, BTC, INITIAL, SLOTS, build_ledger

TIMEOUT_S = 180  # generous: the machine running the suite may be busy


def openbell(cwd: Path, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    width = {} if columns is None else {"COLUMNS": str(columns)}
    env = clean_env(without={"COLUMNS"}, **width)
    return run_openbell(cwd, *args, env=env, timeout_s=TIMEOUT_S)


LONG_NAME = "an-agent-whose-name-is-longer-than-a-table-cell"


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared SQLite ledger (see openbell_testkit.reports), with no config file beside it, plus
    a US cash account whose agent has a long name."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    ledger = Ledger(engine)
    build_ledger(ledger)
    opened = SLOTS[0] - timedelta(days=1)
    account = ledger.open_account(
        ledger.ensure_agent(LONG_NAME, "cash", opened), "us", "USD", INITIAL, opened
    )
    for at in SLOTS:
        cycle = ledger.claim_cycle(account, at, "test", at + timedelta(minutes=5), at)
        assert cycle is not None
        ledger.write_nav_snapshot(account, at, SnapshotKind.SLOT, {})
        ledger.finish_cycle(cycle, CycleStatus.DONE, at)
    engine.dispose()
    return path


BAD_CONFIG = """\
[store]
urll = "sqlite:///var/x.db"

[markets.us]
universe = "nasdaq100"
cadence = "weekly"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "cash"
kind = "cash"
markets = ["us", "crypto"]
seed = 3
"""


def test_a_bad_config_lists_every_problem_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_CONFIG, encoding="utf-8")
    expected = [
        f"openbell: error: {bad}: store.urll: unknown key (did you mean 'url'?)",
        f"openbell: error: {bad}: agents[0].seed: unknown key",
        f"openbell: error: {bad}: markets.us.cadence: ",
    ]
    for args in (("config", "check"), ("leaderboard",), ("ledger", "verify")):
        result = openbell(tmp_path, "--config", str(bad), *args)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 3, result.stderr
        for line, start in zip(lines, expected, strict=True):
            assert line.startswith(start), result.stderr

    good = tmp_path / "good.toml"
    good.write_text(default_config_text(), encoding="utf-8")
    result = openbell(tmp_path, "config", "check", "--config", str(good))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{good}: ok (markets us, cn, crypto; 5 agents)\n"


def test_db_reads_a_ledger_without_a_config_file(ledger_db: Path, tmp_path: Path) -> None:
    for db in (str(ledger_db), f"sqlite:///{ledger_db}"):
        runs = {
            "leaderboard": openbell(tmp_path, "leaderboard", "--db", db, "-f", "json"),
            "report": openbell(tmp_path, "report", "alpha", "-m", "us", "--db", db, "--json"),
            "export": openbell(tmp_path, "export", "fills", "--db", db),
            "trace": openbell(tmp_path, "trace", "1", "--db", db),
            "ledger verify": openbell(tmp_path, "ledger", "verify", "--db", db),
        }
        for name, result in runs.items():
            assert result.returncode == 0, (name, db, result.stderr)
        assert '"final_nav": "10080.00"' in runs["leaderboard"].stdout
        assert '"agent": "alpha"' in runs["report"].stdout
        assert runs["export"].stdout.count("AAPL") == 3
        assert "cycle 1: alpha (buy_and_hold) in us" in runs["trace"].stdout
        assert runs["ledger verify"].stdout.startswith("ledger ok: 5 accounts, 4 fills")
    assert not (tmp_path / "openbell.toml").exists()


def test_db_overrides_the_config_store(ledger_db: Path, tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        default_config_text().replace("sqlite:///var/openbell.db", "sqlite:///elsewhere.db"),
        encoding="utf-8",
    )
    result = openbell(tmp_path, "leaderboard", "--db", str(ledger_db), "-f", "csv")
    assert result.returncode == 0, result.stderr
    assert "alpha" in result.stdout
    assert not (tmp_path / "elsewhere.db").exists()


def test_db_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    result = openbell(tmp_path, "leaderboard", "--db", "var/nowhere.db")
    assert result.returncode == 2
    assert result.stderr == "openbell: error: --db var/nowhere.db: no such file\n"
    assert not (tmp_path / "var").exists()


def table_rows(text: str) -> list[list[str]]:
    """The cells of every header and body line of the rich tables in `text`."""
    rows = []
    for line in text.splitlines():
        if line.startswith(("┃", "│")):
            rows.append([cell.strip() for cell in re.split("[┃│]", line)[1:-1]])
    return rows


def board_rows(text: str) -> dict[str, dict[str, str]]:
    """Each leaderboard row of `text` by agent name: its cells by header (a name folded over two
    lines is joined, its marks dropped)."""
    found: dict[str, dict[str, str]] = {}
    header: list[str] = []
    last: dict[str, str] | None = None
    for cells in table_rows(text):
        if cells[0] == "#":
            header = cells
        elif cells[0] == "" and last is not None:  # the rest of a folded name
            last["agent"] += cells[1]
        else:
            last = dict(zip(header, cells, strict=True))
            found[last["agent"]] = last
    for key, row in list(found.items()):
        # The marks after a name ("[cutoff unknown]", "[model changed]") are not part of it.
        found[re.sub(r"( \[[^\]]*\])+$", "", row["agent"])] = found.pop(key)
    return found


def section(text: str, market: str) -> str:
    """The part of `text` that shows the leaderboard of `market`."""
    return text.split(f"{market} leaderboard (")[1].split(" leaderboard (")[0]


def pct(value: float) -> str:
    return f"{value * 100:.2f}"


COMPACT = {
    "#": None,
    "agent": None,
    "slot NAV": None,
    "return %": "cumulative_return",
    "ann. %": "annual_return",
    "Sharpe": "sharpe_ratio",
    "Sortino": "sortino_ratio",
    "max DD %": "max_drawdown",
    "composite": "composite",
}


def test_the_leaderboard_fits_120_columns_and_wide_shows_the_whole_panel(ledger_db: Path) -> None:
    cwd = ledger_db.parent
    exact = json.loads(openbell(cwd, "leaderboard", "--db", str(ledger_db), "-f", "json").stdout)
    compact = openbell(cwd, "leaderboard", "--db", str(ledger_db), columns=120)
    assert compact.returncode == 0, compact.stderr
    assert "…" not in compact.stdout
    assert "..." not in compact.stdout
    assert max(len(line) for line in compact.stdout.splitlines()) <= 120
    for board in exact["leaderboards"]:
        shown = board_rows(section(compact.stdout, board["market"]))
        assert set(shown) == {row["name"] for row in board["rows"]}
        for row in board["rows"]:
            cells = shown[row["name"]]
            assert list(cells) == list(COMPACT)
            assert cells["#"] == ("bench" if row["is_benchmark"] else str(row["rank"]))
            for header, key in COMPACT.items():
                if key in {"cumulative_return", "annual_return", "max_drawdown"}:
                    assert cells[header] == pct(row[key]), (row["name"], header)
                elif key is not None:
                    digits = 3 if key == "composite" else 2
                    want = "-" if row[key] is None else f"{row[key]:.{digits}f}"
                    assert cells[header] == want, (row["name"], header)
    assert LONG_NAME in board_rows(compact.stdout)

    wide = openbell(cwd, "leaderboard", "--db", str(ledger_db), "--wide", columns=120)
    assert wide.returncode == 0, wide.stderr
    assert "…" not in wide.stdout
    us = board_rows(section(wide.stdout, "us"))
    headers = list(us["alpha"])
    assert headers == ["#", "agent", *WIDE]  # every column of the panel, in order
    assert us[LONG_NAME]["agent"] == LONG_NAME
    assert max(len(line) for line in wide.stdout.splitlines()) > 120  # the whole panel, uncut


WIDE = {
    "slot NAV": "final_nav",
    "return %": "cumulative_return",
    "ann. %": "annual_return",
    "vol %": "annual_volatility",
    "Sharpe": "sharpe_ratio",
    "Sortino": "sortino_ratio",
    "max DD %": "max_drawdown",
    "Calmar": "calmar_ratio",
    "excess %": "excess_return",
    "IR": "information_ratio",
    "trades": "trades",
    "no-trade %": "no_trade_share",
    "rej. %": "rejection_rate",
    "turnover": "turnover",
    "turn./yr": "annual_turnover",
    "HHI": "hhi",
    "cash %": "cash_ratio",
    "hold %": "hold_share",
    "switch %": "switch_rate",
    "react.": "reactivity",
    "react. next": "reactivity_next",
    "persist. %": "persistence",
    "revision %": "revision_rate",
    "weight react.": "weight_reactivity",
    "protocol %": "protocol_completion",
    "composite": "composite",
    # The significance suite (docs/guide/significance.md), which the report also carries.
    "DSR": "dsr",
    "immature": "immature",
    "adj. p": "adjusted_p_value_best",
    "cost/dec.": "cost_per_decision",
    "ret./$": "return_per_dollar",
}


#: The behavioural columns of the wide view (Herculean's: issues 15 and 25) and their keys.
BEHAVIOUR = {
    "hold %": "hold_share",
    "switch %": "switch_rate",
    "react.": "reactivity",
    "react. next": "reactivity_next",
    "persist. %": "persistence",
    "revision %": "revision_rate",
    "weight react.": "weight_reactivity",
    "protocol %": "protocol_completion",
}


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties given their average rank (worked out here, not openbell's)."""
    ordered = sorted(values)
    return [(ordered.index(v) + 1 + len(ordered) - ordered[::-1].index(v)) / 2 for v in values]


def spearman(xs: list[float], ys: list[float]) -> float:
    return statistics.correlation(ranks(xs), ranks(ys))


def behaviour_cells(text: str, market: str) -> dict[str, list[str]]:
    """The behavioural cells of each row of the wide leaderboard of `market` in `text`."""
    return {
        agent: [cells[header] for header in BEHAVIOUR]
        for agent, cells in board_rows(section(text, market)).items()
    }


def _aapl_returns() -> list[float]:
    """AAPL's return from each slot to the next, priced as reports price (the bundled bars'
    quote at the slot)."""
    bundled = ReplaySource.from_bundled("us")
    prices = []
    for at in SLOTS:
        quote = bundled.quote_at("AAPL", at)
        assert quote is not None
        prices.append(float(quote.price))
    return [now / before - 1 for before, now in itertools.pairwise(prices)]


def gamma_weight_reactivity() -> str:
    """gamma's weight reactivity, worked out here: the weight each of its cycles but the first
    traded in AAPL (buy 20 at 102 on a NAV of 10,000; sell 20 at 105 on 10,060) against AAPL's
    return since the previous slot."""
    weights = [20 * 102 / 10_000, 0.0, -20 * 105 / 10_060, 0.0, 0.0]
    return f"{statistics.correlation(weights, _aapl_returns()):.3f}"


def next_reactivity(codes: list[float]) -> str:
    """Herculean's reactivity against the next return of an AAPL trader with these action codes
    at the first five slots: the Spearman correlation of the codes and AAPL's next returns."""
    return f"{spearman(codes, _aapl_returns()):.3f}"


def test_the_wide_leaderboard_shows_the_behavioural_metrics_of_the_ledger(
    ledger_db: Path,
) -> None:
    """Hold share, switch rate, reactivity and protocol completion of the prepared ledger (see
    openbell_testkit.reports), as worked out by hand, in the wide view and in its JSON."""
    cwd = ledger_db.parent
    wide = openbell(cwd, "leaderboard", "--db", str(ledger_db), "--wide")
    assert wide.returncode == 0, wide.stderr
    none = ["-"] * len(BEHAVIOUR)
    # alpha buys at its first of six cycles, gamma buys at its second and sells at its fourth
    # (a rejected order at its third is a hold); baselines have no trace: no protocol figure.
    # Six slots leave one trailing 5-period return: no trailing reactivity. Persistence: alpha's
    # codes (1, 0, 0, 0, 0, 0) move once by 1 over 5 pairs (1 - 0.5 / 5); gamma's
    # (0, 1, 0, -1, 0, 0) four times by 1 (1 - 2 / 5); crypto alpha's (1, 0, 0) once (1 - 0.5 / 2).
    # No rating agent: no revision rate.
    assert behaviour_cells(wide.stdout, "us") == {
        "benchmark:QQQ": none,
        "alpha": ["83.33", "16.67", "-", next_reactivity([1, 0, 0, 0, 0]), "90.00", "-", "-", "-"],
        "beta": ["100.00", "0.00", "-", "-", "-", "-", "-", "-"],
        "gamma": [
            "66.67",
            "33.33",
            "-",
            next_reactivity([0, 1, 0, -1, 0]),
            "60.00",
            "-",
            gamma_weight_reactivity(),
            "-",
        ],
        LONG_NAME: ["100.00", "0.00", "-", "-", "-", "-", "-", "-"],
    }
    assert behaviour_cells(wide.stdout, "crypto") == {
        "benchmark:CD5": none,
        "alpha": ["66.67", "33.33", "-", "-", "75.00", "-", "-", "-"],  # two next returns only
    }
    exact = json.loads(openbell(cwd, "leaderboard", "--db", str(ledger_db), "-f", "json").stdout)
    for board in exact["leaderboards"]:
        shown = behaviour_cells(wide.stdout, board["market"])
        for row in board["rows"]:
            want = [figures.figure(key, row[key]) for key in BEHAVIOUR.values()]
            assert shown[row["name"]] == want, (board["market"], row["name"])


def llm_reactivities() -> tuple[str, str]:
    """The reactivities of `protocol_script`'s agent over 2025-09-01..09, whose only trade was
    a buy of `CN_STOCK` at its third cycle, priced from the bundled bars (09:30 Shanghai):
    Herculean's against the next return, the Spearman correlation of its codes
    (0, 0, 1, 0, 0, 0) at the first six slots with the stock's next returns; openbell's weight
    reactivity, the Pearson correlation of the weights its cycles after the first traded (a
    correlation ignores the weight's size: (0, 1, 0, 0, 0, 0)) with the returns since the
    previous slot."""
    bundled = ReplaySource.from_bundled("cn")
    prices = []
    for day in (1, 2, 3, 4, 5, 8, 9):
        quote = bundled.quote_at(CN_STOCK, utc(2025, 9, day, 1, 30))
        assert quote is not None
        prices.append(float(quote.price))
    returns = [now / before - 1 for before, now in itertools.pairwise(prices)]
    herculean = spearman([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], returns)
    weight = statistics.correlation([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], returns)
    return f"{herculean:.3f}", f"{weight:.3f}"


def test_the_wide_leaderboard_shows_the_protocol_completion_of_a_replayed_llm(
    tmp_path: Path,
) -> None:
    """An LLM agent replayed through the real CLI against a scripted model on 127.0.0.1, seven
    A-share cycles of which four end with its own `finish` within its budgets (see
    `openbell_testkit.llm.PROTOCOL_ENDINGS`): protocol 4/7 in the wide view, the JSON and the
    report; it bought once (its third cycle), as `buy-and-hold` did (its first)."""
    model = ScriptedModel([protocol_script()] * 100)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{tmp_path / "ledger.db"}"\n\n'
            '[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "100000"\n'
            # September 2025 is before the dates sse50.toml vouches for (2025-09-30 on), and
            # 688981.SH has no bundled bars that week
            "allow_outside_coverage = true\nallow_partial_coverage = true\n\n"
            '[[agents]]\nname = "scripted-llm"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\n'
            f"max_turns = {PROTOCOL_MAX_TURNS}\nmax_tool_calls = {PROTOCOL_MAX_TOOL_CALLS}\n\n"
            '[[agents]]\nname = "buy-and-hold"\nkind = "buy_and_hold"\nmarkets = ["cn"]\n',
            encoding="utf-8",
        )
        replayed = openbell(tmp_path, "replay", "--start", "2025-09-01", "--end", "2025-09-09")
    assert replayed.returncode == 0, replayed.stderr
    assert "14 cycles done, 0 failed" in replayed.stdout
    assert (PROTOCOL_COMPLETE, len(PROTOCOL_ENDINGS)) == (4, 7)

    wide = openbell(tmp_path, "leaderboard", "-m", "cn", "--wide")
    assert wide.returncode == 0, wide.stderr
    cells = behaviour_cells(wide.stdout, "cn")
    react_next, weight_react = llm_reactivities()
    # Its codes (0, 0, 1, 0, 0, 0, 0) move twice by 1 over 6 pairs: persistence 1 - 1 / 6.
    assert cells["scripted-llm"] == [
        "85.71", "14.29", "-", react_next, "83.33", "-", weight_react, "57.14"
    ]  # fmt: skip
    # buy-and-hold bought in its first cycle only: (1, 0, 0, 0, 0, 0, 0) in each symbol, 1 - 0.5 / 6
    # (its next reactivity, a mean over the symbols it bought, is checked against the JSON below).
    assert [cells["buy-and-hold"][i] for i in (0, 1, 2, 4, 5, 6, 7)] == [
        "85.71", "14.29", "-", "91.67", "-", "-", "-"
    ]  # fmt: skip
    assert cells["benchmark:000016.SH"] == ["-"] * len(BEHAVIOUR)
    exact = json.loads(openbell(tmp_path, "leaderboard", "-m", "cn", "-f", "json").stdout)
    (board,) = exact["leaderboards"]
    rows = {row["name"]: row for row in board["rows"]}
    assert rows["scripted-llm"]["protocol_completion"] == 4 / 7
    assert rows["buy-and-hold"]["protocol_completion"] is None
    for name, row in rows.items():
        assert cells[name] == [figures.figure(key, row[key]) for key in BEHAVIOUR.values()]
    for agent in ("scripted-llm", "buy-and-hold"):
        shown = openbell(tmp_path, "report", agent, "-m", "cn")
        assert shown.returncode == 0, shown.stderr
        reported = report_rows(shown.stdout)
        row = board_rows(section(wide.stdout, "cn"))[agent]
        for header, key in BEHAVIOUR.items():
            assert reported[key][0] == row[header], (agent, key)


def report_rows(text: str) -> dict[str, tuple[str, str]]:
    """A report table's rows: value and unit by metric."""
    return {cells[0]: (cells[1], cells[2]) for cells in table_rows(text)}


def test_report_and_leaderboard_print_an_account_identically(ledger_db: Path) -> None:
    cwd = ledger_db.parent
    boards = {}
    for market in ("us", "crypto"):
        wide = openbell(cwd, "leaderboard", "--db", str(ledger_db), "-m", market, "--wide")
        assert wide.returncode == 0, wide.stderr
        boards[market] = board_rows(wide.stdout)
    for market, agent in (("us", "alpha"), ("us", "gamma"), ("crypto", "alpha")):
        result = openbell(cwd, "report", agent, "-m", market, "--db", str(ledger_db))
        assert result.returncode == 0, result.stderr
        reported = report_rows(result.stdout)
        row = boards[market][agent]
        for header, key in WIDE.items():
            assert reported[key][0] == row[header], (market, agent, key)
            if header.endswith("%"):
                assert reported[key][1] == "%", key
        assert reported["final_nav"][1] == ("USD" if market == "us" else "USDT")


def test_figures_in_tables_are_rounded_for_people(ledger_db: Path) -> None:
    cwd = ledger_db.parent
    exact = json.loads(openbell(cwd, "leaderboard", "--db", str(ledger_db), "-f", "json").stdout)
    for board in exact["leaderboards"]:
        (bench,) = [row for row in board["rows"] if row["is_benchmark"]]
        places = {"USD": 2, "USDT": 8}[board["currency"]]
        assert Decimal(bench["final_nav"]).as_tuple().exponent >= -places, bench["final_nav"]
        alpha = next(row for row in board["rows"] if row["name"] == "alpha")
        exact_nav = {"USD": "10080.00", "USDT": "10100.00000000"}[board["currency"]]
        assert alpha["final_nav"] == exact_nav  # a ledger amount stays exact in JSON
    shown = [
        openbell(cwd, "leaderboard", "--db", str(ledger_db), "--wide").stdout,
        openbell(cwd, "report", "gamma", "-m", "us", "--db", str(ledger_db)).stdout,
        openbell(cwd, "report", "alpha", "-m", "crypto", "--db", str(ledger_db)).stdout,
    ]
    for text in shown:
        cells = [cell for cells in table_rows(text) for cell in cells]
        assert cells
        long = [cell for cell in cells if re.fullmatch(r"-?[\d,]+\.\d{4,}", cell)]
        assert long == [], long
    assert "10,100.00" in shown[2]  # a USDT NAV in cents, not to its 8 places


def test_parquet_export_holds_decimals(ledger_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "fills.parquet"
    result = openbell(
        tmp_path, "export", "fills", "-f", "parquet", "-o", str(out), "--db", str(ledger_db)
    )
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    for name in ("quantity", "price", "notional", "fees"):
        assert pa.types.is_decimal(table.schema.field(name).type), name
    csv_rows = openbell(tmp_path, "export", "fills", "--db", str(ledger_db)).stdout.splitlines()
    header = csv_rows[0].split(",")
    for got, line in zip(table.to_pylist(), csv_rows[1:], strict=True):
        text = dict(zip(header, line.split(","), strict=True))
        for name in ("quantity", "price", "notional", "fees"):
            assert got[name] == Decimal(text[name]), name


def test_positions_show_cash_and_holdings_from_the_ledger(ledger_db: Path) -> None:
    cwd, db = ledger_db.parent, str(ledger_db)
    found = openbell(cwd, "positions", "--db", db, "--format", "json")
    assert found.returncode == 0, found.stderr
    accounts = {(a["market"], a["agent"]): a for a in json.loads(found.stdout)["accounts"]}
    assert set(accounts) == {
        ("us", "alpha"), ("us", "beta"), ("us", "gamma"), ("us", LONG_NAME), ("crypto", "alpha")
    }  # fmt: skip
    # alpha bought 10 AAPL at the first slot's price and holds them; crypto alpha 0.1 BTC
    for key, symbol, quantity, bought, mark, currency in (
        (("us", "alpha"), "AAPL", Decimal(10), AAPL[0], AAPL[-1], "USD"),
        (("crypto", "alpha"), "BTC/USDT", Decimal("0.1"), BTC[0], BTC[-1], "USDT"),
    ):
        account = accounts[key]
        (position,) = account["positions"]
        assert account["currency"] == currency
        assert Decimal(account["cash"]) == INITIAL - quantity * bought
        assert position["symbol"] == symbol
        assert Decimal(position["quantity"]) == quantity
        assert Decimal(position["cost"]) == quantity * bought
        assert Decimal(position["avg_cost"]) == bought
        assert Decimal(position["last_mark"]) == mark
        assert Decimal(position["value"]) == quantity * mark
        nav = INITIAL - quantity * bought + quantity * mark
        assert Decimal(account["nav"]) == nav
        assert position["weight"] == pytest.approx(float(quantity * mark / nav))
        assert account["cash_weight"] == pytest.approx(float((nav - quantity * mark) / nav))
    for key in (("us", "beta"), ("us", "gamma")):
        assert accounts[key]["positions"] == []
        assert accounts[key]["cash_weight"] == 1.0

    table = openbell(cwd, "positions", "--db", db, "-m", "us", "--agent", "alpha", columns=120)
    assert table.returncode == 0, table.stderr
    assert "alpha in us (USD)" in table.stdout
    rows = {cells[0]: cells for cells in table_rows(table.stdout)}
    assert rows["symbol"] == ["symbol", "quantity", "avg cost", "last mark", "marked at UTC",
                              "value", "weight %"]  # fmt: skip
    assert rows["AAPL"] == ["AAPL", "10", "100.00", "108.00", "2025-10-08 13:30", "1,080.00",
                            "10.71"]  # fmt: skip
    assert rows["cash"][-2:] == ["9,000.00", "89.29"]
    # Each NAV says which valuation it is and when (issue 28, 5): here the last marks are the
    # last slot's, so both are one figure.
    assert rows["total (last marks)"][-3:] == ["2025-10-08 13:30", "10,080.00", "100.00"]
    assert rows["NAV at last slot"][-3:] == ["2025-10-08 13:30", "10,080.00", ""]
    assert "beta" not in table.stdout

    btc = openbell(cwd, "positions", "--db", db, "-m", "crypto", columns=120)
    assert btc.returncode == 0, btc.stderr
    btc_row = next(cells for cells in table_rows(btc.stdout) if cells[0] == "BTC/USDT")
    assert btc_row[1:4] == ["0.10000", "60,000.00", "61,000.00"]  # the quantity to BTC's step

    as_csv = openbell(cwd, "positions", "--db", db, "-f", "csv", "-m", "crypto")
    assert as_csv.returncode == 0, as_csv.stderr
    lines = as_csv.stdout.splitlines()
    assert lines[0] == (
        "market,agent,currency,kind,symbol,quantity,cost,avg_cost,last_mark,marked_at,value,weight"
    )
    assert lines[1].startswith("crypto,alpha,USDT,cash,,,,,,,4000.00000000,")
    assert lines[2].startswith(
        "crypto,alpha,USDT,position,BTC/USDT,0.1,6000.00000000,60000,61000,"
        "2025-10-03T00:00:00+00:00,6100.00000000,"  # the value to USDT's minor unit
    )

    unknown = openbell(cwd, "positions", "--db", db, "--agent", "nobody")
    assert unknown.returncode == 2
    assert unknown.stderr == "openbell: error: no account of agent 'nobody' in the ledger\n"


def test_trace_of_a_baseline_cycle_shows_its_orders_and_fills(ledger_db: Path) -> None:
    cwd, db = ledger_db.parent, str(ledger_db)
    orders = openbell(cwd, "export", "orders", "--db", db, "-m", "us").stdout.splitlines()
    header = orders[0].split(",")
    placed = [dict(zip(header, line.split(","), strict=True)) for line in orders[1:]]
    # alpha's buy of 10 AAPL at the first slot, gamma's rejected buy of 500 and its sale of 20
    bought = next(o for o in placed if o["agent"] == "alpha")
    rejected = next(o for o in placed if o["status"] == "rejected")
    sold = next(o for o in placed if o["side"] == "sell")

    shown = openbell(cwd, "trace", bought["cycle_id"], "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "alpha (buy_and_hold) in us" in shown.stdout
    rows = {cells[0]: cells for cells in table_rows(shown.stdout)}
    assert rows["#"][:8] == ["#", "symbol", "side", "quantity", "status", "price", "notional",
                             "fees"]  # fmt: skip
    assert rows["0"][:8] == ["0", "AAPL", "buy", "10", "filled", "100.00", "1,000.00", "0.00"]
    assert "confidence 0.8: test" in rows["0"][8]

    shown = openbell(cwd, "trace", rejected["cycle_id"], "--db", db)
    row = next(cells for cells in table_rows(shown.stdout) if cells[0] == "0")
    assert row[:8] == ["0", "AAPL", "buy", "500", "rejected", "", "", ""]
    assert "insufficient_cash: no" in row[8]

    as_json = json.loads(openbell(cwd, "trace", sold["cycle_id"], "--db", db, "--json").stdout)
    (order,) = as_json["orders"]
    assert (order["symbol"], order["side"], order["quantity"], order["status"]) == (
        "AAPL", "sell", "20", "filled"
    )  # fmt: skip
    (fill,) = order["fills"]
    assert (fill["quantity"], fill["price"], fill["notional"], fill["fees"]) == (
        "20", str(AAPL[3]), f"{20 * AAPL[3]:.2f}", "0"
    )  # fmt: skip

    cycles = openbell(cwd, "export", "cycles", "--db", db, "--agent", "beta").stdout.splitlines()
    quiet = dict(zip(cycles[0].split(","), cycles[1].split(","), strict=True))["cycle_id"]
    shown = openbell(cwd, "trace", quiet, "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "no orders in this cycle" in shown.stdout
