"""The StockBench composite rank of accounts that traded one market over one window.

This module owns turning a set of metrics panels into leaderboard rows: each account's
cumulative return, max drawdown and Sortino ratio are z-scored across the ranked accounts, the
composite is the mean of the three z-scores, and rows come back sorted by composite with a rank.
A benchmark can be shown as a row for reference; it never moves anyone's z-scores. The panels
should cover the same window, which is the caller's job; nothing here reads the store.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from openbell.ops.evaluation.return_metrics import Panel


@dataclass(frozen=True, slots=True, kw_only=True)
class Entrant:
    """One account to rank (or, with `is_benchmark`, a reference row) and its panel."""

    name: str
    panel: Panel
    is_benchmark: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RankRow:
    """One leaderboard row: the three ranked metrics, their z-scores, composite and rank.

    `rank` is 1 for the best composite; equal composites share a rank (1, 2, 2, 4). A benchmark
    row and an unranked row (see `composite_rank`) have `rank` `None`.
    """

    name: str
    is_benchmark: bool
    cumulative_return: float | None
    max_drawdown: float | None
    sortino_ratio: float | None
    z_cumulative_return: float | None
    z_max_drawdown: float | None
    z_sortino_ratio: float | None
    composite: float | None
    rank: int | None


_Metric = Callable[[Panel], float | None]

# Each ranked metric, oriented so that higher is better: a max drawdown is <= 0, so the less
# negative one is already the higher one.
_METRICS: tuple[_Metric, ...] = (
    lambda panel: panel.cumulative_return,
    lambda panel: panel.max_drawdown,
    lambda panel: panel.sortino_ratio,
)


@dataclass(frozen=True, slots=True)
class _Scale:
    """Mean and sample standard deviation of one metric over the ranked accounts."""

    mean: float
    std: float

    @classmethod
    def of(cls, values: Sequence[float]) -> _Scale:
        if len(values) < 2:
            return cls(values[0] if values else 0.0, 0.0)
        return cls(statistics.fmean(values), statistics.stdev(values))

    def z(self, value: float | None) -> float:
        if value is None or self.std == 0 or not math.isfinite(self.std):
            return 0.0
        return (value - self.mean) / self.std


def _is_rankable(panel: Panel) -> bool:
    return panel.cumulative_return is not None and panel.max_drawdown is not None


def composite_rank(entrants: Sequence[Entrant]) -> tuple[RankRow, ...]:
    """Rank accounts by the mean z-score of cumulative return, max drawdown and Sortino.

    Z-scores use the mean and the *sample* standard deviation (ddof=1) of each metric over the
    ranked accounts: the non-benchmark entrants with at least one return. With fewer than two
    such values, or no spread among them, every z-score of that metric is 0. An account whose
    Sortino is undefined (no losing period) gets a Sortino z-score of 0, neutral, and its
    Sortino does not enter the mean and spread of the others. An account with no return at all
    is unranked: `None` z-scores, composite and rank, listed last by name.

    A benchmark entrant (`is_benchmark=True`) does not enter any mean or spread: it is scored
    against the ranked accounts' scales and placed where its composite falls, with `rank` `None`,
    for reference only. Rows are sorted by composite, descending, ties by name.
    """
    names = [entrant.name for entrant in entrants]
    if len(set(names)) != len(names):
        raise ValueError(f"entrant names must be unique, got {names}")
    ranked = [e for e in entrants if not e.is_benchmark and _is_rankable(e.panel)]
    scales = [
        _Scale.of([v for e in ranked if (v := metric(e.panel)) is not None]) for metric in _METRICS
    ]
    scored: list[RankRow] = []
    unranked: list[RankRow] = []
    for entrant in entrants:
        panel = entrant.panel
        values = [metric(panel) for metric in _METRICS]
        if not _is_rankable(panel):
            unranked.append(_row(entrant, values, (None, None, None), None))
            continue
        z_cum, z_drawdown, z_sortino = (scale.z(v) for scale, v in zip(scales, values, strict=True))
        composite = (z_cum + z_drawdown + z_sortino) / 3.0
        scored.append(_row(entrant, values, (z_cum, z_drawdown, z_sortino), composite))
    scored.sort(key=lambda row: (-(row.composite or 0.0), row.name))
    unranked.sort(key=lambda row: row.name)
    return (*_with_ranks(scored), *unranked)


def _row(
    entrant: Entrant,
    values: Sequence[float | None],
    z_scores: tuple[float | None, float | None, float | None],
    composite: float | None,
) -> RankRow:
    return RankRow(
        name=entrant.name,
        is_benchmark=entrant.is_benchmark,
        cumulative_return=values[0],
        max_drawdown=values[1],
        sortino_ratio=values[2],
        z_cumulative_return=z_scores[0],
        z_max_drawdown=z_scores[1],
        z_sortino_ratio=z_scores[2],
        composite=composite,
        rank=None,
    )


def _with_ranks(rows: Sequence[RankRow]) -> list[RankRow]:
    """Competition ranks over the non-benchmark rows, which arrive sorted by composite."""
    out: list[RankRow] = []
    position = 0
    previous: tuple[float | None, int] | None = None
    for row in rows:
        if row.is_benchmark:
            out.append(row)
            continue
        position += 1
        rank = previous[1] if previous and previous[0] == row.composite else position
        previous = (row.composite, rank)
        out.append(replace(row, rank=rank))
    return out
