"""Builders for the decision-mode and masking tests: one LLM agent cycle with a scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from openbell.agents.llm.agent import LlmAgent, MaskerFactory, PromptFactory
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.hooks import IdentityMasker, OpenResearchPrompt
from openbell.agents.llm.run import Budgets
from openbell.agents.toolbox import Toolbox
from openbell.store.records import CycleStatus, RecordedOrder, TraceEntry
from openbell_testkit.agents import Arena
from openbell_testkit.llm import ScriptedModel


@dataclasses.dataclass
class Cycle:
    """What one scripted cycle did."""

    model: ScriptedModel
    tools: Toolbox
    cycle_id: int
    traces: list[TraceEntry]
    orders: list[RecordedOrder]

    def messages(self, request: int = 0) -> list[dict[str, Any]]:
        return list(self.model.requests[request]["messages"])

    def user_messages(self) -> list[str]:
        """Every user message the model was sent, in order (from the last request)."""
        return [m["content"] for m in self.model.requests[-1]["messages"] if m["role"] == "user"]


def run_llm(
    arena: Arena,
    script: list[Any],
    now: datetime,
    *,
    prompt: PromptFactory = lambda ctx: OpenResearchPrompt(),
    masker: MaskerFactory = lambda ctx: IdentityMasker(),
    budgets: Budgets | None = None,
    model: ScriptedModel | None = None,
) -> Cycle:
    """One cycle of an `LlmAgent` at `now` against `script`, finished as done."""
    scripted = model if model is not None else ScriptedModel(list(script))

    async def scenario() -> Cycle:
        transport = httpx.MockTransport(scripted.handler)
        async with httpx.AsyncClient(transport=transport) as http:
            client = ChatClient(
                ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key="k"),
                http=http,
            )
            agent = LlmAgent(
                name="llm", client=client, budgets=budgets, prompt=prompt, masker=masker
            )
            tools = await arena.toolbox(now)
            ctx = dataclasses.replace(
                arena.context(agent, tools), journal=arena.ledger, masking_keys=arena.ledger
            )
            await agent.decide(ctx)
            arena.ledger.finish_cycle(ctx.cycle_id, CycleStatus.DONE, now)
            return Cycle(
                model=scripted,
                tools=tools,
                cycle_id=ctx.cycle_id,
                traces=arena.ledger.traces(ctx.cycle_id),
                orders=arena.ledger.cycle_orders(ctx.cycle_id),
            )

    return asyncio.run(scenario())


Answer = Callable[[dict[str, Any]], dict[str, Any]]
