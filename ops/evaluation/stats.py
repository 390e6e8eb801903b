"""The small statistics the reports share: Spearman's rank correlation, Student's t tail, the
binomial tail and its exact (Clopper-Pearson) interval, and an ordinary least-squares regression
of one variable on another with fixed effects.

This module owns the formulas, so that the behavioural metrics (`ops.evaluation.behaviour`), the
ratings' calibration (`ops.evaluation.rating_report`) and the quality-versus-return regression
(`ops.evaluation.insights_report`) compute them one way. Inputs are floats (statistics, not money);
a statistic that is undefined for its input (too few points, no spread, no degrees of freedom left)
is `None`.

`ols`: y = a + b x + the fixed effects (one dummy per level of each factor but its first) + e,
solved by least squares (`numpy.linalg.lstsq`). It gives the slope `b`, its standard error
(`sqrt(s^2 / RSS_x)`, `s^2` the residual sum of squares over `n - rank(X)` and `RSS_x` that of x
regressed on the rest: `[(X'X)^-1]_bb` however the effects nest), the t statistic
`b / se`, its two-sided p-value from Student's t with `n - rank(X)` degrees of freedom, and the R^2
of the whole model (`1 - RSS / TSS`), as statsmodels' `OLS(...).fit()` reports them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

_BETA_ITERATIONS = 300
_BETA_EPSILON = 1e-15
_TINY = 1e-300
#: x's residual sum of squares, relative to its own, below which it has no spread left.
_SPREAD = 1e-12


#: A series of floats: a sequence, or a one-dimensional array.
Floats = Sequence[float] | npt.NDArray[Any]


def spearman(xs: Floats, ys: Floats) -> float | None:
    """Spearman's rank correlation of `xs` and `ys` (average ranks for ties: the Pearson
    correlation of the ranks, as `scipy.stats.spearmanr` computes it); None with fewer than two
    pairs or when either side has no spread."""
    if len(xs) != len(ys):
        raise ValueError("spearman needs pairs")
    if len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    rx -= rx.mean()
    ry -= ry.mean()
    vx, vy = float(rx @ rx), float(ry @ ry)
    if vx == 0 or vy == 0:
        return None
    return max(-1.0, min(1.0, float(rx @ ry) / math.sqrt(vx * vy)))


def _ranks(values: Floats) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
    # One sort: a run of equal values in sorted order (the positions `start .. end - 1`) shares
    # the average of the 1-based ranks it spans, `(start + 1 + end) / 2`; a market view ranks
    # thousands of short trajectories, where `np.unique`'s extra passes cost a third more. NaNs
    # sort last and are one run, as `np.unique` groups them.
    found = np.asarray(values, dtype=float)
    order = np.argsort(found, kind="stable")
    ordered = found[order]
    first = np.empty(len(found), dtype=bool)
    first[:1] = True
    missing = np.isnan(ordered)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    first[1:] &= ~(missing[1:] & missing[:-1])
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], len(found))
    ranks = np.empty(len(found))
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


def ranks(values: Sequence[float]) -> list[float]:
    """The 1-based ranks of `values`, ties given the average of the ranks they span."""
    return [float(rank) for rank in _ranks(values)]


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _BETA_ITERATIONS + 1):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _BETA_EPSILON:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and x in [0, 1]."""
    if a <= 0 or b <= 0 or not 0.0 <= x <= 1.0:
        raise ValueError(f"I_x(a, b) needs a, b > 0 and x in [0, 1], got {a}, {b}, {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def binomial_upper_tail(hits: int, n: int, p: float) -> float:
    """P(X >= hits) for X ~ Binomial(n, p): I_p(hits, n - hits + 1), exactly (1 at 0 hits)."""
    if not 0 <= hits <= n or not 0.0 <= p <= 1.0:
        raise ValueError(f"need 0 <= hits <= n and p in [0, 1], got {hits}, {n}, {p}")
    if hits == 0:
        return 1.0
    return regularized_beta(hits, n - hits + 1, p)


def clopper_pearson(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion at `level`: the
    p whose upper tail P(X >= hits) is (1 - level) / 2, and the p whose lower tail
    P(X <= hits) is; each end found by bisection on the incomplete beta to 1e-12. (0, 1) when
    `n` is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= hits <= n or not 0.0 < level < 1.0:
        raise ValueError(f"need 0 <= hits <= n and level in (0, 1), got {hits}, {n}, {level}")
    tail = (1.0 - level) / 2.0
    low = 0.0 if hits == 0 else _bisect(lambda p: binomial_upper_tail(hits, n, p) - tail)
    # P(X <= hits) = 1 - P(X >= hits + 1), decreasing in p.
    high = (
        1.0 if hits == n else _bisect(lambda p: tail - (1.0 - binomial_upper_tail(hits + 1, n, p)))
    )
    return low, high


def _bisect(increasing: Callable[[float], float]) -> float:
    """The root in [0, 1] of an increasing function, by bisection."""
    low, high = 0.0, 1.0
    while high - low > 1e-12:
        middle = (low + high) / 2.0
        if increasing(middle) < 0:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def t_two_sided_p(t: float, df: float) -> float:
    """The two-sided p-value of `t` under Student's t with `df` degrees of freedom:
    P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / 2.0, 0.5, df / (df + t * t))


@dataclass(frozen=True, slots=True, kw_only=True)
class Regression:
    """The slope of y on x (with the fixed effects), its standard error, t statistic and
    two-sided p-value, the model's R^2, the observations and the residual degrees of freedom."""

    n: int
    slope: float
    stderr: float | None
    t_stat: float | None
    p_value: float | None
    r_squared: float | None
    df_resid: int
    fixed_effects: tuple[str, ...]


def _dummies(levels: Sequence[str]) -> list[list[float]]:
    """One 0/1 column per level of `levels` but the first (in sorted order)."""
    kept = sorted(set(levels))[1:]
    return [[1.0 if level == one else 0.0 for level in levels] for one in kept]


def ols(
    ys: Sequence[float],
    xs: Sequence[float],
    fixed_effects: Mapping[str, Sequence[str]] | None = None,
) -> Regression | None:
    """The least-squares regression of `ys` on `xs` with an intercept and the fixed effects (a
    factor name -> each observation's level); see the module docstring. None with fewer than
    two observations, an x without spread once the effects are absorbed, or no residual degree
    of freedom."""
    n = len(ys)
    if len(xs) != n:
        raise ValueError(f"{n} ys but {len(xs)} xs")
    factors = dict(fixed_effects or {})
    for name, levels in factors.items():
        if len(levels) != n:
            raise ValueError(f"fixed effect {name!r} has {len(levels)} levels for {n} points")
    if n < 2 or not all(math.isfinite(v) for v in (*ys, *xs)):
        return None
    others = [[1.0] * n]
    for name in sorted(factors):
        others += _dummies(factors[name])
    controls = np.array(others, dtype=float).T
    target, x = np.array(ys, dtype=float), np.array(xs, dtype=float)
    # Frisch-Waugh-Lovell: the slope is that of y's residual on x's residual, each regressed on
    # the intercept and the effects (a level nested in another factor's costs nothing).
    x_left = x - controls @ np.linalg.lstsq(controls, x, rcond=None)[0]
    sxx = float(x_left @ x_left)
    rank = int(np.linalg.matrix_rank(controls)) + 1
    df_resid = n - rank
    if sxx <= _SPREAD * max(1.0, float(x @ x)) or df_resid < 1:
        # x has no spread once the effects are absorbed, or nothing is left to estimate the
        # error from: the slope is not identified.
        return None
    design = np.column_stack([controls, x])
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    residuals = target - design @ coefficients
    rss = float(residuals @ residuals)
    tss = float(((target - target.mean()) ** 2).sum())
    slope = float(coefficients[-1])
    stderr = math.sqrt(rss / df_resid / sxx) if rss > 0 else None
    t_stat = slope / stderr if stderr else None
    return Regression(
        n=n,
        slope=slope,
        stderr=stderr,
        t_stat=t_stat,
        p_value=None if t_stat is None else t_two_sided_p(t_stat, df_resid),
        r_squared=None if tss == 0 else 1.0 - rss / tss,
        df_resid=df_resid,
        fixed_effects=tuple(sorted(factors)),
    )
