"""Block-bootstrap confidence intervals of the metrics panel and of the composite rank.

This module owns the stationary bootstrap (Politis and Romano, 1994) of per-period returns and
what it yields for a leaderboard: for each account, a percentile interval of every return-based
metric of the panel (`ops.evaluation.return_metrics`), of its composite (`ops.evaluation.ranking`)
and of its rank, and for each pair of accounts the share of draws in which the first account's
composite beats the second's. Resampling blocks rather than single periods keeps the serial
dependence of returns (volatility clusters, trends) inside each draw.

Rules, fixed so that a figure can be reproduced:

- **Block length.** Blocks have a geometric length with mean `block_length(n) = ceil(n ** (1/3))`
  for `n` returns (the `n^(1/3)` growth is the rate at which the optimal block length of the
  stationary bootstrap grows for the variance of a mean; 1 for up to one return, 4 for 30 to 64
  returns, 7 for 252).
- **Draw.** Each draw is `n` indices: the first uniform in `[0, n)`; each next one starts a new
  block (uniform) with probability `1 / block_length`, else continues the block (`i + 1`, wrapping
  round to 0: the circular series). Indices come from `numpy.random.default_rng(seed)` (PCG64),
  so a seed gives the same draws on every machine; the default seed is 0.
- **Joint draws.** The accounts (and the benchmark) are resampled with the *same* indices, so a
  draw keeps the cross-correlation of their returns: that is what makes the composite of a draw,
  and thus its rank and who beats whom, meaningful. This needs one set of periods: the returns
  between the NAV timestamps that every ranked account (and the benchmark) shares.
- **Interval.** The `(1 - confidence) / 2` and `(1 + confidence) / 2` quantiles (numpy's linear
  interpolation) of a metric over the draws where it is defined (`None` draws are left out and
  counted in `defined`); `None` when no draw defines it.
- **P(beat).** `p_beat[a][b]` is the share of draws in which both are ranked and `a`'s composite
  is strictly greater than `b`'s (so `p_beat[a][b] + p_beat[b][a]` is below 1 by the ties).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from openbell.ops.evaluation import return_metrics as rm
from openbell.ops.evaluation.ranking import Entrant, composite_rank
from openbell.ops.evaluation.return_metrics import Panel, Returns

#: The panel metrics that get an interval (the return-based ones; `periods` is fixed).
PANEL_METRICS: tuple[str, ...] = (
    "cumulative_return",
    "annual_return",
    "annual_volatility",
    "sharpe_ratio",
    "sortino_ratio",
    "max_drawdown",
    "calmar_ratio",
    "excess_return",
    "information_ratio",
)
#: Every metric with an interval: the panel's, then the composite and the rank.
METRICS: tuple[str, ...] = (*PANEL_METRICS, "composite", "rank")
DEFAULT_DRAWS = 1000
DEFAULT_CONFIDENCE = 0.95

Indices = npt.NDArray[np.intp]


def block_length(periods: int) -> int:
    """The mean block length for `periods` returns: `ceil(periods ** (1/3))`, at least 1."""
    if periods < 1:
        return 1
    length: int = math.ceil(float(periods) ** (1.0 / 3.0))
    # ceil of a float cube root can land one above an exact cube (64 ** (1/3) = 4.000000000000001)
    while (length - 1) ** 3 >= periods:
        length -= 1
    return max(length, 1)


def stationary_indices(
    periods: int, draws: int, *, mean_block: float, rng: np.random.Generator
) -> Indices:
    """`draws` rows of `periods` stationary-bootstrap indices into a series of `periods` values.

    See the module docstring for the rule. For each draw, the generator is asked for the
    `periods` uniform starts first, then the `periods` block-break uniforms (both as arrays), so
    a reference implementation can replay the same stream.
    """
    if periods < 1 or draws < 1:
        raise ValueError(f"periods and draws must be at least 1, got {periods} and {draws}")
    if mean_block < 1:
        raise ValueError(f"the mean block length must be at least 1, got {mean_block}")
    out = np.empty((draws, periods), dtype=np.intp)
    for draw in range(draws):
        starts = rng.integers(0, periods, size=periods)
        breaks = rng.random(periods) < 1.0 / mean_block
        row = out[draw]
        row[0] = starts[0]
        for i in range(1, periods):
            row[i] = starts[i] if breaks[i] else (row[i - 1] + 1) % periods
    return out


def returns_panel(
    returns: Returns, *, periods_per_year: float, benchmark: Returns | None = None
) -> Panel:
    """The panel of a return series (the same definitions as `return_metrics.compute_panel`,
    without timestamps: `start_at` and `end_at` are None)."""
    factor = periods_per_year
    excess = information = None
    if benchmark is not None:
        excess = rm.excess_return(returns, benchmark)
        information = rm.information_ratio(returns, benchmark, factor)
    return Panel(
        periods=int(returns.size),
        periods_per_year=factor,
        start_at=None,
        end_at=None,
        cumulative_return=rm.cum_returns_final(returns),
        annual_return=rm.annual_return(returns, factor),
        annual_volatility=rm.annual_volatility(returns, factor),
        sharpe_ratio=rm.sharpe_ratio(returns, factor),
        sortino_ratio=rm.sortino_ratio(returns, factor),
        max_drawdown=rm.max_drawdown(returns),
        calmar_ratio=rm.calmar_ratio(returns, factor),
        excess_return=excess,
        information_ratio=information,
    )


Columns = dict[str, npt.NDArray[np.float64]]


def _dispersion_rows(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row's sample standard deviation (ddof=1), exactly 0.0 for a row of equal values
    (as `return_metrics._dispersion`)."""
    std: npt.NDArray[np.float64] = np.std(matrix, axis=1, ddof=1)
    std[matrix.max(axis=1) == matrix.min(axis=1)] = 0.0
    return std


