"""A strategy-code agent in a replay of the bundled crypto bars, next to a baseline: the model's
first answer peeks and is refused with the reason, the second is stored with its claim and runs
in the sandbox every cycle, it is rewritten on schedule, its weights are traded through the
toolbox, every run is stored, the ledger verifies and the agent is on the leaderboard with its
concordance gap. The model is faked at the HTTP boundary with real-shaped completions."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.agents.strategy_code.agent import StrategyCodeAgent, StrategySettings
from openbell.agents.strategy_code.sandbox import MAX_ERROR_CHARS, SandboxLimits
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Rejection, utc
from openbell.ops.reports.market_reports import leaderboard
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.redact import REDACTED, Redactor
from openbell.store.verify import verify_ledger
from openbell_testkit.jail import need_jail
from openbell_testkit.llm import ScriptedModel, completion
from openbell_testkit.replay import crypto_daily

DAYS = 10  # 2025-11-01 .. 2025-11-10, one slot a day at 00:00 UTC

PEEKING = """
def strategy(bars):
    scores = {s: df["close"].shift(-1).iloc[-2] / df["close"].iloc[-2] for s, df in bars.items()}
    best = max(scores, key=scores.get)
    return {best: 0.9}
"""

MOMENTUM = """
import pandas as pd

LOOKBACK = 20


def strategy(bars):
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        if len(close) > LOOKBACK:
            scores[symbol] = close.iloc[-1] / close.iloc[-LOOKBACK - 1] - 1
    if not scores:
        return {}
    ranked = pd.Series(scores).sort_values(ascending=False)
    return {symbol: 0.3 for symbol in list(ranked.index)[:3]}
