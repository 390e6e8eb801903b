"""The baseline agents: buy-and-hold, equal weight, SMA(50, 200) crossover, cash, seeded random
and pair-neutral (long-short pairs, in `pairs.py`).

This module owns the passive and rule-based agents the arena compares LLM agents against (DESIGN
§6). They act only through the toolbox, so the market rules and the point-in-time rule bind them as
they bind every agent, and each ends its cycle with `finish`. They trade only what is offered at the
slot (`ctx.universe`: the members of that day with a bar ended by then; the benchmark once it has
one), so a coin whose data starts in 2023 is not bought in a 2021 replay. They keep no memory
between cycles: each decides from the portfolio and the market data of the slot, so a cycle run
again after an interruption (the toolbox shows the account as at its start) decides exactly as the
first run did, and a restarted daemon needs no agent state. `build_agent` makes one from its
configured kind.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from types import MappingProxyType
from typing import Final

from openbell.agents.kinds import BASELINE_KINDS, PAIR_NEUTRAL
from openbell.agents.pair_rules import DEFAULT_MOMENTUM_SESSIONS, check_pairs
from openbell.agents.pairs import PairNeutral
from openbell.agents.protocol import Agent, DecisionContext
from openbell.agents.tools import ToolError
from openbell.markets.domain import check_market
from openbell.markets.gateway import AveragesResult

#: AI-Trader's CD5 crypto index weights (its crypto benchmark), as fractions of NAV.
CD5_WEIGHTS: Mapping[str, Decimal] = MappingProxyType(
    {
        "BTC/USDT": Decimal("0.7456"),
        "ETH/USDT": Decimal("0.1597"),
        "XRP/USDT": Decimal("0.0520"),
        "SOL/USDT": Decimal("0.0353"),
        "ADA/USDT": Decimal("0.0076"),
    }
)

SMA_FAST = 50
SMA_SLOW = 200
_WEIGHT_PLACES = Decimal("0.000001")


@functools.cache
def _weight(numerator: int, denominator: int) -> Decimal:
    """`numerator / denominator` rounded down to `_WEIGHT_PLACES` (kept: a baseline asks for the
    same few, 1/N of its symbols, at slot after slot)."""
    return (Decimal(numerator) / Decimal(denominator)).quantize(_WEIGHT_PLACES, ROUND_DOWN)


def _basket(weights: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """`weights` scaled down to sum to 1 when they sum above it (CD5's published weights sum to
    100.02%), largest first."""
    if not weights or any(weight <= 0 for weight in weights.values()):
        raise ValueError(f"basket weights must be positive, got {dict(weights)}")
    total = sum(weights.values(), Decimal(0))
    scale = Decimal(1) / total if total > 1 else Decimal(1)
    ordered = sorted(weights.items(), key=lambda item: (-item[1], item[0]))
    return {
        symbol: (weight * scale).quantize(_WEIGHT_PLACES, ROUND_DOWN) for symbol, weight in ordered
    }


async def _holdings(ctx: DecisionContext) -> dict[str, Decimal] | None:
    """Symbol -> weight of what the account holds (the weights `get_portfolio` shows), or None
    when the portfolio is unavailable."""
    held = await ctx.tools.holdings()
    return None if isinstance(held, ToolError) else held


@dataclass(frozen=True, slots=True, kw_only=True)
class BuyAndHold:
    """Buys the market's benchmark at the first slot it can and holds it.

    The benchmark is the toolbox's (QQQ; for A-shares a synthetic fund tracking the SSE-50 index
    000016.SH, see `book.benchmark_instrument`), bought with a target weight of 1 (what the cash
    affords after fees). With `weights` (the default for crypto: AI-Trader's CD5 basket) it buys
    each symbol towards its weight instead. It buys at the first slot where any of its basket is
    offered, only what is offered then (each at its own weight; a later part is never bought), and
    once it holds any of its basket it only holds.
    """

    name: str
    market: str
    weights: Mapping[str, Decimal] | None = None
    kind: str = field(default="buy_and_hold", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        basket = self._basket(tools.benchmark_symbol)
        held = await _holdings(ctx)
        if not basket:
            await tools.finish("No benchmark to buy in this market; holding cash.")
            return
        if held is None or set(held) & set(basket):
            await tools.finish(f"Holding {', '.join(basket)}.")
            return
        offered = {*ctx.universe.symbols, tools.benchmark_symbol}
        buyable = {symbol: weight for symbol, weight in basket.items() if symbol in offered}
        if not buyable:
            await tools.finish("Nothing of the benchmark is offered at this slot; buying later.")
            return
        bought = []
        for symbol, weight in buyable.items():
            result = await tools.place_order(
                symbol, "buy", target_weight=weight, reason="buy and hold the benchmark"
            )
            if not isinstance(result, ToolError) and result.status == "filled":
                bought.append(symbol)
        await tools.finish(f"Bought {', '.join(bought) or 'nothing'} to hold.")

    def _basket(self, benchmark: str | None) -> dict[str, Decimal]:
        if self.weights is not None:
            return _basket(self.weights)
        if self.market == "crypto":
            return _basket(CD5_WEIGHTS)
        return {} if benchmark is None else {benchmark: Decimal(1)}


@dataclass(frozen=True, slots=True, kw_only=True)
class EqualWeight:
    """Buys 1/N of NAV of each symbol offered at its first slot, then holds.

    N counts the symbols offered with a quote at that slot (the others are skipped). A-share lots
    may round a 1/N share of a small account down to nothing; those symbols are skipped too. Once
    it holds anything it only holds: a member offered later (a coin whose data starts after the
    first slot, a stock that joins the index) is never bought, as a fund that bought the list once
    would not have it.
    """

    name: str
    kind: str = field(default="equal_weight", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        held = await _holdings(ctx)
        if held is None or held:
            await tools.finish(f"Holding {len(held or {})} symbols.")
            return
        quotes = await tools.get_quote(ctx.universe.symbols)
        if isinstance(quotes, ToolError) or not quotes.quotes:
            await tools.finish("No prices at this slot; buying later.")
            return
        priced = {quote.symbol for quote in quotes.quotes}
        symbols = [symbol for symbol in ctx.universe.symbols if symbol in priced]
        weight = _weight(1, len(symbols))
        for symbol in symbols:
            await tools.place_order(
                symbol, "buy", target_weight=weight, reason=f"equal weight 1/{len(symbols)}"
            )
        await tools.finish(f"Bought up to {weight} of NAV in each of {len(symbols)} symbols.")


@dataclass(frozen=True, slots=True, kw_only=True)
class SmaCrossover:
    """Long a symbol while its SMA50 is above its SMA200 (the means of the last 50 and 200 daily
    closes known at the slot, `Toolbox.moving_averages`).

    It trades towards the signal's state, which is the crossover rule without memory: holding
    nothing while SMA50 > SMA200 (a cross up, or already above at the first slot) it buys 1/N of NAV
    (N = the number of symbols offered at that slot); holding while SMA50 <= SMA200 (a cross down)
    it sells all. A symbol with fewer than 200 daily bars has no signal and is left as it is. Sells
    go first, so their cash is there for the buys.
    """

    name: str
    kind: str = field(default="sma_crossover", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        held = tools.positions()
        offered = ctx.universe.symbols
        if not offered:
            await tools.finish("Nothing is offered at this slot; no trades.")
            return
        found = await tools.moving_averages_of(offered, "1d", (SMA_FAST, SMA_SLOW))
        signals = {} if isinstance(found, ToolError) else found
        longs: list[str] = []
        exits: list[str] = []
        for symbol in offered:
            signal = _crossed(signals.get(symbol))
            if signal is True and symbol not in held:
                longs.append(symbol)
            elif signal is False and symbol in held:
                exits.append(symbol)
        for symbol in exits:
            await tools.place_order(
                symbol, "sell", target_weight=Decimal(0), reason="SMA50 <= SMA200"
            )
        weight = _weight(1, len(offered))
        for symbol in longs:
            await tools.place_order(symbol, "buy", target_weight=weight, reason="SMA50 > SMA200")
        await tools.finish(f"Entered {longs or 'none'}; exited {exits or 'none'}.")


def _crossed(found: AveragesResult | None) -> bool | None:
    """Whether SMA50 is above SMA200 (None: fewer than 200 bars, or no averages)."""
    if found is None or SMA_SLOW not in found.averages:
        return None
    return found.averages[SMA_FAST] > found.averages[SMA_SLOW]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cash:
    """Holds its cash: the zero-risk baseline."""

    name: str
    kind: str = field(default="cash", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        await ctx.tools.finish("Holding cash.")


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomTrader:
    """Places up to two random orders per cycle: a buy adds 1-5% of NAV to a random priced
    symbol, a sell (of a holding, half the time) takes 1-5% off it.

    The generator is seeded with (`seed`, the slot time), so a cycle run again decides the same.
    """

    name: str
    seed: int = 0
    kind: str = field(default="random", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        # Not for security: a reproducible stream per (seed, slot).
        rng = random.Random(f"{self.seed}:{ctx.now.isoformat()}")  # noqa: S311
        quotes = await tools.get_quote(ctx.universe.symbols)
        priced = [] if isinstance(quotes, ToolError) else sorted(q.symbol for q in quotes.quotes)
        done: list[str] = []
        for _ in range(rng.randint(0, 2)):
            held = await _holdings(ctx)
            if held is None or not priced:
                break
            step = Decimal(rng.randint(1, 5)) / 100
            if held and rng.random() < 0.5:
                symbol = rng.choice(sorted(held))
                side, target = "sell", max(held[symbol] - step, Decimal(0))
            else:
                symbol = rng.choice(priced)
                side, target = "buy", min(held.get(symbol, Decimal(0)) + step, Decimal(1))
            await tools.place_order(symbol, side, target_weight=target, reason="random")
            done.append(f"{side} {symbol} to {target}")
        await tools.finish(f"Random orders: {'; '.join(done) or 'none'}.")


#: openbell's own rule baselines: their cycles' toolboxes are `trusted` (`Toolbox`), a type
#: exactly one of these (never a subclass, nor an agent merely of a baseline's `kind`).
RULE_BASELINES: Final[frozenset[type]] = frozenset(
    {BuyAndHold, EqualWeight, SmaCrossover, Cash, RandomTrader, PairNeutral}
)


def build_agent(
    kind: str,
    name: str,
    *,
    market: str,
    seed: int | None = None,
    weights: Mapping[str, Decimal] | None = None,
    pairs: Sequence[Sequence[str]] | None = None,
    sessions: int = DEFAULT_MOMENTUM_SESSIONS,
) -> Agent:
    """The baseline agent of `kind` (one of `BASELINE_KINDS`) called `name`, trading `market`.

    `kind` may also be `PAIR_NEUTRAL`. `seed` seeds `random` (default 0; the other kinds ignore
    it); `weights` (symbol -> fraction of NAV) replace the benchmark of `buy_and_hold`, and are
    refused for any other kind; `pairs` (and `sessions`, its momentum window) are what
    `pair_neutral` trades, needed by it and refused for any other kind.
    """
    check_market(market)
    if kind not in (*BASELINE_KINDS, PAIR_NEUTRAL):
        known = ", ".join((*BASELINE_KINDS, PAIR_NEUTRAL))
        raise ValueError(f"unknown baseline kind {kind!r}; known: {known}")
    if weights is not None and kind != "buy_and_hold":
        raise ValueError(f"weights are for buy_and_hold, not {kind}")
    if (pairs is not None) != (kind == "pair_neutral"):
        raise ValueError(f"pairs are for pair_neutral and needed by it, not given for {kind}")
    if pairs is not None:
        return PairNeutral(name=name, pairs=check_pairs(pairs), sessions=sessions)
    if kind == "buy_and_hold":
        if weights is not None:
            _basket(weights)  # refuse bad weights now, not at the first cycle
        return BuyAndHold(name=name, market=market, weights=weights)
    if kind == "equal_weight":
        return EqualWeight(name=name)
    if kind == "sma_crossover":
        return SmaCrossover(name=name)
    if kind == "cash":
        return Cash(name=name)
    return RandomTrader(name=name, seed=0 if seed is None else seed)
