"""A fake OpenAI-compatible model: `openbell fake-llm`, so the LLM path runs with no key and no
network.

This module owns `FakeModel`, which answers a chat-completions request body with a completion
body in OpenAI's shape (tool calls included), and `serve_fake_model`, a standard-library HTTP
server on loopback that posts those answers at `POST .../chat/completions` (any prefix: the agent's
`base_url` is `http://HOST:PORT/v1`) and lists its one model at `GET .../models`.

It keeps no state between requests: what it answers depends only on the request, so concurrent
agents and a replay run again get the same answers. The turn it plays is the number of assistant
messages in the request (a cycle's conversation only grows), and

- **scripted** (`FakeScript`, from a JSON file): turn N of every cycle is the script's item N,
  either `{"content": "text"}` or `{"tool_calls": [{"name": "get_quote", "arguments": {...}}]}`;
  past the script's end it calls `finish` (or answers "done" when `finish` is not offered);
- **seeded random** (no script): a random plan drawn from the seed, the request's own `seed`
  (OpenAI's parameter, when it sends an integer one: `replay --seeds` and `openbell experiment`
  do) and the cycle's first two messages (its system prompt and its account, time and universe):
  quote a few symbols of the
  `Universe:` the agent is shown, then buy one at a small target weight, sell a holding, or hold,
  then `finish`. Only tools the request offers are called; a request offering none is answered
  in text.

Every byte of a request is hostile: a body over `MAX_BODY_BYTES`, not JSON, or not the shape of a
chat request is answered with an OpenAI-shaped 400 error, and no field of it is echoed back except
the symbols it lists, as arguments of tool calls.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from openbell.markets.errors import ConfigError

#: The model name the fake answers as (any requested model is accepted).
FAKE_MODEL: Final = "openbell-fake"
#: The largest request body read, in bytes.
MAX_BODY_BYTES: Final = 8 * 1024 * 1024
#: The target weights a random buy picks from.
BUY_WEIGHTS: Final = ("0.05", "0.1", "0.2")
#: How many symbols a random cycle quotes at most.
QUOTED: Final = 3

_UNIVERSE = re.compile(r"^Universe: (.+)$", re.MULTILINE)
_HELD = re.compile(r'"symbol":\s*"([^"]{1,64})"')
_SYMBOL = re.compile(r"[A-Za-z0-9_./:-]{1,32}")

Body = dict[str, Any]


class BadRequest(ValueError):
    """A request the fake cannot answer (its message goes back in the 400)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One scripted tool call: the tool's `name` and its `arguments` (sent as JSON text)."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted answer: text `content`, or `calls` (or both)."""

    content: str | None = None
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class FakeScript:
    """The turns every cycle plays, in order."""

    turns: tuple[Turn, ...]

    @classmethod
    def read(cls, path: Path) -> FakeScript:
        """The script in the JSON file at `path`: a list of turns (or `{"turns": [...]}`);
        `ConfigError` naming the first problem."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"--script {path}: no such file") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--script {path}: not a JSON file ({exc})") from None
        items = raw.get("turns") if isinstance(raw, dict) else raw
        if not isinstance(items, list):
            raise ConfigError(f'--script {path}: should be a list of turns or {{"turns": [...]}}')
        return cls(
            turns=tuple(_turn(item, f"--script {path}: turn {n}") for n, item in enumerate(items))
        )


def _turn(item: object, where: str) -> Turn:
    if not isinstance(item, dict) or not set(item) <= {"content", "tool_calls"} or not item:
        raise ConfigError(f'{where}: should be {{"content": TEXT}} or {{"tool_calls": [...]}}')
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        raise ConfigError(f"{where}: content should be text")
    calls = item.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ConfigError(f"{where}: tool_calls should be a list")
    parsed = []
    for call in calls:
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("arguments", {}), dict)
        ):
            raise ConfigError(
                f'{where}: each tool call should be {{"name": TOOL, "arguments": {{...}}}}'
            )
        parsed.append(ToolCall(name=call["name"], arguments=call.get("arguments", {})))
    return Turn(content=content, calls=tuple(parsed))


class FakeModel:
    """Answers chat-completions requests; see the module docstring. `script` None: seeded
    random tool calls from `seed`."""

    def __init__(self, *, seed: int = 0, script: FakeScript | None = None) -> None:
        self.seed = seed
        self.script = script

    def answer(self, body: object) -> Body:
        """The completion body answering the request `body`; `BadRequest` for one that is not a
        chat request."""
        if not isinstance(body, dict):
            raise BadRequest("the request body should be a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages should be a list of objects")
        offered = _tool_names(body.get("tools"))
        turn = sum(1 for message in messages if message.get("role") == "assistant")
        if self.script is not None:
            chosen = self._scripted(turn, offered)
        else:
            asked = body.get("seed")
            request_seed = asked if isinstance(asked, int) and not isinstance(asked, bool) else None
            chosen = self._random(messages, turn, offered, request_seed)
        return _completion(chosen, turn, prompt_chars=len(json.dumps(messages)))

    def _scripted(self, turn: int, offered: frozenset[str]) -> Turn:
        assert self.script is not None  # noqa: S101  (answer's branch)
        if turn < len(self.script.turns):
            return self.script.turns[turn]
        return _finish("The script has ended.", offered)

    def _random(
        self,
        messages: Sequence[Body],
        turn: int,
        offered: frozenset[str],
        request_seed: int | None = None,
    ) -> Turn:
        texts = [_text(message) for message in messages if message.get("role") != "tool"]
        universe = _listed(texts)
        held = [s for s in _HELD.findall("\n".join(texts[:2])) if _SYMBOL.fullmatch(s)]
        digest = hashlib.sha256("\x00".join(texts[:2]).encode("utf-8", "replace")).hexdigest()
        key = (
            f"{self.seed}:{digest}"
            if request_seed is None
            else f"{self.seed}:{request_seed}:{digest}"
        )
        rng = random.Random(key)  # noqa: S311  (a fake model's choices)
        quoted = rng.sample(universe, min(QUOTED, len(universe)))
        move = rng.random()
        weight = rng.choice(BUY_WEIGHTS)
        sold = rng.choice(held) if held else None
        if turn == 0 and quoted and "get_quote" in offered:
            return Turn(calls=(ToolCall("get_quote", {"symbols": quoted}),))
        if turn <= 1 and "place_order" in offered and quoted:
            if sold is not None and move < 0.3:
                order = {
                    "symbol": sold,
                    "side": "sell",
                    "target_weight": "0",
                    "reason": "fake-llm: taking profit",
                    "confidence": "0.5",
                }
                return Turn(calls=(ToolCall("place_order", order),))
            if move < 0.8:
                order = {
                    "symbol": quoted[0],
                    "side": "buy",
                    "target_weight": weight,
                    "reason": "fake-llm: a random pick",
                    "confidence": "0.5",
                }
                return Turn(calls=(ToolCall("place_order", order),))
        return _finish(f"fake-llm (seed {self.seed}): done for this slot.", offered)


def _finish(summary: str, offered: frozenset[str]) -> Turn:
    if "finish" in offered:
        return Turn(calls=(ToolCall("finish", {"summary": summary}),))
    return Turn(content=summary)


def _tool_names(tools: object) -> frozenset[str]:
    if not isinstance(tools, list):
        return frozenset()
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return " ".join(text for text in texts if isinstance(text, str))
    return ""


def _listed(texts: Sequence[str]) -> list[str]:
    """The symbols of the last `Universe:` line the agent was shown (in order, each once)."""
    found: list[str] = []
    for text in texts:
        for line in _UNIVERSE.findall(text):
            found = [word for word in line.split() if _SYMBOL.fullmatch(word)]
    return list(dict.fromkeys(found))


def _completion(turn: Turn, number: int, *, prompt_chars: int) -> Body:
    message: Body = {"role": "assistant", "content": turn.content}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{number}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for index, call in enumerate(turn.calls)
        ]
    completion_tokens = 20 + 10 * len(turn.calls)
    prompt_tokens = max(1, prompt_chars // 4)
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": FAKE_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(message: str) -> Body:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


class _Handler(BaseHTTPRequestHandler):
    model: FakeModel  # set on the subclass `serve_fake_model` makes
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.close_connection = True  # until the body is read: its bytes must not be taken
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(HTTPStatus.NOT_FOUND, _error(f"no route {self.path[:100]}"))
            return
        try:
            length = int(self.headers.get("content-length", ""))
        except ValueError:
            self._send(HTTPStatus.LENGTH_REQUIRED, _error("a Content-Length is required"))
            return
        if not 0 <= length <= MAX_BODY_BYTES:
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _error("the body is too large"))
            return
        raw = self.rfile.read(length)
        self.close_connection = False
        try:
            body = json.loads(raw)
            answer = self.model.answer(body)
        except (ValueError, UnicodeDecodeError) as exc:  # json's errors and BadRequest
            reason = str(exc) if isinstance(exc, BadRequest) else "the body is not JSON"
            self._send(HTTPStatus.BAD_REQUEST, _error(reason))
            return
        self._send(HTTPStatus.OK, answer)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(
                HTTPStatus.OK,
                {"object": "list", "data": [{"id": FAKE_MODEL, "object": "model"}]},
            )
            return
        self._send(HTTPStatus.NOT_FOUND, _error(f"no route {self.path[:100]}"))

    def _send(self, status: HTTPStatus, payload: Body) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:  # said, so that a client does not send on a closing socket
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the agents' traces show every request."""


class FakeServer:
    """A running fake model: its `url` (the `base_url` to configure) until `close`."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        host, port = server.server_address[:2]
        shown = host.decode() if isinstance(host, bytes) else host
        self.url = f"http://{shown}:{port}/v1"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve_fake_model(model: FakeModel, host: str = "127.0.0.1", port: int = 0) -> FakeServer:
    """Serve `model` on `host:port` (0: any free port) in a thread; `ConfigError` when the
    address cannot be listened on."""
    handler = type("FakeHandler", (_Handler,), {"model": model})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise ConfigError(
            f"fake-llm: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another "
            "--port (0 picks a free one)"
        ) from None
    server.daemon_threads = True
    return FakeServer(server)