"""


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("strategy")


def answer(code: str, expected_return: float = 0.002, hit_rate: float = 0.6) -> dict[str, Any]:
    claim = {
        "expected_return": expected_return,
        "hit_rate": hit_rate,
        "rationale": "Momentum persists over weeks in crypto.",
    }
    return completion(json.dumps({"code": code, "claim": claim}), usage=(900, 300))


def make_agent(
    model: ScriptedModel, limits: SandboxLimits | None = None, **settings: Any
) -> StrategyCodeAgent:
    http = httpx.AsyncClient(transport=httpx.MockTransport(model.handler))
    return StrategyCodeAgent(
        name="coder",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key="sk-x"),
            http=http,
        ),
        settings=StrategySettings(
            lookback=60,
            limits=limits or SandboxLimits(cpu_s=10, memory_mb=1024, wall_s=30),
            **settings,
        ),
        prices=Prices(in_per_mtok=Decimal("0.27"), out_per_mtok=Decimal("1.10")),
    )


def replay(url: str, agent: StrategyCodeAgent, days: int = DAYS) -> Any:
    upgrade(url)
    return run_replay(
        ReplayPlan(
            store_url=url,
            start_at=utc(2025, 11, 1),
            end_at=utc(2025, 11, 1 + days),
            markets=(
                crypto_daily(agent, build_agent("equal_weight", "equal-weight", market="crypto")),
            ),
        )
    )


def coder_account(url: str) -> int:
    (account,) = [
        a for a in queries.accounts(make_engine(url), "crypto") if a.agent_kind == "strategy_code"
    ]
    return account.account_id


def test_a_strategy_code_agent_trades_a_replay_and_verifies(sqlite_url: str) -> None:
    model = ScriptedModel([answer(PEEKING), answer(MOMENTUM), answer(MOMENTUM, 0.01, 0.9)])
    done = replay(sqlite_url, make_agent(model, rewrite_every=6))
    assert (done.cycles_done, done.cycles_failed) == (2 * DAYS, 0)
    engine = make_engine(sqlite_url)
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
    ledger = Ledger(engine)
    account = coder_account(sqlite_url)
    strategies = ledger.strategies(account)
    # Written at the first cycle (after one refusal) and again after six runs.
    assert [s.answers for s in strategies] == [2, 1]
    assert [s.written_at for s in strategies] == [utc(2025, 11, 1), utc(2025, 11, 7)]
    assert strategies[0].claimed_return == Decimal("0.002")
    assert strategies[1].claimed_hit_rate == Decimal("0.9")
    assert all("shift(-1)" not in s.code for s in strategies)
    # The refusal went back to the model with the reason.
    refused = model.requests[1]["messages"][-1]["content"]
    assert "shift(-1) reads later rows" in refused
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account)]
    assert len(cycles) == DAYS
    runs = [ledger.strategy_run(cycle) for cycle in cycles]
    assert all(run is not None and run.outcome == "ok" for run in runs)
    first = runs[0]
    assert first is not None
    assert len(first.weights) == 3
    assert set(first.weights.values()) == {Decimal("0.3")}
    # The weights were traded through the toolbox: three buys at the first cycle.
    orders = ledger.cycle_orders(cycles[0])
    assert len(orders) == 3
    assert not [o for o in orders if isinstance(o.outcome, Rejection)]
    assert {o.symbol for o in orders} == set(first.weights)
    roles = [entry.role for entry in ledger.traces(cycles[0])]
    assert roles[:3] == ["system", "user", "assistant"]
    assert "refusal" in roles
    assert "tool" in roles
    assert ledger.cycle_usage(cycles[0]).tokens_in == 1800
    assert ledger.cycle_usage(cycles[1]).tokens_in == 0  # no model call between rewrites
    board = leaderboard(engine, "crypto")
    assert {"coder", "equal-weight"} <= {row.agent for row in board.rows}
    gaps = ledger.strategy_concordance(account)
    assert [g.runs for g in gaps] == [6, 4]
    assert [g.periods for g in gaps] == [6, 3]  # the last run has no next snapshot yet
    assert gaps[0].realised_return is not None
    assert gaps[0].return_gap == pytest.approx(0.002 - gaps[0].realised_return)


def test_a_model_that_keeps_peeking_fails_the_cycle_with_the_reason(sqlite_url: str) -> None:
    model = ScriptedModel([answer(PEEKING)] * 10)
    done = replay(sqlite_url, make_agent(model, max_retries=1), days=2)
    assert done.cycles_failed == 2
    assert len(model.requests) == 4  # one answer and one retry per cycle
    engine = make_engine(sqlite_url)
    assert verify_ledger(engine).ok
    account = coder_account(sqlite_url)
    (cycle, _) = queries.cycle_activity(engine, account)
    found = Ledger(engine).traces(cycle.cycle_id)
    assert found[-1].role == "error"
    assert "StrategyRefused" in (found[-1].content or "")
    assert "no acceptable strategy after 2 answers" in (found[-1].content or "")
    assert Ledger(engine).strategies(account) == []


def test_a_strategy_that_hangs_in_its_trial_goes_back_to_the_model(sqlite_url: str) -> None:
    hanging = "def strategy(bars):\n    while True:\n        pass\n"
    model = ScriptedModel([answer(hanging), answer(MOMENTUM)])
    agent = make_agent(model)
    done = replay(sqlite_url, agent, days=2)
    assert (done.cycles_done, done.cycles_failed) == (4, 0)
    assert "trial run failed" in model.requests[1]["messages"][-1]["content"]
    engine = make_engine(sqlite_url)
    assert verify_ledger(engine).ok
    (strategy,) = Ledger(engine).strategies(coder_account(sqlite_url))
    assert strategy.answers == 2
    assert "while True" not in strategy.code


LATER_BLOWS_UP = """
import numpy as np


