"""One period's cross-sectional regression: symbol returns on the market and style exposures.

This module owns how a period's factor returns are estimated. The estimation sample is the
universe's members with a return over the period; other symbols with a return (a held ETF, a
symbol outside the universe) are scored with the sample's statistics but never move them. Each
style's raw exposures are standardised over the sample, equally weighted: mean 0, standard
deviation 1, clipped at +-3 and standardised again (the same transformation is applied to the
scored symbols); a symbol without the exposure gets 0 (the mean). A style with fewer than three
known values in the sample or no dispersion is dropped. Collinear styles are screened by their
variance inflation factor (VIF, from regressing each standardised style on the others with an
intercept, over the sample): while the largest VIF exceeds `VIF_THRESHOLD` (5.0, the usual rule
of thumb), that style is dropped (on a tie, the later one in `exposures.STYLE_FACTORS`). Styles
are then dropped from the end of that order until the sample has at least `SPARE_NAMES` (3) more
symbols than parameters.

The market factor's return is the sample's equal-weighted mean return (the market proxy that
`beta` is measured against). The styles' returns come from weighted least squares of the
returns in excess of it on the standardised exposures, with weights the square root of each
symbol's mean traded value over the lookback (a liquidity proxy standing in for market
capitalisation, which openbell's bars do not hold; the sample's median weight for a symbol
without one). As the exposures have an equal-weighted mean of 0, this is a regression with an
intercept constrained so that the equal-weighted sample has no specific return: an equal-weight
book of the universe is all market. Each symbol's specific return is its residual,
`u = r - market - sum(x * f)`, exactly as computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from openbell.ops.evaluation.attribution.exposures import Exposures, Matrix

Vector = npt.NDArray[np.float64]

VIF_THRESHOLD = 5.0
CLIP = 3.0
SPARE_NAMES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossSection:
    """A period's factor returns: `market` (the intercept) and one per kept style; the sample's
    standardised exposures (rows: the exposures' symbols, columns: `factors`), each symbol's
    return and specific return (NaN outside the sample), and the styles dropped, with why."""

    symbols: tuple[str, ...]
    factors: tuple[str, ...]
    market: float
    styles: Mapping[str, float]
    exposures: Matrix
    returns: Vector
    residuals: Vector
    dropped: Mapping[str, str]

    @property
    def in_sample(self) -> npt.NDArray[np.bool_]:
        """Which symbols had a return over the period."""
        return ~np.isnan(self.returns)


def _standardised(column: Vector, sample: npt.NDArray[np.bool_]) -> Vector | None:
    """`column` standardised by the statistics of its known values in `sample`, 0 where unknown;
    None when the sample has fewer than three known values or no dispersion."""
    known = ~np.isnan(column)
    values = column[known & sample]
    if len(values) < 3:
        return None
    spread = values.std()
    if not spread > 1e-12 * max(1.0, float(np.abs(values).max())):
        return None
    centre = values.mean()
    clipped = np.clip((values - centre) / spread, -CLIP, CLIP)
    again = clipped.std()
    if not again > 0:
        return None
    out = np.zeros_like(column)
    scored = np.clip((column[known] - centre) / spread, -CLIP, CLIP)
    out[known] = (scored - clipped.mean()) / again
    return out


def variance_inflation(columns: Matrix) -> Vector:
    """The VIF of each column of `columns` (rows: observations): `1 / (1 - R^2)` of the column
    regressed on the others with an intercept; infinite for an exact linear combination.

    Read off the diagonal of the inverse correlation matrix; a matrix too close to singular for
    that (condition number above 1e10) is answered by the regressions themselves."""
    count = columns.shape[1]
    if count < 2:
        return np.ones(count)
    centred = columns - columns.mean(axis=0)
    scale = np.sqrt((centred**2).sum(axis=0))
    if (scale > 0).all():
        correlation = (centred / scale).T @ (centred / scale)
        if np.linalg.cond(correlation) < 1e10:
            return np.asarray(np.diag(np.linalg.inv(correlation)), dtype=np.float64)
    return regressed_variance_inflation(columns)


def regressed_variance_inflation(columns: Matrix) -> Vector:
    """`variance_inflation` by one regression per column (exact, and slower)."""
    count = columns.shape[1]
    out = np.ones(count)
    for index in range(count):
        target = columns[:, index]
        others = np.column_stack([np.ones(len(target)), np.delete(columns, index, axis=1)])
        coef, *_ = np.linalg.lstsq(others, target, rcond=None)
        residual = target - others @ coef
        total = float(((target - target.mean()) ** 2).sum())
        unexplained = float(residual @ residual) / total if total > 0 else 0.0
        out[index] = math.inf if unexplained <= 1e-12 else 1.0 / unexplained
    return out


def _screen(
    columns: dict[str, Vector],
    threshold: float,
    sample: npt.NDArray[np.bool_],
    dropped: dict[str, str],
) -> None:
    while len(columns) >= 2:
        names = list(columns)
        vif = variance_inflation(np.column_stack([columns[name][sample] for name in names]))
        worst = max(range(len(names)), key=lambda index: (vif[index], index))
        if not vif[worst] > threshold:
            return
        dropped[names[worst]] = f"VIF {vif[worst]:.1f} > {threshold:g}"
        del columns[names[worst]]


def _weights(traded: Vector) -> Vector:
    weights = np.sqrt(np.where(traded > 0, traded, np.nan))
    known = ~np.isnan(weights)
    fallback = float(np.median(weights[known])) if known.any() else 1.0
    return np.where(known, weights, fallback)


def regress(
    returns: Vector,
    exposures: Exposures,
    *,
    members: npt.NDArray[np.bool_] | None = None,
    vif_threshold: float = VIF_THRESHOLD,
) -> CrossSection:
    """The period's cross-section: `returns` (one per symbol of `exposures`, NaN for a symbol
    without a return over the period) on the market and the styles, as the module docstring says.
    `members` marks the universe's members (default: every symbol).
    """
    if returns.shape != (len(exposures.symbols),):
        raise ValueError("one return per symbol of the exposures is needed")
    scored = ~np.isnan(returns)
    sample = scored if members is None else scored & members
    count = int(sample.sum())
    dropped: dict[str, str] = {}
    columns: dict[str, Vector] = {}
    for index, name in enumerate(exposures.factors):
        found = _standardised(exposures.values[:, index], sample)
        if found is None:
            dropped[name] = "no dispersion in the sample"
        else:
            columns[name] = found
    _screen(columns, vif_threshold, sample, dropped)
    while columns and count < len(columns) + 1 + SPARE_NAMES:
        last = list(columns)[-1]
        dropped[last] = f"thin cross-section ({count} symbols)"
        del columns[last]
    factors = tuple(columns)
    # An empty sample keeps every style dropped: the market is then 0 and all is specific.
    market = float(returns[sample].mean()) if count else 0.0
    design = (
        np.column_stack([columns[name] for name in factors])
        if factors
        else np.zeros((len(exposures.symbols), 0))
    )
    coef: Vector = np.zeros(len(factors))
    if factors:
        root = np.sqrt(_weights(exposures.traded[sample]))
        excess = (returns[sample] - market) * root
        fitted, *_ = np.linalg.lstsq(design[sample] * root[:, None], excess, rcond=None)
        coef = np.asarray(fitted, dtype=np.float64)
    styles = {name: float(value) for name, value in zip(factors, coef, strict=True)}
    standard = np.full((len(exposures.symbols), len(factors)), np.nan)
    residuals = np.full(len(exposures.symbols), np.nan)
    standard[scored] = design[scored]
    residuals[scored] = returns[scored] - market - design[scored] @ coef
    return CrossSection(
        symbols=exposures.symbols,
        factors=factors,
        market=market,
        styles=MappingProxyType(styles),
        exposures=standard,
        returns=returns,
        residuals=residuals,
        dropped=MappingProxyType(dropped),
    )
