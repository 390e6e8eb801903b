"""The MCP server for an outside agent allowed to short, on real uvicorn with the SDK's client: once
its session has a cycle, `tools/list` offers `place_order` with short and cover, a short fills,
and `get_portfolio` shows the exposures; a long-only agent's listing keeps the two sides."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.mcp import call, connect
from tests.integration.test_mcp_server import AGENT, cycle_served, outside, run, token_of


def sides(listed: Any) -> list[str]:
    (place,) = [tool for tool in listed.tools if tool.name == "place_order"]
    found: list[str] = place.input_schema["properties"]["side"]["enum"]
    return found


def test_a_shorting_outside_agent_is_offered_and_fills_a_short(
    ledger: Ledger, engine: Engine
) -> None:
    arena = make_arena(ledger, "us", agent=AGENT, allow_short=True)
    agent = outside()
    token = token_of(ledger, AGENT)

    async def scenario() -> tuple[list[str], list[tuple[dict[str, Any], bool]]]:
        async with cycle_served(ledger, arena, agent) as (url, task):
            async with connect(url, token) as session:
                waited = await call(session, "wait_for_cycle", timeout_s=10)
                offered = sides(await session.list_tools())
                answers = [
                    waited,
                    await call(
                        session, "place_order", symbol="MSFT", side="short", target_weight="0.3"
                    ),
                    await call(session, "get_portfolio"),
                    await call(session, "finish", summary="short MSFT"),
                ]
            await task
        return offered, answers

    offered, (waited, shorted, portfolio, _finished) = run(scenario)
    assert offered == ["buy", "sell", "short", "cover"]
    assert waited[0]["account"]["short_value"] == "0"
    assert "Long and short" in waited[0]["rules"]
    assert shorted[0]["status"] == "filled", shorted
    assert Decimal(shorted[0]["held_after"]) < 0
    shown = portfolio[0]
    assert Decimal(shown["short_value"]) > 0
    assert Decimal(shown["gross_exposure"]) == -Decimal(shown["net_exposure"])
    assert Decimal("0.25") < Decimal(shown["gross_exposure"]) <= Decimal("0.3")
    cycle_id = arena.claim(US_OPEN)
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, US_OPEN)
    assert verify_ledger(engine).ok


def test_a_long_only_outside_agent_lists_two_sides(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent=AGENT)
    agent = outside()
    token = token_of(ledger, AGENT)

    async def scenario() -> tuple[list[str], list[str], dict[str, Any]]:
        async with cycle_served(ledger, arena, agent) as (url, task):
            async with connect(url, token) as session:
                before = sides(await session.list_tools())
                waited = await call(session, "wait_for_cycle", timeout_s=10)
                after = sides(await session.list_tools())
                await call(session, "finish", summary="nothing")
            await task
        return before, after, waited[0]

    before, after, waited = run(scenario)
    assert before == after == ["buy", "sell"]
    assert "short_value" not in waited["account"]
    assert "Long only" in waited["rules"]
