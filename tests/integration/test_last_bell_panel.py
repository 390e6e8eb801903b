"""The arena page's last-bell panel (issue 28, problem 9): served with a daemon's health, it shows
each market's last slot, its state and cause (escaped: a vendor's error text is outside text),
the cycles and the next bell, from the same body as `/healthz`; without a daemon, no panel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.daemon.health import HealthBoard, MarketWatch
from openbell.daemon.runner import CycleOutcome, SlotReport
from openbell.ops.web.pages import page_routes
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell_testkit.reports import build_ledger

HOSTILE = '<script>window.__xss=1</script><img src=x onerror="alert(1)">'
SLOT_AT = datetime(2026, 12, 1, 14, 30, tzinfo=UTC)
NEXT_AT = datetime(2026, 12, 2, 14, 30, tzinfo=UTC)


def health_board() -> HealthBoard:
    watch = MarketWatch(cadence=timedelta(days=1), grace=timedelta(hours=1), since=SLOT_AT)
    return HealthBoard({"us": watch}, lambda _m, _at: SLOT_AT, lambda _m, _at: NEXT_AT)


def test_the_panel_shows_a_dark_slot_its_cause_and_the_next_bell(
    engine: Engine, ledger: Ledger
) -> None:
    build_ledger(ledger)
    board = health_board()
    board.slot_started("us", SLOT_AT, SLOT_AT)
    outcomes = tuple(
        CycleOutcome(account_id=n, agent=f"a{n}", cycle_id=n, status=CycleStatus.SKIPPED)
        for n in (1, 2)
    )
    board.slot_finished(
        SlotReport(
            market="us",
            slot_at=SLOT_AT,
            outcomes=outcomes,
            unavailable_cause="dns",
            unavailable_message=HOSTILE,
        ),
        rejections=0,
        latency_s=1.0,
    )
    now = SLOT_AT + timedelta(minutes=5)
    client = TestClient(Starlette(routes=page_routes(engine, health=lambda: board.status(now)[1])))
    page = client.get("/").text
    assert 'id="last-bell"' in page
    row = page[page.index('<tr data-market="us">') :]
    row = row[: row.index("</tr>")]
    assert "2026-12-01 14:30 UTC" in row
    assert 'class="state state-data-unavailable">data unavailable<' in row
    assert "dns &lt;script&gt;" in row
    assert HOSTILE not in page
    assert "skipped 2" in row
    assert "2026-12-02 14:30 UTC" in row
    # A slot in progress reads so, on the next request, before the ledger's stamp moves.
    board.slot_started("us", NEXT_AT, NEXT_AT)
    running = client.get("/").text
    assert 'class="state state-running">in progress<' in running


def test_without_a_daemon_there_is_no_panel(engine: Engine, ledger: Ledger) -> None:
    build_ledger(ledger)
    page = TestClient(Starlette(routes=page_routes(engine))).get("/").text
    assert 'id="last-bell"' not in page
