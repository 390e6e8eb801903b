"""The seams of the LLM agent: how a decision mode drives the model and how masking rewrites text.

This module owns two protocols and their defaults, kept stable so decision modes (`agents/modes/`)
and masking (`agents/masking.py`) plug into `LlmAgent` without touching its loop.
`PromptBuilder` decides what the model is told, which tools it may call and what happens when it
answers without calling a tool; `OpenResearchPrompt` is the default (AI-Trader style: the time,
cash, positions and the market's rules; market data only through tools). `Masker` rewrites all
that crosses the model boundary; `IdentityMasker` (the `bright` level) changes nothing.

Contract, per cycle, in this order. (1) `await builder.prepare(ctx)` once: gather what the prompts
need, through `ctx.tools` only (so the point-in-time rule holds). (2) `system_prompt(ctx)` and
`first_user_message(ctx)`, each passed through `Masker.mask_text`. (3) `tool_names(ctx)`: None
offers every toolbox tool, a tuple only those (in that order), `()` none at all (the model then
answers in its content: the structured-final-action modes). (4) The loop: each tool call's
arguments go through `Masker.unmask_arguments(tool, args)`, then `ctx.tools.serve`; the result's
JSON text goes through `Masker.mask_result(tool, text)` before the model sees it. (5) When the
model answers without a tool call, `await builder.after_answer(ctx, content, call)` decides: a
string is the next user message (masked, then sent; the loop goes on within its budgets: the way
to run the next stage of a workflow), None ends the cycle, and a `ParseFailure` says the answer
could not be used (it counts in the cycle's `parse_failures`) and carries either the feedback to
send or None to end the cycle.
`call(tool, args)` runs a tool exactly as a model's call would be run (unmasked, traced, counted
against the budgets) and returns a `CalledTool` (the real outcome, and the masked text to show the
model). The loop calls `finish` itself if the builder never did. A `PhasedPromptBuilder` (KTD-Fin's
research phase, then its forced `submit_action`) also chooses, before every model turn, what that
turn is offered (`offer`: the tools by name, the one the model must call, a user message to send
first), and serves the tools it declares itself (`own_tools`, `serve_own`, whether offered that turn
or not) in place of the toolbox: their calls are counted as tool calls, their replies are passed
through `Masker.mask_text`, and a reply that says the call was an unusable answer counts as a parse
failure. Builders and maskers must not read the wall clock (`ctx.now` is the decision time), and a
masker must never raise for anything the model wrote: an alias it cannot map is left as written (the
toolbox then answers `unknown_symbol`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

from openbell.agents.llm.completion import wire_json
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import PortfolioOut, ToolError, ToolOutcome
from openbell.agents.untrusted import RULE, carries_untrusted, enveloped_result
from openbell.markets.price_limits import band_rows, percent
from openbell.markets.rules import MarketRules, PriceLimits, ShortRules


class Masker(Protocol):
    """Rewrites what the model sees (tickers, names, dates) and translates its calls back."""

    def mask_text(self, text: str) -> str:
        """`text` (a prompt or any model-bound message) with every real identifier aliased."""
        ...

    def unmask_arguments(self, tool: str, args: dict[str, object]) -> dict[str, object]:
        """The model's arguments for `tool` with aliases turned back into real identifiers."""
        ...

    def mask_result(self, tool: str, result_json: str) -> str:
        """The JSON text of `tool`'s result (or error) with real identifiers aliased."""
        ...


class IdentityMasker:
    """The `bright` level: nothing is masked."""

    def mask_text(self, text: str) -> str:
        """`text` unchanged."""
        return text

    def unmask_arguments(self, tool: str, args: dict[str, object]) -> dict[str, object]:
        """`args` unchanged (as a new dict)."""
        return dict(args)

    def mask_result(self, tool: str, result_json: str) -> str:
        """`result_json` unchanged."""
        return result_json


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """An answer a decision mode could not use: `feedback`, the next user message, or None when
    the mode has ended the cycle (its retries spent)."""

    feedback: str | None


