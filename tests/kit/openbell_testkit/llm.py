"""A scripted OpenAI-compatible model for the LLM agent tests: real-shaped chat-completions JSON.

`completion(...)` builds one response body as OpenAI sends it; `ScriptedModel` answers the
requests of an `httpx.MockTransport` (or of a local HTTP server, `serve_script`) from a script of
such bodies (or of functions of the request), and keeps every request body it received.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Body = dict[str, Any]
Step = Body | httpx.Response | Callable[[Body], Body | httpx.Response]


def call(name: str, arguments: object, call_id: str | None = None) -> dict[str, Any]:
    """One OpenAI tool call; `arguments` is sent as given when a string, else as JSON."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{name}_{abs(hash(text)) % 10_000}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def completion(
    content: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    usage: tuple[int, int] | None = (100, 20),
    cached: int | None = None,
    reasoning: str | None = None,
    model: str = "scripted-1",
) -> Body:
    """A chat-completions response body as OpenAI sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    body: Body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
        if cached is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return body


def tool_turn(*calls: tuple[str, object], usage: tuple[int, int] = (100, 20)) -> Body:
    """A turn calling `calls` = (name, arguments), ..."""
    return completion(
        None, [call(name, args, f"call_{i}") for i, (name, args) in enumerate(calls)], usage=usage
    )


def finish(summary: str = "done") -> Body:
    return tool_turn(("finish", {"summary": summary}))


@dataclass
class ScriptedModel:
    """Answers requests from `script`, in order; past its end, with `finish`."""

    script: list[Step]
    requests: list[Body] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    #: Each request's body as sent, in bytes (over `client`'s transport).
    sent: list[bytes] = field(default_factory=list)

    def answer(self, body: Body, headers: dict[str, str]) -> httpx.Response:
        self.requests.append(body)
        self.headers.append(headers)
        step: Step = self.script.pop(0) if self.script else finish("script ended")
        if callable(step):
            step = step(body)
        if isinstance(step, httpx.Response):
            return step
        return httpx.Response(200, json=step)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.content)
        return self.answer(json.loads(request.content), dict(request.headers))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))

    def tool_results(self, index: int = -1) -> list[dict[str, Any]]:
        """The tool results the model was shown in request `index`, parsed."""
        return [
            json.loads(message["content"])
            for message in self.requests[index]["messages"]
            if message["role"] == "tool"
        ]


@contextmanager
def serve_script(model: ScriptedModel) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering from `model`; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            response = model.answer(body, {k.lower(): v for k, v in self.headers.items()})
            payload = response.content
            self.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(key, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


#: The A-share the self-correcting trader buys (ICBC: cheap enough for a 100-share lot).
CN_STOCK = "601398.SH"


def self_correcting_trader(body: Body) -> Body:
    """A model that, each cycle, researches (bars, quote), and when it holds nothing buys 50
    shares of `CN_STOCK` (under a lot: rejected `lot_size`), then corrects to 100 and finishes."""
    messages = body["messages"]
    results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
    if not results:
        return tool_turn(
            ("get_bars", {"symbol": CN_STOCK, "interval": "1d", "lookback": 5}),
            ("get_quote", {"symbols": [CN_STOCK]}),
        )
    last = results[-1]
    if "quotes" in last:
        if "positions none" not in messages[1]["content"]:
            return finish("Holding.")
        return tool_turn(
            ("place_order", {"symbol": CN_STOCK, "side": "buy", "shares": 50, "reason": "cheap"})
        )
    if last.get("reject_reason") == "lot_size":
        return tool_turn(
            (
                "place_order",
                {"symbol": CN_STOCK, "side": "buy", "shares": 100, "confidence": 0.7},
            )
        )
    return finish(f"Last: {last.get('status', last.get('code'))}.")


#: How each of seven cycles of `protocol_script` ends, and the stop reason its loop records, under
#: budgets of 3 turns and 3 tool calls (Herculean's protocol completion: four finish in budget).
PROTOCOL_ENDINGS: tuple[tuple[str, str], ...] = (
    ("quote, then finish", "finished"),
    ("quotes until the turns run out", "max_turns"),
    ("buy, then finish", "finished"),
    ("answer in text, no finish", "answered"),
    ("finish past the tool-call budget", "max_tool_calls"),
    ("finish at once", "finished"),
    ("quote, then finish on the last turn", "finished"),
)
#: How many of `PROTOCOL_ENDINGS` end with the model's own `finish` within budget.
PROTOCOL_COMPLETE = sum(stop == "finished" for _, stop in PROTOCOL_ENDINGS)
#: The budgets `protocol_script` is written for.
PROTOCOL_MAX_TURNS = 3
PROTOCOL_MAX_TOOL_CALLS = 3


def protocol_script() -> Callable[[Body], Body]:
    """A model that ends its cycles as `PROTOCOL_ENDINGS` say, one ending per cycle in order
    (a cycle's first request holds no assistant message), for one agent's sequential cycles."""
    cycle = -1

    def answer(body: Body) -> Body:
        nonlocal cycle
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        if turn == 0:
            cycle += 1
        quote = ("get_quote", {"symbols": [CN_STOCK]})
        ending = PROTOCOL_ENDINGS[cycle % len(PROTOCOL_ENDINGS)][0]
        if ending == "quote, then finish":
            return tool_turn(quote) if turn == 0 else finish("Seen enough.")
        if ending == "quotes until the turns run out":
            return tool_turn(quote)
        if ending == "buy, then finish":
            buy = ("place_order", {"symbol": CN_STOCK, "side": "buy", "shares": 100})
            return tool_turn(buy) if turn == 0 else finish("Bought.")
        if ending == "answer in text, no finish":
            return completion("I would rather hold today.")
        if ending == "finish past the tool-call budget":
            return tool_turn(quote, quote, quote, ("finish", {"summary": "too late"}))
        if ending == "finish at once":
            return finish("Holding.")
        return tool_turn(quote) if turn < 2 else finish("Done on my third turn.")

    return answer
