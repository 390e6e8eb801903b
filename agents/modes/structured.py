"""The common engine of the structured (no-tool) decision modes: answer, validate, retry, place.

This module owns `StructuredPrompt`, the base of the fixed-candidate and memory-only builders (and
the machinery stockbench reuses): it offers no tools, reads the model's answer as a
`FinalAction`, checks that every `stock_id` names a member of the universe (or the benchmark), and
feeds back what is wrong up to `MAX_RETRIES` times; then the cycle ends with no trade. Each answer
refused is a `ParseFailure`, counted in the cycle's usage. A valid action's orders are placed
through the loop's `call` and the cycle is finished with a summary (with the action's
`overall_reason`). The
model writes in its own vocabulary: under masking its ids are aliases, translated here with the
account's masker (built from the same stored key as the loop's) only to check them, while the
orders go to `call` as written and the loop unmasks them. Under masking the prompts list stocks in
the account's alias order and do not name the universe, and under price rebasing every price and
amount of money in them (the account, the rules, a mode's data) is shown in the account's unit, so
what the mode checks a plan against is what the model was shown. It also owns the account's
rendering for prompts, with or without prices.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Final

from openbell.agents.llm.completion import wire_json
from openbell.agents.llm.hooks import ParseFailure, ToolCaller, describe_rules
from openbell.agents.masking import AliasMasker, MaskingLevel, account_masker
from openbell.agents.modes.final_action import (
    ACTION_FORMAT,
    MAX_RETRIES,
    FinalAction,
    ValidationFeedback,
    feedback,
    parse_final_action,
    place_orders,
)
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import OrderOut, PortfolioOut, ToolError
from openbell.agents.untrusted import RULE

NO_TRADE_SUMMARY: Final = "No valid final action after {n} answers; no trade this cycle."
#: The longest finish summary (`FinishArgs.summary`).
MAX_SUMMARY_CHARS: Final = 4000


def account_text(portfolio: PortfolioOut | None, *, with_prices: bool) -> str:
    """The account for a prompt; without prices only cash and quantities are shown."""
    if portfolio is None:
        return "unavailable"
    if with_prices:
        held = [
            {
                "stock_id": p.symbol,
                "quantity": str(p.quantity),
                "price": str(p.mark),
                "weight": str(p.weight),
            }
            for p in portfolio.positions
        ]
        head = f"cash {portfolio.cash} {portfolio.currency}, NAV {portfolio.nav}"
    else:
        held = [{"stock_id": p.symbol, "quantity": str(p.quantity)} for p in portfolio.positions]
        head = f"cash {portfolio.cash} {portfolio.currency}"
    return f"{head}, positions {wire_json(held) if held else 'none'}"


class StructuredPrompt:
    """Base of the no-tool modes; subclasses write `system_role` and `first_user_message`."""

    #: One sentence on what the mode gives the model, for the system prompt.
    system_role: str = ""

    def __init__(
        self,
        *,
        masking: MaskingLevel = MaskingLevel.BRIGHT,
        masking_seed: str | int = 0,
        rebase: bool | None = None,
    ) -> None:
        self.masking = masking
        self.masking_seed = masking_seed
        self.rebase = rebase
        self.masker: AliasMasker | None = None
        self.portfolio: PortfolioOut | None = None
        self.failures = 0
        #: Every answer failed validation and the cycle was ended with no trade (`GivesUp`).
        self.gave_up = False
        self.outcomes: list[OrderOut | ToolError] = []

    async def prepare(self, ctx: DecisionContext) -> None:
        """The account as the model is shown it (and the masker that reads its ids back)."""
        self.masker = account_masker(self.masking, ctx, seed=self.masking_seed, rebase=self.rebase)
        found = await ctx.tools.get_portfolio()
        self.portfolio = None if isinstance(found, ToolError) else self.shown(found)
        await self.gather(ctx)

    def shown(self, portfolio: PortfolioOut) -> PortfolioOut:
        """`portfolio` as the model is shown it (rebased, positions in alias order)."""
        return portfolio if self.masker is None else self.masker.show(portfolio)

    def money(self, amount: Decimal) -> Decimal:
        """An amount of money as the model is shown it."""
        return amount if self.masker is None else self.masker.money(amount)

    def listing(self, symbols: Iterable[str]) -> list[str]:
        """`symbols` in the order the model is shown them."""
        return list(symbols) if self.masker is None else self.masker.listing(symbols)

    async def gather(self, ctx: DecisionContext) -> None:
        """What the mode's prompts need beyond the account (none here)."""

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The role, the rules, and the answer format."""
        return (
            "You are a trading agent managing a paper account. You have no tools: decide from "
            f"what this conversation gives you. {self.system_role}\n"
            f"{self.rules_text(ctx)}\n"
            f"{ACTION_FORMAT}\n"
            f"Orders are placed in the order given, at the next trade price. {RULE}"
        )

    def rules_text(self, ctx: DecisionContext) -> str:
        """The market's rules as the model is told them (see `describe_rules`)."""
        masker = self.masker
        money = masker.money if masker is not None and masker.unit is not None else None
        return describe_rules(ctx, masked=masker is not None, money=money)

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The decision time, the account and the mode's data (subclasses)."""
        raise NotImplementedError

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """No tools: the model answers with its final action."""
        return ()

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | ParseFailure | None:
        """Validate the answer: feed back what is wrong, or place the orders and finish."""
        found = self.validate(ctx, content)
        if isinstance(found, ValidationFeedback):
            return await self.refuse(found, call)
        await self.execute(found, call)
        return None

    def validate(self, ctx: DecisionContext, content: str) -> FinalAction | ValidationFeedback:
        """The answer as a `FinalAction` whose stock ids are all served, or feedback."""
        found = parse_final_action(content)
        if isinstance(found, ValidationFeedback):
            return found
        unknown = [i.stock_id for i in found.orders if self.resolve(ctx, i.stock_id) is None]
        if unknown and self.masking.masks_stocks:  # never echo a guessed real ticker back
            return feedback([f"{len(unknown)} order(s) name a stock_id that is not listed"])
        if unknown:
            return feedback([f"unknown stock_id {', '.join(dict.fromkeys(unknown))}"])
        return found

    async def refuse(self, found: ValidationFeedback, call: ToolCaller) -> ParseFailure:
        """A parse failure: feed `found` back, or end the cycle with no trade once the retries
        are spent."""
        self.failures += 1
        if self.failures > MAX_RETRIES:
            self.gave_up = True
            summary = NO_TRADE_SUMMARY.format(n=self.failures)
            await call("finish", {"summary": summary})
            return ParseFailure(None)
        return ParseFailure(found.message)

    async def execute(self, action: FinalAction, call: ToolCaller) -> None:
        """Place `action`'s orders and finish the cycle with what became of them."""
        placed = await place_orders(action, call)
        self.outcomes = [
            called.outcome for called in placed if isinstance(called.outcome, OrderOut | ToolError)
        ]
        statuses = [
            o.status.value if isinstance(o, OrderOut) else o.code.value for o in self.outcomes
        ]
        summary = f"Placed {len(placed)} order(s): {', '.join(statuses) or 'none (hold)'}."
        if action.overall_reason:
            summary += f" Overall: {action.overall_reason}"
        if action.notes:
            summary += f" Notes: {'; '.join(action.notes)}."
        await call("finish", {"summary": summary[:MAX_SUMMARY_CHARS]})

    def resolve(self, ctx: DecisionContext, stock_id: str) -> str | None:
        """The real symbol the model's `stock_id` stands for, if the toolbox serves it."""
        real: object = stock_id
        if self.masker is not None:
            real = self.masker.unmask_arguments("place_order", {"symbol": stock_id}).get("symbol")
        if not isinstance(real, str):
            return None
        if real in ctx.universe or real == ctx.tools.benchmark_symbol:
            return real
        return None

    def now_text(self, ctx: DecisionContext) -> str:
        """The decision time (masked later with everything else under date-blindness)."""
        return f"Now: {ctx.now.isoformat()}"
