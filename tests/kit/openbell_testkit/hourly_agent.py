"""A deterministic python agent for `tests/acceptance/test_cache_replay_cli.py`, made by the live
session in the test and loaded by the replay's config (`kind = "python"`,
`entry = "openbell_testkit.hourly_agent:HourlyRandom"`).

It reads the last three hourly bars of each offered symbol, then trades as the seeded `random`
baseline does. Reading the hourly bars is what makes the live daemon fetch (and cache) them: the
snapshot reads daily bars only, and a cache replay of an hourly market rings at its cached hourly
bars.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openbell.agents.baselines import RandomTrader
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ToolError


@dataclass(frozen=True, slots=True, kw_only=True)
class HourlyRandom:
    """Reads each offered symbol's last three hourly bars, then decides as `RandomTrader`."""

    name: str
    seed: int = 0
    kind: str = field(default="hourly_random", init=False)

    async def decide(self, ctx: DecisionContext) -> None:
        for symbol in ctx.universe.symbols:
            found = await ctx.tools.get_bars(symbol, "1h", 3)
            assert not isinstance(found, ToolError), found
        await RandomTrader(name=self.name, seed=self.seed).decide(ctx)
