"""A momentum strategy as an openbell plug-in agent: hold the `top` symbols that rose most
over the last `lookback` daily bars, equally weighted, and sell what drops out."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ToolError


class Momentum:
    kind = "momentum"  # stored as the agent's kind in the ledger

    def __init__(self, name: str, lookback: int = 10, top: int = 3) -> None:
        self.name, self.lookback, self.top = name, lookback, top

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools  # the same toolbox as every agent: rules and point-in-time apply
        gains: dict[str, Decimal] = {}
        for symbol in ctx.universe.symbols:
            found = await tools.get_bars(symbol, "1d", lookback=self.lookback)
            if not isinstance(found, ToolError) and len(found.bars) == self.lookback:
                gains[symbol] = found.bars[-1].close / found.bars[0].close - 1
        rising = sorted((s for s in gains if gains[s] > 0), key=gains.__getitem__, reverse=True)
        leaders = rising[: self.top]
        portfolio = await tools.get_portfolio()
        held = [] if isinstance(portfolio, ToolError) else [p.symbol for p in portfolio.positions]
        for symbol in held:
            if symbol not in leaders:
                await tools.place_order(symbol, "sell", target_weight=Decimal(0), reason="faded")
        weight = (Decimal(1) / self.top).quantize(Decimal("0.0001"), ROUND_DOWN)
        for symbol in leaders:
            if symbol not in held:
                reason = f"up {gains[symbol]:.2%} in {self.lookback} bars"
                await tools.place_order(symbol, "buy", target_weight=weight, reason=reason)
        await tools.finish(f"Holding the leaders: {', '.join(leaders) or 'none'}.")
