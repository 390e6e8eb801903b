"""The open-research first prompt on the real toolbox: small enough (issues 5 and 14: with its tool
schemas, at most a third of AI-Trader's for the Nasdaq-100, in real cl100k tokens), sent as compact
JSON, and still holding every rule a model needs to trade each market correctly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openbell.store.ledger import Ledger
from openbell_testkit.agents import CN_OPEN, CRYPTO_DAY, US_OPEN, make_arena
from openbell_testkit.llm import ScriptedModel, finish, tool_turn
from openbell_testkit.modes import run_llm
from openbell_testkit.tokens import (
    AI_TRADER_FIRST_REQUEST_TOKENS,
    compact_json,
    count,
    encoding,
    request_tokens,
)

#: The share of AI-Trader's first request (`AI_TRADER_FIRST_REQUEST_TOKENS`) ours may take.
TARGET_SHARE = 1 / 3
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
    # counted as benchmarks/llm_bench.py counts it: real tokens, tool schemas as compact JSON
    counted = request_tokens(body)
    assert counted.message_tokens > 0
    assert counted.tool_tokens > 0
    assert counted.tokens <= AI_TRADER_FIRST_REQUEST_TOKENS * TARGET_SHARE  # 1301


def test_the_token_count_is_cl100k() -> None:
    # tiktoken's own examples for cl100k_base: the bundled vocabulary gives the same ids
    assert encoding().encode("hello world") == [15339, 1917]
    assert encoding().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert count('{"a":1}') < count('{"a": 1}')


def test_every_request_is_sent_as_compact_json(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    script = [
        tool_turn(("get_portfolio", {})),
        tool_turn(("get_quote", {"symbols": ["AAPL", "NOPE"]})),
        tool_turn(("place_order", {"symbol": "AAPL", "side": "buy", "shares": "1"})),
        finish(),
    ]
    model = ScriptedModel(script)
    ran = run_llm(arena, [], US_OPEN, model=model)
    assert len(model.sent) == 4
    for sent, body in zip(model.sent, model.requests, strict=True):
        assert sent == compact_json(body).encode()
        for message in body["messages"]:
            if message["role"] == "tool":
                assert message["content"] == compact_json(json.loads(message["content"]))
            for call in message.get("tool_calls") or []:
                arguments = call["function"]["arguments"]
                assert arguments == compact_json(json.loads(arguments))
    assert ran.model is model


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
