"""What a configured pair (and a hedger's set of candidates) may be: the `Pair` type, its checks,
how reasons and prompts name it, its states, and the defaults the config reads.

Data and pure checks only, apart from the trading code of `agents.pairs` (the pair rule and the
pair-neutral baseline) and the LLM modes (`agents.modes.pair`, `agents.modes.hedge`), so that
loading the config imports neither the agent toolbox nor the modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Final

#: A pair of symbols of one market, as configured: `("AAPL", "MSFT")`.
Pair = tuple[str, str]
#: The default momentum window of `PairNeutral`, in daily sessions.
DEFAULT_MOMENTUM_SESSIONS: Final = 20
#: What every order the pair rule places says first.
PAIR_RULE: Final = "pair rule"
#: Herculean's Hedging universe: eight liquid US stocks (all in the bundled Nasdaq-100 bars), the
#: hedge mode's default candidates (`agents.modes.hedge`).
HERCULEAN_ASSETS: Final = ("AAPL", "ADBE", "AMZN", "GOOGL", "META", "MSFT", "NVDA", "TSLA")
#: The fraction of NAV each open leg of a hedge is sized to (equal notional: gross 1, net 0).
LEG_WEIGHT: Final = Decimal("0.5")


def check_pairs(pairs: Sequence[Sequence[str]]) -> tuple[Pair, ...]:
    """`pairs` as tuples, refused (ValueError) when empty, when a pair is not two different
    symbols, or when a symbol is in two pairs (its leg could not be told apart)."""
    found: list[Pair] = []
    seen: set[str] = set()
    if not pairs:
        raise ValueError("pairs must name at least one pair")
    for pair in pairs:
        if len(pair) != 2 or pair[0] == pair[1]:
            raise ValueError(f"a pair is two different symbols, got {list(pair)}")
        for symbol in pair:
            if symbol in seen:
                raise ValueError(f"{symbol} is in two pairs")
            seen.add(symbol)
        found.append((pair[0], pair[1]))
    return tuple(found)


def check_assets(assets: Sequence[str]) -> tuple[str, ...]:
    """`assets` as a tuple, refused (ValueError) with fewer than two or a symbol twice."""
    if len(assets) < 2:
        raise ValueError("a hedger needs at least two candidate assets")
    if len(set(assets)) != len(assets):
        raise ValueError("a candidate asset is named twice")
    return tuple(assets)


def named(pair: Pair) -> str:
    """`pair` as its reasons and prompts write it: "AAPL vs MSFT" (a crypto symbol has a slash)."""
    return f"{pair[0]} vs {pair[1]}"


def pair_state(held: dict[str, Decimal], pair: Pair) -> str:
    """`hedged` (one leg long, the other short), `flat` (neither held) or `broken`."""
    first, second = (held.get(symbol, Decimal(0)) for symbol in pair)
    if first == 0 and second == 0:
        return "flat"
    if (first > 0 > second) or (first < 0 < second):
        return "hedged"
    return "broken"
