"""The `ktd-fin` decision mode driven by the real LLM loop with a scripted model: the research phase
offers KTD-Fin's six tools, ends when the model answers in text, when `research_calls` are spent or
when only the submission's turns are left, and the model is then forced (`tool_choice`) into
`submit_action`, whose action is validated as the structured modes validate theirs (refused
actions fed back, no trade after three retries, each a parse failure); the next cycle's first
message shows the previous step's fills and rejections with their reasons, in the model's terms
under masking."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.ktd.contract import KTD_TOOLS
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.run import Budgets
from openbell.agents.masking import masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.agents.modes.final_action import FEEDBACK_PREFIX
from openbell.agents.modes.ktd_prompt import NO_ORDERS, SUBMIT_MESSAGE
from openbell.agents.modes.structured import NO_TRADE_SUMMARY
from openbell.agents.rebasing import MoneyUnit
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Fill, Rejection, utc
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.agents import CN_OPEN, make_arena
from openbell_testkit.llm import Body, ScriptedModel, call, completion, tool_turn
from openbell_testkit.modes import run_llm
from openbell_testkit.replay import cn_daily

D = Decimal
CHEAP = "601398.SH"
FORCED = {"type": "function", "function": {"name": "submit_action"}}
NEXT_SESSION = CN_OPEN + timedelta(days=3)  # Monday 2025-10-13


sqlite_only = pytest.mark.sqlite_only


def ktd(**options: Any) -> Any:
    return lambda ctx: prompt_for_mode("ktd-fin", **options)


def submit(*orders: dict[str, object], reason: str = "one lot of the cheapest") -> Body:
    action = {"orders": list(orders), "overall_reason": reason}
    return completion(None, [call("submit_action", action, "call_submit")])


def order(side: str, shares: int, stock_id: str = CHEAP) -> dict[str, object]:
    return {
        "stock_id": stock_id,
        "side": side,
        "shares": shares,
        "confidence": 0.7,
        "reason": "cheap and liquid",
    }


def offered(body: Body) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


@sqlite_only
def test_research_then_a_forced_submission_that_trades(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    script = [
        tool_turn(("get_market_context", {}), ("get_portfolio_state", {})),
        tool_turn(("get_bars", {"symbol": CHEAP})),  # not a tool of this mode
        completion("I have seen enough."),
        submit(order("buy", 100)),
    ]
    ran = run_llm(arena, script, CN_OPEN, prompt=ktd())
    first, second, third, forced = ran.model.requests
    for research in (first, second, third):
        assert offered(research) == list(KTD_TOOLS)
        assert "tool_choice" not in research
    assert offered(forced) == ["submit_action"]
    assert forced["tool_choice"] == FORCED
    assert forced["messages"][-1] == {"role": "user", "content": SUBMIT_MESSAGE}
    assert [(o.symbol, o.quantity, type(o.outcome)) for o in ran.orders] == [(CHEAP, D(100), Fill)]
    roles = [(t.role, t.tool) for t in ran.traces]
    assert ("user", None) in roles[roles.index(("assistant", None), 3) :]
    assert roles[-3:] == [("tool", "finish"), ("tool", "submit_action"), ("stop", None)]
    submitted = json.loads(next(t.result for t in ran.traces if t.tool == "submit_action") or "")
    assert submitted["status"] == "submitted"
    assert submitted["orders"][0]["status"] == "filled"
    finish = next(t for t in ran.traces if t.tool == "finish")
    assert finish.content == "called by the mode"
    assert next(t.content for t in ran.traces if t.role == "stop") == "finished"
    usage = ledger.cycle_usage(ran.cycle_id)
    assert (usage.parse_failures, usage.invalid_tool_calls) == (0, 1)


@sqlite_only
def test_the_research_budget_ends_the_research_phase(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    research = tool_turn(("get_market_context", {}), ("screen_candidates", {"top_k": 3}))
    ran = run_llm(arena, [research, submit()], CN_OPEN, prompt=ktd(research_calls=2))
    assert [offered(body) for body in ran.model.requests] == [list(KTD_TOOLS), ["submit_action"]]
    assert ran.model.requests[1]["tool_choice"] == FORCED
    assert ran.model.requests[1]["messages"][-1]["content"] == SUBMIT_MESSAGE
    assert "up to 2 calls" in ran.model.requests[0]["messages"][0]["content"]
    assert ran.tools.finished
    assert ran.orders == []


@sqlite_only
def test_the_turn_budget_keeps_the_submissions_turns(ledger: Ledger) -> None:
    # Six turns: two of research, then four kept for the submission and its three retries.
    arena = make_arena(ledger, "cn")
    research = tool_turn(("get_market_context", {}))
    ran = run_llm(
        arena,
        [research, research, submit(order("buy", 100))],
        CN_OPEN,
        prompt=ktd(),
        budgets=Budgets(max_turns=6),
    )
    assert [body.get("tool_choice") for body in ran.model.requests] == [None, None, FORCED]
    assert len(ran.orders) == 1


@sqlite_only
def test_refused_submissions_are_fed_back_and_counted_then_no_trade(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    refused = [
        completion(None, [call("submit_action", "{not json", "call_a")]),
        submit({**order("buy", 100), "side": "short"}),
        submit(order("buy", 100, "IBM")),
        submit({**order("buy", 100), "target_weight": 0.1}),
    ]
    ran = run_llm(arena, [completion("Done."), *refused], CN_OPEN, prompt=ktd())
    assert len(ran.model.requests) == 5
    assert all(body.get("tool_choice") == FORCED for body in ran.model.requests[1:])
    replies = [json.loads(t.result or "") for t in ran.traces if t.tool == "submit_action"]
    assert [reply["status"] for reply in replies] == ["refused"] * 4
    assert all(reply["message"].startswith(FEEDBACK_PREFIX) for reply in replies[:3])
    assert replies[3]["message"] == NO_TRADE_SUMMARY.format(n=4)
    assert "IBM" in replies[2]["message"]
    assert ran.orders == []
    assert ran.tools.finished
    assert ledger.cycle_usage(ran.cycle_id).parse_failures == 4


@sqlite_only
def test_a_refused_submission_then_a_valid_one_trades(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    script = [
        completion("Done."),
        submit({**order("buy", 100), "side": "hold"}),
        submit(order("buy", 100)),
    ]
    ran = run_llm(arena, script, CN_OPEN, prompt=ktd())
    assert [type(o.outcome) for o in ran.orders] == [Fill]
    assert ledger.cycle_usage(ran.cycle_id).parse_failures == 1


@sqlite_only
def test_an_answer_in_text_in_the_submission_phase_is_read_as_the_action(ledger: Ledger) -> None:
    # A server that ignores tool_choice: the action comes back as content.
    arena = make_arena(ledger, "cn")
    text = completion(json.dumps({"orders": [order("buy", 100)], "overall_reason": "cheap"}))
    ran = run_llm(arena, [completion("Done."), text], CN_OPEN, prompt=ktd())
    assert [(o.symbol, type(o.outcome)) for o in ran.orders] == [(CHEAP, Fill)]
    assert ran.tools.finished


def previous_step(body: Body) -> list[str]:
    user = body["messages"][1]["content"]
    return user.split("## Previous-step execution outcome\n")[1].split("\n## ")[0].splitlines()


@sqlite_only
@pytest.mark.parametrize("masking", ["bright", "blinded"])
def test_the_next_prompt_shows_the_previous_steps_fills_and_rejections(
    ledger: Ledger, masking: str
) -> None:
    arena = make_arena(ledger, "cn")
    masker = masker_for(masking, seed="s")
    prompt = ktd(masking=masking, masking_seed="s")

    def cheap_id(body: Body) -> str:
        if masking == "bright":
            return CHEAP
        key = ledger.masking_key(arena.account_id)
        assert key is not None
        return dict(key.aliases)[CHEAP]

    def trade(body: Body) -> Body:
        stock = cheap_id(body)
        return submit(order("buy", 50, stock), order("buy", 100, stock), order("sell", 100, stock))

    first = run_llm(arena, [completion("Done."), trade], CN_OPEN, prompt=prompt, masker=masker)
    assert previous_step(first.model.requests[0]) == ["None: this is the first step."]
    reasons = [o.outcome.reason.value for o in first.orders if isinstance(o.outcome, Rejection)]
    assert reasons == ["lot_size", "t_plus_1"]
    fill = first.orders[1].outcome
    assert isinstance(fill, Fill)

    second = run_llm(
        arena, [completion("Hold."), submit()], NEXT_SESSION, prompt=prompt, masker=masker
    )
    stock = cheap_id(second.model.requests[0])
    lines = previous_step(second.model.requests[0])
    assert len(lines) == 3
    assert lines[0].startswith(f"- BUY {stock} 50: rejected (lot_size): ")
    assert lines[2].startswith(f"- SELL {stock} 100: rejected (t_plus_1): ")
    price, fees = re.fullmatch(
        rf"- BUY {stock}: filled 100 at (\S+), fees (\S+)", lines[1]
    ).groups()
    if masking == "bright":
        assert (D(price), D(fees)) == (fill.price, fill.fees)
        assert "can be sold" in lines[2]
    else:  # in the account's unit, as every amount of money it is shown
        key = ledger.masking_key(arena.account_id)
        assert key is not None
        unit = MoneyUnit(key.money_unit)
        assert (D(price), D(fees)) == (unit.show(fill.price), unit.show(fill.fees))
        assert CHEAP not in json.dumps(second.model.requests)

    later = NEXT_SESSION + timedelta(days=1)
    third = run_llm(arena, [completion("Hold."), submit()], later, prompt=prompt, masker=masker)
    assert previous_step(third.model.requests[0]) == [NO_ORDERS]


@sqlite_only
def test_the_bright_account_is_the_tools_account(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    ran = run_llm(arena, [completion("Done."), submit()], CN_OPEN, prompt=ktd())
    user = ran.model.requests[0]["messages"][1]["content"]
    assert "- Total value: 100000 CNY" in user
    assert "- Cash: 100000 CNY (1.0000 of NAV)" in user
    assert "- 0 positions: none" in user
    assert "Cumulative return since the start of the backtest: +0.00%" in user
    # the arena's account opened in 2000: no benchmark close goes back that far
    assert "- Benchmark 000016.SH cumulative return over the same window: unavailable" in user
    listed = re.search(r"\(50 names\)\n(.*)\n", user)
    assert listed is not None
    assert listed.group(1).split(" ") == list(arena.universe.symbols)
    system = ran.model.requests[0]["messages"][0]["content"]
    for needed in (
        "T+1",
        "main +-10%",
        "star +-20%",
        "submit_action",
        "limit_up",
        "up to 20 calls",
    ):
        assert needed in system, needed


@sqlite_only
def test_a_submission_before_the_research_phase_ends_is_taken(ledger: Ledger) -> None:
    # The paper's prompt lets the model decide when to stop researching and submit.
    arena = make_arena(ledger, "cn")
    early = completion(
        None,
        [
            call("get_portfolio_state", {}, "call_0"),
            call("submit_action", {"orders": [order("buy", 100)]}, "call_1"),
        ],
    )
    ran = run_llm(arena, [early], CN_OPEN, prompt=ktd())
    assert len(ran.model.requests) == 1
    assert [(o.symbol, type(o.outcome)) for o in ran.orders] == [(CHEAP, Fill)]
    assert ledger.cycle_usage(ran.cycle_id).invalid_tool_calls == 0
    assert next(t.content for t in ran.traces if t.role == "stop") == "finished"


def replay_trader(body: Body) -> Body:
    """Each cycle: an answer in text, then (forced) on the first day a lot-size rejection and a
    fill of `CHEAP`, afterwards a hold."""
    if body.get("tool_choice") != FORCED:
        return completion("Research done.")
    if "None: this is the first step." in body["messages"][1]["content"]:
        return submit(order("buy", 50), order("buy", 100))
    return submit()


def test_a_ktd_fin_replay_shows_each_step_the_one_before_on_either_ledger(db_url: str) -> None:
    upgrade(db_url)
    model = ScriptedModel([replay_trader] * 100)
    agent = LlmAgent(
        name="ktd",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1"), http=model.client()
        ),
        prompt=ktd(),
    )
    market = cn_daily(agent, build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    done = run_replay(
        ReplayPlan(
            store_url=db_url, start_at=utc(2025, 9, 1), end_at=utc(2025, 9, 4), markets=(market,)
        )
    )
    assert (done.slots, done.cycles_failed) == (3, 0)
    firsts = [body for body in model.requests if len(body["messages"]) == 2]
    assert len(firsts) == 3
    steps = [previous_step(body) for body in firsts]
    assert steps[0] == ["None: this is the first step."]
    assert steps[1][0].startswith(f"- BUY {CHEAP} 50: rejected (lot_size): ")
    assert re.fullmatch(rf"- BUY {CHEAP}: filled 100 at \S+, fees \S+", steps[1][1])
    assert steps[2] == [NO_ORDERS]
    benchmark = r"Benchmark 000016\.SH cumulative return over the same window: ([+-]\d+\.\d\d%)"
    found = [re.search(benchmark, body["messages"][1]["content"]) for body in firsts]
    assert [line.group(1) if line else None for line in found[:1]] == ["+0.00%"]
    assert all(line is not None for line in found)
