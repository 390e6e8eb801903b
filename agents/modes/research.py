"""The `open-research` decision mode under masking: every tool but those masking cannot hide.

This module owns `MaskedResearchPrompt`, the default `OpenResearchPrompt` (its prompts unchanged)
with news and fundamentals taken off the offered tools when a masking level blinds anything, and a
line in the system prompt saying so (the masker answers a call to them with a `masked` error in
any case).
"""

from __future__ import annotations

from openbell.agents.llm.hooks import OpenResearchPrompt
from openbell.agents.masking import BLINDED_TOOLS, MaskingLevel
from openbell.agents.protocol import DecisionContext


class MaskedResearchPrompt(OpenResearchPrompt):
    """`open-research` at a masking level other than bright."""

    def __init__(self, masking: MaskingLevel) -> None:
        super().__init__()
        self.masking = masking

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The default system prompt, and that news and fundamentals are unavailable."""
        return (
            f"{super().system_prompt(ctx)}\nIn this run the data is masked ({self.masking.value}):"
            " news and fundamentals are unavailable."
        )

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """Every toolbox tool except news and fundamentals."""
        return tuple(spec.name for spec in ctx.tools.specs if spec.name not in BLINDED_TOOLS)
