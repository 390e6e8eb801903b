"""Which model answered, over a real local HTTP server: a scripted server that keeps the model
name but changes its `system_fingerprint` and revision header in the middle of a replay has its
account marked (the report, the leaderboard record, the API record, the arena row and a
`model_changed` trace row), while an agent whose server never changes is not."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import httpx
from sqlalchemy import Engine

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.ops.reports.exporting import report_record, row_record
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.web.views import arena_row
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.llm import ScriptedModel, finish, serve_script
from openbell_testkit.replay import cn_daily

SESSIONS = 5  # 2025-09-01 .. 2025-09-05
CHANGES_AT = 3  # the server's third cycle answers as another build


def answering_as(fingerprint: str, revision: str) -> Callable[[dict[str, object]], httpx.Response]:
    """One cycle's answer (a `finish` call) from `gpt-test`, built `fingerprint`, revision
    header `revision`."""

    def answer(body: dict[str, object]) -> httpx.Response:
        payload = finish() | {"model": "gpt-test", "system_fingerprint": fingerprint}
        return httpx.Response(200, json=payload, headers={"openai-model": revision})

    return answer


def agent(name: str, base_url: str) -> LlmAgent:
    return LlmAgent(
        name=name,
        client=ChatClient(ClientConfig(base_url=base_url, model="gpt-test", api_key="sk-x")),
        prices=Prices(in_per_mtok=Decimal(1), out_per_mtok=Decimal(2)),
    )


def test_a_server_changing_its_build_mid_replay_is_flagged(db_url: str) -> None:
    upgrade(db_url)
    changing = ScriptedModel(
        [answering_as("fp_a", "gpt-test-0601")] * (CHANGES_AT - 1)
        + [answering_as("fp_b", "gpt-test-0901")] * (SESSIONS - CHANGES_AT + 1)
    )
    steady = ScriptedModel([answering_as("fp_a", "gpt-test-0601")] * SESSIONS)
    with serve_script(changing) as changing_url, serve_script(steady) as steady_url:
        done = run_replay(
            ReplayPlan(
                store_url=db_url,
                start_at=utc(2025, 9, 1),
                end_at=utc(2025, 9, 6),
                markets=(cn_daily(agent("changing", changing_url), agent("steady", steady_url)),),
            )
        )
    assert (done.cycles_done, done.cycles_failed) == (2 * SESSIONS, 0)
    engine = make_engine(db_url)
    try:
        check_flagged(engine)
    finally:
        engine.dispose()


def check_flagged(engine: Engine) -> None:
    ledger = Ledger(engine)
    accounts = {a.agent_name: a for a in queries.accounts(engine, "cn")}
    changing_id = accounts["changing"].account_id
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, changing_id)]
    assert len(cycles) == SESSIONS

    exchanges = [
        [(t.model, t.fingerprint, t.revision) for t in ledger.traces(c) if t.role == "assistant"]
        for c in cycles
    ]
    before = ("gpt-test", "fp_a", "openai-model=gpt-test-0601")
    after = ("gpt-test", "fp_b", "openai-model=gpt-test-0901")
    assert exchanges == [[before]] * (CHANGES_AT - 1) + [[after]] * (SESSIONS - CHANGES_AT + 1)
    changed = [[t.content for t in ledger.traces(c) if t.role == "model_changed"] for c in cycles]
    assert [bool(rows) for rows in changed] == [i == CHANGES_AT - 1 for i in range(SESSIONS)]
    assert "fp_b" in changed[CHANGES_AT - 1][0]
    assert "fp_a" in changed[CHANGES_AT - 1][0]

    found = report(engine, "changing", "cn")
    assert found.llm is not None
    assert found.llm.model_changed
    assert [(m.fingerprint, m.first_slot_at.day, m.exchanges) for m in found.llm.models] == [
        ("fp_a", 1, CHANGES_AT - 1),
        ("fp_b", CHANGES_AT, SESSIONS - CHANGES_AT + 1),
    ]
    record = report_record(found)
    assert record["model_changed"] is True
    assert [m["revision"] for m in record["models"]] == [before[2], after[2]]
    steady_report = report(engine, "steady", "cn")
    assert steady_report.llm is not None
    assert not steady_report.llm.model_changed
    assert len(steady_report.llm.models) == 1

    board = leaderboard(engine, "cn")
    marks = {row.agent: row_record(row)["model_changed"] for row in board.rows}
    assert marks == {"changing": True, "steady": False, None: None}  # None: the benchmark
    rows = {row.agent: arena_row("cn", row, ()) for row in board.rows if row.agent}
    assert rows["changing"].model_changed
    assert not rows["steady"].model_changed

    # Before the change, the window shows one identity: the mark is the window's.
    early = report(engine, "changing", "cn", end=utc(2025, 9, CHANGES_AT))
    assert early.llm is not None
    assert not early.llm.model_changed
