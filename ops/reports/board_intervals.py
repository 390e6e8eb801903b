"""The block bootstrap of a market's leaderboard: intervals of each row and who beats whom.

This module owns feeding a `MarketView` to `ops.evaluation.bootstrap`: the ranked accounts' NAV
series are cut to the timestamps they all share (an account that joined later shortens everyone's
series, so that one draw resamples the same periods for all; an account without snapshots is left
out, as it is unranked), the benchmark is taken at those timestamps when it has a value at each of
them (else excess return and the information ratio get no interval), and the leaderboard comes
back with its `bootstrap` set. The leaderboard's own figures are not changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Engine

from openbell.ops.evaluation.benchmark import MarketBasis
from openbell.ops.evaluation.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_DRAWS, bootstrap_ranking
from openbell.ops.evaluation.return_metrics import Returns, simple_returns
from openbell.ops.reports.market_reports import MARKETS, Leaderboard, MarketView, market_view
from openbell.store import queries


def with_bootstrap(
    view: MarketView,
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Leaderboard:
    """The view's leaderboard with the bootstrap of its ranked accounts (see the module
    docstring); `bootstrap` stays None when they share fewer than three timestamps."""
    board = view.leaderboard
    series = {account.info.agent_name: account.navs for account in view.accounts if account.navs}
    if not series:
        return board
    shared = set.intersection(*({point.at for point in navs} for navs in series.values()))
    returns: dict[str, Returns] = {
        name: simple_returns([point for point in navs if point.at in shared])
        for name, navs in series.items()
    }
    bench_points = [point for point in view.benchmark_navs if point.at in shared]
    bench: Returns | None = (
        simple_returns(bench_points) if len(bench_points) == len(shared) else None
    )
    result = bootstrap_ranking(
        returns,
        periods_per_year=board.periods_per_year,
        benchmark=bench,
        draws=draws,
        seed=seed,
        confidence=confidence,
    )
    return replace(board, bootstrap=result)


def bootstrapped_leaderboards(
    engine: Engine,
    markets: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    bases: Mapping[str, MarketBasis] | None = None,
) -> list[Leaderboard]:
    """`reports.leaderboards` with the bootstrap of each board (`with_bootstrap`); `bases` as
    there."""
    if markets is None:
        present = {info.market for info in queries.accounts(engine)}
        markets = [market for market in MARKETS if market in present]
    out: list[Leaderboard] = []
    for market in markets:
        basis = None if bases is None else bases.get(market)
        view = market_view(
            engine,
            market,
            start,
            end,
            benchmark=None if basis is None else basis.benchmark,
            extra_sources=() if basis is None else basis.sources,
        )
        out.append(with_bootstrap(view, draws=draws, seed=seed))
    return out
