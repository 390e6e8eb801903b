"""The `pair` decision mode (Herculean's Hedging task): the open-research prompt, told the
configured pairs and the pair rule that `agents.pairs.PairEnforced` applies after each turn.

It lives with the other modes, apart from the pair rule and the pair-neutral baseline in
`agents.pairs`, so that a replay of baselines does not import the LLM prompt machinery.
"""

from __future__ import annotations

from collections.abc import Sequence

from openbell.agents.llm.hooks import OpenResearchPrompt
from openbell.agents.pair_rules import Pair, named
from openbell.agents.protocol import DecisionContext


def pair_rule_text(pairs: Sequence[Pair]) -> str:
    """The pair rule as a model is told it."""
    listed = "; ".join(named(pair) for pair in pairs)
    return (
        f"Pair mode: you trade the pairs {listed}. End every cycle with each pair hedged (one leg "
        "long, the other short: buy one, short the other) or flat; a pair left with one leg "
        "alone, or both legs on one side, has its legs closed by openbell after you finish."
    )


class PairPrompt(OpenResearchPrompt):
    """The `pair` mode: the open-research prompt, told the pairs and the pair rule."""

    def __init__(self, pairs: Sequence[Pair]) -> None:
        super().__init__()
        self.pairs = tuple(pairs)

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The open-research prompt and the pair rule."""
        return f"{super().system_prompt(ctx)}\n{pair_rule_text(self.pairs)}"
