"""The structured modes' answers, as counted and accepted: every answer a mode cannot use is a
parse failure in the cycle's stored usage (fixed-candidate and stockbench, whether the cycle then
trades or gives up), KTD-Fin's own action object, with its `overall_reason`, is placed, and a
cycle whose mode gave up on the model's answers does not count as completing the protocol."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from openbell.agents.modes import prompt_for_mode
from openbell.agents.modes.final_action import FEEDBACK_PREFIX
from openbell.markets.domain import Fill
from openbell.ops.evaluation.behaviour_report import completion as protocol_completion
from openbell.store.behaviour_facts import protocol_facts_of
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.llm import completion
from openbell_testkit.modes import run_llm

pytestmark = pytest.mark.sqlite_only


def answer(payload: object) -> dict[str, object]:
    return completion(json.dumps(payload))


def buy(stock_id: str = "AAPL", shares: int = 3) -> dict[str, object]:
    reason = "Momentum leads."
    return {
        "stock_id": stock_id,
        "side": "buy",
        "shares": shares,
        "confidence": 0.6,
        "reason": reason,
    }


BAD_ANSWERS = [
    completion("I would buy Apple."),
    answer({"orders": [{**buy(), "side": "short"}]}),
    answer({"orders": [buy("IBM")]}),
    answer({"orders": [{**buy(), "target_weight": 0.1}]}),
]


@pytest.mark.parametrize("failed", [1, 2, 3])
def test_fixed_candidate_counts_each_refused_answer(ledger: Ledger, failed: int) -> None:
    arena = make_arena(ledger, "us")
    script = [*BAD_ANSWERS[:failed], answer({"orders": [buy("MSFT", 2)]})]
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("fixed-candidate"))
    assert len([m for m in ran.user_messages() if m.startswith(FEEDBACK_PREFIX)]) == failed
    assert [(o.symbol, o.quantity) for o in ran.orders] == [("MSFT", 2)]
    usage = ledger.cycle_usage(ran.cycle_id)
    assert (usage.parse_failures, usage.invalid_tool_calls) == (failed, 0)


def test_fixed_candidate_giving_up_counts_all_four_answers(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    ran = run_llm(
        arena, BAD_ANSWERS, US_OPEN, prompt=lambda ctx: prompt_for_mode("fixed-candidate")
    )
    assert ran.orders == []
    assert ran.tools.finished
    assert ledger.cycle_usage(ran.cycle_id).parse_failures == 4


def test_stockbench_counts_refused_answers_of_every_stage(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    increase = {
        "stock_id": "AAPL",
        "action": "increase",
        "target_weight": 0.1,
        "confidence": 0.7,
        "reason": "r",
    }
    decrease = {**increase, "stock_id": "MSFT", "action": "decrease", "target_weight": 0}
    script = [
        completion("Let me think about it."),  # stage 1: no JSON
        answer({"selected": ["AAPL"]}),
        answer({"decisions": [{**increase, "action": "double"}]}),  # stage 3: schema
        answer({"decisions": [decrease]}),  # stage 4: nothing held to decrease
        answer({"decisions": [increase]}),
    ]
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("stockbench"))
    assert [o.symbol for o in ran.orders] == ["AAPL"]
    assert ledger.cycle_usage(ran.cycle_id).parse_failures == 3


def test_ktd_fin_action_with_overall_reason_is_placed(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    action = {
        "orders": [buy("MSFT", 2)],
        "overall_reason": "Momentum leaders; keep most of the cash.",
    }
    ran = run_llm(
        arena, [answer(action)], US_OPEN, prompt=lambda ctx: prompt_for_mode("fixed-candidate")
    )
    assert [(o.symbol, o.quantity) for o in ran.orders] == [("MSFT", 2)]
    assert isinstance(ran.orders[0].outcome, Fill)
    assert ran.tools.summary is not None
    assert "Momentum leaders; keep most of the cash." in ran.tools.summary
    assert ledger.cycle_usage(ran.cycle_id).parse_failures == 0
    system = ran.messages()[0]["content"]
    assert "overall_reason" in system  # the format the model is asked for names it


def test_giving_up_is_not_completing_the_protocol(ledger: Ledger, engine: Engine) -> None:
    arena = make_arena(ledger, "us")
    gave_up = run_llm(
        arena, BAD_ANSWERS, US_OPEN, prompt=lambda ctx: prompt_for_mode("fixed-candidate")
    )
    assert [t.content for t in gave_up.traces if t.role == "stop"] == ["invalid_answer"]
    assert gave_up.tools.summary is not None
    assert gave_up.tools.summary.startswith("No valid final action after 4 answers")
    facts = protocol_facts_of(engine, [arena.account_id])[arena.account_id]
    assert protocol_completion("llm", facts) == 0.0

    paper = {
        "orders": [
            {
                "stock_id": "MSFT",
                "side": "BUY",
                "confidence": 0.62,
                "reason": "20-day +27.4%, low vol 0.0255",
                "shares": 2,
            }
        ],
        "overall_reason": "The strongest low-volatility trend; the rest in cash.",
    }
    traded = run_llm(
        arena,
        [answer(paper)],
        US_OPEN + timedelta(days=1),
        prompt=lambda ctx: prompt_for_mode("fixed-candidate"),
    )
    assert isinstance(traded.orders[0].outcome, Fill)
    assert [t.content for t in traded.traces if t.role == "stop"] == ["answered"]
    facts = protocol_facts_of(engine, [arena.account_id])[arena.account_id]
    assert protocol_completion("llm", facts) == 0.5
