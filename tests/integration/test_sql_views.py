"""The leaderboard views (migration 0010) on SQLite and Postgres: after a replay, `v_leaderboard`
gives every account the last NAV, cumulative return and max drawdown `openbell leaderboard
--format json` prints, and the example queries of the docs (docs/how-to/query-the-ledger.md) run
on a real ledger.

Last NAV and initial cash are the stored exact values, compared exactly. The ratios are doubles in
SQL (each NAV cast once, one division), floats compounded period by period in the CLI: they are
compared to 1e-9 relative (1e-12 absolute near zero): the two ways of rounding differed by at most
2e-13 relative (3e-16 absolute) over three months of the same replay, and a wrong formula differs
by far more.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from openbell.agents.baselines import BASELINE_KINDS, build_agent
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell_testkit.cli import openbell
from openbell_testkit.postgres import PgServer
from openbell_testkit.replay import cn_daily, crypto_daily

ROOT = Path(__file__).resolve().parents[2]
START = utc(2025, 9, 1)
END = utc(2025, 9, 22)
VIEW_NAMES = ("v_leaderboard", "v_latest_nav", "v_account_returns")
REL = 1e-9
ABS = 1e-12


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def replayed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Engine]]:
    """A ledger after three weeks' replay of every baseline in the A-share and crypto markets,
    once per engine for the module's tests (they only read it)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'openbell.db'}"
    else:
        pg_server: PgServer = request.getfixturevalue("pg_server")
        url = pg_server.fresh_schema_url()
    upgrade(url)

    def agents(market: str) -> list[Any]:
        return [
            build_agent(kind, kind.replace("_", "-"), market=market, seed=7)
            for kind in BASELINE_KINDS
        ]

    markets = (cn_daily(*agents("cn")), crypto_daily(*agents("crypto")))
    run_replay(ReplayPlan(store_url=url, start_at=START, end_at=END, markets=markets))
    engine = make_engine(url)
    try:
        yield url, engine
    finally:
        engine.dispose()


def cli_rows(url: str, cwd: Path) -> dict[tuple[str, str], dict[str, Any]]:
    result = openbell(cwd, "leaderboard", "--db", url, "--format", "json")
    assert result.returncode == 0, result.stderr
    return {
        (board["market"], row["agent"]): row
        for board in json.loads(result.stdout)["leaderboards"]
        for row in board["rows"]
        if not row["is_benchmark"]
    }


VIEWS = {name: text(f"SELECT * FROM {name}") for name in VIEW_NAMES}  # noqa: S608 (constant names)


def view_rows(engine: Engine, view: str) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        return [dict(row._mapping) for row in connection.execute(VIEWS[view])]


def close(view: float | None, cli: float | None) -> bool:
    if view is None or cli is None:
        return view is cli
    return math.isclose(view, cli, rel_tol=REL, abs_tol=ABS)


def test_the_leaderboard_view_gives_the_clis_figures(
    replayed: tuple[str, Engine], tmp_path: Path
) -> None:
    url, engine = replayed
    cli = cli_rows(url, tmp_path)
    board = view_rows(engine, "v_leaderboard")
    assert {(row["market"], row["agent"]) for row in board} == set(cli)
    assert len(board) == 2 * len(BASELINE_KINDS)
    for row in board:
        expected = cli[(row["market"], row["agent"])]
        assert Decimal(str(row["last_nav"])) == Decimal(expected["final_nav"]), row
        assert row["periods"] == expected["periods"], row
        assert close(row["cumulative_return"], expected["cumulative_return"]), (row, expected)
        assert close(row["max_drawdown"], expected["max_drawdown"]), (row, expected)
    # The figures are not trivial: someone lost from a peak, someone gained, cash did neither.
    assert min(row["max_drawdown"] for row in board) < -0.01
    assert max(row["cumulative_return"] for row in board) > 0.001
    cash = [row for row in board if row["agent"] == "cash"]
    assert [(row["cumulative_return"], row["max_drawdown"]) for row in cash] == [(0, 0), (0, 0)]
    # Ordered by market, best cumulative return first.
    for market in ("cn", "crypto"):
        returns = [row["cumulative_return"] for row in board if row["market"] == market]
        assert returns == sorted(returns, reverse=True)
    assert [row["market"] for row in board] == sorted(row["market"] for row in board)


def test_the_latest_nav_and_returns_views_agree_with_the_snapshots(
    replayed: tuple[str, Engine],
) -> None:
    _url, engine = replayed
    latest = view_rows(engine, "v_latest_nav")
    returns = view_rows(engine, "v_account_returns")
    with engine.connect() as connection:
        snapshots = connection.execute(
            text("SELECT account_id, at, nav FROM nav_snapshot WHERE kind = 'slot'")
        ).all()
    by_account: dict[int, list[tuple[str, Decimal]]] = {}
    for account_id, at, nav in snapshots:
        by_account.setdefault(account_id, []).append((str(at), Decimal(str(nav))))
    assert {row["account_id"] for row in latest} == set(by_account)
    for row in latest:
        newest_at, newest_nav = max(by_account[row["account_id"]])
        assert (str(row["at"]), Decimal(str(row["nav"]))) == (newest_at, newest_nav)
    assert len(returns) == len(snapshots)
    for row in returns:
        series = sorted(by_account[row["account_id"]])
        first = float(series[0][1])
        up_to = [float(nav) for at, nav in series if at <= str(row["at"])]
        assert close(row["cumulative_return"], up_to[-1] / first - 1)
        assert close(row["drawdown"], up_to[-1] / max(up_to) - 1)
        assert close(row["period_return"], up_to[-1] / up_to[-2] - 1 if len(up_to) > 1 else None)


def docs_queries() -> dict[str, list[str]]:
    """The SQL of each `sqlite3 ... '...'` and `psql ... -c '...'` line of the docs' "Query the
    ledger" page."""
    page = (ROOT / "docs" / "how-to" / "query-the-ledger.md").read_text(encoding="utf-8")
    section = page.split("# Query the ledger\n", 1)[1]
    found: dict[str, list[str]] = {"sqlite3": [], "psql": []}
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line)
            if words and words[0] in found:
                found[words[0]].append(words[-1])
    return found


def test_the_docs_name_example_queries_for_both_clients() -> None:
    queries = docs_queries()
    assert len(queries["sqlite3"]) >= 3
    assert len(queries["psql"]) >= 1
    assert all("v_" in sql for sql in queries["sqlite3"] + queries["psql"])


def test_each_docs_query_runs_on_a_real_ledger(replayed: tuple[str, Engine]) -> None:
    url, engine = replayed
    client = "psql" if url.startswith("postgresql") else "sqlite3"
    queries = docs_queries()[client]
    assert queries
    with engine.connect() as connection:
        for sql in queries:
            assert connection.exec_driver_sql(sql).all(), sql
