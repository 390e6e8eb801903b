"""A full short A-share replay with a scripted LLM agent next to a baseline: it researches, trades,
gets a `lot_size` rejection and corrects itself, every cycle is traced and priced, and the ledger
verifies. Then the same replay built from `openbell.toml`, against a real local HTTP server, with
the API key taken from the environment."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from openbell.agents.baselines import build_agent
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.agents.llm.run import Budgets
from openbell.agents.protocol import DecisionContext
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Rejection, utc
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import load_config
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.wiring.planning import replay_from_config
from openbell.store import queries
from openbell.store.behaviour_facts import AUTO_FINISH_CONTENT
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.replay_batch import WriteBehind
from openbell.store.verify import verify_ledger
from openbell_testkit.llm import (
    CN_STOCK,
    PROTOCOL_COMPLETE,
    PROTOCOL_ENDINGS,
    PROTOCOL_MAX_TOOL_CALLS,
    PROTOCOL_MAX_TURNS,
    ScriptedModel,
    protocol_script,
    self_correcting_trader,
    serve_script,
)
from openbell_testkit.replay import cn_daily
from openbell_testkit.store import dump_ledger

SESSIONS = 5  # 2025-09-01 .. 2025-09-05
KEY = "sk-replay-test-0123456789"


def check_ledger(url: str) -> tuple[Ledger, list[int]]:
    """The ledger verifies; the LLM account's cycle ids."""
    return checked_ledger(make_engine(url))


def checked_ledger(engine: Engine) -> tuple[Ledger, list[int]]:
    """The ledger on `engine` verifies; the LLM account's cycle ids."""
    report_ = verify_ledger(engine)
    assert report_.ok, report_.lines()
    ledger = Ledger(engine)
    (account,) = [a for a in queries.accounts(engine, "cn") if a.agent_kind == "llm"]
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account.account_id)]
    return ledger, cycles


def assert_self_corrected(ledger: Ledger, cycles: list[int]) -> None:
    assert len(cycles) == SESSIONS
    first = ledger.cycle_orders(cycles[0])
    assert [o.outcome.reason.value for o in first if isinstance(o.outcome, Rejection)] == [
        "lot_size"
    ]
    fills = [o.outcome for o in first if not isinstance(o.outcome, Rejection)]
    assert [(f.symbol, f.quantity) for f in fills] == [(CN_STOCK, Decimal(100))]
    assert all(not ledger.cycle_orders(cycle) for cycle in cycles[1:])  # it holds afterwards
    for cycle in cycles:
        roles = [t.role for t in ledger.traces(cycle)]
        assert roles[:2] == ["system", "user"]
        assert "stop" in roles
        assert ledger.cycle_usage(cycle).tokens_in > 0


def test_a_scripted_llm_agent_replays_next_to_a_baseline(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    model = ScriptedModel([self_correcting_trader] * 100)
    http = httpx.AsyncClient(transport=httpx.MockTransport(model.handler))
    agent = LlmAgent(
        name="scripted-llm",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key=KEY),
            http=http,
        ),
        prices=Prices(in_per_mtok=Decimal("0.27"), out_per_mtok=Decimal("1.10")),
    )
    market = cn_daily(agent, build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    done = run_replay(
        ReplayPlan(
            store_url=sqlite_url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 9, 6),
            markets=(market,),
        )
    )
    assert (done.slots, done.cycles_done, done.cycles_failed) == (SESSIONS, 2 * SESSIONS, 0)
    ledger, cycles = check_ledger(sqlite_url)
    assert_self_corrected(ledger, cycles)
    found = report(make_engine(sqlite_url), "scripted-llm", "cn")
    assert found.llm is not None
    assert found.llm.decisions == SESSIONS
    assert found.llm.cost is not None
    assert found.llm.cost > 0
    assert found.llm.cost_per_decision == found.llm.cost / SESSIONS
    assert found.rejections_by_reason == {"lot_size": 1}
    baseline = report(make_engine(sqlite_url), "buy-and-hold", "cn")
    assert baseline.llm is None


