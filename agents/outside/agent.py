"""`McpAgent`: an outside agent that connects to the MCP server to trade its account's cycles.

This module owns the agent object of `kind = "mcp"`: at each cycle it opens the cycle on the
`CycleHub` (with its budgets and its account's masker) and holds it until the client calls
`finish` or the deadline (`OutsideBudgets.max_wall_s`) passes. A cycle no client came to by the
deadline raises `CycleSkipped("agent_absent")` (the runner records it `skipped`); a client that
stopped mid-cycle leaves what it did, and openbell finishes the cycle for it at the deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from openbell.agents.kinds import MCP_KIND
from openbell.agents.llm.hooks import IdentityMasker, Masker
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import CycleSkipped

#: The reason stored on the cycle of an outside agent no client came to.
AGENT_ABSENT: Final = "agent_absent"

MaskerFactory = Callable[[DecisionContext], Masker]


def _bright(ctx: DecisionContext) -> Masker:
    return IdentityMasker()


class McpAgent:
    """An agent of kind `mcp`; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        hub: CycleHub,
        budgets: OutsideBudgets | None = None,
        masker: MaskerFactory = _bright,
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        self._name = name
        self._hub = hub
        self._budgets = budgets if budgets is not None else OutsideBudgets()
        self._masker = masker

    @property
    def name(self) -> str:
        """The agent's configured name."""
        return self._name

    @property
    def kind(self) -> str:
        """Always `mcp`."""
        return MCP_KIND

    @property
    def budgets(self) -> OutsideBudgets:
        """The per-cycle budgets enforced by the server."""
        return self._budgets

    @property
    def hub(self) -> CycleHub:
        """The hub its cycles are opened on (the MCP server's)."""
        return self._hub

    async def decide(self, ctx: DecisionContext) -> None:
        """Hold the cycle open until the client finishes it or its deadline passes."""
        async with self._hub.open(
            ctx, budgets=self._budgets, masker=self._masker(ctx), reason="deadline"
        ) as cycle:
            await cycle.wait_finished(self._budgets.max_wall_s)
            attended = cycle.attended
        if not attended:
            raise CycleSkipped(AGENT_ABSENT, f"no client came to the cycle of {self._name}")
