"""The `ktd-fin` decision mode: KTD-Fin's open-research protocol, research then a forced submission.

This module owns `KtdFinPrompt`, a `PhasedPromptBuilder`. Its first message is the paper's
template (the step, the constraints, the account valued at the last closes with the shares
sellable today, today's universe, the previous step's execution outcome: each order's fill or its
rejection with the reason, read from the ledger; and the account's cumulative return since it
opened against the benchmark's over the same window). In the research phase the model is offered
KTD-Fin's six read-only tools (`agents/ktd/`, served by the toolbox on the point-in-time gateway
and masked like every tool). The research phase ends when the model answers without a tool call,
when it has made `research_calls` calls, or when what is left of the cycle's budgets is only what
a submission needs (`SUBMIT_TURNS` turns; `SUBMIT_TOOL_CALLS` calls: the submissions and room for
orders); then the model is told so and forced, by `tool_choice`, to call `submit_action`, whose
arguments are the structured final action (`final_action.FinalAction`, validated as the
structured modes validate it: `StructuredPrompt.validate`). A refused action goes back with the
reasons, at most `MAX_RETRIES` times, then the cycle ends with no trade; a valid one's orders are
placed in order through `place_order` and the cycle finished. An answer in text during the
submission phase (a server that ignores `tool_choice`) is read as the action too, and a model may
call `submit_action` before it is forced (the paper's prompt lets it decide when to submit).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, TypeVar
from zoneinfo import ZoneInfo

from openbell.agents.ktd.contract import KTD_TOOLS, PortfolioStateOut
from openbell.agents.llm.completion import wire_json
from openbell.agents.llm.hooks import Offer, OwnReply, ParseFailure, ToolCaller
from openbell.agents.masking import MaskingLevel, account_masker
from openbell.agents.modes.final_action import MAX_RETRIES, FinalAction, ValidationFeedback
from openbell.agents.modes.ktd_prompt import (
    SUBMIT_ACTION,
    SUBMIT_DESCRIPTION,
    SUBMIT_MESSAGE,
    Performance,
    first_user_message,
    previous_outcome,
    system_prompt,
)
from openbell.agents.modes.structured import NO_TRADE_SUMMARY, StructuredPrompt
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import (
    BarsOut,
    OrderOut,
    ToolResult,
    function_tool,
)
from openbell.markets.gateway import MAX_LOOKBACK
from openbell.store.records import RecordedOrder

#: The research calls a cycle may make before it must submit (the paper prints no budget: its
#: model calls the tools "as many as it deems necessary").
DEFAULT_RESEARCH_CALLS: Final = 20
#: The turns a submission may take: the first answer and its retries.
SUBMIT_TURNS: Final = MAX_RETRIES + 1
#: The tool calls kept for the submission phase: its submissions and ten orders.
SUBMIT_TOOL_CALLS: Final = SUBMIT_TURNS + 10
R = TypeVar("R", bound=ToolResult)


class KtdFinPrompt(StructuredPrompt):
    """`ktd-fin`: see the module docstring."""

    def __init__(
        self,
        *,
        masking: MaskingLevel = MaskingLevel.BRIGHT,
        masking_seed: str | int = 0,
        rebase: bool | None = None,
        research_calls: int = DEFAULT_RESEARCH_CALLS,
    ) -> None:
        super().__init__(masking=masking, masking_seed=masking_seed, rebase=rebase)
        if research_calls < 0:
            raise ValueError(f"research_calls must not be negative, got {research_calls}")
        self.research_calls = research_calls
        self.account: PortfolioStateOut | None = None
        self.previous: list[OrderOut] | None = None
        self.performance = Performance(portfolio=None, benchmark_symbol=None, benchmark=None)
        self.submitting = False
        self.submitted = False
        self._announced = False
        self._calls_left_at_start: int | None = None

    async def prepare(self, ctx: DecisionContext) -> None:
        """The account (at the last closes), the previous step's orders and the performance."""
        self.masker = account_masker(self.masking, ctx, seed=self.masking_seed, rebase=self.rebase)
        found = await ctx.tools.call("get_portfolio_state", {})
        account = found if isinstance(found, PortfolioStateOut) else None
        self.account = None if account is None else self._show(account)
        slot, orders = await ctx.tools.previous_cycle_orders()
        self.previous = None if slot is None else [self._show(_order_out(o, slot)) for o in orders]
        self.performance = await _performance(ctx, account)

    def _show(self, result: R) -> R:
        return result if self.masker is None else self.masker.show(result)

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The paper's open-research system prompt, with this market's rules."""
        return system_prompt(
            market=ctx.market,
            rules=ctx.rules,
            rules_text=self.rules_text(ctx),
            research_calls=self.research_calls,
            t_plus_one=ctx.rules.settlement_days > 0,
        )

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The paper's user template: the step, the account, the universe, the previous step's
        execution outcome and the performance against the benchmark."""
        return first_user_message(
            step=ctx.now.astimezone(ZoneInfo(ctx.rules.timezone)).date(),
            t_plus_one=ctx.rules.settlement_days > 0,
            account=self.account,
            universe=self.listing(ctx.universe.symbols),
            previous=previous_outcome(self.previous),
            performance=self.performance,
        )

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """The research tools (the loop asks `offer` before every turn)."""
        return tuple(KTD_TOOLS)

    # -- the phases ----------------------------------------------------------------------------

    def own_tools(self, ctx: DecisionContext) -> dict[str, dict[str, Any]]:
        """`submit_action`, whose arguments are the final action."""
        return {SUBMIT_ACTION: function_tool(SUBMIT_ACTION, SUBMIT_DESCRIPTION, FinalAction)}

    def offer(self, ctx: DecisionContext, *, turns_left: int, tool_calls_left: int) -> Offer:
        """The research tools, until the research phase ends; then `submit_action`, forced."""
        if self._calls_left_at_start is None:
            self._calls_left_at_start = tool_calls_left
        researched = self._calls_left_at_start - tool_calls_left
        if (
            researched >= self.research_calls
            or turns_left <= SUBMIT_TURNS
            or tool_calls_left <= SUBMIT_TOOL_CALLS
        ):
            self.submitting = True
        if not self.submitting:
            return Offer(tuple(KTD_TOOLS))
        message = None if self._announced else SUBMIT_MESSAGE
        self._announced = True
        return Offer((SUBMIT_ACTION,), forced=SUBMIT_ACTION, message=message)

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | ParseFailure | None:
        """In research, an answer without a tool call ends the research phase; in the
        submission phase it is read as the action (the structured modes' path)."""
        if not self.submitting:
            self.submitting = self._announced = True
            return SUBMIT_MESSAGE
        return await super().after_answer(ctx, content, call)

    async def serve_own(
        self, ctx: DecisionContext, name: str, raw_arguments: str, call: ToolCaller
    ) -> OwnReply:
        """A `submit_action` call: refused with the reasons (a parse failure), or its orders
        placed and the cycle finished."""
        if self.submitted or ctx.tools.finished:
            return OwnReply(wire_json({"status": "already_submitted"}))
        self.submitting = self._announced = True  # a submission ends the research phase
        found = self.validate(ctx, raw_arguments)
        if isinstance(found, ValidationFeedback):
            failure = await self.refuse(found, call)
            message = failure.feedback or NO_TRADE_SUMMARY.format(n=self.failures)
            return OwnReply(wire_json({"status": "refused", "message": message}), True)
        await self.execute(found, call)
        self.submitted = True
        orders = [
            (self._show(o) if isinstance(o, OrderOut) else o).model_dump(mode="json")
            for o in self.outcomes
        ]
        return OwnReply(wire_json({"status": "submitted", "orders": orders}))


