"""Every request an LLM agent makes is on record: a failed attempt (HTTP 500, 429, a body that is
not JSON, a completion without choices) is a `attempt` trace row with its error and latency, the
cycle's usage counts the attempts and the failed ones, and the model latency is the sum of the
requests' latencies; a call that runs out of retries leaves every attempt in the trace too."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx
import pytest

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.markets.errors import LlmUnavailable
from openbell.store.ledger import Ledger
from openbell.store.records import TraceEntry
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.llm import Body, completion, finish, tool_turn

KEY = "sk-attempts-0123456789abcdefXYZ"


@pytest.fixture
def db_url(sqlite_url: str) -> str:
    return sqlite_url


Step = tuple[httpx.Response, float]


def ok(body: Body) -> httpx.Response:
    return httpx.Response(200, json=body)


@dataclasses.dataclass
class Run:
    cycle_id: int
    traces: list[TraceEntry]
    error: Exception | None


def run_steps(ledger: Ledger, steps: list[Step]) -> Run:
    """One cycle against a model answering `steps` = (response, seconds it takes), in order, on a
    fake monotonic clock (backoff sleeps take no time); what `decide` raised, if anything."""
    clock = [0.0]
    remaining = list(steps)

    def handler(request: httpx.Request) -> httpx.Response:
        response, took_s = remaining.pop(0) if remaining else (ok(finish("end")), 0.0)
        clock[0] += took_s
        return response

    async def no_sleep(seconds: float) -> None:
        return None

    def monotonic() -> float:
        return clock[0]

    arena = make_arena(ledger, "us", agent="flaky")

    async def scenario() -> Run:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = ChatClient(
                ClientConfig(base_url="https://llm.test/v1", model="flaky-1", api_key=KEY),
                http=http,
                sleep=no_sleep,
                monotonic=monotonic,
            )
            agent = LlmAgent(name="flaky", client=client, monotonic=monotonic)
            tools = await arena.toolbox(US_OPEN)
            ctx = dataclasses.replace(arena.context(agent, tools), journal=ledger)
            error: Exception | None = None
            try:
                await agent.decide(ctx)
            except Exception as exc:  # noqa: BLE001  (the test looks at it)
                error = exc
            return Run(ctx.cycle_id, ledger.traces(ctx.cycle_id), error)

    return asyncio.run(scenario())


def test_every_failed_attempt_is_a_trace_row_and_counted(ledger: Ledger) -> None:
    steps: list[Step] = [
        (httpx.Response(500, text=f"upstream broke for {KEY}"), 1.0),
        (
            httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"message": "slow"}}),
            0.5,
        ),
        (httpx.Response(200, text="<html>bad gateway</html>"), 0.25),
        (ok({**completion("x"), "choices": []}), 0.125),
        (ok(tool_turn(("get_quote", {"symbols": ["AAPL"]}))), 2.0),
        (httpx.Response(502), 0.0625),
        (ok(finish("done")), 1.0),
    ]
    ran = run_steps(ledger, steps)
    assert ran.error is None
    traces = ran.traces
    attempts = [t for t in traces if t.role == "attempt"]
    assert [t.latency_ms for t in attempts] == [1000, 500, 250, 125, 62]
    kinds = ["server_error", "rate_limited", "invalid_body", "no_completion", "server_error"]
    for entry, kind in zip(attempts, kinds, strict=True):
        assert kind in (entry.content or ""), entry.content
    assert "HTTP 500" in (attempts[0].content or "")
    assert "HTTP 429: slow" in (attempts[1].content or "")
    assert "retrying" in (attempts[0].content or "")
    assert all(KEY not in (t.content or "") for t in traces)
    # The failed attempts come before the answer they delayed.
    roles = [t.role for t in traces]
    first_answer = roles.index("assistant")
    assert roles[first_answer - 4 : first_answer] == ["attempt"] * 4
    assistant = [t for t in traces if t.role == "assistant"]
    assert [t.latency_ms for t in assistant] == [2000, 1000]

    usage = ledger.cycle_usage(ran.cycle_id)
    assert (usage.llm_attempts, usage.llm_failed_attempts) == (7, 5)
    assert usage.llm_latency_ms == sum(t.latency_ms or 0 for t in attempts + assistant) == 4937


def test_a_call_out_of_retries_leaves_every_attempt_in_the_trace(ledger: Ledger) -> None:
    steps: list[Step] = [
        (httpx.Response(503, headers={"Retry-After": "0"}, text=f"down {KEY}"), 0.5)
    ] * 5
    ran = run_steps(ledger, steps)
    assert isinstance(ran.error, LlmUnavailable)
    assert "5 attempts" in str(ran.error)
    traces = ran.traces
    attempts = [t for t in traces if t.role == "attempt"]
    assert len(attempts) == 5
    assert all("server_error" in (t.content or "") for t in attempts)
    assert "gave up" in (attempts[-1].content or "")
    assert [t.role for t in traces][-1] == "error"
    assert all(KEY not in (t.content or "") for t in traces)
    usage = ledger.cycle_usage(ran.cycle_id)
    assert (usage.llm_attempts, usage.llm_failed_attempts, usage.llm_latency_ms) == (5, 5, 2500)