def _undefined_where(values: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_]) -> None:
    values[mask | ~np.isfinite(values)] = np.nan


def panel_columns(
    matrix: npt.NDArray[np.float64],
    *,
    periods_per_year: float,
    benchmark: npt.NDArray[np.float64] | None = None,
) -> Columns:
    """The panel metrics (`PANEL_METRICS`) of every row of `matrix` (draws x periods, at least two
    periods) at once, NaN where the metric is undefined: the definitions of
    `ops.evaluation.return_metrics`, computed along the rows (`returns_panel` is the one-row
    reference). `benchmark` has the matrix's shape."""
    factor = periods_per_year
    periods = matrix.shape[1]
    with np.errstate(all="ignore"):
        growth = np.prod(matrix + 1.0, axis=1)
        cumulative = growth - 1.0
        annual = growth ** (1.0 / (periods / factor)) - 1.0
        std = _dispersion_rows(matrix)
        mean = np.mean(matrix, axis=1)
        volatility = std * factor ** (1.0 / 2.0)
        sharpe = mean / std * math.sqrt(factor)
        _undefined_where(sharpe, std == 0)
        downside = np.sqrt(np.mean(np.square(np.clip(matrix, -np.inf, 0.0)), axis=1))
        downside = downside * math.sqrt(factor)
        sortino = mean * factor / downside
        _undefined_where(sortino, downside == 0)
        wealth = np.empty((matrix.shape[0], periods + 1), dtype=np.float64)
        wealth[:, 0] = 100.0
        wealth[:, 1:] = np.cumprod(matrix + 1.0, axis=1) * 100.0
        peak = np.fmax.accumulate(wealth, axis=1)
        drawdown = np.min((wealth - peak) / peak, axis=1)
        calmar = annual / np.abs(drawdown)
        _undefined_where(calmar, ~(drawdown < 0) | ~np.isfinite(annual))
        excess = np.full(matrix.shape[0], np.nan)
        information = np.full(matrix.shape[0], np.nan)
        if benchmark is not None:
            excess = cumulative - (np.prod(benchmark + 1.0, axis=1) - 1.0)
            active = matrix - benchmark
            tracking = _dispersion_rows(active)
            information = np.mean(active, axis=1) / tracking * math.sqrt(factor)
            _undefined_where(information, tracking == 0)
    columns: Columns = {
        "cumulative_return": cumulative,
        "annual_return": annual,
        "annual_volatility": volatility,
        "sharpe_ratio": sharpe,
        "sortino_ratio": sortino,
        "max_drawdown": drawdown,
        "calmar_ratio": calmar,
        "excess_return": excess,
        "information_ratio": information,
    }
    for values in columns.values():
        _undefined_where(values, np.zeros(values.shape, dtype=np.bool_))
    return columns