async def _performance(ctx: DecisionContext, account: PortfolioStateOut | None) -> Performance:
    """The account's cumulative return since it opened (its value at the last closes over its
    initial cash) and the benchmark's over the same window (its last close over its last close
    at or before the opening), both from data ended by now."""
    opened_at, initial_cash = ctx.tools.account_start()
    portfolio = None
    if account is not None and initial_cash > 0:
        portfolio = account.total_value / initial_cash - 1
    symbol = ctx.tools.benchmark_symbol
    if symbol is None:
        return Performance(portfolio=portfolio, benchmark_symbol=None, benchmark=None)
    sessions = min(max((ctx.now - opened_at).days + 10, 2), MAX_LOOKBACK)
    found = await ctx.tools.get_bars(symbol, "1d", sessions)
    benchmark = None
    if isinstance(found, BarsOut) and found.bars:
        before = [bar.close for bar in found.bars if bar.end_at <= opened_at]
        if before:
            benchmark = found.bars[-1].close / before[-1] - 1
    return Performance(portfolio=portfolio, benchmark_symbol=symbol, benchmark=benchmark)


def _order_out(recorded: RecordedOrder, placed_at: datetime) -> OrderOut:
    """A recorded order as `place_order` showed it (without the account after it)."""
    return OrderOut.of(recorded, as_of=recorded.placed_at or placed_at)
