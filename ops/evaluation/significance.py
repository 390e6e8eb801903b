"""The significance suite of a leaderboard's returns, as pure functions.

This module owns the statistics that say whether a row's figures can be told apart from luck:
the probabilistic and deflated Sharpe ratios and the minimum track record length (Bailey and
López de Prado, "The Sharpe Ratio Efficient Frontier", 2012, and "The Deflated Sharpe Ratio",
2014), a paired sign-flip permutation test of one return series against another with Holm's
step-down correction across a board, and the entry-aligned first 7/30/90-day returns of an
account. The return series are `ops.evaluation.return_metrics.Returns` (floats, made from Decimal
NAVs once in `simple_returns`); nothing here reads a clock, a ledger or the network.

Definitions, fixed so that a figure can be reproduced:

- **Sharpe.** Per period, not annualised: the mean return over its sample standard deviation
  (ddof=1), risk-free 0 (the leaderboard's Sharpe divided by `sqrt(periods_per_year)`).
  Skewness `g3` and kurtosis `g4` are the population moments (kurtosis not in excess: 3 for a
  normal), as in the papers.
- **PSR(SR*)** `= Phi((SR - SR*) sqrt(T - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2))` for `T`
  returns: the probability that the true Sharpe exceeds `SR*`.
- **DSR** is PSR at `SR* = sqrt(V) ((1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e)))`,
  the expected maximum Sharpe of `N` independent trials whose Sharpes have variance `V`
  (`gamma` is Euler-Mascheroni's constant). On a board `N` is the number of accounts compared
  (agents, their seeded variants and the baselines) and `V` the sample variance of their
  per-period Sharpes; with `N < 2` the expected maximum is 0 and DSR is PSR(0).
- **MinTRL** `= 1 + (1 - g3 SR + (g4 - 1) / 4 SR^2) (z / (SR - SR*))^2`, `z = Phi^-1(1 - alpha)`:
  the returns needed for PSR(SR*) to reach `1 - alpha`. It is undefined (`None`: never) when the
  observed Sharpe is not above `SR*`; an account with fewer returns than it is **immature**.
- **Permutation test.** The paired differences `d_t = a_t - b_t` over the periods both series
  share; under the null that `a` and `b` are exchangeable within each period, every `d_t` is as
  likely to have either sign. The statistic is the mean of `d`; its one-sided p-value (`a` beats
  `b`) is `(1 + #{draws with mean >= observed}) / (1 + draws)` over `draws` random sign flips
  (one bit of `Generator.bytes` a period, most significant first) from `numpy.random.default_rng`
  seeded by the board's seed and the two names (`pair_seed`), so the smallest p-value is
  `1 / (1 + draws)` and a seed gives the same answer on every machine. The flips treat the
  periods as independent: serial dependence in the differences makes the test somewhat
  liberal.
- **Holm.** The p-values of every test on a board, sorted ascending, are adjusted to
  `max_{j<=i} min(1, (m - j + 1) p_(j))` (Holm 1979): the family-wise error rate across the board
  stays at most `alpha`, whatever the dependence between the tests.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from statistics import NormalDist
from typing import Final

import numpy as np

from openbell.ops.evaluation.return_metrics import NavPoint, Returns, simple_returns

#: Euler-Mascheroni's constant, in the expected maximum of N normal Sharpes.
EULER_GAMMA = 0.5772156649015329
DEFAULT_ALPHA = 0.05
DEFAULT_PERMUTATIONS = 10_000
#: The entry-aligned windows, in calendar days from an account's first snapshot.
ENTRY_DAYS: tuple[int, ...] = (7, 30, 90)
#: Sign-flip draws made at once: bounds the memory of a long series to a few MB.
_CHUNK = 1_000
#: The eight bits of every byte value, high bit first, as 0.0 or 1.0: `_BYTE_BITS[b, k]`.
_BYTE_BITS: Final = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(
    np.float64
)
_NORMAL = NormalDist()


@dataclass(frozen=True, slots=True, kw_only=True)
class Moments:
    """The per-period Sharpe, skewness and kurtosis (not excess) of `periods` returns."""

    periods: int
    sharpe: float
    skewness: float
    kurtosis: float


def moments(returns: Returns) -> Moments | None:
    """The moments of `returns` (see the module docstring); `None` for fewer than three returns
    or zero dispersion."""
    if returns.size < 3 or returns.max() == returns.min():
        return None
    mean = float(np.mean(returns))
    std = float(np.std(returns, ddof=1))
    centred = returns - mean
    m2 = float(np.mean(centred**2))
    return Moments(
        periods=int(returns.size),
        sharpe=mean / std,
        skewness=float(np.mean(centred**3)) / m2**1.5,
        kurtosis=float(np.mean(centred**4)) / m2**2,
    )


def _spread(found: Moments) -> float | None:
    """`1 - g3 SR + (g4 - 1) / 4 SR^2`, the variance factor of the Sharpe estimate; `None` when
    the moments make it non-positive (a pathological skew)."""
    value = 1.0 - found.skewness * found.sharpe + (found.kurtosis - 1.0) / 4.0 * found.sharpe**2
    return value if value > 0 else None


def probabilistic_sharpe(found: Moments, benchmark_sharpe: float = 0.0) -> float | None:
    """PSR: the probability that the true per-period Sharpe exceeds `benchmark_sharpe`."""
    spread = _spread(found)
    if spread is None:
        return None
    z = (found.sharpe - benchmark_sharpe) * math.sqrt(found.periods - 1) / math.sqrt(spread)
    return _NORMAL.cdf(z)


def expected_max_sharpe(trials: int, variance: float) -> float:
    """The expected maximum per-period Sharpe of `trials` independent trials whose Sharpes have
    `variance` (0 for fewer than two trials)."""
    if trials < 2 or variance <= 0:
        return 0.0
    first = _NORMAL.inv_cdf(1.0 - 1.0 / trials)
    second = _NORMAL.inv_cdf(1.0 - 1.0 / (trials * math.e))
    return math.sqrt(variance) * ((1.0 - EULER_GAMMA) * first + EULER_GAMMA * second)


def deflated_sharpe(found: Moments, *, trials: int, variance: float) -> float | None:
    """DSR: PSR against the expected maximum Sharpe of `trials` trials of Sharpe `variance`."""
    return probabilistic_sharpe(found, expected_max_sharpe(trials, variance))


def min_track_record(
    found: Moments, benchmark_sharpe: float = 0.0, alpha: float = DEFAULT_ALPHA
) -> float | None:
    """MinTRL: the returns needed to reject `Sharpe <= benchmark_sharpe` at level `alpha`;
    `None` when the observed Sharpe is not above it (no record is long enough)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    spread = _spread(found)
    if spread is None or found.sharpe <= benchmark_sharpe:
        return None
    z = _NORMAL.inv_cdf(1.0 - alpha)
    return 1.0 + spread * (z / (found.sharpe - benchmark_sharpe)) ** 2


