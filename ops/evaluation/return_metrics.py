"""The return-based metrics panel of one account's NAV series (DESIGN §7), as pure functions.

This module owns the conversion of a NAV series into simple returns and every statistic computed
from them: cumulative and annualised return, volatility, Sharpe, Sortino, max drawdown, Calmar, and
excess return and information ratio against a benchmark, gathered in a frozen `Panel`, and the
long-short metrics of an account allowed to short (mean gross and net exposure, borrow cost:
`LongShort`). The definitions are empyrical's by default (risk-free rate 0, sample standard
deviation with ddof=1, downside deviation over all periods with a required return of 0,
annualisation by the factor the caller passes, see `periods_per_year`); a `Convention`
(`ops.evaluation.conventions`) passed to `compute_panel` changes the standard deviation's kind and
the Sortino ratio's definition, and the caller passes the factor it names
(`conventions.annualisation_factor`). Money stays `Decimal` in the ledger; statistics are floats:
each NAV is converted to float exactly once, in `simple_returns`, and nothing after that is money. A
statistic that is undefined for its series (too few returns, zero dispersion in its denominator, no
drawdown for Calmar, no benchmark) is `None`, never NaN or infinity, and nothing here divides by
zero or raises on such a series. The trading-behaviour metrics live in
`openbell.ops.evaluation.behaviour` and the composite rank in `openbell.ops.evaluation.ranking`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from openbell.markets.domain import check_decimal, check_market, check_utc
from openbell.markets.slots import slots_per_session as scheduled_slots_per_session
from openbell.ops.evaluation.conventions import OPENBELL, Convention, SortinoKind

#: A one-dimensional array of simple returns, one per period.
Returns = npt.NDArray[np.float64]

#: Sessions a year: trading days for the stock markets, calendar days for crypto.
SESSIONS_PER_YEAR: dict[str, float] = {"us": 252.0, "cn": 252.0, "crypto": 365.0}

CADENCES: frozenset[str] = frozenset({"daily", "hourly"})
#: The median spacing of snapshots from which a series counts as daily.
DAILY_SPACING = timedelta(hours=20)


def periods_per_year(market: str, cadence: str, slots_per_session: int | None = None) -> float:
    """The annualisation factor of a NAV series sampled once per slot.

    Sessions a year (252 for "us" and "cn", 365 for "crypto") times slots per session. Pass the
    slots a session of the series actually has (`markets.slots.observed_slots_per_session`: the
    bundled US hourly bars ring six, 10:00..15:00 New York, so 252 * 6 = 1512). Without it, the
    market's live schedule for `cadence` counts them in a regular session (`slots_per_session`:
    daily 1; hourly US 7, 09:30..15:30, A-shares 4, crypto 24). Raises `ValueError` on an unknown
    market or cadence, or fewer than one slot.
    """
    check_market(market)
    if cadence not in CADENCES:
        raise ValueError(f"unknown cadence {cadence!r}; known: {sorted(CADENCES)}")
    if slots_per_session is None:
        slots_per_session = scheduled_slots_per_session(market, cadence)
    if slots_per_session < 1:
        raise ValueError(f"slots_per_session must be at least 1, got {slots_per_session}")
    return SESSIONS_PER_YEAR[market] * slots_per_session


@dataclass(frozen=True, slots=True, kw_only=True)
class NavPoint:
    """One NAV snapshot of an account: its net asset value at an aware UTC instant.

    The NAV must be positive: a return from a zero NAV is undefined, and a long-only, unlevered
    account stays above zero unless everything it holds is worth nothing.
    """

    at: datetime
    nav: Decimal

    def __post_init__(self) -> None:
        check_utc("at", self.at)
        check_decimal("nav", self.nav, positive=True)

    def __reduce__(self) -> tuple[Callable[..., NavPoint], tuple[datetime, Decimal]]:
        # Pickled as a call with its two values: a market view sent back by the web's view
        # worker (`ops.web.view_worker`) holds tens of thousands of points, and the frozen
        # dataclass's own `__setstate__` costs about five times as much per point.
        return _nav_point, (self.at, self.nav)


def _nav_point(at: datetime, nav: Decimal) -> NavPoint:
    return NavPoint(at=at, nav=nav)


@dataclass(frozen=True, slots=True, kw_only=True)
class Panel:
    """The return-based metrics of one account over one window.

    `periods` is the number of returns (NAV points minus one); `start_at` and `end_at` are the
    first and last NAV timestamps (`None` for an empty series). Every ratio is a plain fraction
    (0.05 is 5 %), annualised by `periods_per_year` where empyrical annualises. `None` means the
    statistic is undefined for this series: fewer than one return (cumulative and annual return,
    max drawdown), fewer than two returns (volatility, Sharpe, Sortino, information ratio), a
    zero denominator (Sharpe and the information ratio with zero dispersion, Sortino with no
    period below zero, Calmar with no drawdown), or no benchmark (excess return, information
    ratio). A flat NAV therefore has return 0.0, volatility 0.0, max drawdown 0.0 and `None`
    Sharpe, Sortino and Calmar.
    """

    periods: int
    periods_per_year: float
    start_at: datetime | None
    end_at: datetime | None
    cumulative_return: float | None
    annual_return: float | None
    annual_volatility: float | None
    sharpe_ratio: float | None
    sortino_ratio: float | None
    max_drawdown: float | None
    calmar_ratio: float | None
    excess_return: float | None
    information_ratio: float | None


def simple_returns(navs: Sequence[NavPoint]) -> Returns:
    """Simple returns `nav[i] / nav[i-1] - 1` between consecutive NAV points.

    This is the one place NAVs leave `Decimal`: each is converted to float once, and the returns
    are computed in float64 (statistics are floats; money stays Decimal in the ledger). Fewer
    than two points give an empty array.
    """
    values = np.array([float(point.nav) for point in navs], dtype=np.float64)
    if values.size < 2:
        return np.empty(0, dtype=np.float64)
    out: Returns = values[1:] / values[:-1] - 1.0
    return out


def _finite(value: float | np.floating[npt.NBitBase]) -> float | None:
    """The value as a float, or `None` when it is NaN or infinite."""
    result = float(value)
    return result if math.isfinite(result) else None


def _check_factor(factor: float) -> None:
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"periods_per_year must be a positive finite number, got {factor}")


def _dispersion(returns: Returns, ddof: int = 1) -> float | None:
    """Sample (ddof=1) or population (ddof=0) standard deviation; exactly 0.0 when every return
    is equal.

    As empyrical's `_zero_dispersion_std`: the float mean of identical values can differ from
    them in the last bit, leaving a residue near 1e-18 that would turn an undefined ratio into a
    huge finite one. `None` for fewer than two returns.
    """
    if returns.size < 2:
        return None
    if returns.max() == returns.min():
        return 0.0
    return float(np.std(returns, ddof=ddof))


def cum_returns_final(returns: Returns) -> float | None:
    """Compounded return over the whole series, `prod(1 + r) - 1` (empyrical, start 0)."""
    if returns.size < 1:
        return None
    return _finite(np.prod(returns + 1.0) - 1.0)


def annual_return(returns: Returns, factor: float) -> float | None:
    """Compound annual growth rate: `(1 + cum) ** (1 / (n / factor)) - 1` for n returns.

    Years are counted as periods / factor, as empyrical does, not from the timestamps.
    """
    _check_factor(factor)
    if returns.size < 1:
        return None
    ending = float(np.prod(returns + 1.0))
    num_years = returns.size / factor
    try:
        return _finite(ending ** (1.0 / num_years) - 1.0)
    except OverflowError:  # float ** float raises instead of giving inf
        return None


def annual_volatility(returns: Returns, factor: float, ddof: int = 1) -> float | None:
    """Standard deviation (sample by default, population with `ddof=0`) of the returns times
    `factor ** 0.5`.

    Exactly 0.0 when every return is equal, where empyrical reports the float residue (~1e-16).
    """
    _check_factor(factor)
    std = _dispersion(returns, ddof)
    if std is None:
        return None
    return _finite(std * factor ** (1.0 / 2.0))


def sharpe_ratio(returns: Returns, factor: float, ddof: int = 1) -> float | None:
    """Mean return over its standard deviation (sample by default), times `sqrt(factor)`;
    risk-free 0."""
    _check_factor(factor)
    std = _dispersion(returns, ddof)
    if not std:
        return None
    return _finite(float(np.mean(returns)) / std * math.sqrt(factor))


def downside_risk(returns: Returns, factor: float) -> float | None:
    """Annualised downside deviation below 0: `sqrt(mean(min(r, 0) ** 2)) * sqrt(factor)`.

    The mean runs over all periods (a period above zero counts as a zero deviation), not over
    the losing periods only, as empyrical's `downside_risk` with `required_return=0`.
    """
    _check_factor(factor)
    if returns.size < 1:
        return None
    below = np.clip(returns, -np.inf, 0.0)
    return _finite(math.sqrt(float(np.mean(np.square(below)))) * math.sqrt(factor))


def sortino_ratio(
    returns: Returns, factor: float, kind: SortinoKind = "downside-all", ddof: int = 1
) -> float | None:
    """The mean return over a downside deviation, times `sqrt(factor)`; risk-free 0.

    `kind` says which deviation: `downside-all` (empyrical: `downside_risk`, the root mean square
    of `min(r, 0)` over all periods; the annualised mean over it), `std-of-negatives`
    (AI-Trader's code: the standard deviation of the negative returns alone, with `ddof`) or
    `rms-of-negatives` (StockBench's paper: `sqrt(1/N_d * sum r^2)` over the `N_d` negative
    returns). `None` for fewer than two returns, when no period is below zero, or when the
    deviation is zero (two equal losses have no spread).
    """
    _check_factor(factor)
    if returns.size < 2:
        return None
    mean = float(np.mean(returns))
    if kind == "downside-all":
        downside = downside_risk(returns, factor)
        return _finite(mean * factor / downside) if downside else None
    negative = returns[returns < 0]
    if negative.size == 0:
        return None
    if kind == "rms-of-negatives":
        spread: float | None = math.sqrt(float(np.mean(np.square(negative))))
    else:
        spread = _dispersion(negative, ddof)
    if not spread:
        return None
    return _finite(mean / spread * math.sqrt(factor))


def max_drawdown(returns: Returns) -> float | None:
    """The deepest fall from a running peak of wealth, as a fraction `<= 0` (-0.2 is 20 % down).

    The starting wealth counts as a peak, so a first-period loss is a drawdown. 0.0 when wealth
    never falls.
    """
    if returns.size < 1:
        return None
    wealth = np.empty(returns.size + 1, dtype=np.float64)
    wealth[0] = 100.0
    wealth[1:] = np.cumprod(returns + 1.0) * 100.0
    peak = np.fmax.accumulate(wealth)
    return _finite(np.min((wealth - peak) / peak))


def calmar_ratio(returns: Returns, factor: float) -> float | None:
    """Annual return over the absolute max drawdown; `None` when there is no drawdown."""
    drawdown = max_drawdown(returns)
    growth = annual_return(returns, factor)
    if drawdown is None or growth is None or drawdown >= 0:
        return None
    return _finite(growth / abs(drawdown))


def _check_same_length(returns: Returns, benchmark: Returns) -> None:
    if returns.shape != benchmark.shape:
        raise ValueError(
            f"returns and benchmark returns differ in length: {returns.size} != {benchmark.size}"
        )


def excess_return(returns: Returns, benchmark: Returns) -> float | None:
    """Cumulative return minus the benchmark's cumulative return over the same periods.

    A difference of compounded returns (0.12 - 0.05 = 0.07), not a compounded active return.
    """
    _check_same_length(returns, benchmark)
    account = cum_returns_final(returns)
    reference = cum_returns_final(benchmark)
    if account is None or reference is None:
        return None
    return _finite(account - reference)


def information_ratio(
    returns: Returns, benchmark: Returns, factor: float, ddof: int = 1
) -> float | None:
    """Annualised information ratio: `mean(a) / std(a, ddof) * sqrt(factor)`, `a = r - b`.

    The active return `a` is the per-period difference of simple returns. With `ddof=1` this is
    empyrical's `excess_sharpe(returns, benchmark)` times `sqrt(factor)`: `excess_sharpe` is the
    same ratio per period, not annualised. `None` for fewer than two returns or when the active
    return never varies (the account tracks the benchmark exactly, or leads it by a constant).
    """
    _check_factor(factor)
    _check_same_length(returns, benchmark)
    active: Returns = returns - benchmark
    tracking_error = _dispersion(active, ddof)
    if not tracking_error:
        return None
    return _finite(float(np.mean(active)) / tracking_error * math.sqrt(factor))


def _check_series(navs: Sequence[NavPoint], benchmark: Sequence[NavPoint] | None) -> None:
    for earlier, later in itertools.pairwise(navs):
        if later.at <= earlier.at:
            raise ValueError(
                f"NAV timestamps must increase strictly: {later.at.isoformat()} follows "
                f"{earlier.at.isoformat()}"
            )
    if benchmark is not None and [p.at for p in benchmark] != [p.at for p in navs]:
        raise ValueError("the benchmark NAV series must have the account's timestamps")


def compute_panel(
    navs: Sequence[NavPoint],
    *,
    periods_per_year: float,
    benchmark: Sequence[NavPoint] | None = None,
    convention: Convention = OPENBELL,
) -> Panel:
    """The metrics panel of one account's NAV series, optionally against a benchmark, measured
    as `convention` measures (its standard deviation and Sortino; `periods_per_year` is the
    factor it names).

    `navs` are one account's snapshots over the window, in time order, sampled once per period
    (all slot snapshots, or all session-close snapshots, not a mix: the annualisation factor
    assumes a fixed sampling). `benchmark`, when given, holds the benchmark's NAV (or price) at
    exactly the same timestamps. An undefined statistic is `None` (see `Panel`); out-of-order
    timestamps, a benchmark on other timestamps or a non-positive factor raise `ValueError`, as
    those are the caller's mistakes rather than properties of the series.
    """
    _check_factor(periods_per_year)
    _check_series(navs, benchmark)
    returns = simple_returns(navs)
    factor = periods_per_year
    ddof = convention.ddof
    excess: float | None = None
    information: float | None = None
    if benchmark is not None:
        benchmark_returns = simple_returns(benchmark)
        excess = excess_return(returns, benchmark_returns)
        information = information_ratio(returns, benchmark_returns, factor, ddof)
    return Panel(
        periods=int(returns.size),
        periods_per_year=factor,
        start_at=navs[0].at if navs else None,
        end_at=navs[-1].at if navs else None,
        cumulative_return=cum_returns_final(returns),
        annual_return=annual_return(returns, factor),
        annual_volatility=annual_volatility(returns, factor, ddof),
        sharpe_ratio=sharpe_ratio(returns, factor, ddof),
        sortino_ratio=sortino_ratio(returns, factor, convention.sortino, ddof),
        max_drawdown=max_drawdown(returns),
        calmar_ratio=calmar_ratio(returns, factor),
        excess_return=excess,
        information_ratio=information,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExposurePoint:
    """One NAV snapshot's long and short market values (both >= 0) and its NAV."""

    at: datetime
    nav: Decimal
    long_value: Decimal
    short_value: Decimal

    def __post_init__(self) -> None:
        check_utc("at", self.at)
        check_decimal("long_value", self.long_value)
        check_decimal("short_value", self.short_value)


@dataclass(frozen=True, slots=True, kw_only=True)
class LongShort:
    """The long-short metrics of one account over one window (issue 16): the mean over its
    snapshots with a positive NAV of the gross exposure `(long + short) / nav` and the net
    exposure `(long - short) / nav` (signed quantity x price / NAV, summed), the largest gross
    exposure, and the borrow cost: the borrow fees charged in the window over the initial cash.
    The return panel of such an account is computed on its long-short NAV (cash + longs - shorts)
    like any other's. An exposure is `None` without a snapshot with a positive NAV."""

    mean_gross_exposure: float | None
    mean_net_exposure: float | None
    max_gross_exposure: float | None
    borrow_fees: Decimal
    borrow_cost: float | None


def long_short(
    points: Sequence[ExposurePoint], borrow_fees: Decimal, initial_cash: Decimal
) -> LongShort:
    """The `LongShort` metrics of `points` (one account's snapshots), its `borrow_fees` and its
    `initial_cash`."""
    check_decimal("borrow_fees", borrow_fees)
    gross = [float((p.long_value + p.short_value) / p.nav) for p in points if p.nav > 0]
    net = [float((p.long_value - p.short_value) / p.nav) for p in points if p.nav > 0]
    return LongShort(
        mean_gross_exposure=math.fsum(gross) / len(gross) if gross else None,
        mean_net_exposure=math.fsum(net) / len(net) if net else None,
        max_gross_exposure=max(gross) if gross else None,
        borrow_fees=borrow_fees,
        borrow_cost=float(borrow_fees / initial_cash) if initial_cash > 0 else None,
    )


def infer_cadence(timestamps: Sequence[datetime]) -> str:
    """`daily` when the median spacing of the timestamps is 20 hours or more, else `hourly`.

    Fewer than two timestamps say nothing: `daily`.
    """
    ordered = sorted(timestamps)
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    if not gaps:
        return "daily"
    return "daily" if statistics.median_low(gaps) >= DAILY_SPACING else "hourly"
