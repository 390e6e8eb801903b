"""Metric conventions as data: how each paper turns a NAV series into its figures.

This module owns `Convention`, the choices behind the return-based metrics that papers make
differently, and the four conventions openbell knows (`CONVENTIONS`, `[metrics] convention` in the
config):

- `openbell` (the default): empyrical's definitions. Sample standard deviation; Sortino over the
  downside deviation of all periods (`sqrt(mean(min(r, 0)^2))`), annualised; annualised by sessions
  a year (252, crypto 365) times the slots a session actually rang; accounts' slot snapshots, each
  valued at the slot's opening prices (open-to-open); the benchmark priced at the slots the same
  way, a basket's weights normalised to sum to one.
- `ai-trader`: AI-Trader's (arXiv 2512.10971) `tools/calculate_metrics.py`, which gives its Table
  1: population standard deviation (numpy's default); Sortino as the mean return over the
  population deviation of the negative returns alone; annualised by 252 x 6.5 = 1,638 periods for
  any hourly series, 252 for daily stocks, 365 for daily crypto; close-to-close: each slot's
  period valued at its end (its bar's close), from the value before the window's first slot; the
  benchmark valued at its bars' closes from the last close ended by the first slot, a basket in
  its published weights without normalising them (CD5's sum to 100.02 %: its base is the cash, so
  its first close reads 0.02 % high, as AI-Trader's published index does).
- `stockbench`: StockBench (arXiv 2510.02209) section 3.1: Sortino as the mean return over
  `sqrt(1/N_d * sum of r^2 over the N_d losing periods)`, not annualised (its Table 2 reads
  0.0420, a daily figure); no annualisation at all (volatility and Sharpe per period; the annual
  return column holds the mean compounded return per period); opening prices (its agents trade
  and are valued at the open); sample standard deviation (the paper states none).
- `ktd-fin`: KTD-Fin's appendix G: end-of-day NAV (close-to-close), Sharpe and the information
  ratio annualised by 252 days (sessions a year times slots, as openbell), sample standard
  deviation, empyrical's Sortino (KTD-Fin reports none).

Cumulative return and max drawdown are the same in every convention (compounded returns; the
deepest fall from a running peak, the first value counting as a peak). Nothing here computes: the
figures are `ops.evaluation.return_metrics`'s, the series `ops.reports.market_reports`'s and
`ops.evaluation.benchmark`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

StdKind = Literal["sample", "population"]
Annualisation = Literal["observed", "ai-trader", "none"]
SortinoKind = Literal["downside-all", "std-of-negatives", "rms-of-negatives"]
ReturnsKind = Literal["open-to-open", "close-to-close"]
BasketWeights = Literal["normalised", "as-published"]

#: AI-Trader's periods a year for any hourly series: 252 sessions of 6.5 hours.
AI_TRADER_HOURLY: Final = 252 * 6.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Convention:
    """How a paper measures: see the module docstring for each field's meaning."""

    name: str
    source: str
    std: StdKind
    annualisation: Annualisation
    sortino: SortinoKind
    returns: ReturnsKind
    basket_weights: BasketWeights

    @property
    def ratio_places(self) -> int:
        """The places a table shows its risk ratios with: 4 for per-period ratios (StockBench's
        Table 2 reads Sortino 0.0420), else 2."""
        return 4 if self.annualisation == "none" else 2

    @property
    def ddof(self) -> int:
        """The delta degrees of freedom of its standard deviations."""
        return 1 if self.std == "sample" else 0

    def describe(self) -> str:
        """One line naming the convention and its choices, for every report."""
        return (
            f"metrics: {self.name} convention ({self.source}): {self.std} standard deviation, "
            f"{_ANNUALISATION[self.annualisation]}, Sortino {_SORTINO[self.sortino]}, "
            f"{self.returns} returns, benchmark {_BENCHMARK[self.returns, self.basket_weights]}"
        )


_ANNUALISATION: Final = {
    "observed": "annualised by sessions a year times the slots a session rang",
    "ai-trader": "annualised by 1,638 periods (hourly), 252 (daily stocks) or 365 (daily crypto)",
    "none": "not annualised",
}
_SORTINO: Final = {
    "downside-all": "over the downside deviation of all periods",
    "std-of-negatives": "over the standard deviation of the negative returns",
    "rms-of-negatives": "over the root mean square of the negative returns",
}
_BENCHMARK: Final = {
    ("open-to-open", "normalised"): "at the slots' opening prices",
    ("close-to-close", "normalised"): "at its bars' closes",
    ("open-to-open", "as-published"): "at the slots' opening prices, weights as published",
    ("close-to-close", "as-published"): "at its bars' closes, weights as published",
}

OPENBELL: Final = Convention(
    name="openbell",
    source="empyrical's definitions",
    std="sample",
    annualisation="observed",
    sortino="downside-all",
    returns="open-to-open",
    basket_weights="normalised",
)

CONVENTIONS: Final = MappingProxyType(
    {
        convention.name: convention
        for convention in (
            OPENBELL,
            Convention(
                name="ai-trader",
                source="AI-Trader, arXiv 2512.10971, Table 1",
                std="population",
                annualisation="ai-trader",
                sortino="std-of-negatives",
                returns="close-to-close",
                basket_weights="as-published",
            ),
            Convention(
                name="stockbench",
                source="StockBench, arXiv 2510.02209, section 3.1",
                std="sample",
                annualisation="none",
                sortino="rms-of-negatives",
                returns="open-to-open",
                basket_weights="normalised",
            ),
            Convention(
                name="ktd-fin",
                source="KTD-Fin, appendix G",
                std="sample",
                annualisation="observed",
                sortino="downside-all",
                returns="close-to-close",
                basket_weights="normalised",
            ),
        )
    }
)

ConventionName = Literal["openbell", "ai-trader", "stockbench", "ktd-fin"]


def convention_named(name: str) -> Convention:
    """The convention called `name`; `ValueError` naming the known ones otherwise."""
    found = CONVENTIONS.get(name)
    if found is None:
        raise ValueError(f"unknown metrics convention {name!r}; known: {', '.join(CONVENTIONS)}")
    return found


def annualisation_factor(
    convention: Convention, market: str, cadence: str, observed: float
) -> float:
    """The periods a year `convention` annualises by: `observed` (openbell's
    `return_metrics.periods_per_year` of the series) where it counts slots, AI-Trader's fixed
    factors, or 1 where it does not annualise."""
    if convention.annualisation == "observed":
        return observed
    if convention.annualisation == "none":
        return 1.0
    if cadence == "hourly":
        return AI_TRADER_HOURLY
    return 365.0 if market == "crypto" else 252.0
