"""The say-to-do judge against a scripted model at the HTTP boundary (SQLite, Postgres): each
stored strategy is shown to the judge once, a bad answer goes back with the reason, a strategy the
judge never answers usably on is left unjudged and said so, and the verdicts are stored with the
judge's model name (a secret the judge echoes masked) and read back newest last."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.ops.evaluation.concordance.judge import SYSTEM_PROMPT, judge_strategies, verdict_line
from openbell.store.ledger import Ledger
from openbell.store.strategy_runs import StrategyCode
from openbell_testkit.llm import ScriptedModel, completion
from openbell_testkit.store import NOW

KEY = "sk-judge-5Fq8Lw2Zr7XvK9pT"  # a made-up key the judge echoes back
GOOD = {
    "direction": 1,
    "indicators": 0,
    "exits": 1,
    "no_extra_rule": 1,
    "rationale": f"No RSI. {KEY}",
}


def test_a_judge_stores_its_verdicts_and_leaves_what_it_cannot_judge(ledger: Ledger) -> None:
    account = ledger.open_account(
        ledger.ensure_agent("coder", "strategy_code", NOW), "us", "USD", Decimal(10000), NOW
    )
    cycle = ledger.claim_cycle(account, NOW, "run", NOW, NOW)
    assert cycle is not None
    strategies = [
        ledger.save_strategy(
            StrategyCode(
                account_id=account, cycle_id=cycle, written_at=NOW, rationale=f"RSI {n}.",
                code=f"def strategy(bars):\n    return {{}}  # {n}\n",
            )
        )
        for n in (1, 2)
    ]  # fmt: skip

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        assert body["messages"][0]["content"] == SYSTEM_PROMPT
        assert body["temperature"] == 0.0
        if "# 1" in body["messages"][1]["content"]:
            return completion(json.dumps(GOOD) if len(body["messages"]) == 4 else "I think so.")
        return completion('{"direction": 1}')  # never usable

    model = ScriptedModel([answer] * 10)
    client = ChatClient(ClientConfig(base_url="https://judge.test/v1", model="judge-x",
                                     api_key=KEY), http=model.client())  # fmt: skip
    done = asyncio.run(judge_strategies(ledger, client, strategies, now=NOW, max_retries=1))
    assert len(model.requests) == 4  # two answers per strategy: the first and one retry
    retry = model.requests[1]["messages"]
    assert retry[-1]["content"].startswith("Refused: answer with one JSON object")
    assert [judged.judgement is not None for judged in done] == [True, False]
    assert verdict_line(1, done[0]) == (
        'strategy_1: say_do 0.75 {"direction": 1, "indicators": 0, "exits": 1, '
        '"no_extra_rule": 1} by judge-x'
    )
    assert verdict_line(2, done[1]).startswith("strategy_2: not judged: no verdict after 2 answers")
    first, second = (s.strategy_id for s in strategies)
    assert first is not None
    assert second is not None
    found = ledger.judgements([first, second])
    assert found[second] == []
    (verdict,) = found[first]
    assert (verdict.judge_model, verdict.say_do) == ("judge-x", 0.75)
    assert verdict.rationale.startswith("No RSI. ")
    assert KEY not in verdict.rationale  # the judge's own key, echoed, is masked before storing
    assert verdict.judged_at == NOW
