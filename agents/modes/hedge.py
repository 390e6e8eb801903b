"""The hedge decision mode (Herculean's Hedging workflow): pick one pair of the candidates, then
act on it with Long-Short, Short-Long, Hold or Close.

This module owns `HedgePrompt`, the `mode = "hedge"` builder, and `HedgeEnforced`, the rule run
after its turn. The candidates are assets (default `HERCULEAN_ASSETS`, the paper's eight US
stocks); every two of them are a candidate pair (eight give 28); the model is told only those
offered at the decision time (point-in-time). It researches with the read-only tools (bars,
quotes, news, fundamentals, arithmetic, the portfolio; no `place_order`) and answers with one JSON
object, `{"pair": ["AAPL", "MSFT"], "action": "long-short", "reason": "..."}`. Its first valid
answer picks the pair, in the order it gave, and the pick is stored (`HedgeStore`, the ledger:
`store/hedge_pairs.py`): as in the paper the pair then holds for the rest of the run, and a later
answer may leave `pair` out or must repeat it as picked. The actions, for the pair `[i, j]`:
`long-short` holds `i` long and `j` short, `short-long` the reverse, each leg `leg_weight` of NAV
(`hedge_leg_weight`; default `LEG_WEIGHT`, a half: equal notional, gross exposure 1, net 0); `hold`
keeps the position as it is (flat stays flat); `close` exits both legs. openbell places the orders
through the loop's `call` (traced and counted as the mode's): an action that is the position
already trades nothing; a reversal closes both legs first, then opens the short leg, then the long
one (so the cash and the margin are there). An answer that does not parse or breaks a rule is fed
back up to `MAX_RETRIES` times (each a parse failure), then the cycle ends with nothing traded, as
a cycle that ends without an answer does: the position is kept, as the paper keeps it for a step
without a committed decision.

The pair rule (`HedgeEnforced`, after every turn, as `PairEnforced` for the pair mode): the
account ends each cycle holding its picked pair hedged (one leg long, the other short) or
nothing; a pair left with one leg alone or both on one side has its legs closed
(`pairs.enforce_pairs`), and any other holding is closed too (before a pick, every holding).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Final, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openbell.agents.llm.hooks import ParseFailure, ToolCaller, describe_rules
from openbell.agents.modes.final_action import (
    MAX_RETRIES,
    ValidationFeedback,
    extract_json,
    feedback,
)
from openbell.agents.modes.structured import account_text
from openbell.agents.pair_rules import (
    HERCULEAN_ASSETS,
    LEG_WEIGHT,
    PAIR_RULE,
    Pair,
    check_assets,
    named,
)
from openbell.agents.pairs import enforce_pairs
from openbell.agents.protocol import Agent, DecisionContext
from openbell.agents.tools import (
    OrderOut,
    PortfolioOut,
    Symbol,
    ToolError,
    describe_validation_error,
)
from openbell.agents.untrusted import RULE
from openbell.markets.errors import ConfigError
from openbell.store.hedge_pairs import HedgePick
from openbell.store.records import TraceEntry

LONG_SHORT: Final = "long-short"
SHORT_LONG: Final = "short-long"
HOLD: Final = "hold"
CLOSE: Final = "close"
ACTIONS: Final = (LONG_SHORT, SHORT_LONG, HOLD, CLOSE)
#: The tools a hedger researches with; it places no order itself.
RESEARCH_TOOLS: Final = (
    "get_bars",
    "get_quote",
    "get_news",
    "get_fundamentals",
    "calculate",
    "get_portfolio",
)
ANSWER_FORMAT: Final = (
    'Answer with one JSON object and nothing else: {"pair": ["<asset i>", "<asset j>"], '
    '"action": "long-short" | "short-long" | "hold" | "close", "reason": "<why, briefly>"}.'
)
_SEPARATORS: Final = re.compile(r"[\s_\u2010-\u2015-]+")


@runtime_checkable
class HedgeStore(Protocol):
    """Where a hedging agent's pick is kept (`Ledger` is one)."""

    def hedge_pair(self, account_id: int, at: datetime) -> HedgePick | None: ...

    def save_hedge_pair(self, pick: HedgePick) -> HedgePick: ...


def candidate_pairs(assets: Sequence[str]) -> list[Pair]:
    """Every pair of two of `assets`, in their order (n assets give n (n - 1) / 2 pairs)."""
    return list(itertools.combinations(assets, 2))


def orientation(held: dict[str, Decimal], pair: Pair) -> str:
    """`long-short`, `short-long`, `flat` or `broken`: how `held` holds `pair`."""
    first, second = (held.get(symbol, Decimal(0)) for symbol in pair)
    if first == 0 and second == 0:
        return "flat"
    if first > 0 > second:
        return LONG_SHORT
    if first < 0 < second:
        return SHORT_LONG
    return "broken"