@dataclass(frozen=True, slots=True)
class CalledTool:
    """A tool run for a builder: the real `outcome`, and `text`, its masked JSON for the model."""

    outcome: ToolOutcome
    text: str


async def serve_masked(
    ctx: DecisionContext, masker: Masker, name: str, arguments: dict[str, object]
) -> CalledTool:
    """One tool call as a model's is run, by the LLM loop and the MCP server alike: the arguments
    unmasked, served by `ctx.tools.serve` (rows within the result size budget), the result's JSON
    masked, and a result that carries third-party text put in the untrusted envelope
    (`agents/untrusted.py`)."""
    real = masker.unmask_arguments(name, arguments)
    outcome = await ctx.tools.serve(name, real)
    text = masker.mask_result(name, outcome.model_dump_json())
    if carries_untrusted(outcome):
        text = enveloped_result(text)
    return CalledTool(outcome, text)


#: Runs one tool as a model's call is run: `await call("place_order", {...})`.
ToolCaller = Callable[[str, dict[str, object]], Awaitable[CalledTool]]


@runtime_checkable
class GivesUp(Protocol):
    """A builder that may end a cycle because every answer failed its validation (the structured
    modes, once their retries are spent): `gave_up` says it did, so the loop records the cycle's
    stop as `invalid_answer` however the answer came (in text, or through a mode's own tool)."""

    gave_up: bool


