"""Provider quirks, parsed once: a chat-completions response body becomes a typed `Completion`.

This module owns what OpenAI-compatible endpoints disagree on. Content may be a string, None or a
list of text parts; `<think>...</think>` blocks (and a bare leading block closed by `</think>`)
are cut from the content into `reasoning`, as are `reasoning_content` / `reasoning` fields (kept
for the trace, never sent back). Tool-call arguments may be a JSON string, an object, empty, or
almost-JSON: trailing commas, single quotes, Python literals and code fences are repaired once,
and what still does not parse becomes a `ToolCall` with a `parse_error` the loop feeds back to the
model. Tool calls written as text in the content (`<tool_call>{...}</tool_call>`, or a JSON object
or list of objects with `name` and `arguments`) are recovered when the response has none. A
missing `usage` is estimated at four characters a token and flagged `estimated`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openbell.agents.model_json import FENCE

#: JSON separators of everything sent to a model: no space after "," and ":" (spaces cost tokens).
WIRE_SEPARATORS = (",", ":")


def wire_json(value: Any) -> str:
    """`value` as the JSON a model is sent: compact, non-ASCII kept as written, `str` for the rest
    (decimals, datetimes)."""
    return json.dumps(value, separators=WIRE_SEPARATORS, ensure_ascii=False, default=str)


#: Characters per token when a provider reports no usage.
CHARS_PER_TOKEN = 4
#: Raw tool arguments longer than this are refused, not parsed.
MAX_ARGUMENT_CHARS = 100_000

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_TEXT_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")
_PY_TO_JSON = {"True": "true", "False": "false", "None": "null"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call of the model. `arguments` is None exactly when `parse_error` says why."""

    call_id: str
    name: str
    raw_arguments: str
    arguments: dict[str, object] | None
    parse_error: str | None = None
    repaired: bool = False
    from_content: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens billed for one completion; `estimated` when the provider reported none."""

    tokens_in: int
    tokens_out: int
    tokens_cached: int = 0
    estimated: bool = False

    @property
    def total(self) -> int:
        """Tokens in and out."""
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The model's answer: content without reasoning, the reasoning, its tool calls, usage, and
    the identity the response reported: `model`, `system_fingerprint` (each cut to
    `MAX_IDENTITY_CHARS`; None when absent or not a string) and `revision`, the provider's revision
    headers (set by the client, which sees them)."""

    content: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage
    model: str | None = None
    system_fingerprint: str | None = None
    revision: str | None = None


class MalformedResponse(ValueError):
    """The response body is not a chat completion at all."""