class _StopsAt(LlmAgent):
    """An LLM agent whose cycle on the day `stop_on` raises a database error (the slot stops)
    once the others wait on their models."""

    def __init__(self, stop_on: date, *, name: str, client: ChatClient) -> None:
        super().__init__(name=name, client=client, monotonic=lambda: 0.0)
        self._stop_on = stop_on

    async def decide(self, ctx: DecisionContext) -> None:
        if ctx.now.date() == self._stop_on:
            await asyncio.sleep(0.05)
            raise OperationalError("INSERT ...", {}, Exception("the disk went away"))
        await super().decide(ctx)


def _replay_scripted(
    url: str, *, batch_slots: int, stop_on: date | None = None, resume: bool = False
) -> None:
    """Three scripted LLM agents and a baseline over the sessions, on a still clock (so the
    traces' instants and latencies are the same in every run)."""
    model = ScriptedModel([self_correcting_trader] * 1000)
    agents = []
    for index in range(3):
        client = ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(model.handler)),
            monotonic=lambda: 0.0,
        )
        name = f"llm-{index}"
        agents.append(
            LlmAgent(name=name, client=client, monotonic=lambda: 0.0)
            if index or stop_on is None
            else _StopsAt(stop_on, name=name, client=client)
        )
    market = cn_daily(*agents, build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    run_replay(
        ReplayPlan(
            store_url=url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 9, 6),
            markets=(market,),
            batch_slots=batch_slots,
            resume=resume,
        )
    )


