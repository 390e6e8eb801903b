"""Paired differences between two variants of an experiment, over its seeds and its slots.

This module owns the statistic `openbell experiment` reports for each comparison (two cells that
differ in one axis, `grid.Comparison`) and its interval, as pure functions of the runs' slot NAVs.
Both cells ran on the same bars and the same slots, once per seed, so a slot's return of the
variant and of the reference with the same seed form a pair.

Definitions, fixed so that a figure can be reproduced:

- **Periods.** The NAV timestamps that every run of both cells shares (one replay: normally all
  its slots); returns are simple returns between consecutive shared timestamps.
- **Differences.** `d[s, t] = r_variant[s, t] - r_reference[s, t]` for seed `s` and period `t`;
  the statistic is their mean over seeds and periods, the **mean per-slot return difference**.
  Its slot series `m_t = mean_s d[s, t]` carries the whole statistic (each seed has every period).
- **Interval.** A stationary bootstrap of the periods (`ops.evaluation.bootstrap`: geometric blocks
  of mean length `ceil(T^(1/3))`, circular): each draw resamples the periods, every seed's
  difference of a period moving with it, and takes the mean; the interval is the `(1 - confidence) /
  2` and `(1 + confidence) / 2` quantiles of `draws` draws from `numpy.random.default_rng` seeded by
  the experiment's `resample_seed` and the CRC-32 of both cells' names. Resampling periods, not
  (seed, period) pairs, keeps what ties a period's seeds together (the same price move), and
  blocks keep what ties a period to the next (positions held across slots); seed-to-seed noise
  is inside each period's value.
- **Permutation p-value.** A two-sided sign-flip test of `m_t` (`ops.evaluation.significance`:
  `2 min(p(m), p(-m))`, at most 1), Holm-adjusted across the experiment's comparisons
  (`paired_board`): with many comparisons, the adjusted p guards the family-wise error that the
  intervals, read one by one, do not.
- **Verdict.** A pair is **distinguishable from zero** when the interval excludes 0 *and* the
  raw p-value is at most `1 - confidence`. Either alone is liberal on few periods (the
  percentile bootstrap of 15 to 40 periods of pure noise excludes 0 in 9 to 13 % of draws at the
  95 % level; the sign flips assume independent periods); both together stay under the level on
  noise (2 to 4 %) and keep most of the power.
- **Per seed.** Each seed's difference of cumulative return over the shared periods, their mean,
  and the seeds in which the variant ended above the reference (`wins`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

import numpy as np

from openbell.ops.evaluation.bootstrap import block_length, interval, stationary_indices
from openbell.ops.evaluation.return_metrics import NavPoint, simple_returns
from openbell.ops.evaluation.significance import holm, permutation_p_value

#: NAV series of one cell by seed.
Runs = Mapping[int, Sequence[NavPoint]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedDifference:
    """A variant against its reference, paired over `seeds` and `periods` (module docstring)."""

    variant: str
    reference: str
    seeds: tuple[int, ...]
    periods: int
    mean_difference: float | None
    low: float | None
    high: float | None
    confidence: float
    draws: int
    block_length: int
    p_value: float | None
    adjusted_p_value: float | None
    return_differences: Mapping[int, float]
    mean_return_difference: float | None
    wins: int

    @property
    def distinguishable(self) -> bool:
        """Whether the interval excludes 0 and the raw p-value is at most `1 - confidence`."""
        if self.low is None or self.high is None or self.p_value is None:
            return False
        excluded = self.low > 0.0 or self.high < 0.0
        return excluded and self.p_value <= 1.0 - self.confidence + 1e-12


def pair_entropy(seed: int, variant: str, reference: str) -> tuple[int, int, int]:
    """The entropy of one comparison's draws: the experiment's seed and both names' CRC-32."""
    return (seed, zlib.crc32(variant.encode()), zlib.crc32(reference.encode()))


def paired_difference(
    variant: str,
    reference: str,
    variant_runs: Runs,
    reference_runs: Runs,
    *,
    confidence: float,
    draws: int,
    seed: int = 0,
) -> PairedDifference:
    """The paired difference of `variant`'s runs against `reference`'s over the seeds both ran
    (see the module docstring); `adjusted_p_value` is the raw one until `paired_board`."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    seeds = tuple(sorted(set(variant_runs) & set(reference_runs)))
    series = [variant_runs[s] for s in seeds] + [reference_runs[s] for s in seeds]
    shared = set.intersection(*({p.at for p in navs} for navs in series)) if series else set()
    rows = []
    cumulative: dict[int, float] = {}
    for s in seeds:
        mine = sorted((p for p in variant_runs[s] if p.at in shared), key=_at)
        theirs = sorted((p for p in reference_runs[s] if p.at in shared), key=_at)
        rows.append(simple_returns(mine) - simple_returns(theirs))
        if len(mine) >= 2:
            cumulative[s] = float(_total(mine) - _total(theirs))
    periods = len(shared) - 1 if shared else 0
    length = block_length(periods)
    empty = PairedDifference(
        variant=variant, reference=reference, seeds=seeds, periods=max(periods, 0),
        mean_difference=None, low=None, high=None, confidence=confidence, draws=draws,
        block_length=length, p_value=None, adjusted_p_value=None,
        return_differences=cumulative, mean_return_difference=_mean(list(cumulative.values())),
        wins=sum(1 for value in cumulative.values() if value > 0),
    )  # fmt: skip
    if periods < 2:
        return empty
    slot_means = np.mean(np.vstack(rows), axis=0)
    rng = np.random.default_rng(pair_entropy(seed, variant, reference))
    indices = stationary_indices(periods, draws, mean_block=length, rng=rng)
    found = interval(slot_means[indices].mean(axis=1).tolist(), confidence)
    entropy = pair_entropy(seed, variant, reference)
    upper = permutation_p_value(slot_means, draws=draws, seed=entropy)
    lower = permutation_p_value(-slot_means, draws=draws, seed=entropy)
    p = None if upper is None or lower is None else min(1.0, 2.0 * min(upper, lower))
    return replace(
        empty,
        mean_difference=float(np.mean(slot_means)),
        low=found.low,
        high=found.high,
        p_value=p,
        adjusted_p_value=p,
    )


def paired_board(found: Sequence[PairedDifference]) -> list[PairedDifference]:
    """`found` with each p-value Holm-adjusted across all of them (those without one kept)."""
    defined = [i for i, pair in enumerate(found) if pair.p_value is not None]
    adjusted = holm([p for pair in found if (p := pair.p_value) is not None])
    out = list(found)
    for i, value in zip(defined, adjusted, strict=True):
        out[i] = replace(found[i], adjusted_p_value=value)
    return out


def _at(point: NavPoint) -> datetime:
    return point.at


def _total(ordered: Sequence[NavPoint]) -> Decimal:
    return ordered[-1].nav / ordered[0].nav - Decimal(1)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None
