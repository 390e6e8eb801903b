"""Trading-behaviour metrics of one account (DESIGN §7), as pure functions of ledger facts.

This module owns the metrics that describe how an agent trades rather than what its NAV did:
turnover, HHI concentration, cash ratio, number of trades, share of cycles without a trade,
rejection rate, and the calibration (expected calibration error and Brier score) of the
confidence it attaches to orders. The caller reads the ledger and passes plain typed values
(Decimal amounts, `CycleActivity`, `Forecast`); nothing here touches the store. Amounts are
summed exactly in `Decimal` and only the final ratio becomes a float (statistics are floats,
money is not). A metric that is undefined for its input (no cycles, no orders, no positions,
no forecasts, a zero denominator) is `None`; nothing here divides by zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from openbell.markets.domain import check_decimal

#: Equal-width confidence bins for the expected calibration error.
CALIBRATION_BINS = 10


def turnover(traded_notionals: Sequence[Decimal], navs: Sequence[Decimal]) -> float | None:
    """Total traded notional over the average NAV, for one window (not annualised).

    `traded_notionals` are the notionals of every fill in the window, buys and sells alike
    (unsigned, before fees); `navs` are the account's NAV snapshots over the same window, whose
    arithmetic mean is the denominator. A buy of 1000 and a sell of 500 on an average NAV of
    10000 is a turnover of 0.15. `None` without NAV snapshots or with an average NAV of zero.
    """
    for notional in traded_notionals:
        check_decimal("traded notional", notional)
    for nav in navs:
        check_decimal("nav", nav)
    if not navs:
        return None
    average_nav = sum(navs, Decimal(0)) / len(navs)
    if average_nav == 0:
        return None
    return float(sum(traded_notionals, Decimal(0)) / average_nav)


def hhi(position_values: Sequence[Decimal]) -> float | None:
    """Herfindahl-Hirschman concentration of the positions' weights at one snapshot.

    The weights are each position's market value over the total value of the positions (cash
    excluded: `cash_ratio` reports it), so the index runs from 1/n for n equal positions to 1.0
    for a single one. `None` when nothing is held.
    """
    for value in position_values:
        check_decimal("position value", value)
    total = sum(position_values, Decimal(0))
    if total == 0:
        return None
    return float(sum(((value / total) ** 2 for value in position_values), Decimal(0)))


def cash_ratio(cash: Decimal, nav: Decimal) -> float | None:
    """The share of NAV held as cash at one snapshot; `None` for a NAV of zero."""
    check_decimal("cash", cash)
    check_decimal("nav", nav)
    if nav == 0:
        return None
    return float(cash / nav)


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleActivity:
    """What one decision cycle did: orders placed, how many were rejected, fills made."""

    orders: int
    rejections: int
    fills: int

    def __post_init__(self) -> None:
        for name in ("orders", "rejections", "fills"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.rejections > self.orders:
            raise ValueError(f"{self.rejections} rejections exceed {self.orders} orders")


def trade_count(cycles: Sequence[CycleActivity]) -> int:
    """The number of trades (fills) over the cycles."""
    return sum(cycle.fills for cycle in cycles)


def no_trade_share(cycles: Sequence[CycleActivity]) -> float | None:
    """The share of cycles that ended without a fill; `None` without cycles."""
    if not cycles:
        return None
    return sum(1 for cycle in cycles if cycle.fills == 0) / len(cycles)


def rejection_rate(cycles: Sequence[CycleActivity]) -> float | None:
    """Rejected orders over placed orders, across the cycles; `None` if no order was placed."""
    orders = sum(cycle.orders for cycle in cycles)
    if orders == 0:
        return None
    return sum(cycle.rejections for cycle in cycles) / orders


@dataclass(frozen=True, slots=True, kw_only=True)
class Forecast:
    """An order's stated confidence in [0, 1] and whether it came true.

    What "came true" means (say, the position gained over the next session) is the caller's
    definition; calibration only compares the two.
    """

    confidence: float
    outcome: bool

    def __post_init__(self) -> None:
        if not (math.isfinite(self.confidence) and 0.0 <= self.confidence <= 1.0):
            raise ValueError(f"confidence must be within [0, 1], got {self.confidence}")
        if not isinstance(self.outcome, bool):
            raise TypeError(f"outcome must be a bool, got {type(self.outcome).__name__}")


def _bin_of(confidence: float, bins: int) -> int:
    """Bin k holds confidences in [k / bins, (k + 1) / bins); the last bin also holds 1.0."""
    return min(int(confidence * bins), bins - 1)


def expected_calibration_error(
    forecasts: Sequence[Forecast], bins: int = CALIBRATION_BINS
) -> float | None:
    """Expected calibration error over equal-width confidence bins (10 by default).

    `ECE = sum over bins of (n_bin / n) * |mean confidence in bin - share true in bin|`; empty
    bins contribute nothing. 0.0 is perfectly calibrated. `None` without forecasts.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if not forecasts:
        return None
    confidences: list[list[float]] = [[] for _ in range(bins)]
    outcomes: list[list[float]] = [[] for _ in range(bins)]
    for forecast in forecasts:
        k = _bin_of(forecast.confidence, bins)
        confidences[k].append(forecast.confidence)
        outcomes[k].append(1.0 if forecast.outcome else 0.0)
    gaps = (
        len(conf) * abs(math.fsum(conf) / len(conf) - math.fsum(hit) / len(hit))
        for conf, hit in zip(confidences, outcomes, strict=True)
        if conf
    )
    return math.fsum(gaps) / len(forecasts)


def brier_score(forecasts: Sequence[Forecast]) -> float | None:
    """Mean squared gap between confidence and outcome (1 if true, else 0); `None` if empty.

    0.0 is a perfect forecaster, 0.25 one that always says 0.5, 1.0 one confidently wrong.
    """
    if not forecasts:
        return None
    squares = ((f.confidence - (1.0 if f.outcome else 0.0)) ** 2 for f in forecasts)
    return math.fsum(squares) / len(forecasts)
