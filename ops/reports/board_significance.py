"""The significance suite of a market's leaderboard: feeding a `MarketView` to
`ops.evaluation.significance`, and its records for the JSON of the CLI and the API.

This module owns which accounts are compared and against what: every account of the board with
snapshots in the window (each on its own series, as its row measures it: an account that joined
late is not cut to the others' periods), DSR's N the number of those accounts (agents, their
seeded variants and the baselines alike), and each non-baseline account tested against each
baseline account (`agents.kinds.BASELINE_KINDS` and the pair-neutral baseline) on the periods
the two share, Holm-corrected across the board. The market's benchmark row is not an account
and is not a baseline here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from openbell.agents.kinds import BASELINE_KINDS, PAIR_NEUTRAL
from openbell.ops.evaluation.benchmark import MarketBasis
from openbell.ops.evaluation.conventions import OPENBELL, Convention
from openbell.ops.evaluation.significance import (
    DEFAULT_ALPHA,
    DEFAULT_PERMUTATIONS,
    BoardSignificance,
    RowSignificance,
    board_significance,
)
from openbell.ops.reports.market_reports import MARKETS, Leaderboard, MarketView, market_view
from openbell.store import queries


def significance_of(
    view: MarketView,
    *,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> BoardSignificance:
    """The significance suite of the view's accounts (see the module docstring)."""
    series = {a.info.agent_name: a.navs for a in view.accounts if a.navs}
    kinds = {*BASELINE_KINDS, PAIR_NEUTRAL}
    baselines = [a.info.agent_name for a in view.accounts if a.info.agent_kind in kinds]
    return board_significance(series, baselines, alpha=alpha, permutations=permutations, seed=seed)


def with_significance(view: MarketView, **options: Any) -> Leaderboard:
    """The view's leaderboard with its `significance` set (`significance_of`'s options)."""
    return replace(view.leaderboard, significance=significance_of(view, **options))


def row_significance_record(row: RowSignificance) -> dict[str, Any]:
    """One account's significance as a record."""
    best = row.best
    return {
        "name": row.name,
        "periods": row.periods,
        "sharpe_per_period": row.sharpe,
        "skewness": row.skewness,
        "kurtosis": row.kurtosis,
        "psr": row.psr,
        "dsr": row.dsr,
        "min_track_record": row.min_track_record,
        "immature": row.immature,
        "entry_returns": {f"{days}d": value for days, value in row.entry_returns.items()},
        "best_baseline": row.best_baseline,
        "adjusted_p_value_best": None if best is None else best.adjusted_p_value,
        "significant": row.significant,
        "comparisons": [
            {
                "baseline": c.baseline,
                "periods": c.periods,
                "p_value": c.p_value,
                "adjusted_p_value": c.adjusted_p_value,
            }
            for c in row.comparisons
        ],
    }


def report_fields(found: BoardSignificance | None, name: str) -> dict[str, Any]:
    """The fields an agent's report gains from its board's significance suite: flat keys for the
    report's table and JSON (empty when the agent was not compared)."""
    row = None if found is None else found.row(name)
    if found is None or row is None:
        return {}
    best = row.best
    return {
        "sharpe_per_period": row.sharpe,
        "skewness": row.skewness,
        "kurtosis": row.kurtosis,
        "psr": row.psr,
        "dsr": row.dsr,
        "dsr_trials": found.trials,
        "min_track_record": row.min_track_record,
        "record_periods": row.periods,
        "immature": row.immature,
        **{f"entry_return_{days}d": value for days, value in row.entry_returns.items()},
        "best_baseline": row.best_baseline,
        "adjusted_p_value_best": None if best is None else best.adjusted_p_value,
        "significant": row.significant,
        "adjusted_p_values": {c.baseline: c.adjusted_p_value for c in row.comparisons},
        "significance_settings": {
            "alpha": found.alpha,
            "permutations": found.permutations,
            "seed": found.seed,
            "correction": found.correction,
        },
    }


def market_views(
    engine: Engine,
    markets: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    *,
    bases: Mapping[str, MarketBasis] | None = None,
    convention: Convention = OPENBELL,
    with_behaviour: bool = True,
) -> list[MarketView]:
    """The market view of each of `markets` (default: every market with accounts), as
    `reports.leaderboards` builds their boards (without `with_behaviour`, as `market_view` says:
    the rows' behaviour left out and not computed)."""
    if markets is None:
        present = {info.market for info in queries.accounts(engine)}
        markets = [market for market in MARKETS if market in present]
    out: list[MarketView] = []
    for market in markets:
        basis = None if bases is None else bases.get(market)
        out.append(
            market_view(
                engine,
                market,
                start,
                end,
                benchmark=None if basis is None else basis.benchmark,
                extra_sources=() if basis is None else basis.sources,
                convention=convention,
                with_behaviour=with_behaviour,
            )
        )
    return out


def significance_record(found: BoardSignificance) -> dict[str, Any]:
    """A board's significance suite as a record."""
    return {
        "alpha": found.alpha,
        "trials": found.trials,
        "sharpe_variance": found.sharpe_variance,
        "expected_max_sharpe": found.expected_max_sharpe,
        "permutations": found.permutations,
        "seed": found.seed,
        "correction": found.correction,
        "test": "paired sign-flip permutation of period returns, one-sided (agent above baseline)",
        "rows": [row_significance_record(row) for row in found.rows],
    }
