"""Splitting an account when its model changed (`on_model_change = "split"`).

This module owns what a split makes: the name of the agent's next generation (`NAME~2`, then
`NAME~3`; `~` is not allowed in a configured name, so a generation never collides with another
agent), the agent under that name (`Generation`: the same agent object, deciding for its new
account), and the new account, opened at the slot of the split with the old account's initial cash
and shorting permission (`open_successor`). The old account is closed: the cycle runner runs the
new one in its place from that slot on (`runner.CycleRunner`), so the old account's history ends
with the cycle that saw the change (`skipped`, reason `model_changed`), and the leaderboard shows
the two accounts as two rows, `NAME` and `NAME~2`. A run that starts later (a restarted daemon,
a resumed replay) trades the latest generation (`latest_generation`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from openbell.agents.protocol import Agent, DecisionContext
from openbell.store.ledger import Ledger

#: The separator of a generation's number in an agent's name.
GENERATION_SEP: Final = "~"
_GENERATION = re.compile(r"^(.*)~(\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountSplit:
    """A split: `account_id` of `market` closed at the slot `at`, `successor_id` (of agent
    `successor`) trading from it on."""

    market: str
    account_id: int
    successor_id: int
    successor: str
    at: datetime


def next_generation(name: str) -> str:
    """`NAME~2` for `NAME`, `NAME~3` for `NAME~2`."""
    found = _GENERATION.match(name)
    if found is None:
        return f"{name}{GENERATION_SEP}2"
    return f"{found.group(1)}{GENERATION_SEP}{int(found.group(2)) + 1}"


class Generation:
    """`agent` deciding under another `name` (its next generation's)."""

    def __init__(self, agent: Agent, name: str) -> None:
        self._agent = agent
        self._name = name

    @property
    def name(self) -> str:
        """The generation's name."""
        return self._name

    @property
    def kind(self) -> str:
        """The agent's kind."""
        return self._agent.kind

    async def decide(self, ctx: DecisionContext) -> None:
        """The agent's decision."""
        await self._agent.decide(ctx)


def latest_generation(
    ledger: Ledger, account_id: int, agent: Agent, market: str
) -> tuple[int, Agent]:
    """The account (and agent) of `agent`'s latest generation in `market`: its own `account_id`
    when it was never split, so a restarted run goes on where the split left it."""
    while (found := ledger.account_of(next_generation(agent.name), market)) is not None:
        account_id, agent = found, Generation(agent, next_generation(agent.name))
    return account_id, agent


def open_successor(
    ledger: Ledger, account_id: int, agent: Agent, market: str, currency: str, now: datetime
) -> tuple[int, Agent]:
    """The new account (and its agent) that succeeds `account_id` of `agent` at `now`."""
    successor = Generation(agent, next_generation(agent.name))
    agent_id = ledger.ensure_agent(successor.name, successor.kind, now)
    opened = ledger.open_account(
        agent_id,
        market,
        currency,
        ledger.initial_cash(account_id),
        now,
        allow_short=ledger.allows_short(account_id),
    )
    return opened, successor