def strategy(bars):
    day = bars["BTC/USDT"].index[-1].day
    if day == 1:  # the bar of 2025-11-01, seen at the slot of 2025-11-02
        hog = np.ones(10 * 1024**3 // 8)
        return {"BTC/USDT": float(hog[0])}
    if day == 2:
        while True:
            pass
    if day == 3:
        return {"BTC/USDT": 0.8, "ETH/USDT": 0.8}
    return {"BTC/USDT": 0.5}
"""


def test_runs_that_blow_up_later_hold_the_account_and_the_ledger_verifies(
    sqlite_url: str,
) -> None:
    model = ScriptedModel([answer(LATER_BLOWS_UP)])
    agent = make_agent(model, SandboxLimits(cpu_s=2, memory_mb=1024, wall_s=30))
    done = replay(sqlite_url, agent, days=5)
    assert (done.cycles_done, done.cycles_failed) == (10, 0)
    engine = make_engine(sqlite_url)
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
    ledger = Ledger(engine)
    account = coder_account(sqlite_url)
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account)]
    runs = [ledger.strategy_run(cycle) for cycle in cycles]
    assert all(run is not None for run in runs)
    stored = [run for run in runs if run is not None]
    assert [run.outcome for run in stored] == ["ok", "error", "killed", "invalid", "ok"]
    assert "MemoryError" in (stored[1].error or "")
    assert "CPU limit is 2 s" in (stored[2].error or "")
    assert "above 1" in (stored[3].error or "")
    assert [run.weights for run in stored[1:4]] == [{}, {}, {}]
    # The account held through the three bad runs: no orders in their cycles.
    assert ledger.cycle_orders(cycles[0])
    assert [ledger.cycle_orders(cycle) for cycle in cycles[1:4]] == [[], [], []]
    assert len(model.requests) == 1


def test_a_refused_rewrite_keeps_the_previous_strategy_running(sqlite_url: str) -> None:
    model = ScriptedModel([answer(MOMENTUM), answer(PEEKING), answer(PEEKING)])
    done = replay(sqlite_url, make_agent(model, rewrite_every=1, max_retries=0), days=3)
    assert (done.cycles_done, done.cycles_failed) == (6, 0)
    engine = make_engine(sqlite_url)
    assert verify_ledger(engine).ok
    ledger = Ledger(engine)
    account = coder_account(sqlite_url)
    (strategy,) = ledger.strategies(account)
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account)]
    runs = [ledger.strategy_run(cycle) for cycle in cycles]
    assert [(r.strategy_id, r.outcome) for r in runs if r is not None] == [
        (strategy.strategy_id, "ok")
    ] * 3
    assert len(model.requests) == 3  # the rewrite is due again at every cycle
    notes = [e.content or "" for e in ledger.traces(cycles[1]) if e.role == "refusal"]
    assert any("the previous strategy runs on" in note for note in notes)


OTHER_KEY = "other-agents-key-Zk3Jp8Qw5Rt2Yv7X"  # another agent's key, of no known pattern
TELLS = f"""
def strategy(bars):
    raise ValueError("{OTHER_KEY} " + "x" * 100000)
"""


def test_a_trial_error_is_masked_and_cut_before_the_model_the_trace_or_the_ledger_see_it(
    sqlite_url: str,
) -> None:
    model = ScriptedModel([answer(TELLS)] * 4)
    agent = make_agent(model, max_retries=1)
    masked = StrategyCodeAgent(
        name="coder",
        client=agent._client,
        settings=agent._settings,
        redactor=Redactor([OTHER_KEY]),
    )
    done = replay(sqlite_url, masked, days=1)
    assert done.cycles_failed == 1
    retry = model.requests[1]["messages"][-1]["content"]
    assert "trial run failed" in retry
    assert REDACTED in retry
    told = [
        m["content"] for body in model.requests for m in body["messages"] if m["role"] == "user"
    ]
    assert not [text for text in told if OTHER_KEY in text]  # (its own code holds it, of course)
    assert len(retry) < MAX_ERROR_CHARS + 500  # the 100 000 characters were cut
    engine = make_engine(sqlite_url)
    (cycle,) = queries.cycle_activity(engine, coder_account(sqlite_url))
    texts = [
        entry.content or ""
        for entry in Ledger(engine).traces(cycle.cycle_id)
        if entry.role in ("refusal", "error")
    ]
    assert any(REDACTED in text for text in texts)
    assert not [text for text in texts if OTHER_KEY in text]
    assert max(len(text) for text in texts) < 10_000