def parse_completion(
    payload: Mapping[str, Any], *, prompt_chars: int, recover_text_calls: bool = True
) -> Completion:
    """The first choice of a chat-completions `payload` as a `Completion`.

    `prompt_chars` (the request's size) feeds the usage estimate when `usage` is missing.
    Raises `MalformedResponse` when there is no choice with a message.
    """
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise MalformedResponse("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise MalformedResponse("the first choice has no message")
    content, reasoning = split_reasoning(_text_of(message.get("content")))
    for key in ("reasoning_content", "reasoning"):
        field = message.get(key)
        if isinstance(field, str) and field.strip():
            reasoning = field if reasoning is None else f"{field}\n{reasoning}"
            break
    calls = _tool_calls(message.get("tool_calls"))
    if not calls and recover_text_calls:
        content, calls = recover_tool_calls(content)
    finish = choice.get("finish_reason")
    answer_chars = len(content) + len(reasoning or "") + sum(len(c.raw_arguments) for c in calls)
    return Completion(
        content=content,
        reasoning=reasoning,
        tool_calls=tuple(calls),
        finish_reason=finish if isinstance(finish, str) else None,
        usage=parse_usage(
            payload.get("usage"), prompt_chars=prompt_chars, answer_chars=answer_chars
        ),
        model=_identity(payload.get("model")),
        system_fingerprint=_identity(payload.get("system_fingerprint")),
    )


#: A reported model name, fingerprint or revision is cut to this many characters (it is the
#: endpoint's text, stored as is).
MAX_IDENTITY_CHARS = 200


def _identity(value: object) -> str | None:
    """A reported identity field: a non-blank string, cut; else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    return cut(value.strip(), MAX_IDENTITY_CHARS)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": "..."}]
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def split_reasoning(content: str) -> tuple[str, str | None]:
    """`content` without `<think>` blocks, and the thinking cut out (None when there was none)."""
    thoughts: list[str] = []
    if "</think>" in content and "<think>" not in content:  # the opening tag was in the prompt
        head, _, content = content.partition("</think>")
        thoughts.append(head.strip())

    def keep_thought(match: re.Match[str]) -> str:
        inner = match.group(0)
        inner = re.sub(r"(?i)^<think>|</think>$", "", inner)
        thoughts.append(inner.strip())
        return ""

    content = _THINK.sub(keep_thought, content)
    kept = [thought for thought in thoughts if thought]
    return content.strip(), ("\n".join(kept) if kept else None)


def parse_usage(usage: object, *, prompt_chars: int, answer_chars: int) -> Usage:
    """The billed tokens of `usage` (OpenAI or DeepSeek fields), or an estimate when absent."""
    if isinstance(usage, Mapping):
        tokens_in = _count(usage.get("prompt_tokens"))
        tokens_out = _count(usage.get("completion_tokens"))
        if tokens_in is not None and tokens_out is not None:
            details = usage.get("prompt_tokens_details")
            cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
            if cached is None:
                cached = _count(usage.get("prompt_cache_hit_tokens"))
            return Usage(
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                tokens_cached=min(cached or 0, tokens_in),
            )
    return Usage(
        tokens_in=estimate_tokens(prompt_chars),
        tokens_out=estimate_tokens(answer_chars),
        estimated=True,
    )


def estimate_tokens(chars: int) -> int:
    """About four characters a token, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _tool_calls(raw: object) -> list[ToolCall]:
    if not isinstance(raw, list):
        return []
    calls = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        function = item.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name")
        call_id = item.get("id")
        calls.append(
            make_call(
                call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                name if isinstance(name, str) else "",
                function.get("arguments"),
            )
        )
    return calls


def make_call(call_id: str, name: str, raw: object, *, from_content: bool = False) -> ToolCall:
    """A `ToolCall` from raw arguments: a dict, a JSON string, or almost-JSON to repair."""
    if isinstance(raw, Mapping):
        text = json.dumps(raw, default=str)
        return ToolCall(
            call_id=call_id,
            name=name,
            raw_arguments=text,
            arguments=dict(raw),
            from_content=from_content,
        )
    text = raw if isinstance(raw, str) else ("" if raw is None else json.dumps(raw, default=str))
    arguments, error, repaired = parse_arguments(text)
    return ToolCall(
        call_id=call_id,
        name=name,
        raw_arguments=text,
        arguments=arguments,
        parse_error=error,
        repaired=repaired,
        from_content=from_content,
    )


def parse_arguments(text: str) -> tuple[dict[str, object] | None, str | None, bool]:
    """(arguments, None, repaired) for a JSON object, else (None, why, False)."""
    if len(text) > MAX_ARGUMENT_CHARS:
        return (
            None,
            f"the arguments are {len(text)} characters long; the limit is {MAX_ARGUMENT_CHARS}",
            False,
        )
    if not text.strip():
        return {}, None, False
    try:
        return _object(json.loads(text)), None, False
    except (ValueError, TypeError):
        pass
    try:
        return _object(json.loads(_repair(text))), None, True
    except (ValueError, TypeError) as exc:
        return None, f"the arguments are not a JSON object ({_why(exc)})", False


def _object(value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _why(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _repair(text: str) -> str:
    """Near-JSON made JSON: code fences, Python literals, single quotes, trailing commas."""
    fenced = FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if '"' not in text:
        text = text.replace("'", '"')
    text = _PY_LITERALS.sub(lambda match: _PY_TO_JSON[match.group(1)], text)
    return _TRAILING_COMMA.sub(r"\1", text.strip())


def recover_tool_calls(content: str) -> tuple[str, list[ToolCall]]:
    """Tool calls written as text in `content`, and the content without them.

    Recognised: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, and a content
    that is (after code fences) nothing but such an object or a list of them.
    """
    found: list[ToolCall] = []

    def take(match: re.Match[str]) -> str:
        call = _call_from_text(match.group(1), len(found))
        if call is None:
            return match.group(0)
        found.append(call)
        return ""

    rest = _TEXT_CALL.sub(take, content).strip()
    if found:
        return rest, found
    stripped = content.strip()
    fenced = FENCE.match(stripped)
    body = fenced.group(1) if fenced else stripped
    if not body.startswith(("{", "[")):
        return content, []
    try:
        value = json.loads(body)
    except ValueError:
        return content, []
    items = value if isinstance(value, list) else [value]
    calls = [_call_from_value(item, index) for index, item in enumerate(items)]
    if not calls or any(call is None for call in calls):
        return content, []
    return "", [call for call in calls if call is not None]


def _call_from_text(text: str, index: int) -> ToolCall | None:
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = json.loads(_repair(text))
        except ValueError:
            return None
    return _call_from_value(value, index)


def _call_from_value(value: object, index: int) -> ToolCall | None:
    if not isinstance(value, Mapping):
        return None
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    if set(value) - {"name", "arguments", "parameters"}:
        return None
    raw = value.get("arguments", value.get("parameters", {}))
    return make_call(f"text_call_{index}", name, raw, from_content=True)


def assistant_message(completion: Completion, *, max_content_chars: int) -> dict[str, Any]:
    """The assistant message to send back: content (cut to `max_content_chars`) and tool calls in
    the standard shape; reasoning is not sent back."""
    content = cut(completion.content, max_content_chars)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if completion.tool_calls:
        message["tool_calls"] = [
            _wire_call(call, max_content_chars) for call in completion.tool_calls
        ]
    return message


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters with a note of how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text)} characters]"


def _wire_call(call: ToolCall, max_chars: int) -> dict[str, Any]:
    arguments = wire_json(call.arguments) if call.arguments is not None else call.raw_arguments
    if len(arguments) > max_chars:
        arguments = wire_json({"cut": f"{len(arguments)} characters"})
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
