"""The arena page's significance columns over a real ledger (SQLite and Postgres), through
Starlette's test client: each row's DSR, Holm-adjusted p and immature mark are the suite's of
`openbell leaderboard --wide` (`ops.reports.board_significance`, the API's defaults), the skilled
agent's p is marked significant and no noise agent's is, the explanation is on the page, and an
agent whose name is markup is shown as text."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.ops.reports.board_significance import market_views, significance_of
from openbell.ops.web.pages import page_routes
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell_testkit.significance import (
    BASELINES,
    DAYS,
    INITIAL,
    START,
    build_significance_ledger,
)

HOSTILE = '<img src=x onerror="alert(1)">"&\'idle'


def _row(page: str, name: str) -> str:
    """The `<tr>` of the agent called `name` (as the page escapes it)."""
    escaped = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = escaped.replace('"', "&#34;").replace("'", "&#39;")
    match = re.search(
        rf'<tr class="agent" data-name="{re.escape(escaped)}">(.*?)</tr>', page, re.DOTALL
    )
    assert match is not None, name
    return match.group(1)


def _cell(row: str, column: str) -> str:
    match = re.search(rf'<td class="num {column}[^"]*"[^>]*>([^<]*)</td>', row)
    assert match is not None, column
    return unescape(match.group(1))


def test_the_arena_shows_the_boards_significance_suite(engine: Engine) -> None:
    ledger = Ledger(engine)
    build_significance_ledger(ledger)
    opened = START - timedelta(days=1)
    idle = ledger.open_account(
        ledger.ensure_agent(HOSTILE, "llm", opened), "crypto", "USDT", INITIAL, opened
    )
    for day in range(DAYS):
        ledger.write_nav_snapshot(idle, START + timedelta(days=day), SnapshotKind.SLOT, {})
    (view,) = market_views(engine, ["crypto"], None, None)
    suite = significance_of(view)  # the API's and the page's defaults
    client = TestClient(Starlette(routes=page_routes(engine)))
    for path in ("/", "/markets/crypto"):
        page = client.get(path).text
        assert 'id="significance"' in page
        assert "docs/guide/significance.md" in page
        assert f"DSR over N={suite.trials} accounts" in page
        for found in suite.rows:
            row = _row(page, found.name)
            expected_dsr = "-" if found.dsr is None else f"{found.dsr:.3f}"
            assert _cell(row, "dsr") == expected_dsr, found.name
            best = found.best
            p = None if best is None else best.adjusted_p_value
            assert _cell(row, "adjusted_p") == ("-" if p is None else f"{p:.4f}"), found.name
            assert ("adjusted_p significant" in row) is found.significant, found.name
            assert ('class="tag immature"' in row) is found.immature, found.name
        skilled = suite.row("skilled")
        assert skilled is not None
        assert skilled.significant
        assert not any(r.significant for r in suite.rows if r.name.startswith("noise"))
        for baseline in BASELINES:
            assert _cell(_row(page, baseline), "adjusted_p") == "-"
        assert '<img src=x onerror="alert(1)">' not in page
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
        idle_row = _row(page, HOSTILE)
        assert 'class="tag immature"' in idle_row  # a flat NAV: no Sharpe, never mature
        assert _cell(idle_row, "dsr") == "-"
