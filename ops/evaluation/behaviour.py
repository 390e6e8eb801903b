"""Trading-behaviour metrics of one account (DESIGN §7), as pure functions of ledger facts.

This module owns the metrics that describe how an agent trades rather than what its NAV did:
turnover, HHI concentration, cash ratio, number of trades, share of cycles without a trade,
rejection rate, the calibration (expected calibration error and Brier score) of the confidence it
attaches to orders, and Herculean's behavioural metrics (Appendix H.2): hold share, switch rate,
reactivity, persistence, revision rate and protocol completion (one rule per agent kind), beside
openbell's own weight reactivity. The caller reads the ledger and passes plain typed values (Decimal
amounts, `CycleActivity`, `Forecast`); nothing here touches the store. Amounts are summed exactly in
`Decimal` and only the final ratio becomes a float (statistics are floats, money is not). A metric
that is undefined for its input (no cycles, no orders, no positions, no forecasts, a zero
denominator) is `None`; nothing here divides by zero.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from openbell.markets.domain import check_decimal
from openbell.ops.evaluation.stats import Floats, spearman

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


def annual_turnover(turnover: float | None, steps: int, periods_per_year: float) -> float | None:
    """A window's `turnover` scaled to a year: its mean per decision step (`steps`, the slots of
    the window) times `periods_per_year` (KTD-Fin's "scaled to a 252-day year" for a daily
    series). `None` without a turnover or a step."""
    if turnover is None or steps < 1:
        return None
    return turnover / steps * periods_per_year


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


# -- Herculean's behavioural metrics --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PositionChange:
    """What one decision cycle did to the book: the symbols held before and after it, and the
    net signed quantity it traded per symbol (buys positive; a symbol bought and sold back in
    the same cycle nets to zero)."""

    held_before: frozenset[str]
    held_after: frozenset[str]
    net_quantities: Mapping[str, Decimal]


def hold_share(changes: Sequence[PositionChange]) -> float | None:
    """The share of cycles that left every position as it was: no symbol's net traded quantity
    is non-zero (a cycle without a fill, or whose fills net out). `None` without cycles."""
    if not changes:
        return None
    held = sum(1 for change in changes if not any(change.net_quantities.values()))
    return held / len(changes)


def switch_rate(changes: Sequence[PositionChange]) -> float | None:
    """The share of cycles after which the set of held symbols differs from the set before: a
    symbol entered or left the book (long-only, so this is also every flip between holding a
    symbol and not). Resizing a position is not a switch. `None` without cycles."""
    if not changes:
        return None
    switched = sum(1 for change in changes if change.held_before != change.held_after)
    return switched / len(changes)


#: The fewest (step, return) pairs a correlation is computed from.
MIN_REACTIONS = 3


def weight_reactivity(
    weight_changes: Sequence[float], previous_returns: Sequence[float]
) -> float | None:
    """openbell's own reactivity (before Herculean's was built): the Pearson correlation of weight
    changes against the previous period's returns, pooled over every (cycle, symbol) pair:
    `weight_changes[i]` is the weight a cycle traded in a symbol (net signed notional over NAV)
    and `previous_returns[i]` that symbol's return over the period that ended at the cycle's
    slot. Above 0 the agent buys what just rose (momentum), below 0 what just fell (contrarian).
    `None` for fewer than `MIN_REACTIONS` pairs or when either side never varies; a value that is
    not finite raises `ValueError`."""
    if len(weight_changes) != len(previous_returns):
        raise ValueError(
            f"{len(weight_changes)} weight changes but {len(previous_returns)} returns"
        )
    if not (
        np.isfinite(np.asarray(weight_changes, dtype=float)).all()
        and np.isfinite(np.asarray(previous_returns, dtype=float)).all()
    ):
        raise ValueError("weight changes and returns must be finite")
    if len(weight_changes) < MIN_REACTIONS:
        return None
    xs, ys = weight_changes, previous_returns
    mean_x, mean_y = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    # The deviations once, each sum's terms made by `map` (the same terms, exactly summed).
    dx = [x - mean_x for x in xs]
    dy = [y - mean_y for y in ys]
    sxy = math.fsum(map(operator.mul, dx, dy))
    sxx = math.fsum(map(pow, dx, itertools.repeat(2)))
    syy = math.fsum(map(pow, dy, itertools.repeat(2)))
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


# Herculean's panel (Appendix H.2) reads each trajectory, one account's decisions about one
# symbol step by step, as a code w_t in [-1, 1]: Buy +1, Hold 0, Sell -1 for a trading step, a
# rating's exposure for a report. Each statistic is computed per trajectory and averaged over the
# trajectories where it is defined, as the paper averages over an agent's assets.

#: The width of the code's range [-1, 1]: the largest change between two steps.
CODE_RANGE = 2


def action_code(net_quantity: Decimal) -> int:
    """Herculean's action code of one step in one symbol: Buy +1 (the step bought, or covered,
    more than it sold or shorted), Sell -1 (the other way), Hold 0 (no trade, or trades that net
    to zero)."""
    if not net_quantity.is_finite():
        raise ValueError(f"a net quantity must be finite, got {net_quantity}")
    return (net_quantity > 0) - (net_quantity < 0)


def _mean_defined(values: Sequence[float | None]) -> float | None:
    defined = [value for value in values if value is not None]
    return math.fsum(defined) / len(defined) if defined else None


def _checked_codes(codes: Floats) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
    found = np.asarray(codes, dtype=float)
    wrong = ~(np.isfinite(found) & (np.abs(found) <= 1.0))
    if wrong.any():
        raise ValueError(f"a code is in [-1, 1], got {found[wrong][0]}")
    return found


def reactivity(
    trajectories: Sequence[Sequence[tuple[float, float]] | npt.NDArray[Any]],
) -> float | None:
    """Herculean's reactivity: per trajectory, Spearman's rank correlation of the code against a
    return at each step (`(code, return)` pairs: the steps where the return is priced), averaged
    over the trajectories where it is defined (at least `MIN_REACTIONS` pairs, both sides
    varying). Against the trailing 5-period return it is the paper's reactivity (above 0 the
    agent buys what has risen); against the next period's return, whether its decisions
    anticipate the move. `None` when no trajectory has one."""
    values: list[float | None] = []
    for pairs in trajectories:
        found = np.asarray(pairs, dtype=float)  # an array of (code, return) rows taken as it is
        if len(found) == 0:
            values.append(None)
            continue
        if found.ndim != 2 or found.shape[1] != 2:
            raise ValueError("a trajectory is a sequence of (code, return) pairs")
        codes, returns = _checked_codes(found[:, 0]), found[:, 1]
        if not np.isfinite(returns).all():
            raise ValueError("returns must be finite")
        values.append(spearman(codes, returns) if len(found) >= MIN_REACTIONS else None)
    return _mean_defined(values)


def persistence(trajectories: Sequence[Sequence[float]]) -> float | None:
    """Herculean's persistence: one minus the normalized turnover of the codes. A trajectory's
    normalized turnover is the mean of `|w_t - w_(t-1)| / CODE_RANGE` over its consecutive steps
    (a Buy after a Sell is 1, after a Hold 0.5); the result is averaged over the trajectories of
    two steps or more. `None` when there are none."""
    values: list[float | None] = []
    for codes in trajectories:
        found = _checked_codes(codes)
        if len(found) < 2:
            values.append(None)
            continue
        values.append(1.0 - float(np.abs(np.diff(found)).mean()) / CODE_RANGE)
    return _mean_defined(values)


def revision_rate(trajectories: Sequence[Sequence[str | None]]) -> float | None:
    """Herculean's revision rate (Market Insights): per trajectory, the share of consecutive
    pairs of committed reports `(t-1, t)` whose ratings differ, `Pr[g_t != g_(t-1)]`; a step
    without a committed report (None) pairs with neither neighbour. Averaged over the
    trajectories with at least one pair; `None` when there are none."""
    values: list[float | None] = []
    for ratings in trajectories:
        pairs = [(a, b) for a, b in itertools.pairwise(ratings) if a is not None and b is not None]
        values.append(sum(a != b for a, b in pairs) / len(pairs) if pairs else None)
    return _mean_defined(values)


# -- Protocol completion, one rule per agent kind ----------------------------------------------


#: The reasons an LLM agent's loop ends within the protocol: the model called `finish`, or it
#: answered and its decision mode acted on the answer (the mode then calls `finish`). Not among
#: them: a budget, a refusal, and `invalid_answer` (a structured answer that failed validation
#: every time: the mode finished the cycle with no trade).
COMPLETE_STOPS: frozenset[str | None] = frozenset({None, "finished", "answered"})
#: The outcome of a strategy run that gave valid weights (`store.strategy_runs`).
STRATEGY_OK = "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolStep:
    """How one cycle (a step) ended, as the ledger tells it: `done` (its status);
    `agent_finished` (`finish` was called by the agent, or by its decision mode on its answer,
    not by openbell in its place); `stop_reason` (why an LLM agent's loop ended: `finished`,
    `answered`, `invalid_answer` or a budget; None without a loop); `reported` (a rating agent
    stored a valid report: its `ratings` row); `strategy_outcome` (the outcome of the cycle's
    strategy run, `ok` when it gave valid weights; None without one)."""

    done: bool
    agent_finished: bool = False
    stop_reason: str | None = None
    reported: bool = False
    strategy_outcome: str | None = None


def llm_submitted(step: ProtocolStep) -> bool:
    """An LLM agent (any decision mode): the cycle is done, `finish` was the model's (or its
    mode's, acting on a valid answer), and the loop stopped because of that, not because of a
    budget (turns, tool calls, tokens, wall time), a refusal, or answers that all failed the
    mode's validation."""
    return step.done and step.agent_finished and step.stop_reason in COMPLETE_STOPS


