"""The words of the `ktd-fin` decision mode: KTD-Fin's open-research prompts, filled in.

This module owns the texts the mode sends (pure functions of what the mode gathered): the system
prompt, adapted from the paper's open-research prompt (its goals, information boundary, hard
constraints, limit-board rules, execution details and decision requirements, with this market's
rules and the research-then-submit protocol), and the first user message, the paper's shared
template without its features table (open-research starts from the account and the constraints
only): the step, the constraint summary, the account, today's universe, the previous step's
execution outcome (each order's fill, or its rejection with the reason) and the portfolio's
cumulative return against the benchmark's over the same window. Amounts of money arrive already
shown in the model's terms (rebased under price rebasing); tickers and dates are masked by the
loop with everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Final

from openbell.agents.ktd.contract import KTD_TOOLS, PortfolioStateOut
from openbell.agents.llm.completion import wire_json
from openbell.agents.modes.final_action import ACTION_FORMAT, MAX_RETRIES
from openbell.agents.tools import OrderOut, OrderStatusOut
from openbell.agents.untrusted import RULE
from openbell.markets.rules import MarketRules

SUBMIT_ACTION: Final = "submit_action"
SUBMIT_DESCRIPTION: Final = (
    "Submit this step's trading decision: the orders (SELL before BUY; [] holds) and the "
    "overall_reason. Ends the step."
)
SUBMIT_MESSAGE: Final = (
    "The research phase is over. Call submit_action now with your trading decision (an empty "
    "orders list holds)."
)
FIRST_STEP: Final = "None: this is the first step."
NO_ORDERS: Final = "No orders were placed in the previous step."


@dataclass(frozen=True, slots=True, kw_only=True)
class Performance:
    """The account's and the benchmark's cumulative returns since the account opened (None:
    not known)."""

    portfolio: Decimal | None
    benchmark_symbol: str | None
    benchmark: Decimal | None


def system_prompt(
    *, market: str, rules: MarketRules, rules_text: str, research_calls: int, t_plus_one: bool
) -> str:
    """The system message of a `ktd-fin` cycle."""
    tools = ", ".join(KTD_TOOLS)
    settlement = (
        "3. T+1: a stock bought today can only be sold from the next session.\n"
        if t_plus_one
        else "3. Shares settle at once: what you hold may be sold.\n"
    )
    return (
        f"You are an autonomous trading agent in the {market} market. Within the current "
        "backtest step, conduct research, judgement and order submission, and emit a single "
        "trading decision.\n"
        "## Goals\n"
        "- Maximise the overall benchmark score within the hard constraints.\n"
        "- Decide on your own whether to trade, how many names, concentrated or diversified, "
        "and whether to use target_weight or shares.\n"
        "- If no identifiable edge exists, holding cash or keeping the status quo is an "
        "acceptable decision.\n"
        "## Protocol\n"
        f"- Research phase: call the read-only tools ({tools}) in any order, as often as you "
        f"need, up to {research_calls} calls.\n"
        "- Submission phase: when you answer without a tool call, or the research budget is "
        f"spent, you must call {SUBMIT_ACTION}. An action that fails validation comes back with "
        f"the reasons, up to {MAX_RETRIES} retries; then the step ends with no trade.\n"
        "## Information boundary\n"
        "- Decide only from this conversation and the tool results; assume no outside "
        "information.\n"
        "- The tools see only data ended before now: daily bars up to the last session's close "
        "(their data_cutoff). The current session's prices are not shown.\n"
        "## Hard constraints\n"
        "1. Long-only; no shorting.\n"
        "2. Buy only stocks in today's tradable universe; sell only what you hold.\n"
        f"{settlement}"
        "4. Each order must contain stock_id, side, confidence and reason.\n"
        "5. If no action is intended, submit an empty orders list.\n"
        "## Market rules (engine layer)\n"
        f"{rules_text}\n"
        f"{_board_lines(rules)}"
        "## Execution details\n"
        "- Orders execute in the order given, at the next trade price after now; list SELL "
        "before BUY.\n"
        "- target_weight is the final desired weight of NAV; do not BUY a stock already near "
        "or above it.\n"
        "- When buying, keep a 1%-3% cash buffer (fees, lot rounding, slippage).\n"
        "- SELL only holdings with shares_available > 0.\n"
        "## Decision requirements\n"
        "- An executable decision, not a report: clear, non-conflicting orders; confidence in "
        "[0, 1]; your portfolio-construction rationale in overall_reason.\n"
        f"- {SUBMIT_ACTION} takes the action object as its arguments. {ACTION_FORMAT}\n"
        f"{RULE}"
    )


def _board_lines(rules: MarketRules) -> str:
    limits = rules.price_limits
    if limits is None:
        return ""
    bands = ", ".join(
        f"{board.value} +-{(pct * 100).normalize():f}%" for board, pct in limits.board_pct
    )
    return (
        f"- Price limits by board: {bands}. A buy at the limit-up price or a sell at the "
        "limit-down price is rejected.\n"
        "- The tools show each stock's board, limit_pct, limit_up, limit_down and limit-hit "
        "warnings.\n"
    )


def first_user_message(
    *,
    step: date,
    t_plus_one: bool,
    account: PortfolioStateOut | None,
    universe: Sequence[str],
    previous: str,
    performance: Performance,
) -> str:
    """The first user message: the paper's template, its features table left out."""
    return (
        f"## Backtest step: {step.isoformat()}\n"
        "## Constraint summary\n"
        "- Concentration and number of holdings have no hard upper bound; decide on your own.\n"
        "- Short selling: no\n"
        f"- T+1 settlement: {'yes' if t_plus_one else 'no'}\n"
        "## Current holdings and account\n"
        f"{_account(account)}\n"
        f"## Today's tradable universe ({len(universe)} names)\n"
        f"{' '.join(universe)}\n"
        "## Previous-step execution outcome\n"
        f"{previous}\n"
        "## Portfolio performance\n"
        f"{_performance(performance)}\n"
        f"Research with the tools, then submit today's decision ({SUBMIT_ACTION})."
    )


