"""The leaderboard and report under a metrics convention, from a hand-built ledger (SQLite and
Postgres): a close-to-close account series read from the slot and session-close snapshots with
its base, the convention named on the board and the report, annual turnover, and an LLM agent's
parse failures and tool validity as rates beside their counts."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.markets.domain import Instrument, Order, Side, utc
from openbell.ops.evaluation.conventions import CONVENTIONS, OPENBELL
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.store import queries
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, CycleUsage, SnapshotKind, TraceEntry
from openbell_testkit.store import fill_for

#: Three XNYS sessions: slots at the 09:30 New York open, closes at 16:00.
OPENS = tuple(utc(2025, 10, day, 13, 30) for day in (1, 2, 3))
CLOSES = tuple(utc(2025, 10, day, 20, 0) for day in (1, 2, 3))
#: AAPL at each open and each close.
AT_OPEN = (Decimal(100), Decimal(104), Decimal(99))
AT_CLOSE = (Decimal(102), Decimal(101), Decimal(103))
CASH = Decimal(10_000)
AAPL = Instrument(symbol="AAPL", market="us", currency="USD")


def build(ledger: Ledger) -> int:
    """An LLM agent that buys 10 AAPL at the first open and holds, with a slot snapshot at each
    open and a close snapshot at each close; its cycles trace four tool calls, one invalid, and
    three answers of which one failed to parse."""
    now = OPENS[0] - timedelta(days=1)
    agent_id = ledger.ensure_agent("gpt", "llm", now)
    account_id = ledger.open_account(agent_id, "us", "USD", CASH, now)
    for index, (opened, closed) in enumerate(zip(OPENS, CLOSES, strict=True)):
        cycle = ledger.claim_cycle(
            account_id, opened, "test", opened + timedelta(minutes=5), opened
        )
        assert cycle is not None
        if index == 0:
            order = Order(instrument=AAPL, side=Side.BUY, quantity=Decimal(10), placed_at=opened)
            ledger.record_order(
                cycle_id=cycle, seq=1, order=order, outcome=fill_for(order, AT_OPEN[0])
            )
        calls = 2 if index == 0 else 1
        entries = [
            TraceEntry(cycle_id=cycle, role="tool", at=opened, tool="get_quote", content="{}")
            for _ in range(calls)
        ]
        usage = CycleUsage(
            tokens_in=10,
            llm_attempts=1 + (index == 0),
            parse_failures=int(index == 0),
            invalid_tool_calls=int(index == 0),
        )
        ledger.append_journal(cycle, entries, usage)
        ledger.write_nav_snapshot(account_id, opened, SnapshotKind.SLOT, {"AAPL": AT_OPEN[index]})
        ledger.finish_cycle(cycle, CycleStatus.DONE, opened)
        ledger.write_nav_snapshot(account_id, closed, SnapshotKind.CLOSE, {"AAPL": AT_CLOSE[index]})
    return account_id


def test_close_to_close_reads_the_end_of_day_navs_from_the_initial_cash(engine: Engine) -> None:
    build(Ledger(engine))
    ktd = CONVENTIONS["ktd-fin"]
    board = leaderboard(engine, "us", convention=ktd)
    assert board.convention is ktd
    (row,) = [row for row in board.rows if not row.is_benchmark]
    found = report(engine, "gpt", "us", convention=ktd)
    held = CASH - 10 * AT_OPEN[0]  # the fill at the first open, at its price
    expected = [CASH, *(held + 10 * close for close in AT_CLOSE)]
    assert [point.nav for point in found.navs] == expected
    assert [point.at for point in found.navs] == [OPENS[0], *CLOSES]
    assert row.panel.cumulative_return == pytest.approx(float(expected[-1] / CASH - 1), rel=1e-12)
    assert found.convention is ktd
    # open to open (the default), the slot snapshots at the opens
    default = report(engine, "gpt", "us")
    assert [point.nav for point in default.navs] == [held + 10 * p for p in AT_OPEN]
    assert default.convention is OPENBELL


def test_a_window_after_the_first_day_starts_from_the_close_before_it(engine: Engine) -> None:
    build(Ledger(engine))
    start = utc(2025, 10, 2)
    found = report(engine, "gpt", "us", start, convention=CONVENTIONS["ai-trader"])
    held = CASH - 10 * AT_OPEN[0]
    assert [point.nav for point in found.navs] == [held + 10 * p for p in AT_CLOSE]
    assert [point.at for point in found.navs] == [OPENS[1], *CLOSES[1:]]


def test_rates_beside_their_counts_and_turnover_annualised(engine: Engine) -> None:
    account_id = build(Ledger(engine))
    assert queries.tool_calls_of(engine, [account_id]) == {account_id: 4}
    (row,) = [row for row in leaderboard(engine, "us").rows if not row.is_benchmark]
    usage = row.llm
    assert usage is not None
    assert (usage.parse_failures, usage.invalid_tool_calls, usage.tool_calls) == (1, 1, 4)
    assert usage.parse_failure_rate == 1 / 4  # of four answers
    assert usage.tool_validity_rate == 3 / 4
    found = row.behaviour
    assert found is not None
    assert found.turnover is not None
    assert found.annual_turnover == found.turnover / 3 * 252  # three slots, 252 a year


def test_the_api_measures_under_the_configured_convention_and_names_it(engine: Engine) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from openbell.ops.web.app import web_routes

    build(Ledger(engine))
    ktd = CONVENTIONS["ktd-fin"]
    with TestClient(Starlette(routes=web_routes(engine, convention=ktd))) as client:
        board = client.get("/api/v1/leaderboard/us").json()
        panel = client.get("/api/v1/agents/gpt/us/metrics").json()
    assert board["convention"]["name"] == panel["convention"]["name"] == "ktd-fin"
    (row,) = [row for row in board["rows"] if row["agent"] == "gpt"]
    held = CASH - 10 * AT_OPEN[0]
    assert row["cumulative_return"] == pytest.approx(float((held + 10 * AT_CLOSE[-1]) / CASH - 1))
    assert panel["tool_validity_rate"] == 3 / 4


def test_the_arena_page_names_the_convention(engine: Engine) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from openbell.ops.web.app import web_routes

    build(Ledger(engine))
    routes = web_routes(engine, convention=CONVENTIONS["stockbench"])
    with TestClient(Starlette(routes=routes)) as client:
        page = client.get("/").text
    assert "daily · benchmark QQQ · USD · stockbench metrics" in page
