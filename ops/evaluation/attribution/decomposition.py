"""An account's return split into market, style, selection and trading parts, exactly.

This module owns the decomposition and its window sum. A period runs from one slot snapshot to
the next; its `total` is the NAV's simple return, and `weights` are the held symbols' values over
the NAV at the period's start (cash is the rest, and earns nothing). With the period's
cross-section (`cross_section.regress`: `r_i = market + sum_s x_is f_s + u_i`), over the held
symbols with a return in the period:

- `market`  = `sum_i w_i * market` (the market factor times the invested weight);
- `styles[s]` = `(sum_i w_i x_is) * f_s`, the book's exposure to style `s` times its return;
- `selection` = `sum_i w_i u_i`, the held symbols' specific returns;
- `trading` = `total - sum_i w_i r_i`: what the start-of-period holdings' price returns do not
  explain: fees and slippage of the trades at the period's end, dividends and other corporate
  actions, holdings without a price, and marks that differ from the replayed quotes.

By construction `market + sum(styles) + selection + trading = total` in exact arithmetic; in
floats it holds to about 1e-16 (the property tests check 1e-12). Over a window the per-period
parts are linked by Carino's method: with `R = prod(1 + r_t) - 1`, `k_t = ln(1 + r_t) / r_t`
and `K = ln(1 + R) / R` (each 1 at a zero return), a part's window contribution is
`sum_t c_t * k_t / K`; the linked parts sum to `R`, the compounded return, with no residual.
The results hold plain dicts (typed read-only), so they pickle: the web computes them in its
view worker process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from openbell.ops.evaluation.attribution.cross_section import CrossSection
from openbell.ops.evaluation.attribution.exposures import STYLE_FACTORS


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodAttribution:
    """One period's parts (fractions of the NAV at `start_at`), the book's style exposures and
    invested weight, and the styles not estimated in the period, with why."""

    start_at: datetime
    end_at: datetime
    total: float
    market: float
    styles: Mapping[str, float]
    selection: float
    trading: float
    invested: float
    exposures: Mapping[str, float]
    dropped: Mapping[str, str]

    @property
    def parts_sum(self) -> float:
        """market + every style + selection + trading: `total`, to rounding."""
        return self.market + math.fsum(self.styles.values()) + self.selection + self.trading


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowAttribution:
    """The periods and their Carino-linked window parts (summing to `total`, the compounded
    return); each style's mean book exposure over the periods that estimated it, and in how many
    periods it was not estimated (`dropped_periods`)."""

    periods: tuple[PeriodAttribution, ...]
    total: float
    market: float
    styles: Mapping[str, float]
    selection: float
    trading: float
    mean_exposures: Mapping[str, float]
    dropped_periods: Mapping[str, int]

    @property
    def parts_sum(self) -> float:
        """market + every style + selection + trading: `total`, to rounding."""
        return self.market + math.fsum(self.styles.values()) + self.selection + self.trading


def attribute_period(
    *,
    start_at: datetime,
    end_at: datetime,
    total: float,
    weights: Mapping[str, float],
    section: CrossSection,
    skipped: Mapping[str, str] | None = None,
) -> PeriodAttribution:
    """The parts of one period (see the module docstring); `skipped` adds styles the exposures
    never had (size and value without fundamentals) to those the cross-section dropped."""
    index = {symbol: row for row, symbol in enumerate(section.symbols)}
    held = [
        (index[symbol], weight)
        for symbol, weight in sorted(weights.items())
        if symbol in index and not math.isnan(section.returns[index[symbol]])
    ]
    invested = math.fsum(weight for _, weight in held)
    exposures = {
        name: math.fsum(weight * float(section.exposures[row, column]) for row, weight in held)
        for column, name in enumerate(section.factors)
    }
    held_return = math.fsum(weight * float(section.returns[row]) for row, weight in held)
    return PeriodAttribution(
        start_at=start_at,
        end_at=end_at,
        total=total,
        market=invested * section.market,
        styles={name: exposures[name] * section.styles[name] for name in section.factors},
        selection=math.fsum(weight * float(section.residuals[row]) for row, weight in held),
        trading=total - held_return,
        invested=invested,
        exposures=dict(exposures),
        dropped={**(skipped or {}), **section.dropped},
    )


def _carino(value: float) -> float:
    return 1.0 if value == 0 else math.log1p(value) / value


def link(periods: Sequence[PeriodAttribution]) -> WindowAttribution:
    """The window's parts: each period's parts linked by Carino's method (module docstring)."""
    growth = 1.0
    for period in periods:
        growth *= 1.0 + period.total
    total = growth - 1.0
    scale = _carino(total)
    factors = [_carino(period.total) / scale for period in periods]
    names = [name for name in STYLE_FACTORS if any(name in p.styles for p in periods)]

    def linked(part: Sequence[float]) -> float:
        return math.fsum(c * k for c, k in zip(part, factors, strict=True))

    estimated = {
        name: [p.exposures[name] for p in periods if name in p.exposures] for name in names
    }
    dropped_names = [n for n in STYLE_FACTORS if any(n in p.dropped for p in periods)]
    return WindowAttribution(
        periods=tuple(periods),
        total=total,
        market=linked([p.market for p in periods]),
        styles={name: linked([p.styles.get(name, 0.0) for p in periods]) for name in names},
        selection=linked([p.selection for p in periods]),
        trading=linked([p.trading for p in periods]),
        mean_exposures={name: math.fsum(found) / len(found) for name, found in estimated.items()},
        dropped_periods={
            name: sum(1 for p in periods if name in p.dropped) for name in dropped_names
        },
    )
