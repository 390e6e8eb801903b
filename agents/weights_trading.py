"""What the model-written weight agents share: their set-up, their bars and their trades.

This module owns `WeightsAgent`, the base of the agents whose model writes target weights
rather than orders (`rating.agent.RatingAgent`, `strategy_code.agent.StrategyCodeAgent`):

- the set-up: a name, an OpenAI-compatible `ChatClient`, the prices that cost its usage and a
  monotonic clock, and the `Recorder` each cycle keeps its trace with;
- `bars`: the latest `lookback` bars of `interval` of every offered symbol, through the toolbox
  (`get_bars`), so the point-in-time rule is the toolbox's; a symbol without bars is left out;
- `rebalance`: the account moved towards target weights through the toolbox's `place_order` with
  a target weight (the rule baselines' sizing: `book.shares_for_target`), every sell before every
  buy and each in symbol order; a holding the weights leave out is sold to 0; a change smaller than
  `band` is left alone. A negative weight (an account allowed to short) is held short: covers
  follow the sells, shorts come before the buys, and a symbol that changes sides is closed first
  (`moves`). The cycle ends with `finish`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

from openbell.agents.llm.client import ChatClient
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ToolError
from openbell.markets.domain import Bar


class WeightsAgent:
    """The set-up of a model agent that trades target weights; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        client: ChatClient,
        prices: Prices | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        self._name = name
        self._client = client
        self._prices = prices
        self._monotonic = monotonic

    @property
    def name(self) -> str:
        """The agent's configured name."""
        return self._name

    def recorder(self, ctx: DecisionContext) -> Recorder:
        """The cycle's trace and usage, redacted as the client redacts."""
        return Recorder(
            ctx, redact=self._client.redact, prices=self._prices, monotonic=self._monotonic
        )


async def bars(ctx: DecisionContext, interval: str, lookback: int) -> dict[str, Sequence[Bar]]:
    """The latest `lookback` bars of `interval` of every offered symbol that has any."""
    found: dict[str, Sequence[Bar]] = {}
    for symbol in ctx.universe.symbols:
        got = await ctx.tools.get_bars(symbol, interval, lookback)
        if not isinstance(got, ToolError) and got.bars:
            found[symbol] = got.bars
    return found


async def rebalance(
    ctx: DecisionContext, weights: Mapping[str, Decimal], *, band: Decimal, reason: str, whose: str
) -> None:
    """Move the account towards `weights` and finish: `reason` is every order's, `whose` names
    the weights in the summary ("Rebalanced to `whose` weights: ..."). A negative weight is a
    short (only an account allowed to short is given one): see `moves`."""
    tools = ctx.tools
    portfolio = await tools.get_portfolio()
    if isinstance(portfolio, ToolError):
        await tools.finish("Portfolio unavailable; holding.")
        return
    held = {position.symbol: position.weight for position in portfolio.positions}
    placed = moves(held, weights, band=band)
    for symbol, side, target in placed:
        await tools.place_order(symbol, side, target_weight=target, reason=reason)
    counts = ", ".join(
        f"{sum(1 for _, side, _ in placed if side == name)} {name}s"
        for name in ("sell", "cover", "short", "buy")
        if name in ("sell", "buy") or any(side == name for _, side, _ in placed)
    )
    await tools.finish(f"Rebalanced to {whose} weights: {counts}.")


def moves(
    held: Mapping[str, Decimal], weights: Mapping[str, Decimal], *, band: Decimal
) -> list[tuple[str, str, Decimal]]:
    """The orders (symbol, side, target weight: of NAV, held long for `buy`/`sell`, short for
    `short`/`cover`) that move the signed weights `held` towards `weights` (a held symbol the
    weights leave out goes to 0). Sells, then covers, then shorts, then buys, each in symbol
    order, so that what closes frees the cash and the margin first; a symbol that changes sides
    is closed (`sell` or `cover` to 0) before it opens on the other. A change within `band` is
    left alone, unless the target is 0 and something is held."""
    targets = dict.fromkeys(held, Decimal(0))
    targets.update(weights)
    steps: dict[str, list[tuple[str, str, Decimal]]] = {
        "sell": [],
        "cover": [],
        "short": [],
        "buy": [],
    }
    for symbol in sorted(targets):
        target, now = targets[symbol], held.get(symbol, Decimal(0))
        closing = target == 0 and now != 0
        if abs(target - now) <= band and not closing:
            continue
        if now > 0 and target < now:
            steps["sell"].append((symbol, "sell", max(target, Decimal(0))))
        if now < 0 and target > now:
            steps["cover"].append((symbol, "cover", max(-target, Decimal(0))))
        if target < 0 and target < now:
            steps["short"].append((symbol, "short", -target))
        if target > 0 and target > now:
            steps["buy"].append((symbol, "buy", target))
    return [step for side in ("sell", "cover", "short", "buy") for step in steps[side]]