class PromptBuilder(Protocol):
    """Builds a decision mode's prompts and chooses its tools; see the module docstring."""

    async def prepare(self, ctx: DecisionContext) -> None:
        """Gather what the prompts need through `ctx.tools` (called once, before the prompts)."""
        ...

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The system message: the role, the market's rules, how to act."""
        ...

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The first user message: the decision time and the account (and the mode's data)."""
        ...

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """The tools offered: None for all, a tuple for those only, `()` for none."""
        ...

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | ParseFailure | None:
        """What follows an answer without tool calls: the next user message, None to end, or a
        `ParseFailure` when the answer could not be used."""
        ...


@dataclass(frozen=True, slots=True)
class Offer:
    """What a phased decision mode offers the model's next turn: `tools` by name (the toolbox's
    and the mode's own, in that order as given), `forced` the one it must call (sent as the
    request's `tool_choice`), and `message`, a user message sent before the turn."""

    tools: tuple[str, ...]
    forced: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OwnReply:
    """A phased mode's answer to a call of one of its own tools: `text`, the result the model is
    shown, and `parse_failure`, whether the call was an answer the mode could not use."""

    text: str
    parse_failure: bool = False


@runtime_checkable
class PhasedPromptBuilder(PromptBuilder, Protocol):
    """A `PromptBuilder` whose offer changes from turn to turn and which serves some tools itself;
    see the module docstring."""

    def own_tools(self, ctx: DecisionContext) -> dict[str, dict[str, Any]]:
        """The tools the mode serves itself: name -> OpenAI function tool."""
        ...

    def offer(self, ctx: DecisionContext, *, turns_left: int, tool_calls_left: int) -> Offer:
        """What the next model turn is offered, given what is left of the cycle's budgets."""
        ...

    async def serve_own(
        self, ctx: DecisionContext, name: str, raw_arguments: str, call: ToolCaller
    ) -> OwnReply:
        """The answer to the model's call of the mode's own tool `name` with `raw_arguments`
        (as the model wrote them, JSON or not)."""
        ...


#: Said to a model whose money is rebased (`agents/rebasing.py`).
REBASED_MONEY = (
    "- Prices and money (cash, values, fees) are in a secret unit of this account, not the "
    "market's price levels; quantities, weights and returns are real, and cash / price is still "
    "the shares you can afford (before fees)."
)
#: Said to a masked model (`agents/relative_volume.py`).
RELATIVE_VOLUMES = (
    "- Bar volumes are relative: each bar's volume over the median volume of the bars in the same "
    "result (1 is that series' median); compare them within a result, not across stocks or with "
    "share counts."
)


def describe_rules(
    ctx: DecisionContext,
    *,
    masked: bool = False,
    money: Callable[[Decimal], Decimal] | None = None,
) -> str:
    """The market's trading rules in a few plain lines (lots, settlement, limits, fees).

    A `masked` model is not told the universe's name or size, and is told that its volumes are
    relative; with `money` (price rebasing) the model is told its money is rebased, and the
    rules' amounts of money (the minimum commission, the minimum order value) are not given: any
    such constant shown in the account's unit would give the unit away to a model that knows it.
    """
    rules = ctx.rules
    universe = (
        "" if masked else f", universe {ctx.universe.name} ({len(ctx.universe.symbols)} symbols)"
    )
    shorting = rules.shorting if ctx.tools.shorting else None
    sides = "Long only, no leverage" if shorting is None else "Long and short, no long leverage"
    market = (
        f"Market {ctx.market} ({rules.currency}){universe}. {sides}. Orders fill at "
        "the next trade price after now."
    )
    lines = [market]
    lines.extend(f"- {line}" for line in rule_lines(rules, rebased=money is not None))
    if shorting is not None:
        lines.extend(f"- {line}" for line in short_lines(shorting))
    if masked:
        lines.append(RELATIVE_VOLUMES)
    if money is not None:
        lines.append(REBASED_MONEY)
    return "\n".join(lines)


def rule_lines(rules: MarketRules, *, rebased: bool = False) -> list[str]:
    """The execution rules of `rules` as short sentences (fee components that are zero left out);
    `rebased` (price rebasing): their amounts of money are said to exist, not given."""
    lines = []
    if rules.lot_size is not None and rules.lot_size > 1:
        lines.append(f"Buys are whole lots of {rules.lot_size} shares.")
    else:
        lines.append(f"Quantities round down to steps of {rules.quantity_step}.")
    if rules.settlement_days:
        lines.append("T+1: shares bought today can be sold from the next session.")
    if rules.price_limits is not None:
        lines.append(limit_line(rules.price_limits))
    if rules.min_notional > 0 and rebased:
        lines.append("A minimum order value applies: smaller orders are rejected.")
    elif rules.min_notional > 0:
        lines.append(f"Minimum order value {rules.min_notional} {rules.currency}.")
    lines.append(f"{_fees_text(rules, rebased=rebased)}; slippage {rules.slippage_bps} bps.")
    return lines


def limit_line(limits: PriceLimits) -> str:
    """The daily price limits by board as one sentence (`markets.price_limits.band_rows`): what is
    enforced, and with a buffer the official limit beside it."""
    rows = band_rows(limits)
    if limits.buffer_pct:
        bands = ", ".join(
            f"{row.label} +-{percent(row.pct)} (official {percent(row.official_pct)})"
            for row in rows
        )
        enforced = (
            f", as enforced here ({percent(limits.buffer_pct)} of the previous close inside the "
            "official limit)"
        )
    else:
        bands = ", ".join(f"{row.label} +-{percent(row.pct)}" for row in rows)
        enforced = ""
    return (
        "Daily price limits against the previous close (the last close before this session, "
        "however long the stock was suspended; on an ex-date, the ex-date reference price), by "
        f"board{enforced}: {bands}. A buy at or above its limit-up or a sell at or below its "
        "limit-down is rejected."
    )


def short_lines(shorting: ShortRules) -> list[str]:
    """The shorting rules as short sentences, for an account allowed to short."""
    sides = (
        "Sides: buy/sell a long; short opens or adds to a short (its proceeds stay in cash), "
        "cover buys it back. Sell a long before shorting it, cover a short before buying it."
    )
    margin = (
        f"Margin: equity must cover longs in full plus {shorting.initial_margin} of the short "
        f"value to short more; below longs plus {shorting.maintenance_margin} of it, shorts are "
        "covered at the next open, largest first."
    )
    fee = f"Borrow fee {shorting.borrow_fee_bps_per_year} bps a year on the short value, daily."
    return [sides, margin, fee]


def _fees_text(rules: MarketRules, *, rebased: bool) -> str:
    fees = rules.fees
    parts = []
    if fees.commission_bps or fees.commission_min:
        if not fees.commission_min:
            minimum = ""
        elif rebased:
            minimum = " (with a minimum per fill)"
        else:
            minimum = f" (min {fees.commission_min} {rules.currency})"
        parts.append(f"commission {fees.commission_bps} bps{minimum}")
    if fees.stamp_duty_sell_bps:
        parts.append(f"stamp duty {fees.stamp_duty_sell_bps} bps on sells")
    if fees.transfer_fee_bps:
        parts.append(f"transfer {fees.transfer_fee_bps} bps")
    return f"Fees: {', '.join(parts)}" if parts else "No fees"


class OpenResearchPrompt:
    """The default `open-research` mode: a minimal prompt, research through every tool.

    The first message gives the time, cash and positions (from `get_portfolio` at `prepare`);
    prices, bars and news come only through the tools.
    """

    def __init__(self) -> None:
        self._portfolio: str = "unavailable (call get_portfolio)"

    async def prepare(self, ctx: DecisionContext) -> None:
        """Fetch the account through the toolbox, for the first message."""
        found = await ctx.tools.get_portfolio()
        if not isinstance(found, ToolError):
            self._portfolio = _portfolio_text(self.shown(found))

    def shown(self, portfolio: PortfolioOut) -> PortfolioOut:
        """The account as the model is shown it (a masked mode rebases and reorders it)."""
        return portfolio

    def listing(self, ctx: DecisionContext) -> list[str]:
        """The universe's symbols in the order the model is shown them (the file's here)."""
        return list(ctx.universe.symbols)

    def rules_text(self, ctx: DecisionContext) -> str:
        """The market's rules as the model is told them."""
        return describe_rules(ctx)

    def system_prompt(self, ctx: DecisionContext) -> str:
        """The role, the rules and the protocol of a cycle."""
        return (
            "You manage a paper trading account: decide what to trade now, with market data "
            "only from the tools.\n"
            f"{self.rules_text(ctx)}\n"
            "Give each place_order a reason and a confidence 0-1; a rejected order says why. "
            f"{RULE}"
        )

    def first_user_message(self, ctx: DecisionContext) -> str:
        """The decision time and the account."""
        return (
            f"Now: {ctx.now.isoformat()}\n"
            f"Your account: {self._portfolio}\n"
            f"Universe: {' '.join(self.listing(ctx))}\n"
            "Research, trade, then call finish."
        )

    def tool_names(self, ctx: DecisionContext) -> tuple[str, ...] | None:
        """Every tool of the toolbox."""
        return None

    async def after_answer(
        self, ctx: DecisionContext, content: str, call: ToolCaller
    ) -> str | None:
        """An answer without tool calls ends the cycle."""
        return None


def _portfolio_text(portfolio: PortfolioOut) -> str:
    positions = [
        {"symbol": p.symbol, "quantity": str(p.quantity), "weight": str(p.weight)}
        for p in portfolio.positions
    ]
    exposure = (
        ""
        if portfolio.gross_exposure is None
        else f", gross exposure {portfolio.gross_exposure}, net {portfolio.net_exposure}, "
        f"margin requirement {portfolio.margin_requirement}, borrow fees paid "
        f"{portfolio.borrow_fees_paid}"
    )
    return (
        f"cash {portfolio.cash} {portfolio.currency}, NAV {portfolio.nav}{exposure}, positions "
        f"{wire_json(positions) if positions else 'none'}"
    )
