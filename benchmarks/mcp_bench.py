"""MCP tool-call overhead: one `get_quote` over streamable HTTP on loopback against a direct call.

Opens one cycle of an outside agent on a SQLite ledger over the bundled US data, serves `/mcp` with
uvicorn on a loopback port, and times `CALLS` calls of `get_quote(["AAPL"])`, back to back, four
ways: straight through `Toolbox.serve` (what the built-in agent's loop pays for the call itself);
the same with a trace row written to the ledger after each call (the same row an MCP call
leaves); through the MCP server with the SDK's own client and no journal (the transport alone);
and as deployed, each MCP call also a trace row. Prints the median and p99 latency of each, and
the MCP overhead per call: the bare MCP median minus the direct call's, and the deployed MCP
median minus the traced direct call's. Not a test: run it by hand,
`.venv/bin/python benchmarks/mcp_bench.py [--calls N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.daemon.mcp_http import serve_mcp
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import TraceEntry
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.mcp import connect

ARGUMENTS = {"symbols": ["AAPL"]}


class NoAgentTokens:
    def agent_for_token(self, token: str) -> str | None:
        return None


def trace_row(ctx: DecisionContext, result: str) -> TraceEntry:
    """The trace row a `get_quote` call leaves on the cycle of `ctx`."""
    return TraceEntry(
        cycle_id=ctx.cycle_id,
        role="tool",
        at=ctx.now,
        content="called directly",
        tool="get_quote",
        arguments=json.dumps(ARGUMENTS),
        result=result,
        latency_ms=0,
    )


def summary(label: str, seconds: list[float]) -> float:
    ordered = sorted(seconds)
    median = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    print(f"{label:<28} median {median:7.3f} ms   p99 {p99:7.3f} ms   ({len(ordered)} calls)")
    return median


async def over_mcp(ctx: DecisionContext, calls: int) -> list[float]:
    hub = CycleHub()
    async with (
        serve_mcp(hub, NoAgentTokens(), host="127.0.0.1", port=0) as url,
        hub.open(ctx, budgets=OutsideBudgets(max_tool_calls=10 * calls, max_wall_s=600)) as cycle,
        connect(url, cycle.token) as session,
    ):
        for _ in range(20):  # warm up
            await session.call_tool("get_quote", ARGUMENTS)
        cycle.tool_calls = 0
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.call_tool("get_quote", ARGUMENTS)
            times.append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"get_quote failed: {result.content}")
        return times


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        upgrade(url)
        engine = make_engine(url)
        ledger = Ledger(engine)
        arena = make_arena(ledger, "us", agent="bench")
        tools = await arena.toolbox(US_OPEN)
        ctx = arena.context(McpAgent(name="bench", hub=CycleHub()), tools)
        direct = []
        for _ in range(calls):
            started = time.perf_counter()
            await tools.serve("get_quote", ARGUMENTS)
            direct.append(time.perf_counter() - started)
        base = summary("direct Toolbox.serve", direct)
        traced_direct = []
        for _ in range(calls):
            started = time.perf_counter()
            outcome = await tools.serve("get_quote", ARGUMENTS)
            ledger.append_journal(ctx.cycle_id, [trace_row(ctx, outcome.model_dump_json())])
            traced_direct.append(time.perf_counter() - started)
        traced_base = summary("direct, traced", traced_direct)
        fresh = replace(ctx, tools=await arena.toolbox(US_OPEN))  # the first run finishes its own
        bare = summary("MCP, no trace rows", await over_mcp(ctx, calls))
        traced = summary(
            "MCP, traced (as deployed)", await over_mcp(replace(fresh, journal=ledger), calls)
        )
        print(f"MCP overhead per call (median): {bare - base:.3f} ms bare, ", end="")
        print(f"{traced - traced_base:.3f} ms as deployed (both traced)")
        engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    asyncio.run(main(parser.parse_args().calls))
