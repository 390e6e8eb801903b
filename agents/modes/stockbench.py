"""The `stockbench` decision mode: StockBench's four-stage daily workflow, without tool calls.

This module owns `StockBenchPrompt`. Stage 1, the first message: an overview of every stock (the
quantity held, the account's actions in it over the last `RECENT_DAYS` days, the opening price at
the slot, and the top 5 news items of the last 48 hours, each stock's in the untrusted envelope
of `agents/untrusted.py`; under any masking news are unavailable and the overview says so). Stage
2: the model picks up to `MAX_PICKS` stocks (`{"selected": [...]}`) and gets their fundamentals
through `get_fundamentals` (where the data has no point-in-time fundamentals the refusal is said
in the prompt). Stage 3: a decision per stock,
increase, decrease or hold (`{"decisions": [...]}`). Stage 4: the plan is validated against the
account (`plan.py`) and the problems fed back until it is executable, at most `MAX_RETRIES` times
per stage; then its orders are placed. Recent actions are the account's orders in the ledger placed
in the 7 days before the slot (StockBench's window; through `ctx.tools.recent_orders`), each with
its age, so a restarted daemon or a resumed replay shows the same overview.

StockBench's ablations (its Table 4) are `without`: `{"news"}` leaves the news out of the overview
(no news is read), `{"news", "fundamentals"}` also drops stage 2: the model is asked for its
decisions straight after the overview and no fundamentals are read. Nothing else the model is
shown changes, which `tests/acceptance/test_stockbench_download.py` checks line by line.
Under masking the overview lists the stocks in alias order; under price rebasing its opening
prices and the account are in the account's money unit, and the plan is checked in that unit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Annotated, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from openbell.agents.llm.hooks import ParseFailure, ToolCaller
from openbell.agents.masking import MaskingLevel
from openbell.agents.modes.final_action import (
    FinalAction,
    OrderIntent,
    ValidationFeedback,
    extract_json,
    feedback,
)
from openbell.agents.modes.stockbench_plan import check_plan
from openbell.agents.modes.structured import StructuredPrompt, account_text
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import (
    ErrorCode,
    Fraction,
    NewsItemOut,
    Symbol,
    ToolError,
    describe_validation_error,
)
from openbell.agents.untrusted import envelope
from openbell.markets.domain import Fill
from openbell.store.records import RecordedOrder

MAX_PICKS: Final = 5
NEWS_HOURS: Final = 48
NEWS_PER_STOCK: Final = 5
#: The account's actions of the last `RECENT_DAYS` days are in the overview (StockBench's window).
RECENT_DAYS: Final = 7
#: How many of the account's latest orders the overview reads to find those of the window.
RECENT_ORDERS: Final = 1000
#: The inputs StockBench's ablations can leave out.
ABLATIONS: Final = frozenset({"news", "fundamentals"})

PICK_FORMAT: Final = (
    'Answer with one JSON object: {"selected": ["<stock_id>", ...]} (at most '
    f"{MAX_PICKS}; [] to look at none)."
)
DECISION_FORMAT: Final = (
    'Answer with one JSON object: {"decisions": [{"stock_id": "<id>", "action": "increase" | '
    '"decrease" | "hold", "target_weight": <0..1 of NAV> OR "shares": <number> (not for '
    'hold), "confidence": <0..1>, "reason": "<one sentence>"}]}. Stocks you leave out are held.'
)


class Picks(BaseModel):
    """Stage 2's answer: the stocks to look at closer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    selected: list[Symbol] = Field(max_length=MAX_PICKS)


class StockDecision(BaseModel):
    """Stage 3's decision for one stock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stock_id: Symbol
    action: Literal["increase", "decrease", "hold"]
    confidence: Fraction
    reason: str = Field(min_length=1, max_length=2000)
    shares: Annotated[Decimal, Field(gt=0, allow_inf_nan=False)] | None = None
    target_weight: Fraction | None = None

    @model_validator(mode="after")
    def _size(self) -> Self:
        sized = (self.shares is not None) + (self.target_weight is not None)
        if self.action == "hold" and sized:
            raise ValueError("hold takes neither shares nor target_weight")
        if self.action != "hold" and sized != 1:
            raise ValueError("increase and decrease take exactly one of shares and target_weight")
        return self


class Decisions(BaseModel):
    """Stage 3's answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decisions: list[StockDecision] = Field(max_length=200)

    def action(self) -> FinalAction:
        """The orders of the decisions (holds place nothing)."""
        return FinalAction(
            orders=[
                OrderIntent(
                    stock_id=d.stock_id,
                    side="buy" if d.action == "increase" else "sell",
                    confidence=d.confidence,
                    reason=d.reason,
                    shares=d.shares,
                    target_weight=d.target_weight,
                )
                for d in self.decisions
                if d.action != "hold"
            ]
        )


