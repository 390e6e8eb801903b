"""Decision modes (KTD-Fin, StockBench): what an LLM agent is told, which tools it gets, and how its
answer becomes orders (`ktd-fin`: KTD-Fin's research tools, then a forced `submit_action`).
`prompt_for_mode` builds a fresh `PromptBuilder` for one cycle (the LLM agent's prompt factory calls
it per cycle); `parse_final_action` reads the structured final action of the no-tool modes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from decimal import Decimal
from typing import Final

from openbell.agents.llm.hooks import OpenResearchPrompt, PromptBuilder
from openbell.agents.masking import MaskingLevel, rebases
from openbell.agents.modes.candidates import DEFAULT_TOP_K, FixedCandidatePrompt, MemoryOnlyPrompt
from openbell.agents.modes.final_action import (
    MAX_RETRIES,
    FinalAction,
    OrderIntent,
    ValidationFeedback,
    parse_final_action,
)
from openbell.agents.modes.hedge import HedgePrompt
from openbell.agents.modes.ktd_fin import DEFAULT_RESEARCH_CALLS, KtdFinPrompt
from openbell.agents.modes.open_research import MaskedResearchPrompt
from openbell.agents.modes.pair import PairPrompt
from openbell.agents.modes.stockbench import StockBenchPrompt
from openbell.agents.pair_rules import HERCULEAN_ASSETS, LEG_WEIGHT, Pair

MODES: Final = (
    "open-research",
    "fixed-candidate",
    "memory-only",
    "stockbench",
    "pair",
    "ktd-fin",
    "hedge",
)

__all__ = [
    "DEFAULT_RESEARCH_CALLS",
    "MAX_RETRIES",
    "MODES",
    "FinalAction",
    "OrderIntent",
    "ValidationFeedback",
    "parse_final_action",
    "prompt_for_mode",
]


def prompt_for_mode(
    mode: str,
    *,
    masking: MaskingLevel | str = MaskingLevel.BRIGHT,
    masking_seed: str | int = 0,
    rebase: bool | None = None,
    top_k: int = DEFAULT_TOP_K,
    pairs: Sequence[Pair] = (),
    research_calls: int = DEFAULT_RESEARCH_CALLS,
    hedge_assets: Sequence[str] = HERCULEAN_ASSETS,
    hedge_leg_weight: Decimal = LEG_WEIGHT,
    without: Collection[str] = (),
) -> PromptBuilder:
    """A fresh builder of `mode` (one of `MODES`) for one cycle.

    `masking`, `masking_seed` and `rebase` (price rebasing; None: on at `blinded` only) must be
    those of the agent's masker: the builders show and read back through the same account key.
    `top_k` sizes the fixed-candidate table; `pairs` are the pair mode's (which needs them and
    is bright only: its pairs name real tickers); `research_calls` bounds the research phase of
    `ktd-fin`; `hedge_assets` the hedge mode's candidates and `hedge_leg_weight` the fraction of
    NAV of each of its legs (bright only too); `without` the inputs stockbench leaves out (its
    ablations: "news", "fundamentals").
    """
    level = MaskingLevel(masking)
    if without and mode != "stockbench":
        raise ValueError("only the stockbench mode leaves inputs out")
    if mode == "open-research":
        if level is MaskingLevel.BRIGHT:
            rebases(level, rebase)
            return OpenResearchPrompt()
        return MaskedResearchPrompt(level, masking_seed, rebase)
    if mode == "fixed-candidate":
        return FixedCandidatePrompt(
            top_k=top_k, masking=level, masking_seed=masking_seed, rebase=rebase
        )
    if mode == "memory-only":
        return MemoryOnlyPrompt(masking=level, masking_seed=masking_seed, rebase=rebase)
    if mode == "pair":
        if level is not MaskingLevel.BRIGHT or not pairs:
            raise ValueError("the pair mode needs pairs and masking 'bright'")
        return PairPrompt(pairs)
    if mode == "hedge":
        if level is not MaskingLevel.BRIGHT:
            raise ValueError("the hedge mode names its candidates: masking 'bright' only")
        return HedgePrompt(hedge_assets, leg_weight=hedge_leg_weight)
    if mode == "stockbench":
        return StockBenchPrompt(
            masking=level, masking_seed=masking_seed, rebase=rebase, without=without
        )
    if mode == "ktd-fin":
        return KtdFinPrompt(
            masking=level, masking_seed=masking_seed, rebase=rebase, research_calls=research_calls
        )
    raise ValueError(f"unknown decision mode {mode!r}; known: {', '.join(MODES)}")
