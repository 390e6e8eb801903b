"""The MCP server of outside agents, on real uvicorn on a loopback port, with the SDK's own client.

One cycle of an `mcp` agent on a real SQLite ledger over the bundled US data: the client waits for
the cycle, researches, places an order that fills under the market's rules and finishes; each call
is one trace row. The tools listed are the registry's own. Budgets are enforced by the server; an
agent's token reaches its own cycles only and a cycle token dies with its cycle; an absent client
leaves the cycle `agent_absent`, and one that stops mid-cycle keeps its order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine

from openbell.agents.masking import masker_for
from openbell.agents.outside.agent import AGENT_ABSENT, McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ARGUMENTS, DESCRIPTIONS
from openbell.daemon.mcp_http import serve_mcp
from openbell.markets.errors import ConfigError, CycleSkipped, OperatorError
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import CRYPTO_DAY, US_OPEN, Arena, make_arena
from openbell_testkit.mcp import call, connect, status_without_session

T = TypeVar("T")
AGENT = "outside"


def token_of(ledger: Ledger, agent: str) -> str:
    """A fresh agent token of `agent` (created in the ledger if it is not there)."""
    ledger.ensure_agent(agent, "mcp", US_OPEN)
    return ledger.issue_agent_token(agent, US_OPEN)


@asynccontextmanager
async def cycle_served(
    ledger: Ledger, arena: Arena, agent: McpAgent
) -> AsyncIterator[tuple[str, asyncio.Task[None]]]:
    """The server's URL and the agent's running `decide` on the arena's cycle at `US_OPEN`."""
    tools = await arena.toolbox(US_OPEN)
    ctx = replace(arena.context(agent, tools), journal=ledger)
    async with serve_mcp(agent.hub, ledger, host="127.0.0.1", port=0) as url:
        task = asyncio.create_task(agent.decide(ctx))
        try:
            yield url, task
        finally:
            if not task.done():
                await asyncio.wait({task}, timeout=agent.budgets.max_wall_s + 5)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await scenario()

    return asyncio.run(main())


def outside(budgets: OutsideBudgets | None = None) -> McpAgent:
    return McpAgent(name=AGENT, hub=CycleHub(), budgets=budgets or OutsideBudgets(max_wall_s=20))


def test_a_client_trades_one_cycle_through_every_step(ledger: Ledger, engine: Engine) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = outside()
    token = token_of(ledger, AGENT)

    async def scenario() -> list[tuple[dict[str, Any], bool]]:
        async with cycle_served(ledger, arena, agent) as (url, task):
            async with connect(url, token) as session:
                listed = await session.list_tools()
                names = [tool.name for tool in listed.tools]
                assert names == ["wait_for_cycle", *ARGUMENTS]
                for tool in listed.tools[1:]:
                    assert tool.description == DESCRIPTIONS[tool.name]
                    schema = ARGUMENTS[tool.name].model_json_schema()
                    assert tool.input_schema["properties"] == schema.get("properties", {})
                answers = [
                    await call(session, "wait_for_cycle", timeout_s=10),
                    await call(session, "get_bars", symbol="AAPL", lookback=5),
                    await call(
                        session, "place_order", symbol="AAPL", side="buy", shares="3", reason="r"
                    ),
                    await call(session, "get_bars", symbol="NOPE"),
                    await call(session, "finish", summary="bought"),
                ]
            await asyncio.wait_for(task, 10)
        return answers

    waited, bars, order, unknown, finished = run(scenario)
    assert not waited[1]
    assert waited[0]["market"] == "us"
    assert waited[0]["slot_at"] == US_OPEN.isoformat()
    assert Decimal(waited[0]["account"]["cash"]) == Decimal(10000)
    assert "slippage 5 bps" in waited[0]["rules"]
    assert "AAPL" in waited[0]["universe"]
    assert 0 < waited[0]["deadline_in_s"] <= 20
    assert not bars[1]
    assert len(bars[0]["bars"]) == 5
    assert all(datetime.fromisoformat(bar["end_at"]) <= US_OPEN for bar in bars[0]["bars"])
    assert (order[0]["status"], order[0]["filled_shares"], order[1]) == ("filled", "3", False)
    assert unknown[1]
    assert unknown[0]["code"] == "unknown_symbol"
    assert finished[0]["orders_placed"] == 1
    cycle_id = arena.claim(US_OPEN)
    trace = ledger.traces(cycle_id)
    assert [entry.tool for entry in trace] == [
        "wait_for_cycle",
        "get_bars",
        "place_order",
        "get_bars",
        "finish",
    ]
    assert all(entry.role == "tool" and entry.latency_ms is not None for entry in trace)
    assert token not in " ".join(f"{e.arguments}{e.result}{e.content}" for e in trace)
    assert arena.holdings(US_OPEN) == {"AAPL": Decimal(3)}
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, US_OPEN)
    assert verify_ledger(engine).ok


