"""Protocol completion, Herculean's share of steps with a valid submission, for every agent kind in
one replay: six days of the bundled crypto bars with a rule baseline, an LLM agent in the tool
mode, one in a structured mode (fixed-candidate), a rating agent, a strategy-code agent and a
`command` agent. The models are scripted at the HTTP boundary; each script ends its six cycles so
that the count below can be made by hand, and the leaderboard must give exactly that count.

The two bugs of issue 25 are here: a rating agent whose reports were all valid read 0.00% (it never
called `finish` in its trace), and a structured agent whose every answer failed validation read
100% (its mode finished the cycle with no trade)."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.run import Budgets
from openbell.agents.modes import MAX_RETRIES, prompt_for_mode
from openbell.agents.outside.command import CommandAgent, CommandSpec
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.rating.agent import RatingAgent, RatingSettings
from openbell.agents.strategy_code.agent import StrategyCodeAgent, StrategySettings
from openbell.agents.strategy_code.sandbox import SandboxLimits
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.ops.reports.market_reports import leaderboard
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger
from openbell_testkit.jail import need_jail
from openbell_testkit.llm import Body, ScriptedModel, completion, finish, tool_turn
from openbell_testkit.replay import crypto_daily

DAYS = 6  # 2025-11-01 .. 2025-11-06, one slot a day at 00:00 UTC
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_client_agent.py"
SKIPPED_DAY = "2025-11-03"

#: The tool-mode agent's cycles under a budget of 3 turns: finish at once; answer in text (openbell
#: finishes in its place); look, then finish; look until the turns run out; finish; finish.
TOOL_ENDINGS = ("finish", "text", "look, finish", "look", "finish", "finish")
TOOL_COMPLETE = 4
#: The structured agent's answers, cycle by cycle: valid; invalid every time (MAX_RETRIES + 1
#: answers, then the mode ends the cycle with no trade); invalid, then valid; valid; invalid
#: every time; valid.
STRUCTURED_CYCLES = (
    ["ok"],
    ["bad"] * (MAX_RETRIES + 1),
    ["bad", "ok"],
    ["ok"],
    ["bad"] * 4,
    ["ok"],
)
STRUCTURED_COMPLETE = 4
#: The rating agent's answers (one retry a cycle): valid; invalid, then valid; invalid twice (the
#: cycle fails, no report); valid three times.
RATING_CYCLES = (["ok"], ["bad", "ok"], ["bad", "bad"], ["ok"], ["ok"], ["ok"])
RATING_COMPLETE = 5
#: The strategy-code agent: its first writing is refused (the cycle fails: no strategy yet); the
#: second is stored and runs with valid weights at every cycle after.
STRATEGY_COMPLETE = 5
#: The command agent: it trades and finishes every day but one, when it exits without connecting.
COMMAND_COMPLETE = 5

PEEKING = """
def strategy(bars):
    return {s: 0.1 for s, df in bars.items() if df["close"].shift(-1).iloc[-2] > 0}
"""
EQUAL = """
def strategy(bars):
    return {symbol: 0.05 for symbol in sorted(bars)[:4]}