class StockBenchPrompt(StructuredPrompt):
    """`stockbench`: overview, picks and fundamentals, decisions, validation; see the module.

    `without` names the inputs left out (StockBench's ablations, a subset of `ABLATIONS`)."""

    def __init__(
        self,
        *,
        masking: MaskingLevel = MaskingLevel.BRIGHT,
        masking_seed: str | int = 0,
        rebase: bool | None = None,
        without: Collection[str] = (),
    ) -> None:
        super().__init__(masking=masking, masking_seed=masking_seed, rebase=rebase)
        unknown = set(without) - ABLATIONS
        if unknown:
            known = ", ".join(sorted(ABLATIONS))
            raise ValueError(f"stockbench cannot leave out {sorted(unknown)}: only {known}")
        self.with_news = "news" not in without
        self.with_fundamentals = "fundamentals" not in without
        self.system_role = (
            "You work in four stages: an overview of every stock; picking a few for a closer look "
            "at their fundamentals; a decision per stock (increase, decrease or hold); and a check "
            "that your plan can be executed."
            if self.with_fundamentals
            else "You work in three stages: an overview of every stock; a decision per stock "
            "(increase, decrease or hold); and a check that your plan can be executed."
        )
        self.recent: dict[str, list[str]] = {}
        self.stage = 1
        self.opens: dict[str, Decimal] = {}
        self.news: dict[str, list[NewsItemOut]] = {}

    async def gather(self, ctx: DecisionContext) -> None:
        """Opening prices and the last week's actions of every stock and, when not masked nor
        left out, its news."""
        since = ctx.now - timedelta(days=RECENT_DAYS)
        for order in await ctx.tools.recent_orders(RECENT_ORDERS):
            if order.symbol is None or order.placed_at is None or order.placed_at < since:
                continue
            self.recent.setdefault(order.symbol, []).append(_action_text(order, ctx.now))
        quotes = await ctx.tools.get_quote(list(ctx.universe.symbols))
        if not isinstance(quotes, ToolError):
            self.opens = {quote.symbol: self.money(quote.price) for quote in quotes.quotes}
        if self.masking is not MaskingLevel.BRIGHT or not self.with_news:
            return
        for symbol in ctx.universe.symbols:
            found = await ctx.tools.get_news(
                symbol, lookback_hours=NEWS_HOURS, limit=NEWS_PER_STOCK
            )
            if not isinstance(found, ToolError) and found.items:
                self.news[symbol] = found.items

    def first_user_message(self, ctx: DecisionContext) -> str:
        """Stage 1: the overview, and the request for picks."""
        held = {p.symbol: p.quantity for p in self.portfolio.positions} if self.portfolio else {}
        lines = []
        for symbol in self.listing(ctx.universe.symbols):
            price = self.opens.get(symbol)
            actions = "; ".join(self.recent.get(symbol, ()))
            lines.append(
                f"{symbol} | held {held.get(symbol, 0)} | open {price if price else 'n/a'} | "
                f"recent: {actions or 'none'}"
            )
            items = self.news.get(symbol, ())
            if items:
                entries = [_news_entry(item, ctx.now) for item in items]
                lines.append(f"    news {envelope(entries)}")
        notes = []
        if self.masking is not MaskingLevel.BRIGHT:
            notes.append("News: unavailable in this run (masked).")
        elif self.with_news:
            notes.append(
                f"News: the top {NEWS_PER_STOCK} items of the last {NEWS_HOURS} h, if any, each "
                "stock's in an untrusted envelope (its age and title)."
            )
        stages = 4 if self.with_fundamentals else 3
        ask = (
            f"Stage 2 of 4: pick the stocks whose fundamentals you want to see. {PICK_FORMAT}"
            if self.with_fundamentals
            else f"Stage 2 of 3: {DECISION_FORMAT}"
        )
        return (
            f"{self.now_text(ctx)}\nYour account: {account_text(self.portfolio, with_prices=True)}"
            f"\nStage 1 of {stages}, overview (stock_id | held | opening price | recent actions "
            f"of the last {RECENT_DAYS} days).\n"
            + "".join(f"{note}\n" for note in notes)
            + "\n".join(lines)
            + f"\n{ask}"
        )

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | ParseFailure | None:
        """Run the next stage from the answer; see the module docstring."""
        if self.stage == 1 and self.with_fundamentals:
            picks = self._picks(ctx, content)
            if isinstance(picks, ValidationFeedback):
                return await self.refuse(picks, call)
            self.stage, self.failures = 3, 0
            return await self._fundamentals(picks, call) + f"\nStage 3 of 4: {DECISION_FORMAT}"
        plan = self._decisions(ctx, content)
        if isinstance(plan, ValidationFeedback):
            return await self.refuse(plan, call)
        await self.execute(plan, call)
        return None

    def _picks(self, ctx: DecisionContext, content: str) -> list[str] | ValidationFeedback:
        try:
            picks = Picks.model_validate(extract_json(content))
        except ValidationError as exc:
            return feedback([describe_validation_error(exc)], PICK_FORMAT)
        unknown = [s for s in picks.selected if self.resolve(ctx, s) is None]
        if unknown:
            return feedback([f"{len(unknown)} selected stock_id(s) are not listed"], PICK_FORMAT)
        return list(dict.fromkeys(picks.selected))

    async def _fundamentals(self, picks: Sequence[str], call: ToolCaller) -> str:
        if not picks:
            return "Stage 2 of 4: you picked no stock; no fundamentals."
        parts = ["Stage 2 of 4, fundamentals of the stocks you picked:"]
        for stock_id in picks:
            called = await call("get_fundamentals", {"symbol": stock_id})
            outcome = called.outcome
            if isinstance(outcome, ToolError) and outcome.code in (
                ErrorCode.NOT_POINT_IN_TIME,
                ErrorCode.MASKED,
            ):
                return (
                    "Stage 2 of 4: fundamentals are not available in this run "
                    f"({outcome.code.value}: {outcome.message}) Decide from the overview."
                )
            parts.append(f"{stock_id}: {called.text}")
        return "\n".join(parts)

    def _decisions(self, ctx: DecisionContext, content: str) -> FinalAction | ValidationFeedback:
        try:
            decisions = Decisions.model_validate(extract_json(content))
        except ValidationError as exc:
            return feedback([describe_validation_error(exc)], DECISION_FORMAT)
        action = decisions.action()
        real = {i.stock_id: self.resolve(ctx, i.stock_id) for i in action.orders}
        unknown = [stock_id for stock_id, symbol in real.items() if symbol is None]
        if unknown:
            return feedback([f"{len(unknown)} decision(s) name a stock_id not listed"])
        problems = check_plan(
            action,
            symbols={k: v for k, v in real.items() if v is not None},
            portfolio=self.portfolio,
            prices=self.opens,
            rules=ctx.rules,
        )
        if problems:
            return feedback(problems, DECISION_FORMAT)
        return action


def _news_entry(item: NewsItemOut, now: datetime) -> str:
    """One news item as the overview's envelope holds it: its age in hours and its title."""
    hours = (now - item.published_at) / timedelta(hours=1)
    return f"{hours:.0f}h ago: {item.title}"


def _action_text(order: RecordedOrder, now: datetime) -> str:
    """An earlier order as the overview lists it, with its age in calendar days (UTC; its date
    would tell a date-blind model the date): "1d ago buy 10 filled", "3d ago sell 5 rejected
    (lot_size)"."""
    side = order.side.value if order.side is not None else "?"
    placed = order.placed_at
    age = "?" if placed is None else f"{(now.date() - placed.date()).days}d ago"
    if isinstance(order.outcome, Fill):
        return f"{age} {side} {order.outcome.quantity} filled"
    return f"{age} {side} {order.quantity} rejected ({order.outcome.reason.value})"
