"""The factor screen of the fixed-candidate mode: 20-day momentum over 20-day volatility.

This module owns `screen`, which ranks a universe from the daily bars that had ended by the
decision time (read through the toolbox, so the point-in-time rule holds): momentum is the
20-session return `close[-1] / close[-21] - 1`, volatility the sample standard deviation of the 20
daily returns, and the score momentum divided by volatility (a risk-adjusted trend, as in
KTD-Fin's candidate tables). Symbols without 21 daily closes, or with zero volatility, are left
out. It also renders the top rows as a compact table.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from openbell.agents.toolbox import Toolbox
from openbell.agents.tools import ToolError

WINDOW: Final = 20
_PERCENT: Final = Decimal("0.01")
_SCORE: Final = Decimal("0.001")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One screened symbol: its last close, 20-day momentum and volatility, and score."""

    symbol: str
    last_close: Decimal
    momentum: Decimal
    volatility: Decimal
    score: Decimal


def factors(symbol: str, closes: Sequence[Decimal]) -> Candidate | None:
    """The candidate of `symbol` from its daily closes (oldest first), or None if too few."""
    if len(closes) < WINDOW + 1:
        return None
    window = list(closes[-(WINDOW + 1) :])
    returns = [later / earlier - 1 for earlier, later in itertools.pairwise(window)]
    mean = sum(returns, Decimal(0)) / len(returns)
    variance = sum(((r - mean) ** 2 for r in returns), Decimal(0)) / (len(returns) - 1)
    volatility = variance.sqrt()
    if volatility == 0:
        return None
    momentum = window[-1] / window[0] - 1
    return Candidate(
        symbol=symbol,
        last_close=window[-1],
        momentum=momentum,
        volatility=volatility,
        score=momentum / volatility,
    )


async def screen(tools: Toolbox, symbols: Sequence[str], k: int) -> list[Candidate]:
    """The top `k` of `symbols` by score (ties by symbol), from bars ended by `tools.now`."""
    found: list[Candidate] = []
    for symbol in symbols:
        bars = await tools.get_bars(symbol, "1d", WINDOW + 1)
        if isinstance(bars, ToolError):
            continue
        candidate = factors(symbol, [bar.close for bar in bars.bars])
        if candidate is not None:
            found.append(candidate)
    found.sort(key=lambda c: (-c.score, c.symbol))
    return found[:k]


def table(candidates: Sequence[Candidate]) -> str:
    """A compact pipe table of `candidates`, best first."""
    lines = ["stock_id | last_close | mom_20d_% | vol_20d_% | score"]
    for c in candidates:
        lines.append(
            f"{c.symbol} | {c.last_close} | {(c.momentum * 100).quantize(_PERCENT)} | "
            f"{(c.volatility * 100).quantize(_PERCENT)} | {c.score.quantize(_SCORE)}"
        )
    return "\n".join(lines)