def test_llm_agents_written_behind_a_batch_a_slot_leave_the_ledger_of_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a batch a slot, each slot's batch (with the session close after it) is written in a
    worker thread while the next slot's agents wait on their models; the ledger is the one a
    single batch leaves, traces and usage included. Stopped at the fourth session (a database
    error, once the slot's agents wait on the model) and resumed, it is that ledger again."""
    started: list[object] = []
    start = WriteBehind.start
    monkeypatch.setattr(
        WriteBehind, "start", lambda self, write: (started.append(write), start(self, write))
    )
    dumps = []
    for name, batch_slots in (("one", 500), ("behind", 1)):
        url = f"sqlite:///{(tmp_path / f'{name}.db').as_posix()}"
        upgrade(url)
        started.clear()
        _replay_scripted(url, batch_slots=batch_slots)
        dumps.append(dump_ledger(url))
    assert len(started) == SESSIONS - 1  # the last batch is written at the end
    url = f"sqlite:///{(tmp_path / 'stopped.db').as_posix()}"
    upgrade(url)
    with pytest.raises(OperationalError, match="the disk went away"):
        _replay_scripted(url, batch_slots=1, stop_on=date(2025, 9, 4))
    stopped = dump_ledger(url)
    assert sorted({row[2].date() for row in stopped["cycle"]}) == [
        date(2025, 9, day) for day in (1, 2, 3)
    ]
    _replay_scripted(url, batch_slots=1, resume=True)
    dumps.append(dump_ledger(url))
    assert dumps[0]["trace"]
    assert dumps[0]["fill"]
    for table in dumps[0]:
        assert dumps[1][table] == dumps[0][table], table
        assert dumps[2][table] == dumps[0][table], table
    engine = make_engine(url)
    try:
        verified = verify_ledger(engine)
    finally:
        engine.dispose()
    assert verified.ok, verified.lines()


def config_text(url: str, base_url: str) -> str:
    return f"""
[store]
url = "{url}"

[markets.cn]
universe = "sse50"
cadence = "daily"
source = "akshare"
initial_cash = "100000"
allow_outside_coverage = true  # September 2025: before the dates sse50.toml vouches for
allow_partial_coverage = true  # 688981.SH has no bundled bars that week

[[agents]]
name = "local-llm"
kind = "llm"
markets = ["cn"]
base_url = "{base_url}"
model = "qwen3:8b"
api_key_env = "OPENBELL_TEST_LLM_KEY"
price_in_per_mtok = "0.1"
price_out_per_mtok = "0.4"
max_turns = 8
extra_headers = {{ "X-Title" = "openbell-test" }}
extra_body = {{ keep_alive = "5m" }}
"""


def test_an_llm_agent_from_the_config_trades_against_a_real_local_server(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([self_correcting_trader] * 100)
    monkeypatch.setenv("OPENBELL_TEST_LLM_KEY", KEY)
    path = tmp_path / "openbell.toml"
    with serve_script(model) as base_url:
        path.write_text(config_text(sqlite_url, base_url), encoding="utf-8")
        done = replay_from_config(
            load_config(path),
            start=date(2025, 9, 1),
            end=date(2025, 9, 5),
            market="cn",
            resume=False,
            show_progress=False,
        )
    assert (done.cycles_done, done.cycles_failed) == (SESSIONS, 0)
    ledger, cycles = check_ledger(sqlite_url)
    assert_self_corrected(ledger, cycles)
    assert {h["authorization"] for h in model.headers} == {f"Bearer {KEY}"}
    assert {h["x-title"] for h in model.headers} == {"openbell-test"}
    assert all(r["keep_alive"] == "5m" and r["model"] == "qwen3:8b" for r in model.requests)


def test_a_missing_key_variable_is_one_config_error(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENBELL_TEST_LLM_KEY", raising=False)
    path = tmp_path / "openbell.toml"
    path.write_text(config_text(sqlite_url, "http://127.0.0.1:9/v1"), encoding="utf-8")
    with pytest.raises(ConfigError, match="OPENBELL_TEST_LLM_KEY is not set"):
        replay_from_config(
            load_config(path),
            start=date(2025, 9, 1),
            end=date(2025, 9, 5),
            market="cn",
            resume=False,
            show_progress=False,
        )


# Protocol completion from a real replay (issue 15, item 3): a scripted model, faked at the HTTP
# boundary, ends each of seven A-share cycles its own way, under budgets of 3 turns and 3 tool
# calls. Four cycles finish within budget; the others end on a budget or without `finish`.
PROTOCOL_SESSIONS = len(PROTOCOL_ENDINGS)  # 2025-09-01 .. 2025-09-09


def test_protocol_completion_of_a_replay_is_the_share_of_cycles_finished_within_budget(
    db_url: str,
) -> None:
    upgrade(db_url)
    model = ScriptedModel([protocol_script()] * 100)
    agent = LlmAgent(
        name="scripted-llm",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key=KEY),
            http=model.client(),
        ),
        budgets=Budgets(max_turns=PROTOCOL_MAX_TURNS, max_tool_calls=PROTOCOL_MAX_TOOL_CALLS),
    )
    market = cn_daily(agent, build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    done = run_replay(
        ReplayPlan(
            store_url=db_url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 9, 10),
            markets=(market,),
        )
    )
    assert (done.slots, done.cycles_done, done.cycles_failed) == (
        PROTOCOL_SESSIONS,
        2 * PROTOCOL_SESSIONS,
        0,
    )
    engine = make_engine(db_url)
    try:
        ledger, cycles = checked_ledger(engine)
        stops = [[t.content for t in ledger.traces(cycle) if t.role == "stop"] for cycle in cycles]
        assert stops == [[stop] for _, stop in PROTOCOL_ENDINGS]
        finishes = [
            [t.content for t in ledger.traces(cycle) if t.tool == "finish"] for cycle in cycles
        ]
        # The loop finishes a cycle the model did not: in the model's place, which is no completion.
        assert [AUTO_FINISH_CONTENT in found for found in finishes] == [
            stop != "finished" for _, stop in PROTOCOL_ENDINGS
        ]
        assert (PROTOCOL_COMPLETE, PROTOCOL_SESSIONS) == (4, 7)
        expected = 4 / 7
        found = report(engine, "scripted-llm", "cn")
        assert found.behaviour.protocol_completion == expected
        board = leaderboard(engine, "cn")
        rows = {row.name: row for row in board.rows if not row.is_benchmark}
        llm_row = rows["scripted-llm"].behaviour
        assert llm_row is not None
        assert llm_row.protocol_completion == expected
        baseline = rows["buy-and-hold"].behaviour
        assert baseline is not None
        assert baseline.protocol_completion is None  # no trace: it does not speak the protocol
    finally:
        engine.dispose()
