"""The fixed-candidate and memory-only decision modes (KTD-Fin): a data table, or nothing at all.

This module owns two `StructuredPrompt` builders. `FixedCandidatePrompt` puts a compact table of
the top-k candidates of the factor screen (`screen.py`, from daily bars ended by `now`) and the
account marked at the slot's prices in the first message, offers no research tool, and takes a
structured final action. `MemoryOnlyPrompt` gives only identifiers (the universe's stock ids) and
the account's cash and quantities, no market data at all (no prices, no weights, no NAV), so what
the model trades on is what it remembers. Under masking the ids are listed in alias order, and
under price rebasing the table's closes and the account's cash are in the account's unit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from openbell.agents.masking import MaskingLevel
from openbell.agents.modes.screen import Candidate, screen, table
from openbell.agents.modes.structured import StructuredPrompt, account_text
from openbell.agents.protocol import DecisionContext

DEFAULT_TOP_K: Final = 10


class FixedCandidatePrompt(StructuredPrompt):
    """`fixed-candidate`: the screen's top-k table in the prompt, no research tools."""

    system_role = (
        "You are given a table of candidate stocks from a factor screen (20-day momentum and "
        "volatility from daily closes) and your account; you may trade the candidates and "
        "what you hold."
    )

    def __init__(
        self,
        *,
        top_k: int = DEFAULT_TOP_K,
        masking: MaskingLevel = MaskingLevel.BRIGHT,
        masking_seed: str | int = 0,
        rebase: bool | None = None,
    ) -> None:
        super().__init__(masking=masking, masking_seed=masking_seed, rebase=rebase)
        if top_k < 1:
            raise ValueError(f"top_k must be positive, got {top_k}")
        self.top_k = top_k
        self.candidates: list[Candidate] = []

    async def gather(self, ctx: DecisionContext) -> None:
        """Screen the universe from the daily bars ended by `now`."""
        self.candidates = await screen(ctx.tools, ctx.universe.symbols, self.top_k)

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The time, the account and the candidate table (its last closes as shown)."""
        shown = [replace(c, last_close=self.money(c.last_close)) for c in self.candidates]
        body = table(shown) if shown else "(no symbol had 21 daily closes)"
        return (
            f"{self.now_text(ctx)}\n"
            f"Your account: {account_text(self.portfolio, with_prices=True)}\n"
            f"Top {len(self.candidates)} candidates by score (momentum / volatility):\n"
            f"{body}\n"
            "Decide your orders now."
        )


class MemoryOnlyPrompt(StructuredPrompt):
    """`memory-only`: identifiers and the account only, no market data."""

    system_role = (
        "You get no market data: only the stock ids you may trade and your cash and holdings. "
        "Decide from what you know."
    )

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The time, the account's cash and quantities, and the stock ids."""
        return (
            f"{self.now_text(ctx)}\n"
            f"Your account: {account_text(self.portfolio, with_prices=False)}\n"
            f"Stock ids you may trade: {', '.join(self.listing(ctx.universe.symbols))}\n"
            "Decide your orders now."
        )