def test_the_tool_call_budget_and_the_deadline_are_enforced_by_the_server(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = outside(OutsideBudgets(max_tool_calls=2, max_wall_s=3))
    token = token_of(ledger, AGENT)

    async def scenario() -> list[tuple[dict[str, Any], bool]]:
        async with (
            cycle_served(ledger, arena, agent) as (url, task),
            connect(url, token) as session,
        ):
            answers = [await call(session, "wait_for_cycle", timeout_s=10)]
            answers += [await call(session, "get_quote", symbols=["AAPL"]) for _ in range(3)]
            await asyncio.wait_for(task, 10)  # the deadline closes the cycle
            answers.append(await call(session, "get_portfolio"))
        return answers

    waited, first, second, third, late = run(scenario)
    assert waited[0]["tool_calls_left"] == 2
    assert not first[1]
    assert not second[1]
    assert third[1]
    assert third[0]["code"] == "budget_exhausted"
    assert late[1]
    assert late[0]["code"] == "cycle_closed"
    trace = ledger.traces(arena.claim(US_OPEN))
    # The refused call is traced too; openbell finished the cycle at its deadline.
    assert [entry.tool for entry in trace] == [
        "wait_for_cycle",
        "get_quote",
        "get_quote",
        "get_quote",
        "finish",
    ]
    assert trace[-1].content == "called by openbell"


def test_an_absent_client_skips_the_cycle_and_one_that_stops_keeps_its_order(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    absent = outside(OutsideBudgets(max_wall_s=0.5))

    async def nobody() -> None:
        tools = await arena.toolbox(US_OPEN)
        await absent.decide(replace(arena.context(absent, tools), journal=ledger))

    with pytest.raises(CycleSkipped) as skipped:
        run(nobody)
    assert skipped.value.reason == AGENT_ABSENT
    assert ledger.traces(arena.claim(US_OPEN)) == []

    later = make_arena(ledger, "us", agent="quitter")
    quitter = McpAgent(name="quitter", hub=CycleHub(), budgets=OutsideBudgets(max_wall_s=2))
    token = token_of(ledger, "quitter")

    async def stops() -> None:
        tools = await later.toolbox(US_OPEN)
        ctx: DecisionContext = replace(later.context(quitter, tools), journal=ledger)
        async with serve_mcp(quitter.hub, ledger, host="127.0.0.1", port=0) as url:
            task = asyncio.create_task(quitter.decide(ctx))
            async with connect(url, token) as session:
                await call(session, "wait_for_cycle")
                await call(session, "place_order", symbol="MSFT", side="buy", shares="1")
            await asyncio.wait_for(task, 10)  # done at the deadline, not skipped

    run(stops)
    assert later.holdings(US_OPEN) == {"MSFT": Decimal(1)}
    trace = ledger.traces(later.claim(US_OPEN))
    assert [entry.tool for entry in trace] == ["wait_for_cycle", "place_order", "finish"]


def test_tokens_reach_their_own_cycles_only(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = outside(OutsideBudgets(max_wall_s=20))
    other_token = token_of(ledger, "other")
    replaced = token_of(ledger, AGENT)
    token_of(ledger, AGENT)  # a new token: the one before stops working

    async def scenario() -> dict[str, object]:
        found: dict[str, object] = {}
        async with cycle_served(ledger, arena, agent) as (url, task):
            found["none"] = await status_without_session(url, None)
            found["wrong"] = await status_without_session(url, "obt_not-a-token")
            found["cycle-guess"] = await status_without_session(url, "obc_guessed")
            found["replaced"] = await status_without_session(url, replaced)
            async with connect(url, other_token) as other:
                found["other"] = await call(other, "wait_for_cycle", timeout_s=0.5)
                found["other-call"] = await call(other, "get_portfolio")
            [cycle] = agent.hub.waiting(AGENT)
            token = cycle.token
            found["cycle-open"] = await status_without_session(url, token)
            async with connect(url, token) as session:
                found["by-cycle"] = await call(session, "get_portfolio")
                await call(session, "finish", summary="done")
            await asyncio.wait_for(task, 10)
            found["cycle-closed"] = await status_without_session(url, token)
        return found

    found = run(scenario)
    refused = (found["none"], found["wrong"], found["cycle-guess"], found["replaced"])
    assert refused == (401, 401, 401, 401)
    other, other_error = found["other"]  # type: ignore[misc]
    assert not other_error
    assert other["status"] == "no_cycle"
    other_call, other_call_error = found["other-call"]  # type: ignore[misc]
    assert other_call_error
    assert other_call["code"] == "no_cycle"
    assert found["cycle-open"] == 200
    by_cycle, by_cycle_error = found["by-cycle"]  # type: ignore[misc]
    assert not by_cycle_error
    assert Decimal(by_cycle["cash"]) == Decimal(10000)
    assert found["cycle-closed"] == 401


def test_an_agent_in_two_markets_chooses_its_cycle_and_reads_its_resources(
    ledger: Ledger,
) -> None:
    us, crypto = make_arena(ledger, "us", agent=AGENT), make_arena(ledger, "crypto", agent=AGENT)
    hub = CycleHub()
    budgets = OutsideBudgets(max_wall_s=20)
    agents = [McpAgent(name=AGENT, hub=hub, budgets=budgets) for _ in range(2)]
    token = token_of(ledger, AGENT)

    async def scenario() -> dict[str, Any]:
        found: dict[str, Any] = {}
        contexts = [
            replace(arena.context(agent, await arena.toolbox(at)), journal=ledger)
            for arena, agent, at in ((us, agents[0], US_OPEN), (crypto, agents[1], CRYPTO_DAY))
        ]
        async with serve_mcp(hub, ledger, host="127.0.0.1", port=0) as url:
            tasks = [
                asyncio.create_task(a.decide(c)) for a, c in zip(agents, contexts, strict=True)
            ]
            async with connect(url, token) as session:
                while len(hub.waiting(AGENT)) < 2:  # noqa: ASYNC110  (both cycles open)
                    await asyncio.sleep(0.01)
                found["ambiguous"] = await call(session, "wait_for_cycle")
                found["unbound"] = await call(session, "get_portfolio")
                found["crypto"] = await call(session, "wait_for_cycle", market="crypto")
                found["portfolio"] = await call(session, "get_portfolio")
                listed = await session.list_resources()
                found["resources"] = sorted(resource.uri for resource in listed.resources)
                for uri in found["resources"]:
                    [content] = (await session.read_resource(uri)).contents
                    found[uri] = json.loads(getattr(content, "text", ""))
                await call(session, "finish", summary="crypto done")
                found["next"] = await call(session, "wait_for_cycle")
                await call(session, "finish", summary="us done")
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return found

    found = run(scenario)
    for key in ("ambiguous", "unbound"):
        assert found[key][1], key
        assert found[key][0]["code"] == "ambiguous_cycle"
        assert "crypto, us" in found[key][0]["message"]
    assert found["crypto"][0]["market"] == "crypto"
    assert found["portfolio"][0]["currency"] == "USDT"
    assert found["resources"] == ["openbell://account", "openbell://rules"]
    assert found["openbell://account"]["portfolio"]["currency"] == "USDT"
    assert found["openbell://account"]["recent_orders"] == []
    assert found["openbell://rules"]["market"] == "crypto"
    assert found["next"][0]["market"] == "us"
    crypto_trace = ledger.traces(crypto.claim(CRYPTO_DAY))
    assert [entry.tool for entry in crypto_trace] == [
        "wait_for_cycle",
        "get_portfolio",
        "resource:openbell://account",
        "resource:openbell://rules",
        "finish",
    ]


def test_a_masked_outside_agent_sees_aliases_only(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = McpAgent(
        name=AGENT,
        hub=CycleHub(),
        budgets=OutsideBudgets(max_wall_s=20),
        masker=masker_for("stock-blind", seed=5),
    )
    token = token_of(ledger, AGENT)

    async def scenario() -> list[tuple[dict[str, Any], bool]]:
        tools = await arena.toolbox(US_OPEN)
        ctx = replace(arena.context(agent, tools), journal=ledger, masking_keys=ledger)
        async with serve_mcp(agent.hub, ledger, host="127.0.0.1", port=0) as url:
            task = asyncio.create_task(agent.decide(ctx))
            async with connect(url, token) as session:
                waited = await call(session, "wait_for_cycle")
                alias = waited[0]["universe"][0]
                answers = [
                    waited,
                    await call(session, "get_bars", symbol=alias, lookback=2),
                    await call(session, "place_order", symbol=alias, side="buy", shares="1"),
                    await call(session, "get_bars", symbol="AAPL"),
                    await call(session, "finish", summary="done"),
                ]
            await asyncio.wait_for(task, 10)
        return answers

    waited, bars, order, real, _finished = run(scenario)
    universe = waited[0]["universe"]
    assert all(symbol.startswith("asset_") for symbol in universe)
    assert not set(universe) & set(arena.universe.symbols)
    assert bars[0]["symbol"] == universe[0]
    assert order[0]["status"] == "filled"
    assert real[1]  # a real ticker is not served to a stock-blind agent
    assert real[0]["code"] == "unknown_symbol"
    [held] = arena.holdings(US_OPEN)
    assert held in arena.universe.symbols
    # What the client was shown (and the trace keeps) never names the real ticker it bought.
    trace = ledger.traces(arena.claim(US_OPEN))
    shown = [
        entry.result or "" for entry in trace if entry.tool in ("wait_for_cycle", "place_order")
    ]
    assert len(shown) == 2
    assert all(held not in result for result in shown)


def test_the_endpoint_refuses_a_public_bind_and_a_port_in_use() -> None:
    hub = CycleHub()

    async def scenario() -> None:
        with pytest.raises(ConfigError, match="not loopback"):
            async with serve_mcp(hub, NO_TOKENS, host="0.0.0.0", port=0):  # noqa: S104
                pass
        async with serve_mcp(hub, NO_TOKENS, host="127.0.0.1", port=0) as url:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            with pytest.raises(OperatorError, match="cannot listen there"):
                async with serve_mcp(CycleHub(), NO_TOKENS, host="127.0.0.1", port=port):
                    pass
            assert hub.mcp_url == url
        assert hub.mcp_url is None

    run(scenario)


class _NoTokens:
    def agent_for_token(self, token: str) -> str | None:
        return None


NO_TOKENS = _NoTokens()