def _panel_of(columns: Columns, row: int, periods: int, factor: float) -> Panel:
    values = {
        metric: (None if math.isnan(v := float(columns[metric][row])) else v)
        for metric in PANEL_METRICS
    }
    return Panel(periods=periods, periods_per_year=factor, start_at=None, end_at=None, **values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A percentile interval of one metric over the draws that define it."""

    low: float | None
    high: float | None
    defined: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountIntervals:
    """One account's intervals, by metric name (`METRICS`)."""

    name: str
    intervals: Mapping[str, Interval]


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapResult:
    """The bootstrap of one leaderboard: its settings, each account's intervals and P(beat)."""

    draws: int
    seed: int
    confidence: float
    periods: int
    block_length: int
    accounts: tuple[AccountIntervals, ...]
    p_beat: Mapping[str, Mapping[str, float]]


def interval(values: Sequence[float | None], confidence: float) -> Interval:
    """The percentile interval of the defined values (see the module docstring)."""
    kept = [value for value in values if value is not None]
    if not kept:
        return Interval(low=None, high=None, defined=0)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.array(kept, dtype=np.float64), [tail, 1.0 - tail])
    return Interval(low=float(low), high=float(high), defined=len(kept))


def bootstrap_ranking(
    returns: Mapping[str, Returns],
    *,
    periods_per_year: float,
    benchmark: Returns | None = None,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> BootstrapResult | None:
    """Intervals of the panel, composite and rank of each account, and P(beat), by drawing the
    accounts' aligned returns (`returns`: name -> returns over the same periods) jointly.

    `benchmark`, over the same periods, is resampled alongside for excess return and the
    information ratio; it is not ranked. None when there are fewer than two periods.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    names = list(returns)
    lengths = {series.size for series in returns.values()}
    if benchmark is not None:
        lengths.add(benchmark.size)
    if len(lengths) > 1:
        raise ValueError(f"the series differ in length: {sorted(lengths)}")
    periods = lengths.pop() if lengths else 0
    if periods < 2 or not names:
        return None
    mean_block = block_length(periods)
    indices = stationary_indices(
        periods, draws, mean_block=mean_block, rng=np.random.default_rng(seed)
    )
    samples: dict[str, dict[str, list[float | None]]] = {
        name: {metric: [] for metric in METRICS} for name in names
    }
    wins = {a: dict.fromkeys(names, 0) for a in names}
    bench = None if benchmark is None else benchmark[indices]
    columns = {
        name: panel_columns(
            returns[name][indices], periods_per_year=periods_per_year, benchmark=bench
        )
        for name in names
    }
    for row in range(draws):
        panels = {name: _panel_of(columns[name], row, periods, periods_per_year) for name in names}
        ranked = composite_rank([Entrant(name=name, panel=panels[name]) for name in names])
        composite: dict[str, float | None] = {}
        for ranking in ranked:
            composite[ranking.name] = ranking.composite
            found = samples[ranking.name]
            for metric in PANEL_METRICS:
                found[metric].append(getattr(panels[ranking.name], metric))
            found["composite"].append(ranking.composite)
            found["rank"].append(None if ranking.rank is None else float(ranking.rank))
        for a in names:
            mine = composite[a]
            for b in names:
                theirs = composite[b]
                if a != b and mine is not None and theirs is not None and mine > theirs:
                    wins[a][b] += 1
    return BootstrapResult(
        draws=draws,
        seed=seed,
        confidence=confidence,
        periods=periods,
        block_length=mean_block,
        accounts=tuple(
            AccountIntervals(
                name=name,
                intervals={m: interval(samples[name][m], confidence) for m in METRICS},
            )
            for name in names
        ),
        p_beat={a: {b: wins[a][b] / draws for b in names if b != a} for a in names},
    )