def _account(account: PortfolioStateOut | None) -> str:
    if account is None:
        return "- unavailable (call get_portfolio_state)"
    held = [
        {
            "stock_id": p.stock_id,
            "shares": str(p.shares),
            "shares_available": str(p.shares_available),
            "weight": str(p.weight),
        }
        for p in account.positions
    ]
    return (
        f"- Total value: {account.total_value} {account.currency}\n"
        f"- Cash: {account.cash} {account.currency} ({account.cash_weight} of NAV)\n"
        f"- {account.num_positions} positions: {wire_json(held) if held else 'none'}"
    )


def _performance(performance: Performance) -> str:
    benchmark = performance.benchmark_symbol or "the benchmark"
    return (
        "- Cumulative return since the start of the backtest: "
        f"{_percent(performance.portfolio)}\n"
        f"- Benchmark {benchmark} cumulative return over the same window: "
        f"{_percent(performance.benchmark)}"
    )


def _percent(value: Decimal | None) -> str:
    return "unavailable" if value is None else f"{value * 100:+.2f}%"


def previous_outcome(orders: Sequence[OrderOut] | None) -> str:
    """The previous step's execution outcome: each order's fill or rejection with its reason
    (`orders` as the model is shown them), or that there was none (None: no previous step)."""
    if orders is None:
        return FIRST_STEP
    if not orders:
        return NO_ORDERS
    return "\n".join(_order_line(order) for order in orders)


def _order_line(order: OrderOut) -> str:
    side = order.side.upper()
    if order.status is OrderStatusOut.FILLED:
        return (
            f"- {side} {order.symbol}: filled {order.filled_shares} at {order.price}, fees "
            f"{order.fees}"
        )
    return (
        f"- {side} {order.symbol} {order.shares}: rejected ({order.reject_reason}): {order.message}"
    )
