"""`on_model_change = "split"` over a real local HTTP server: a scripted server whose model answers
under another fingerprint from the third session on has the account of the agent that splits
closed at that slot (its cycle `skipped`, reason `model_changed`, before the new model's answer
is acted on) and a new account, `NAME~2`, opened at that slot, which trades the rest of the
replay; the agent that flags keeps one account, marked. The ledger verifies, and the leaderboard
shows the two accounts as two rows."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

import httpx
from sqlmodel import Session, col, select

from openbell.agents.llm.agent import LlmAgent, OnModelChange
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.daemon.plan import ReplayPlan, open_accounts
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.errors import MODEL_CHANGED
from openbell.markets.rules import rules_for
from openbell.ops.reports.market_reports import leaderboard
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell.store.tables import CycleRow
from openbell.store.verify import verify_ledger
from openbell_testkit.llm import CN_STOCK, Body, ScriptedModel, finish, serve_script, tool_turn
from openbell_testkit.replay import cn_daily

SESSIONS = 5  # 2025-09-01 .. 2025-09-05
CHANGES_ON = 3  # from 2025-09-03 the server answers under another fingerprint


def changing_server(body: Body) -> httpx.Response:
    """Buys a lot of ICBC, then finishes; answering as build `fp_a` before `CHANGES_ON`, `fp_b`
    from it."""
    day = re.search(r"Now: \d{4}-\d{2}-(\d{2})", body["messages"][1]["content"])
    assert day is not None
    fingerprint = "fp_b" if int(day.group(1)) >= CHANGES_ON else "fp_a"
    if any(message["role"] == "tool" for message in body["messages"]):
        payload = finish("Bought.")
    else:
        payload = tool_turn(("place_order", {"symbol": CN_STOCK, "side": "buy", "shares": 100}))
    return httpx.Response(
        200, json=payload | {"model": "gpt-test", "system_fingerprint": fingerprint}
    )


def agent(name: str, base_url: str, on_model_change: OnModelChange) -> LlmAgent:
    return LlmAgent(
        name=name,
        client=ChatClient(ClientConfig(base_url=base_url, model="gpt-test")),
        on_model_change=on_model_change,
    )


def test_a_model_change_splits_the_account_when_asked_and_flags_it_otherwise(db_url: str) -> None:
    upgrade(db_url)
    model = ScriptedModel([changing_server] * 100)
    with serve_script(model) as base_url:
        done = run_replay(
            ReplayPlan(
                store_url=db_url,
                start_at=utc(2025, 9, 1),
                end_at=utc(2025, 9, SESSIONS + 1),
                markets=(
                    cn_daily(
                        agent("splitter", base_url, "split"), agent("flagger", base_url, "flag")
                    ),
                ),
            )
        )
    # The split cycle is skipped; its successor's cycle at the same slot is done.
    assert (done.cycles_done, done.cycles_failed) == (2 * SESSIONS, 0)
    engine = make_engine(db_url)
    try:
        ledger = Ledger(engine)
        accounts = {a.agent_name: a.account_id for a in queries.accounts(engine, "cn")}
        assert set(accounts) == {"splitter", "splitter~2", "flagger"}

        def cycles(name: str) -> list[tuple[datetime, CycleStatus, str | None]]:
            with Session(engine) as session:
                rows = session.exec(
                    select(CycleRow)
                    .where(CycleRow.account_id == accounts[name])
                    .order_by(col(CycleRow.slot_at))
                ).all()
            return [(row.slot_at, CycleStatus(row.status), row.reason) for row in rows]

        before = cycles("splitter")
        assert [day.day for day, _, _ in before] == list(range(1, CHANGES_ON + 1))
        assert [status for _, status, _ in before[:-1]] == [CycleStatus.DONE] * (CHANGES_ON - 1)
        assert before[-1][1:] == (CycleStatus.SKIPPED, MODEL_CHANGED)
        after = cycles("splitter~2")
        assert [day.day for day, _, _ in after] == list(range(CHANGES_ON, SESSIONS + 1))
        assert {status for _, status, _ in after} == {CycleStatus.DONE}
        assert ledger.account_opened_at(accounts["splitter~2"]) == after[0][0]
        assert after[0][0] == before[-1][0]  # from the slot of the split on
        flagged = cycles("flagger")
        assert len(flagged) == SESSIONS
        assert {status for _, status, _ in flagged} == {CycleStatus.DONE}

        # The split cycle placed nothing: the new model's answer was not acted on.
        split_cycle = queries.cycle_activity(engine, accounts["splitter"])[-1].cycle_id
        assert ledger.cycle_orders(split_cycle) == []
        roles = [t.role for t in ledger.traces(split_cycle)]
        assert "model_changed" in roles
        assert "tool" not in roles
        assert ledger.open_positions(accounts["splitter"]) == {CN_STOCK: 200}
        assert ledger.open_positions(accounts["splitter~2"]) == {CN_STOCK: 300}

        board = {row.agent: row for row in leaderboard(engine, "cn").rows}
        assert {"splitter", "splitter~2", "flagger"} <= set(board)
        assert board["flagger"].llm is not None
        assert board["flagger"].llm.model_changed
        assert board["splitter~2"].llm is not None
        assert not board["splitter~2"].llm.model_changed
        assert verify_ledger(engine).ok

        # A later run (a restarted daemon, a resumed replay) trades the latest generation.
        rules = rules_for("cn")
        again = open_accounts(
            ledger,
            "cn",
            rules,
            Decimal(100000),
            [agent("splitter", "http://127.0.0.1:1/v1", "split")],
            utc(2025, 9, 8),
        )
        assert [(account_id, a.name) for account_id, a in again] == [
            (accounts["splitter~2"], "splitter~2")
        ]
    finally:
        engine.dispose()