def outside_submitted(step: ProtocolStep) -> bool:
    """An outside agent (`mcp`, `command`): the cycle is done and the agent called `finish`
    itself (not openbell at its deadline)."""
    return step.done and step.agent_finished


def rating_submitted(step: ProtocolStep) -> bool:
    """A rating agent: the cycle is done with a valid report stored (an answer that never
    parsed fails the cycle, and a cycle without bars to rate stores none)."""
    return step.done and step.reported


def strategy_submitted(step: ProtocolStep) -> bool:
    """A strategy-code agent: the cycle is done and its strategy's run gave valid weights (a
    refused writing fails the cycle; a run that errs, or whose weights are invalid, holds)."""
    return step.done and step.strategy_outcome == STRATEGY_OK


def plugin_submitted(step: ProtocolStep) -> bool:
    """A Python plug-in (any other kind): the cycle is done (its `decide` returned)."""
    return step.done


def protocol_completion(
    steps: Sequence[ProtocolStep], submitted: Callable[[ProtocolStep], bool]
) -> float | None:
    """Herculean's protocol completion: the share of steps with a valid submission, by the
    agent kind's rule `submitted` (one of the `*_submitted` functions). A skipped, failed,
    interrupted or missed cycle never counts. `None` without steps."""
    if not steps:
        return None
    return sum(1 for step in steps if submitted(step)) / len(steps)
