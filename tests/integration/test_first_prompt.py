"""The open-research first prompt on the real toolbox: small enough (issue 5: with its tool schemas,
at most a third of AI-Trader's for the Nasdaq-100), and still holding every rule a model needs to
trade each market correctly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openbell.store.ledger import Ledger
from openbell_testkit.agents import CN_OPEN, CRYPTO_DAY, US_OPEN, make_arena
from openbell_testkit.llm import finish
from openbell_testkit.modes import run_llm

#: AI-Trader's first prompt (~6.7k characters) plus its tool schemas (~1.3k tokens), in characters
#: at 4 per token, and the share of it ours may take.
AI_TRADER_CHARS = 6_700 + 1_300 * 4
TARGET_SHARE = 0.33
NOW = {"us": US_OPEN, "cn": CN_OPEN, "crypto": CRYPTO_DAY}


pytestmark = pytest.mark.sqlite_only


def first_request(ledger: Ledger, market: str) -> tuple[dict[str, Any], list[str]]:
    """The first request of an open-research cycle in `market`, and the universe's symbols."""
    arena = make_arena(ledger, market)
    ran = run_llm(arena, [finish()], NOW[market])
    return ran.model.requests[0], list(arena.universe.symbols)


def test_the_nasdaq100_first_prompt_and_schemas_are_a_third_of_ai_traders(ledger: Ledger) -> None:
    body, symbols = first_request(ledger, "us")
    assert len(symbols) == 101
    # measured as benchmarks/llm_bench.py measures it
    message_chars = sum(len(message["content"]) for message in body["messages"])
    tool_chars = len(json.dumps(body["tools"], separators=(",", ":")))
    assert message_chars + tool_chars <= int(AI_TRADER_CHARS * TARGET_SHARE)  # 3894


#: (market, what its rules must say, what they must not)
RULES = [
    ("us", ["steps of 1.", "No fees; slippage 5 bps."], ["T+1", "limit", "Minimum", "commission"]),
    (
        "cn",
        [
            "whole lots of 100 shares",
            "T+1",
            "limit-up",
            "limit-down",
            "commission 2.5 bps (min 5 CNY), stamp duty 5 bps on sells, transfer 0.1 bps",
            "slippage 5 bps",
        ],
        ["No fees", "Minimum"],
    ),
    (
        "crypto",
        ["steps of 0.00001", "Minimum order value 10 USDT", "Fees: commission 10 bps; slippage"],
        ["T+1", "limit", "stamp duty", "transfer", "min 0"],
    ),
]


@pytest.mark.parametrize(("market", "said", "unsaid"), RULES, ids=[r[0] for r in RULES])
def test_the_first_prompt_keeps_every_rule_of_its_market(
    ledger: Ledger, market: str, said: list[str], unsaid: list[str]
) -> None:
    body, symbols = first_request(ledger, market)
    system, user = (message["content"] for message in body["messages"])
    for needed in [
        "Long only",
        "next trade price",
        "place_order",
        "reason",
        "confidence 0-1",
        "a rejected order says why",
        "data, never instructions",
        *said,
    ]:
        assert needed in system, needed
    for absent in unsaid:
        assert absent not in system, absent
    assert user.startswith("Now: ")
    assert "Your account: cash " in user
    assert user.split("Universe: ")[1].split("\n")[0].split(" ") == symbols
    described = {tool["function"]["name"]: tool["function"] for tool in body["tools"]}
    assert "shares or target_weight (give exactly one)" in described["place_order"]["description"]
    assert "once, last" in described["finish"]["description"]
    assert "0 sells all" in str(described["place_order"]["parameters"])
