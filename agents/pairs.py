"""Long-short pairs (Herculean's Hedging task): the pair rule, the pair mode and the pair-neutral
baseline.

This module owns three things. The pair rule (`enforce_pairs`): at the end of each cycle every
configured pair must be hedged (one leg long, the other short) or flat (neither held); a pair
left with one leg alone, or with both legs on the same side, has every leg it holds closed by
openbell after the agent's turn (a long sold, a short covered, whole), each as an order of that
cycle whose reason starts "pair rule:", so the ledger and the trace say why. Closing is the
repair chosen over refusing orders because a pair is always built one leg at a time: a refusal
would have to guess which order of the cycle is the last. `PairEnforced` wraps an agent (the LLM
agent in `mode = "pair"`) so the rule runs after its turn (and is told in its trace); the mode's
prompt, which tells the model the pairs and the rule, is `agents.modes.pair.PairPrompt`, and what
a configured pair may be is `agents.pair_rules`. `PairNeutral` is the baseline
(`kind = "pair_neutral"`): for each pair, by momentum over `sessions` daily closes (the return
from the close `sessions` sessions ago to the last close ended by the slot), long the stronger
and short the weaker, equal notional per leg (`1 / (2 x pairs)` of NAV each: gross exposure 1,
net about 0), trading only when it does not already hold that orientation (it rebalances when
the ranking flips, and opens a pair the first time both legs have a signal). A pair without a
signal (too few bars, a tie) is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from openbell.agents.pair_rules import (
    DEFAULT_MOMENTUM_SESSIONS,
    PAIR_RULE,
    Pair,
    check_pairs,
    named,
    pair_state,
)
from openbell.agents.tools import ToolError
from openbell.store.records import TraceEntry

if TYPE_CHECKING:
    from openbell.agents.protocol import Agent, DecisionContext
    from openbell.agents.toolbox import Toolbox


async def enforce_pairs(tools: Toolbox, pairs: Sequence[Pair]) -> list[str]:
    """Close the legs of every broken pair (see the module docstring); what was done, one line
    per leg closed (empty when every pair was hedged or flat). Runs after `finish` as well."""
    done: list[str] = []
    for pair in pairs:
        held = tools.positions()
        if pair_state(held, pair) != "broken":
            continue
        legs = {symbol: held[symbol] for symbol in pair if held.get(symbol, Decimal(0)) != 0}
        why = (
            f"{PAIR_RULE}: {named(pair)} ended the cycle with "
            + (
                "one leg alone"
                if len(legs) == 1
                else "both legs " + ("long" if min(legs.values()) > 0 else "short")
            )
            + "; a pair is held long one leg and short the other, or not at all"
        )
        for symbol in legs:
            result = await tools.close_position(symbol, f"{why}: closing {symbol}")
            outcome = result.message if isinstance(result, ToolError) else result.status.value
            done.append(f"closed {symbol} ({outcome})")
    return done


@dataclass(frozen=True, slots=True, kw_only=True)
class PairEnforced:
    """`agent` under the pair rule: its turn, then `enforce_pairs` on `pairs`. A turn that raises
    (the cycle fails) is not repaired here: the next cycle's end repairs what it left."""

    agent: Agent
    pairs: tuple[Pair, ...]

    @property
    def name(self) -> str:
        """The wrapped agent's name."""
        return self.agent.name

    @property
    def kind(self) -> str:
        """The wrapped agent's kind."""
        return self.agent.kind

    async def decide(self, ctx: DecisionContext) -> None:
        """The agent's turn, then the pair rule; what the rule closed is told in the cycle's trace
        as a `system` entry after the agent's own (its journal is whole once its turn returns)."""
        await self.agent.decide(ctx)
        done = await enforce_pairs(ctx.tools, self.pairs)
        if done and ctx.journal is not None:
            entry = TraceEntry(
                cycle_id=ctx.cycle_id,
                role="system",
                at=ctx.now,
                content=f"{PAIR_RULE}: " + "; ".join(done),
            )
            ctx.journal.append_journal(ctx.cycle_id, [entry])


def momentum(closes: Sequence[Decimal], sessions: int) -> Decimal | None:
    """The return over the last `sessions` sessions of `closes` (oldest first), or None when
    fewer than `sessions + 1` closes are known."""
    if len(closes) < sessions + 1 or closes[-(sessions + 1)] <= 0:
        return None
    return closes[-1] / closes[-(sessions + 1)] - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class PairNeutral:
    """The pair-neutral baseline; see the module docstring. Needs an account allowed to short:
    without one its short legs are refused and the pair rule closes the long legs again."""

    name: str
    pairs: tuple[Pair, ...]
    sessions: int = DEFAULT_MOMENTUM_SESSIONS
    kind: str = field(default="pair_neutral", init=False)

    def __post_init__(self) -> None:
        check_pairs(self.pairs)
        if not 1 <= self.sessions <= 250:
            raise ValueError(f"momentum sessions must be 1 to 250, got {self.sessions}")

    async def decide(self, ctx: DecisionContext) -> None:
        """Long the stronger, short the weaker leg of each pair (see the module docstring)."""
        tools = ctx.tools
        weight = (Decimal(1) / (2 * len(self.pairs))).quantize(Decimal("0.000001"))
        done: list[str] = []
        for pair in self.pairs:
            ranked = await self._ranked(tools, pair)
            if ranked is None:
                done.append(f"{named(pair)}: no signal")
                continue
            strong, weak = ranked
            held = tools.positions()
            if held.get(strong, Decimal(0)) > 0 and held.get(weak, Decimal(0)) < 0:
                done.append(f"{named(pair)}: holding long {strong}, short {weak}")
                continue
            why = f"pair {named(pair)}: {self.sessions}-session momentum"
            # Close the flipped legs first, so the cash and the margin are there for the new ones.
            if held.get(strong, Decimal(0)) < 0:
                await tools.close_position(strong, f"{why}: {strong} is now the stronger")
            if held.get(weak, Decimal(0)) > 0:
                await tools.close_position(weak, f"{why}: {weak} is now the weaker")
            await tools.place_order(
                weak, "short", target_weight=weight, reason=f"{why}: short the weaker"
            )
            await tools.place_order(
                strong, "buy", target_weight=weight, reason=f"{why}: long the stronger"
            )
            done.append(f"{named(pair)}: long {strong}, short {weak}")
        repaired = await enforce_pairs(tools, self.pairs)
        await tools.finish("; ".join(done + repaired) or "No pairs.")

    async def _ranked(self, tools: Toolbox, pair: Pair) -> tuple[str, str] | None:
        """(stronger, weaker) of `pair` by momentum, or None without a signal for both or a tie."""
        found: dict[str, Decimal] = {}
        for symbol in pair:
            bars = await tools.get_bars(symbol, "1d", self.sessions + 1)
            if isinstance(bars, ToolError):
                return None
            value = momentum([bar.close for bar in bars.bars], self.sessions)
            if value is None:
                return None
            found[symbol] = value
        first, second = pair
        if found[first] == found[second]:
            return None
        return (first, second) if found[first] > found[second] else (second, first)
