"""Buy-and-hold of a strategy's universe over the strategy's own periods (FIDES' passive
benchmark), priced point-in-time from recorded bars.

This module owns `buy_and_hold_returns`: the universe a strategy's first run was given, bought in
equal weights at the first period's start and held (never rebalanced: each symbol's value moves
with its price), valued at each period's start and end as the leaderboard's benchmark is
(`ops.evaluation.benchmark.benchmark_navs`: the bundled bars and the ledger's bar cache, each
timestamp's point-in-time quote, carried forward); one return per period. FIDES holds one asset
(`pos_t = 1`); a strategy here trades a universe, so its buy-and-hold holds all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Engine

from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import Benchmark, benchmark_navs, report_sources

#: The name of the basket, as a benchmark (never shown as a row).
BASKET_NAME = "buy-and-hold"


def buy_and_hold_returns(
    engine: Engine,
    market: str,
    symbols: Sequence[str],
    spans: Sequence[tuple[datetime, datetime]],
    *,
    sources: Sequence[ReplaySource] | None = None,
) -> list[float] | None:
    """The return of the equal-weight buy-and-hold of `symbols` over each of `spans` (start, end
    instants, in time order); None without symbols or spans, or when a span's end or start has no
    value (a symbol not priced by then). `sources` default to the report's (`report_sources`)."""
    if not symbols or not spans:
        return None
    stamps = sorted({instant for span in spans for instant in span})
    data = (
        tuple(sources)
        if sources is not None
        else report_sources(engine, market, stamps, symbols=symbols)
    )
    basket = Benchmark.basket(BASKET_NAME, dict.fromkeys(symbols, Decimal(1)))
    navs = benchmark_navs(market, stamps, Decimal(1), sources=data, benchmark=basket)
    value = {point.at: point.nav for point in navs}
    returns = []
    for start, end in spans:
        if start not in value or end not in value:
            return None
        returns.append(float(value[end] / value[start] - 1))
    return returns
