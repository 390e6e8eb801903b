"""The chat client over `httpx.MockTransport`: the request it sends, retries with backoff on 429,
5xx and timeouts (honouring Retry-After), no retry on other 4xx, and errors in our tree."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx
import pytest

from openbell.agents.llm.client import Attempt, AttemptError, ChatClient, ClientConfig
from openbell.markets.errors import (
    AgentError,
    LlmAuthError,
    LlmRefused,
    LlmUnavailable,
    OperatorError,
    TransientError,
)

KEY = "sk-test-abcdefghijklmnop"
OK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
MESSAGES = [{"role": "user", "content": "hello"}]


class Script:
    """Answers from a list of responses or exceptions, recording each request."""

    def __init__(self, *steps: httpx.Response | Exception) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def run(script: Script, *, max_retries: int = 4, **config: Any) -> tuple[Any, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def scenario() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as http:
            client = ChatClient(
                ClientConfig(
                    base_url="https://api.example.com/v1/",
                    model="m",
                    api_key=KEY,
                    max_retries=max_retries,
                    **config,
                ),
                http=http,
                sleep=sleep,
                rng=random.Random(7),
            )
            async with client.connect() as chat:
                return await chat.complete(MESSAGES, [{"type": "function", "function": {}}])

    return asyncio.run(scenario()), slept


def test_the_request_carries_the_model_the_key_and_the_extras() -> None:
    script = Script(httpx.Response(200, json=OK))
    answer, slept = run(
        script,
        temperature=0.3,
        max_tokens=99,
        extra_headers={"X-Title": "openbell"},
        extra_body={"top_p": 0.9, "enable_thinking": False},
    )
    (request,) = script.requests
    assert str(request.url) == "https://api.example.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["x-title"] == "openbell"
    sent = json.loads(request.content)
    assert sent["model"] == "m"
    assert sent["messages"] == MESSAGES
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"]) == (0.3, 99, 0.9)
    assert sent["enable_thinking"] is False
    assert sent["tools"] == [{"type": "function", "function": {}}]
    assert request.content == json.dumps(sent, separators=(",", ":")).encode()  # compact
    assert answer.completion.content == "hi"
    assert len(answer.attempts) == 1
    assert slept == []


def test_an_extra_field_replaces_a_configured_one_once() -> None:
    script = Script(httpx.Response(200, json=OK))
    run(script, temperature=0.3, extra_body={"temperature": 0.7})
    (request,) = script.requests
    assert json.loads(request.content)["temperature"] == 0.7
    assert request.content.count(b'"temperature"') == 1


def test_a_forced_tool_call_is_the_requests_tool_choice() -> None:
    # KTD-Fin's submission phase: the tool the model must call, over any configured choice.
    script = Script(httpx.Response(200, json=OK), httpx.Response(200, json=OK))
    forced = {"type": "function", "function": {"name": "submit_action"}}

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as http:
            client = ChatClient(
                ClientConfig(
                    base_url="https://x/v1", model="m", extra_body={"tool_choice": "auto"}
                ),
                http=http,
            )
            async with client.connect() as chat:
                await chat.complete(MESSAGES, [{"type": "function", "function": {}}])
                await chat.complete(
                    MESSAGES, [{"type": "function", "function": {}}], tool_choice=forced
                )

    asyncio.run(scenario())
    free, chosen = (json.loads(request.content) for request in script.requests)
    assert free["tool_choice"] == "auto"
    assert chosen["tool_choice"] == forced
    assert script.requests[1].content.count(b'"tool_choice"') == 1
    assert {k: v for k, v in chosen.items() if k != "tool_choice"} == {
        k: v for k, v in free.items() if k != "tool_choice"
    }


def test_429_with_retry_after_500_and_a_timeout_are_retried_until_success() -> None:
    script = Script(
        httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {"message": "slow"}}),
        httpx.Response(500, text="oops"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed the connection"),
        httpx.Response(200, json=OK),
    )
    answer, slept = run(script, backoff_base_s=1.0, backoff_max_s=30.0)
    assert len(answer.attempts) == 5
    assert len(script.requests) == 5
    assert slept[0] == 7.0  # Retry-After honoured
    # Exponential backoff with jitter: a random half to whole of 1, 2, 4 seconds.
    for delay, step in zip(slept[1:], (2.0, 4.0, 8.0), strict=True):
        assert step / 2 <= delay <= step


def test_an_endpoint_refusing_connections_fails_at_once_without_retries() -> None:
    script = Script(
        httpx.ConnectError("[Errno 111] Connection refused"), httpx.Response(200, json=OK)
    )
    with pytest.raises(LlmUnavailable, match=r"cannot connect.*refused.*not retried") as raised:
        run(script, max_retries=4)
    assert len(script.requests) == 1
    assert raised.value.attempts[-1].error is AttemptError.UNREACHABLE  # type: ignore[attr-defined]
    assert raised.value.attempts[-1].retry_in_s is None  # type: ignore[attr-defined]


def test_a_refused_connection_on_a_real_socket_costs_no_backoff() -> None:
    import socket

    with socket.socket() as holder:  # a port nothing listens on: bound, never listening
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        slept: list[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        async def scenario() -> None:
            async with httpx.AsyncClient() as http:
                client = ChatClient(
                    ClientConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m"),
                    http=http,
                    sleep=sleep,
                )
                await client.complete(http, MESSAGES)

        with pytest.raises(LlmUnavailable, match="cannot connect"):
            asyncio.run(scenario())
    assert slept == []


def test_backoff_is_capped() -> None:
    script = Script(*(httpx.Response(503) for _ in range(6)), httpx.Response(200, json=OK))
    _answer, slept = run(script, max_retries=6, backoff_base_s=1.0, backoff_max_s=3.0)
    assert max(slept) <= 3.0


def test_exhausted_retries_are_a_transient_error() -> None:
    script = Script(*(httpx.Response(502) for _ in range(3)))
    with pytest.raises(LlmUnavailable, match=r"HTTP 502.*3 attempts") as raised:
        run(script, max_retries=2)
    assert isinstance(raised.value, TransientError)
    assert len(script.requests) == 3


def test_a_200_that_is_not_a_completion_is_retried() -> None:
    script = Script(
        httpx.Response(200, text="<html>gateway</html>"),
        httpx.Response(200, json={"error": {"message": "overloaded"}}),
        httpx.Response(200, json=OK),
    )
    answer, _ = run(script)
    assert len(answer.attempts) == 3


@pytest.mark.parametrize("status", [400, 413, 422])
def test_other_4xx_are_refused_without_retry(status: int) -> None:
    script = Script(httpx.Response(status, json={"error": {"message": "context too long"}}))
    with pytest.raises(LlmRefused, match="context too long") as raised:
        run(script)
    assert isinstance(raised.value, AgentError)
    assert len(script.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_bad_key_or_model_is_an_operator_error_and_the_key_is_not_repeated(status: int) -> None:
    script = Script(
        httpx.Response(status, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    )
    with pytest.raises(LlmAuthError) as raised:
        run(script)
    assert isinstance(raised.value, OperatorError)
    assert KEY not in str(raised.value)
    assert len(script.requests) == 1


def test_the_key_is_not_in_the_config_repr() -> None:
    config = ClientConfig(base_url="https://x/v1", model="m", api_key=KEY)
    assert KEY not in repr(config)


def test_extra_body_cannot_override_the_request() -> None:
    with pytest.raises(ValueError, match="messages"):
        ClientConfig(base_url="https://x/v1", model="m", extra_body={"messages": []})


def run_timed(
    steps: list[tuple[httpx.Response, float]], *, max_retries: int = 4
) -> tuple[Any, list[Attempt]]:
    """`steps` = (response, seconds it takes) on a fake monotonic clock; (answer or the error
    raised, every attempt reported)."""
    clock = [0.0]
    reported: list[Attempt] = []

    def handler(request: httpx.Request) -> httpx.Response:
        response, took_s = steps.pop(0)
        clock[0] += took_s
        return response

    async def sleep(seconds: float) -> None:
        return None

    async def scenario() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = ChatClient(
                ClientConfig(
                    base_url="https://api.example.com/v1",
                    model="m",
                    api_key=KEY,
                    max_retries=max_retries,
                ),
                http=http,
                sleep=sleep,
                rng=random.Random(7),
                monotonic=lambda: clock[0],
            )
            async with client.connect() as chat:
                try:
                    return await chat.complete(MESSAGES, on_attempt=reported.append)
                except Exception as exc:  # noqa: BLE001  (the test looks at it)
                    return exc

    return asyncio.run(scenario()), reported


def test_every_attempt_is_reported_with_its_error_and_latency() -> None:
    answer, reported = run_timed(
        [
            (httpx.Response(500, text=f"upstream broke for {KEY}"), 1.5),
            (
                httpx.Response(
                    429, headers={"Retry-After": "2"}, json={"error": {"message": "slow"}}
                ),
                0.25,
            ),
            (httpx.Response(200, text="<html>gateway</html>"), 0.5),
            (httpx.Response(200, json={**OK, "choices": []}), 0.125),
            (httpx.Response(200, json=OK), 2.0),
        ]
    )
    assert [a.number for a in reported] == [1, 2, 3, 4, 5]
    assert [a.error for a in reported] == [
        AttemptError.SERVER_ERROR,
        AttemptError.RATE_LIMITED,
        AttemptError.INVALID_BODY,
        AttemptError.NO_COMPLETION,
        None,
    ]
    assert [a.latency_ms for a in reported] == [1500, 250, 500, 125, 2000]
    assert reported[0].message == "HTTP 500: upstream broke for [redacted]"
    assert reported[1].message == "HTTP 429: slow"
    assert reported[1].retry_in_s == 2.0
    assert reported[0].retry_in_s is not None
    assert 0.5 <= reported[0].retry_in_s <= 1.0
    assert reported[-1].ok
    assert reported[-1].retry_in_s is None
    assert answer.attempts == tuple(reported)
    assert answer.latency_ms == 2000  # the answer's own request


def test_a_call_out_of_retries_reports_every_attempt_and_the_last_is_not_retried() -> None:
    raised, reported = run_timed([(httpx.Response(502), 0.5)] * 3, max_retries=2)
    assert isinstance(raised, LlmUnavailable)
    assert [a.error for a in reported] == [AttemptError.SERVER_ERROR] * 3
    assert [a.retry_in_s is None for a in reported] == [False, False, True]
    assert raised.attempts == tuple(reported)


def test_a_refused_or_unauthorised_attempt_is_reported_too() -> None:
    raised, reported = run_timed([(httpx.Response(401, json={"error": {"message": KEY}}), 0.5)])
    assert isinstance(raised, LlmAuthError)
    (attempt,) = reported
    assert attempt.error is AttemptError.AUTH
    assert attempt.latency_ms == 500
    assert KEY not in attempt.message
    raised, reported = run_timed([(httpx.Response(400, json={"error": {"message": "long"}}), 0)])
    assert isinstance(raised, LlmRefused)
    assert [a.error for a in reported] == [AttemptError.REFUSED]