class HedgeAnswer(BaseModel):
    """An answer as the model wrote it (`action` before normalising)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pair: tuple[Symbol, Symbol] | None = None
    action: str = Field(min_length=1, max_length=40)
    reason: str = Field("", max_length=2000)


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgeDecision:
    """A valid answer: the pair (the stored pick, or the one picked now) and the action."""

    pair: Pair
    action: str
    reason: str
    picks: bool


def store_of(ctx: DecisionContext) -> HedgeStore:
    """The cycle's ledger as a `HedgeStore`; `ConfigError` when it is not one."""
    store: object = ctx.journal
    if not isinstance(store, HedgeStore):
        raise ConfigError("a hedging agent needs a ledger that stores its pair")
    return store


class HedgePrompt:
    """The `hedge` mode's prompts, tools and answer handling (see the module docstring)."""

    def __init__(
        self, assets: Sequence[str] = HERCULEAN_ASSETS, *, leg_weight: Decimal = LEG_WEIGHT
    ) -> None:
        if not 0 < leg_weight <= 1:
            raise ValueError(f"a leg weight is a fraction of NAV in (0, 1], got {leg_weight}")
        self.assets = check_assets(assets)
        self.leg_weight = leg_weight
        self.pick: HedgePick | None = None
        self.portfolio: PortfolioOut | None = None
        self.failures = 0
        self.outcomes: list[OrderOut | ToolError] = []

    async def prepare(self, ctx: DecisionContext) -> None:
        """The stored pick and the account."""
        self.pick = store_of(ctx).hedge_pair(ctx.account_id, ctx.now)
        found = await ctx.tools.get_portfolio()
        self.portfolio = None if isinstance(found, ToolError) else found

    def offered(self, ctx: DecisionContext) -> list[str]:
        """The candidates offered now: only they are named to the model (point-in-time: a
        candidate not listed yet is never told of)."""
        return [symbol for symbol in self.assets if symbol in ctx.universe]

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The role, the candidates offered now, the actions, the rules and the answer format."""
        offered = self.offered(ctx)
        pairs = len(candidate_pairs(offered))
        weight = f"{(self.leg_weight * 100).normalize():f}%"
        return (
            "You are a hedger managing a paper account. At your first decision you pick one pair "
            f"of two candidate assets [i, j] (any two of: {', '.join(offered)}; {pairs} "
            "pairs); it stays your pair for the rest of the run. At every decision you take one "
            f"action on it: long-short (long i, short j, each leg {weight} of NAV: equal "
            "notional), short-long (short i, long j), hold (keep the position as it is; flat "
            "stays flat) or close (exit both legs). Research with the tools; you place no order "
            "yourself: openbell places the legs of your action.\n"
            f"{describe_rules(ctx)}\n"
            f"{PAIR_RULE}: end every cycle with your pair hedged (one leg long, the other short) "
            "or flat, and nothing else held; anything else is closed by openbell after you "
            "answer.\n"
            f'{ANSWER_FORMAT} After the pick you may leave "pair" out. {RULE}'
        )

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The time, the account, the pair (or that it is to be picked) and its position."""
        if self.pick is None:
            pair_line = "Your pair: not picked yet; pick it in this answer."
        else:
            held = ctx.tools.positions()
            pair_line = (
                f"Your pair: {named(self.pick.pair)} (picked {self.pick.picked_at.isoformat()}); "
                f"position: {orientation(held, self.pick.pair)}."
            )
        return (
            f"Now: {ctx.now.isoformat()}\n"
            f"Your account: {account_text(self.portfolio, with_prices=True)}\n"
            f"{pair_line}\n"
            "Research, then answer with your action."
        )

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """The read-only research tools."""
        return RESEARCH_TOOLS

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | ParseFailure | None:
        """Validate the answer: feed back what is wrong, or store the pick, trade and finish."""
        found = self.validate(ctx, content)
        if isinstance(found, ValidationFeedback):
            self.failures += 1
            if self.failures > MAX_RETRIES:
                summary = f"No valid hedge action after {self.failures} answers; no trade."
                await call("finish", {"summary": summary})
                return ParseFailure(None)
            return ParseFailure(found.message)
        if found.picks:
            self.pick = store_of(ctx).save_hedge_pair(
                HedgePick(
                    account_id=ctx.account_id,
                    first=found.pair[0],
                    second=found.pair[1],
                    cycle_id=ctx.cycle_id,
                    picked_at=ctx.now,
                )
            )
        await self.execute(ctx, found, call)
        return None

    def validate(self, ctx: DecisionContext, content: str) -> HedgeDecision | ValidationFeedback:
        """The answer as a decision on the pair, or the feedback saying what to fix."""
        value = extract_json(content)
        if not isinstance(value, dict):
            return feedback(["no JSON object was found in the answer"], ANSWER_FORMAT)
        try:
            answer = HedgeAnswer.model_validate(value)
        except ValidationError as exc:
            return feedback([describe_validation_error(exc)], ANSWER_FORMAT)
        problems = []
        action = _SEPARATORS.sub("-", answer.action.strip().lower())
        if action not in ACTIONS:
            problems.append(f"action {answer.action!r} is not one of {', '.join(ACTIONS)}")
        pair = self.pick.pair if self.pick is not None else answer.pair
        if self.pick is not None and answer.pair not in (None, self.pick.pair):
            problems.append(
                f"your pair is {named(self.pick.pair)}, picked for the whole run: give "
                f'"pair": ["{self.pick.first}", "{self.pick.second}"] or leave it out'
            )
        elif pair is None:
            problems.append('pick your pair: "pair": ["<asset i>", "<asset j>"]')
        else:
            problems.extend(self._pair_problems(ctx, pair))
        if problems or pair is None:
            return feedback(problems, ANSWER_FORMAT)
        return HedgeDecision(
            pair=pair, action=action, reason=answer.reason, picks=self.pick is None
        )

    def _pair_problems(self, ctx: DecisionContext, pair: Pair) -> list[str]:
        if pair[0] == pair[1]:
            return ["a pair is two different assets"]
        unknown = [symbol for symbol in pair if symbol not in self.assets]
        if unknown:
            return [
                f"{', '.join(unknown)} is not a candidate; pick two of {', '.join(self.assets)}"
            ]
        unserved = [symbol for symbol in pair if symbol not in ctx.universe]
        if unserved:
            return [f"{', '.join(unserved)} is not offered now; pick another pair"]
        return []

    async def execute(
        self, ctx: DecisionContext, decision: HedgeDecision, call: ToolCaller
    ) -> None:
        """Trade `decision` (see the module docstring) and finish with what became of it."""
        pair = decision.pair
        now = orientation(ctx.tools.positions(), pair)
        wanted = {LONG_SHORT: LONG_SHORT, SHORT_LONG: SHORT_LONG, CLOSE: "flat"}.get(
            decision.action, now
        )
        why = f"hedge {named(pair)}: {decision.action}"
        if decision.reason:
            why += f": {decision.reason}"
        placed: list[OrderOut | ToolError] = []
        if wanted != now:
            for symbol in pair:
                held = ctx.tools.positions().get(symbol, Decimal(0))
                if held != 0:
                    side = "sell" if held > 0 else "cover"
                    placed.append(await self._order(call, symbol, side, Decimal(0), why))
            if wanted != "flat":
                long_leg, short_leg = pair if wanted == LONG_SHORT else (pair[1], pair[0])
                placed.append(await self._order(call, short_leg, "short", self.leg_weight, why))
                placed.append(await self._order(call, long_leg, "buy", self.leg_weight, why))
        self.outcomes = placed
        statuses = [o.status.value if isinstance(o, OrderOut) else o.code.value for o in placed]
        summary = (
            f"{'Picked' if decision.picks else 'Pair'} {named(pair)}; {decision.action}: "
            f"{len(placed)} order(s){': ' + ', '.join(statuses) if statuses else ''}."
        )
        await call("finish", {"summary": summary})

    @staticmethod
    async def _order(
        call: ToolCaller, symbol: str, side: str, weight: Decimal, why: str
    ) -> OrderOut | ToolError:
        called = await call(
            "place_order",
            {"symbol": symbol, "side": side, "target_weight": str(weight), "reason": why},
        )
        outcome = called.outcome
        if isinstance(outcome, OrderOut | ToolError):
            return outcome
        raise TypeError(f"place_order gave {type(outcome).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgeEnforced:
    """`agent` (an LLM agent in `mode = "hedge"`) under the pair rule of its picked pair: its
    turn, then `enforce_hedge`; what the rule closed is told in the cycle's trace."""

    agent: Agent

    @property
    def name(self) -> str:
        """The wrapped agent's name."""
        return self.agent.name

    @property
    def kind(self) -> str:
        """The wrapped agent's kind."""
        return self.agent.kind

    async def decide(self, ctx: DecisionContext) -> None:
        """The agent's turn, then the rule on the pair stored for the account."""
        await self.agent.decide(ctx)
        pick = store_of(ctx).hedge_pair(ctx.account_id, ctx.now)
        done = await enforce_hedge(ctx, None if pick is None else pick.pair)
        if done and ctx.journal is not None:
            entry = TraceEntry(
                cycle_id=ctx.cycle_id,
                role="system",
                at=ctx.now,
                content=f"{PAIR_RULE}: " + "; ".join(done),
            )
            ctx.journal.append_journal(ctx.cycle_id, [entry])


async def enforce_hedge(ctx: DecisionContext, pair: Pair | None) -> list[str]:
    """Close what breaks the pair rule: a broken `pair` (`enforce_pairs`), then every holding
    outside it (every holding when no pair is picked); one line per position closed."""
    tools = ctx.tools
    done = await enforce_pairs(tools, [pair] if pair is not None else [])
    kept = set(pair) if pair is not None else set()
    for symbol in sorted(tools.positions()):
        if symbol in kept:
            continue
        why = (
            f"{PAIR_RULE}: a hedger holds only its pair "
            + (named(pair) if pair is not None else "(none picked yet)")
            + f": closing {symbol}"
        )
        result = await tools.close_position(symbol, why)
        outcome = result.message if isinstance(result, ToolError) else result.status.value
        done.append(f"closed {symbol} ({outcome})")
    return done