"""
#: Runs the example client, except on `SKIPPED_DAY`, when it leaves without connecting.
WRAPPER = textwrap.dedent(
    f"""
    import runpy, sys
    prompt = sys.stdin.read()
    if "slot at {SKIPPED_DAY}" in prompt:
        print("not today")
        sys.exit(0)
    example = sys.argv[1]
    sys.argv = [example, *sys.argv[2:]]
    runpy.run_path(example, run_name="__main__")
    """
)


def _client(model: ScriptedModel) -> ChatClient:
    return ChatClient(
        ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key="sk-x"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(model.handler)),
    )


def _tool_script() -> Callable[[Body], Body]:
    cycle = -1

    def answer(body: Body) -> Body:
        nonlocal cycle
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        cycle += turn == 0
        look = tool_turn(("get_quote", {"symbols": ["BTC/USDT"]}))
        ending = TOOL_ENDINGS[cycle]
        if ending == "text":
            return completion("I would rather hold.")
        if ending == "look":
            return look
        if ending == "look, finish":
            return look if turn == 0 else finish("Seen enough.")
        return finish("Holding.")

    return answer


def _structured(kind: str) -> Body:
    if kind == "ok":
        return completion(json.dumps({"orders": [], "overall_reason": "nothing to do"}))
    return completion("I cannot decide today.")


def _rating(kind: str) -> Callable[[Body], Body]:
    def answer(body: Body) -> Body:
        if kind == "bad":
            return completion("no JSON here")
        prompt = body["messages"][1]["content"]
        symbols = re.findall(r"^([A-Z0-9]+/[A-Z]+): ", prompt, re.MULTILINE)
        ratings = [
            {"symbol": symbol, "rating": "hold", "confidence": 0.5, "rationale": "flat"}
            for symbol in symbols
        ]
        return completion(json.dumps({"ratings": ratings}))

    return answer


def _strategy(code: str) -> Body:
    claim = {"expected_return": 0.001, "hit_rate": 0.55, "rationale": "equal weights"}
    return completion(json.dumps({"code": code, "claim": claim}))


def _agents(tmp_path: Path) -> tuple[Any, ...]:
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    return (
        build_agent("equal_weight", "baseline", market="crypto"),
        LlmAgent(
            name="tool-mode",
            client=_client(ScriptedModel([_tool_script()] * 50)),
            budgets=Budgets(max_turns=3),
        ),
        LlmAgent(
            name="structured",
            client=_client(
                ScriptedModel([_structured(kind) for found in STRUCTURED_CYCLES for kind in found])
            ),
            prompt=lambda ctx: prompt_for_mode("fixed-candidate"),
        ),
        RatingAgent(
            name="rater",
            client=_client(
                ScriptedModel([_rating(kind) for found in RATING_CYCLES for kind in found])
            ),
            settings=RatingSettings(lookback=5, max_retries=1),
        ),
        StrategyCodeAgent(
            name="coder",
            client=_client(ScriptedModel([_strategy(PEEKING), _strategy(EQUAL)])),
            settings=StrategySettings(
                lookback=30,
                max_retries=0,
                limits=SandboxLimits(cpu_s=10, memory_mb=1024, wall_s=30),
            ),
        ),
        CommandAgent(
            name="command",
            hub=CycleHub(),
            spec=CommandSpec(
                argv=(sys.executable, str(wrapper), str(EXAMPLE), "--symbol", "BTC/USDT"),
                prompt="stdin",
                environ=os.environ,
                workdir_root=tmp_path / "work",
            ),
            budgets=OutsideBudgets(max_wall_s=60),
        ),
    )


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The replay, run once for the tests of this module; its ledger's URL."""
    need_jail("strategy")
    need_jail("command")
    tmp_path = tmp_path_factory.mktemp("mixed")
    sqlite_url = f"sqlite:///{tmp_path / 'state' / 'openbell.db'}"
    upgrade(sqlite_url)
    done = run_replay(
        ReplayPlan(
            store_url=sqlite_url,
            start_at=utc(2025, 11, 1),
            end_at=utc(2025, 11, 1 + DAYS),
            markets=(crypto_daily(*_agents(tmp_path)),),
        )
    )
    # Two cycles failed: the rater's third (no valid report) and the coder's first (refused).
    assert (done.slots, done.cycles_failed) == (DAYS, 2)
    verified = verify_ledger(make_engine(sqlite_url))
    assert verified.ok, verified.lines()
    return sqlite_url


def _stops(url: str, name: str) -> list[list[str | None]]:
    engine = make_engine(url)
    (account,) = [a for a in queries.accounts(engine, "crypto") if a.agent_name == name]
    ledger = Ledger(engine)
    return [
        [t.content for t in ledger.traces(c.cycle_id) if t.role == "stop"]
        for c in queries.cycle_activity(engine, account.account_id)
    ]


def test_protocol_completion_is_counted_by_each_kinds_rule(replayed: str) -> None:
    board = leaderboard(make_engine(replayed), "crypto")
    found = {
        row.name: row.behaviour.protocol_completion
        for row in board.rows
        if row.behaviour is not None
    }
    assert found == {
        "baseline": None,  # a rule baseline has no protocol
        "tool-mode": TOOL_COMPLETE / DAYS,
        "structured": STRUCTURED_COMPLETE / DAYS,
        "rater": RATING_COMPLETE / DAYS,
        "coder": STRATEGY_COMPLETE / DAYS,
        "command": COMMAND_COMPLETE / DAYS,
    }


def test_the_loops_record_why_each_cycle_ended(replayed: str) -> None:
    assert _stops(replayed, "tool-mode") == [
        ["finished"],
        ["answered"],
        ["finished"],
        ["max_turns"],
        ["finished"],
        ["finished"],
    ]
    ended = ["answered", "invalid_answer", "answered", "answered", "invalid_answer", "answered"]
    assert _stops(replayed, "structured") == [[stop] for stop in ended]


def test_the_counts_are_the_scripts(replayed: str) -> None:
    # The hand counts above, from the scripts themselves.
    assert TOOL_ENDINGS.count("finish") + TOOL_ENDINGS.count("look, finish") == TOOL_COMPLETE
    assert sum(found[-1] == "ok" for found in STRUCTURED_CYCLES) == STRUCTURED_COMPLETE
    assert sum(found[-1] == "ok" for found in RATING_CYCLES) == RATING_COMPLETE
    engine = make_engine(replayed)
    (coder,) = [a for a in queries.accounts(engine, "crypto") if a.agent_name == "coder"]
    runs = [
        Ledger(engine).strategy_run(c.cycle_id)
        for c in queries.cycle_activity(engine, coder.account_id)
    ]
    assert [run.outcome if run else None for run in runs] == [None] + ["ok"] * 5
    assert Decimal(STRATEGY_COMPLETE) == sum(run is not None for run in runs)