def is_immature(periods: int, min_record: float | None) -> bool:
    """Whether a record of `periods` returns is shorter than its minimum track record (always,
    when there is none)."""
    return min_record is None or periods < min_record


def permutation_p_value(
    differences: Returns, *, draws: int = DEFAULT_PERMUTATIONS, seed: int | Sequence[int] = 0
) -> float | None:
    """The one-sided sign-flip p-value that the mean of the paired `differences` is above 0
    (see the module docstring); `None` for fewer than two differences."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    if differences.size < 2:
        return None
    rng = np.random.default_rng(seed)
    count = differences.size
    total = float(np.sum(differences))
    # Compare sums rather than means, with a relative tolerance: a flip that reproduces the
    # observed signs must count as at least as extreme despite float rounding.
    target = total - 1e-12 * float(np.sum(np.abs(differences)))
    width = (count + 7) // 8
    # One random bit a period, eight periods a byte (the first period the byte's high bit): 1
    # keeps the difference's sign, 0 flips it, so a draw's sum is 2 (bits . d) - sum(d). A byte's
    # part of (bits . d) is looked up, not multiplied out: `kept[j, b]` is the sum of the
    # differences of byte j's periods whose bits are set in b (periods past the last count 0).
    padded = np.zeros(width * 8)
    padded[:count] = differences
    kept = padded.reshape(width, 8) @ _BYTE_BITS.T
    columns = np.arange(width)
    extreme = 0
    left = draws
    while left > 0:
        size = min(left, _CHUNK)
        raw = np.frombuffer(rng.bytes(size * width), dtype=np.uint8).reshape(size, width)
        sums = 2.0 * kept[columns, raw].sum(axis=1) - total
        extreme += int(np.count_nonzero(sums >= target))
        left -= size
    return (1 + extreme) / (1 + draws)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    count = len(p_values)
    adjusted = [0.0] * count
    running = 0.0
    for step, index in enumerate(order):
        running = max(running, min(1.0, (count - step) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_differences(a: Sequence[NavPoint], b: Sequence[NavPoint]) -> Returns:
    """The period-by-period return differences `a - b` over the NAV timestamps both share."""
    shared = {point.at for point in a} & {point.at for point in b}
    mine = simple_returns([point for point in a if point.at in shared])
    theirs = simple_returns([point for point in b if point.at in shared])
    out: Returns = mine - theirs
    return out


def entry_returns(
    navs: Sequence[NavPoint], days: Sequence[int] = ENTRY_DAYS
) -> dict[int, float | None]:
    """Each `days` window's return from the account's first snapshot: the NAV of its last
    snapshot at or before `first + days` over its first NAV, minus 1. `None` when the record does
    not yet reach `first + days` (no snapshot at or after it)."""
    out: dict[int, float | None] = {}
    if not navs:
        return dict.fromkeys(days)
    ordered = sorted(navs, key=lambda point: point.at)
    first = ordered[0]
    last_at = ordered[-1].at
    for span in days:
        until: datetime = first.at + timedelta(days=span)
        if last_at < until:
            out[span] = None
            continue
        reached = [point for point in ordered if point.at <= until][-1]
        out[span] = float(reached.nav / first.nav - Decimal(1))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One account against one baseline: the paired periods, raw and Holm-adjusted p-values."""

    baseline: str
    periods: int
    p_value: float | None
    adjusted_p_value: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RowSignificance:
    """The significance of one account on a board."""

    name: str
    periods: int
    sharpe: float | None
    skewness: float | None
    kurtosis: float | None
    psr: float | None
    dsr: float | None
    min_track_record: float | None
    immature: bool
    entry_returns: Mapping[int, float | None]
    comparisons: tuple[Comparison, ...]
    #: The baseline with the highest mean return over the periods it shares with this account.
    best_baseline: str | None
    #: Whether the Holm-adjusted p-value against `best_baseline` is at most `alpha`.
    significant: bool

    @property
    def best(self) -> Comparison | None:
        """The comparison with `best_baseline`."""
        return next((c for c in self.comparisons if c.baseline == self.best_baseline), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoardSignificance:
    """The significance suite of one board: its settings and each account's results."""

    alpha: float
    trials: int
    sharpe_variance: float | None
    expected_max_sharpe: float
    permutations: int
    seed: int
    correction: str
    rows: tuple[RowSignificance, ...]

    def row(self, name: str) -> RowSignificance | None:
        """The results of the account called `name`, if it was compared."""
        return next((row for row in self.rows if row.name == name), None)


def board_significance(
    series: Mapping[str, Sequence[NavPoint]],
    baselines: Sequence[str],
    *,
    alpha: float = DEFAULT_ALPHA,
    trials: int | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> BoardSignificance:
    """The significance of every account of `series` (name -> NAV points) on one board.

    `baselines` name the accounts each other account is tested against (a baseline is not tested
    against the others). `trials` is DSR's N, by default the number of accounts. Each pair's test
    is seeded by `pair_seed(seed, name, baseline)`, so the order of the rows and the other rows
    do not change a pair's raw p-value (its Holm-adjusted one depends on the whole board).
    """
    names = list(series)
    found = {name: moments(simple_returns(series[name])) for name in names}
    sharpes = [m.sharpe for m in found.values() if m is not None]
    variance = float(np.var(sharpes, ddof=1)) if len(sharpes) >= 2 else None
    count = trials if trials is not None else len(names)
    threshold = expected_max_sharpe(count, variance or 0.0)
    tests: list[tuple[str, str, int, float | None, float]] = []
    for name in names:
        if name in baselines:
            continue
        for baseline in baselines:
            if baseline not in series:
                continue
            diff = paired_differences(series[name], series[baseline])
            p = permutation_p_value(diff, draws=permutations, seed=pair_seed(seed, name, baseline))
            mean_baseline = _mean_return(series[name], series[baseline])
            tests.append((name, baseline, int(diff.size), p, mean_baseline))
    defined = {i: test[3] for i, test in enumerate(tests) if test[3] is not None}
    adjusted_of = dict(zip(defined, holm(list(defined.values())), strict=True))
    rows: list[RowSignificance] = []
    for name in names:
        mine = found[name]
        periods = max(len(series[name]) - 1, 0)
        record = None if mine is None else min_track_record(mine, alpha=alpha)
        comparisons = [
            (i, Comparison(baseline=t[1], periods=t[2], p_value=t[3],
                           adjusted_p_value=adjusted_of.get(i)))
            for i, t in enumerate(tests)
            if t[0] == name
        ]  # fmt: skip
        best = max(comparisons, key=lambda c: tests[c[0]][4], default=None)
        best_p = None if best is None else best[1].adjusted_p_value
        rows.append(
            RowSignificance(
                name=name,
                periods=periods,
                sharpe=None if mine is None else mine.sharpe,
                skewness=None if mine is None else mine.skewness,
                kurtosis=None if mine is None else mine.kurtosis,
                psr=None if mine is None else probabilistic_sharpe(mine),
                dsr=None if mine is None else probabilistic_sharpe(mine, threshold),
                min_track_record=record,
                immature=is_immature(periods, record),
                entry_returns=entry_returns(series[name]),
                comparisons=tuple(c for _, c in comparisons),
                best_baseline=None if best is None else best[1].baseline,
                significant=best_p is not None and best_p <= alpha,
            )
        )
    return BoardSignificance(
        alpha=alpha,
        trials=count,
        sharpe_variance=variance,
        expected_max_sharpe=threshold,
        permutations=permutations,
        seed=seed,
        correction="holm",
        rows=tuple(rows),
    )


def pair_seed(seed: int, name: str, baseline: str) -> tuple[int, int, int]:
    """The entropy of one pair's sign flips: the board's seed and the CRC-32 of both names (a
    `numpy.random.SeedSequence` entropy, the same on every machine)."""
    return (seed, zlib.crc32(name.encode()), zlib.crc32(baseline.encode()))


def _mean_return(a: Sequence[NavPoint], b: Sequence[NavPoint]) -> float:
    """The mean return of `b` over the timestamps it shares with `a` (-inf without one)."""
    shared = {point.at for point in a}
    returns = simple_returns([point for point in b if point.at in shared])
    return float(np.mean(returns)) if returns.size else -math.inf
