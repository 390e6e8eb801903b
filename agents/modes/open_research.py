"""The `open-research` decision mode under masking: every tool but those masking cannot hide.

This module owns `MaskedResearchPrompt`, the default `OpenResearchPrompt` seen through its
account's masker: news and fundamentals taken off the offered tools when a masking level blinds
anything, and a line in the system prompt saying so (the masker answers a call to them with a
`masked` error in any case); the universe listed in the account's alias order and not named; and,
under price rebasing, the account's cash and NAV and the rules' amounts in the account's money unit.
"""

from __future__ import annotations

from openbell.agents.llm.hooks import OpenResearchPrompt, describe_rules
from openbell.agents.masking import BLINDED_TOOLS, AliasMasker, MaskingLevel, account_masker
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import PortfolioOut


class MaskedResearchPrompt(OpenResearchPrompt):
    """`open-research` at a masking level other than bright."""

    def __init__(
        self, masking: MaskingLevel, masking_seed: str | int = 0, rebase: bool | None = None
    ) -> None:
        super().__init__()
        self.masking = masking
        self.masking_seed = masking_seed
        self.rebase = rebase
        self.masker: AliasMasker | None = None

    async def prepare(self, ctx: DecisionContext) -> None:
        """The account's masker (the loop's own, from the same stored key), then the account."""
        self.masker = account_masker(self.masking, ctx, seed=self.masking_seed, rebase=self.rebase)
        await super().prepare(ctx)

    def shown(self, portfolio: PortfolioOut) -> PortfolioOut:
        """The account rebased (under rebasing) with its positions in alias order."""
        return portfolio if self.masker is None else self.masker.show(portfolio)

    def listing(self, ctx: DecisionContext) -> list[str]:
        """The universe in the account's alias order."""
        symbols = ctx.universe.symbols
        return list(symbols) if self.masker is None else self.masker.listing(symbols)

    def rules_text(self, ctx: DecisionContext) -> str:
        """The rules without the universe's name, their money in the account's unit."""
        masker = self.masker
        money = masker.money if masker is not None and masker.unit is not None else None
        return describe_rules(ctx, masked=True, money=money)

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The default system prompt, and that news and fundamentals are unavailable."""
        return (
            f"{super().system_prompt(ctx)}\nIn this run the data is masked ({self.masking.value}):"
            " news and fundamentals are unavailable."
        )

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """Every toolbox tool except news and fundamentals."""
        return tuple(spec.name for spec in ctx.tools.specs if spec.name not in BLINDED_TOOLS)
