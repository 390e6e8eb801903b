"""Provider quirks are parsed once into typed values: repaired or refused tool arguments, reasoning
kept apart from the content, tool calls written as text recovered, missing usage estimated."""

from __future__ import annotations

from typing import Any

import pytest

from openbell.agents.llm.completion import (
    MAX_ARGUMENT_CHARS,
    MalformedResponse,
    assistant_message,
    parse_arguments,
    parse_completion,
    split_reasoning,
)


def body(message: dict[str, Any], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    if usage is not None:
        payload["usage"] = usage
    return payload


def tool_message(arguments: object, name: str = "get_quote") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@pytest.mark.parametrize(
    ("raw", "expected", "repaired"),
    [
        ('{"symbols": ["AAPL"]}', {"symbols": ["AAPL"]}, False),
        ('{"symbols": ["AAPL"],}', {"symbols": ["AAPL"]}, True),
        ("{'symbols': ['AAPL']}", {"symbols": ["AAPL"]}, True),
        ('```json\n{"symbols": ["AAPL"]}\n```', {"symbols": ["AAPL"]}, True),
        ('{"a": True, "b": None}', {"a": True, "b": None}, True),
        ("", {}, False),
        ("  ", {}, False),
    ],
)
def test_arguments_are_parsed_or_repaired(
    raw: str, expected: dict[str, object], repaired: bool
) -> None:
    assert parse_arguments(raw) == (expected, None, repaired)


@pytest.mark.parametrize(
    "raw", ['{"symbols": ["AAPL"', "not json at all", "[1, 2]", '"a string"', "x" * 200_000]
)
def test_unreadable_arguments_are_a_parse_error(raw: str) -> None:
    arguments, error, repaired = parse_arguments(raw)
    assert arguments is None
    assert error
    assert not repaired
    if len(raw) > MAX_ARGUMENT_CHARS:
        assert "limit" in error


def test_arguments_given_as_an_object_are_taken_as_they_are() -> None:
    parsed = parse_completion(body(tool_message({"symbols": ["AAPL"]}), USAGE), prompt_chars=0)
    (call,) = parsed.tool_calls
    assert call.arguments == {"symbols": ["AAPL"]}
    assert call.parse_error is None


def test_a_broken_call_keeps_its_raw_arguments_and_error() -> None:
    parsed = parse_completion(body(tool_message('{"symbols": [AAPL]}'), USAGE), prompt_chars=0)
    (call,) = parsed.tool_calls
    assert call.arguments is None
    assert call.raw_arguments == '{"symbols": [AAPL]}'
    assert call.parse_error is not None
    assert "JSON" in call.parse_error


def test_reasoning_content_is_kept_apart_and_not_sent_back() -> None:
    message = {"role": "assistant", "content": "Buy.", "reasoning_content": "Prices rose."}
    parsed = parse_completion(body(message, USAGE), prompt_chars=0)
    assert parsed.content == "Buy."
    assert parsed.reasoning == "Prices rose."
    sent = assistant_message(parsed, max_content_chars=1000)
    assert sent == {"role": "assistant", "content": "Buy."}


@pytest.mark.parametrize(
    ("content", "kept", "thought"),
    [
        ("<think>hmm\nok</think>\nBuy AAPL.", "Buy AAPL.", "hmm\nok"),
        ("<THINK>a</THINK>b<think>c</think>", "b", "a\nc"),
        (
            "thinking without an opening tag</think>Answer",
            "Answer",
            "thinking without an opening tag",
        ),
        ("<think>never closed", "", "never closed"),
        ("No thinking here.", "No thinking here.", None),
    ],
)
def test_think_blocks_are_stripped_from_the_content(
    content: str, kept: str, thought: str | None
) -> None:
    assert split_reasoning(content) == (kept, thought)


def test_tool_calls_written_as_tagged_text_are_recovered() -> None:
    content = (
        "I will check.\n<tool_call>\n"
        '{"name": "get_quote", "arguments": {"symbols": ["AAPL"]}}\n</tool_call>'
        '<tool_call>{"name": "finish", "arguments": {"summary": "x",}}</tool_call>'
    )
    parsed = parse_completion(
        body({"role": "assistant", "content": content}, USAGE), prompt_chars=0
    )
    assert parsed.content == "I will check."
    assert [(c.name, c.arguments, c.from_content) for c in parsed.tool_calls] == [
        ("get_quote", {"symbols": ["AAPL"]}, True),
        ("finish", {"summary": "x"}, True),
    ]
    ids = {call.call_id for call in parsed.tool_calls}
    assert len(ids) == 2


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "get_quote", "arguments": {"symbols": ["AAPL"]}}',
        '```json\n[{"name": "get_quote", "parameters": {"symbols": ["AAPL"]}}]\n```',
    ],
)
def test_a_content_that_is_only_a_call_object_is_a_call(content: str) -> None:
    parsed = parse_completion(
        body({"role": "assistant", "content": content}, USAGE), prompt_chars=0
    )
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_quote", {"symbols": ["AAPL"]})
    ]
    assert parsed.content == ""


def test_json_that_is_not_a_call_stays_content_and_no_recovery_without_tools() -> None:
    orders = '{"orders": [{"stock_id": "AAPL", "side": "buy"}]}'
    parsed = parse_completion(body({"role": "assistant", "content": orders}, USAGE), prompt_chars=0)
    assert parsed.tool_calls == ()
    assert parsed.content == orders
    tagged = '<tool_call>{"name": "finish", "arguments": {}}</tool_call>'
    parsed = parse_completion(
        body({"role": "assistant", "content": tagged}, USAGE),
        prompt_chars=0,
        recover_text_calls=False,
    )
    assert parsed.tool_calls == ()


def test_usage_is_read_with_cached_tokens_from_openai_or_deepseek_fields() -> None:
    openai = {**USAGE, "prompt_tokens_details": {"cached_tokens": 4}}
    deepseek = {**USAGE, "prompt_cache_hit_tokens": 6, "prompt_cache_miss_tokens": 4}
    for usage, cached in ((openai, 4), (deepseek, 6)):
        parsed = parse_completion(body({"content": "x"}, usage), prompt_chars=0).usage
        assert (parsed.tokens_in, parsed.tokens_out, parsed.tokens_cached) == (10, 5, cached)
        assert not parsed.estimated


@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens": "many"}])
def test_missing_usage_is_estimated_and_flagged(usage: dict[str, Any] | None) -> None:
    parsed = parse_completion(body({"content": "x" * 40}, usage), prompt_chars=400).usage
    assert (parsed.tokens_in, parsed.tokens_out, parsed.estimated) == (100, 10, True)


def test_content_parts_are_joined() -> None:
    message = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert parse_completion(body(message, USAGE), prompt_chars=0).content == "ab"


@pytest.mark.parametrize(
    "payload", [{}, {"choices": []}, {"choices": [{}]}, {"choices": ["x"]}, {"error": {}}]
)
def test_a_body_without_a_message_is_malformed(payload: dict[str, Any]) -> None:
    with pytest.raises(MalformedResponse):
        parse_completion(payload, prompt_chars=0)


def test_a_huge_content_is_cut_when_sent_back() -> None:
    parsed = parse_completion(body({"content": "y" * 5_000_000}, USAGE), prompt_chars=0)
    sent = assistant_message(parsed, max_content_chars=1000)
    assert len(sent["content"]) < 1100
    assert "5000000 characters" in sent["content"]
