"""The fake model of `openbell fake-llm`: scripted turns, seeded random plans drawn from the
request alone, only offered tools called, and hostile requests refused as OpenAI refuses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from openbell.markets.errors import ConfigError
from openbell.ops.wiring.fake_llm import BadRequest, FakeModel, FakeScript, serve_fake_model

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {}}}
    for name in ("get_quote", "place_order", "finish")
]
SYSTEM = {"role": "system", "content": "You manage a paper trading account."}


def user(now: str = "2025-11-03T00:00:00+00:00", positions: str = "none") -> dict[str, str]:
    return {
        "role": "user",
        "content": f"Now: {now}\nYour account: cash 10000 USDT, NAV 10000, positions {positions}\n"
        "Universe: BTC/USDT ETH/USDT SOL/USDT XRP/USDT\nResearch, trade, then call finish.",
    }


def calls(answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    message = answer["choices"][0]["message"]
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in message.get("tool_calls", [])
    ]


def play(model: FakeModel, first: list[dict[str, Any]], turns: int = 4) -> list[list[Any]]:
    """The calls of a cycle's first `turns` requests, each request holding the earlier answers."""
    messages, played = list(first), []
    for _ in range(turns):
        answer = model.answer({"messages": messages, "tools": TOOLS})
        played.append(calls(answer))
        messages.append(answer["choices"][0]["message"])
    return played


def test_a_random_cycle_quotes_universe_symbols_then_trades_one_then_finishes() -> None:
    played = play(FakeModel(seed=1), [SYSTEM, user()])
    (quote,) = played[0]
    assert quote[0] == "get_quote"
    assert set(quote[1]["symbols"]) <= {"BTC/USDT", "ETH/USDT", "SOL/USDT", "XRP/USDT"}
    names = [name for turn in played for name, _ in turn]
    assert names[-1] == "finish"
    for name, arguments in (call for turn in played for call in turn):
        if name == "place_order":
            assert arguments["symbol"] in quote[1]["symbols"]


def test_a_random_plan_depends_on_the_seed_and_the_prompt_only() -> None:
    cycles = [user(f"2025-11-{day:02d}T00:00:00+00:00") for day in range(3, 23)]
    first = [play(FakeModel(seed=5), [SYSTEM, cycle]) for cycle in cycles]
    again = [play(FakeModel(seed=5), [SYSTEM, cycle]) for cycle in reversed(cycles)][::-1]
    other = [play(FakeModel(seed=6), [SYSTEM, cycle]) for cycle in cycles]
    assert first == again
    assert first != other
    assert any(name == "place_order" for cycle in first for turn in cycle for name, _ in turn)


def test_the_requests_own_seed_draws_another_plan() -> None:
    cycles = [user(f"2025-11-{day:02d}T00:00:00+00:00") for day in range(3, 23)]
    model = FakeModel(seed=5)

    def plans(seed: object) -> list[list[Any]]:
        out = []
        for cycle in cycles:
            messages: list[dict[str, Any]] = [SYSTEM, cycle]
            body = {"messages": messages, "tools": TOOLS, "seed": seed}
            out.append(calls(model.answer(body)))
        return out

    unseeded = [play(model, [SYSTEM, cycle], turns=1)[0] for cycle in cycles]
    assert plans(1) == plans(1)
    assert plans(1) != plans(2)
    assert plans("1") == unseeded  # only an integer seed is the request's seed
    assert plans(True) == unseeded


def test_only_offered_tools_are_called_and_without_tools_it_answers_in_text() -> None:
    answer = FakeModel(seed=1).answer({"messages": [SYSTEM, user()]})
    assert answer["choices"][0]["message"]["content"]
    assert "tool_calls" not in answer["choices"][0]["message"]
    only_finish = [{"type": "function", "function": {"name": "finish"}}]
    answer = FakeModel(seed=1).answer({"messages": [SYSTEM, user()], "tools": only_finish})
    assert [name for name, _ in calls(answer)] == ["finish"]


def test_a_script_is_played_by_turn_and_ends_with_finish(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "get_quote", "arguments": {"symbols": ["X"]}}]},
                    {"content": "thinking"},
                ]
            }
        ),
        encoding="utf-8",
    )
    played = play(FakeModel(script=FakeScript.read(path)), [SYSTEM, user()], turns=3)
    assert played == [[("get_quote", {"symbols": ["X"]})], [], [("finish", played[2][0][1])]]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not a JSON file"),
        ('{"turns": 3}', "list of turns"),
        ('[{"say": "hi"}]', "turn 0"),
        ('[{"tool_calls": [{"name": 1}]}]', "each tool call"),
    ],
)
def test_a_bad_script_is_a_config_error_naming_the_problem(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "script.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=words):
        FakeScript.read(path)


@pytest.mark.parametrize("body", [[], "hi", {"messages": "x"}, {"messages": [1, 2]}])
def test_a_request_that_is_not_a_chat_request_is_refused(body: object) -> None:
    with pytest.raises(BadRequest):
        FakeModel().answer(body)


def test_the_server_answers_chat_completions_and_refuses_bad_bodies() -> None:
    server = serve_fake_model(FakeModel(seed=2), port=0)
    try:
        with httpx.Client(base_url=server.url) as client:
            ok = client.post(
                "/chat/completions", json={"messages": [SYSTEM, user()], "tools": TOOLS}
            )
            assert ok.status_code == 200
            assert calls(ok.json())[0][0] == "get_quote"
            bad = client.post("/chat/completions", content=b"\xff{not json")
            assert bad.status_code == 400
            assert bad.json()["error"]["type"] == "invalid_request_error"
            elsewhere = client.post("/elsewhere", json={})
            assert elsewhere.status_code == 404
            # its body is left unread, so the connection closes, and the answer says so:
            # a client that was not told would send its next request on a closing socket
            assert elsewhere.headers["connection"] == "close"
            assert client.get("/models").json()["data"][0]["id"]
    finally:
        server.close()
