"""The significance suite (`ops.evaluation.significance`) against reference computations written
here.

The references are independent of the module: the normal distribution by `math.erf` and a
bisection for its inverse, moments by explicit sums, the permutation p-value by enumerating every
sign pattern, Holm by its definition; and the worked example of Bailey and López de Prado's
"The Deflated Sharpe Ratio" (2014): N = 100 trials, an annualised Sharpe of 2.5 over 1,250 daily
returns, an annualised variance of the trials' Sharpes of 0.5, skewness -3 and kurtosis 10 give
an expected maximum Sharpe of 0.1132 a day and a DSR of 0.9004.
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest

from openbell.ops.evaluation import significance as sig
from openbell.ops.evaluation.return_metrics import NavPoint

START = datetime(2025, 1, 1, tzinfo=UTC)


def _cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _inv_cdf(p: float) -> float:
    low, high = -10.0, 10.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if _cdf(middle) < p else (low, middle)
    return (low + high) / 2.0


def _reference_moments(values: list[float]) -> tuple[float, float, float]:
    n = len(values)
    mean = sum(values) / n
    sample_sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    m2 = sum((v - mean) ** 2 for v in values) / n
    m3 = sum((v - mean) ** 3 for v in values) / n
    m4 = sum((v - mean) ** 4 for v in values) / n
    return mean / sample_sd, m3 / m2**1.5, m4 / m2**2


def _reference_psr(sr: float, skew: float, kurt: float, n: int, target: float) -> float:
    spread = 1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr**2
    return _cdf((sr - target) * math.sqrt(n - 1) / math.sqrt(spread))


def _navs(
    returns: np.ndarray, start: datetime = START, step: timedelta = timedelta(days=1)
) -> list[NavPoint]:
    values = 1000.0 * np.cumprod(np.concatenate([[1.0], 1.0 + returns]))
    return [
        NavPoint(at=start + i * step, nav=Decimal(f"{value:.6f}")) for i, value in enumerate(values)
    ]


def test_deflated_sharpe_matches_the_papers_worked_example() -> None:
    periods = 1250
    found = sig.Moments(periods=periods, sharpe=2.5 / math.sqrt(250), skewness=-3.0, kurtosis=10.0)
    variance = 0.5 / 250
    threshold = sig.expected_max_sharpe(100, variance)
    gamma = 0.5772156649015329
    reference = math.sqrt(variance) * (
        (1 - gamma) * _inv_cdf(1 - 1 / 100) + gamma * _inv_cdf(1 - 1 / (100 * math.e))
    )
    assert threshold == pytest.approx(reference, abs=1e-9)
    assert threshold == pytest.approx(0.1132, abs=5e-5)
    dsr = sig.deflated_sharpe(found, trials=100, variance=variance)
    assert dsr == pytest.approx(
        _reference_psr(found.sharpe, -3.0, 10.0, periods, reference), abs=1e-9
    )
    # The paper rounds its intermediate figures; its 0.9004 is within 1e-3 of the exact value.
    assert dsr == pytest.approx(0.9004, abs=1e-3)


def test_moments_psr_and_dsr_match_a_reference_on_a_skewed_series() -> None:
    rng = np.random.default_rng(7)
    returns = 0.001 + 0.01 * (rng.standard_exponential(300) - 1.0)
    found = sig.moments(returns)
    assert found is not None
    sr, skew, kurt = _reference_moments([float(r) for r in returns])
    assert (found.sharpe, found.skewness, found.kurtosis) == pytest.approx((sr, skew, kurt))
    assert skew > 1.0  # the exponential's skew: the adjustment is exercised
    assert sig.probabilistic_sharpe(found) == pytest.approx(
        _reference_psr(sr, skew, kurt, 300, 0.0), abs=1e-12
    )
    assert sig.deflated_sharpe(found, trials=1, variance=0.01) == sig.probabilistic_sharpe(found)
    deflated = sig.deflated_sharpe(found, trials=20, variance=0.004)
    assert deflated is not None
    assert deflated < sig.probabilistic_sharpe(found)  # type: ignore[operator]


def test_min_track_record_matches_its_formula_and_is_where_psr_reaches_the_level() -> None:
    found = sig.Moments(periods=10, sharpe=0.1, skewness=-0.5, kurtosis=5.0)
    record = sig.min_track_record(found, alpha=0.05)
    spread = 1.0 + 0.5 * 0.1 + 4.0 / 4.0 * 0.01
    reference = 1.0 + spread * (_inv_cdf(0.95) / 0.1) ** 2
    assert record == pytest.approx(reference, rel=1e-9)
    assert record is not None
    longer = sig.Moments(periods=math.ceil(record), sharpe=0.1, skewness=-0.5, kurtosis=5.0)
    shorter = sig.Moments(periods=math.floor(record), sharpe=0.1, skewness=-0.5, kurtosis=5.0)
    assert sig.probabilistic_sharpe(longer) >= 0.95  # type: ignore[operator]
    assert sig.probabilistic_sharpe(shorter) < 0.95  # type: ignore[operator]
    assert sig.is_immature(math.floor(record), record)
    assert not sig.is_immature(math.ceil(record), record)
    losing = sig.Moments(periods=1000, sharpe=-0.01, skewness=0.0, kurtosis=3.0)
    assert sig.min_track_record(losing) is None
    assert sig.is_immature(1000, None)


def test_permutation_p_value_approaches_the_exact_enumeration() -> None:
    differences = np.array(
        [0.012, -0.004, 0.007, 0.003, -0.009, 0.011, 0.002, -0.001, 0.006, 0.005]
    )
    observed = differences.sum()
    patterns = list(itertools.product((-1.0, 1.0), repeat=differences.size))
    exact = sum(1 for signs in patterns if np.dot(signs, differences) >= observed - 1e-15) / len(
        patterns
    )
    found = sig.permutation_p_value(differences, draws=40_000, seed=3)
    assert found == pytest.approx(exact, abs=0.006)
    assert found == sig.permutation_p_value(differences, draws=40_000, seed=3)
    assert sig.permutation_p_value(differences[:1]) is None


def test_holm_matches_its_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06)
    assert sig.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sig.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert sig.holm([]) == []


def test_entry_returns_count_from_the_first_snapshot() -> None:
    late = START + timedelta(days=40)
    navs = [NavPoint(at=late + timedelta(days=d), nav=Decimal(1000 + 10 * d)) for d in range(35)]
    found = sig.entry_returns(navs)
    assert found[7] == pytest.approx(1070 / 1000 - 1)
    assert found[30] == pytest.approx(1300 / 1000 - 1)
    assert found[90] is None
    gappy = [navs[0], navs[5], navs[9]]  # day 7 falls between snapshots: the one before counts
    assert sig.entry_returns(gappy, (7,))[7] == pytest.approx(1050 / 1000 - 1)
    assert sig.entry_returns([]) == {7: None, 30: None, 90: None}


def test_noise_agents_are_not_significant_while_a_skilled_one_is() -> None:
    rng = np.random.default_rng(2026)
    periods = 500
    market = rng.normal(0.0003, 0.01, periods)
    series = {"buy-and-hold": _navs(market), "cash": _navs(np.zeros(periods))}
    for i in range(20):
        series[f"noise-{i:02d}"] = _navs(market + rng.normal(0.0, 0.008, periods))
    series["skilled"] = _navs(market + 0.003 + rng.normal(0.0, 0.008, periods))
    board = sig.board_significance(series, ["buy-and-hold", "cash"], permutations=4000, seed=1)
    assert board.trials == 23
    assert board.correction == "holm"
    noise = [row for row in board.rows if row.name.startswith("noise")]
    assert len(noise) == 20
    assert not any(row.significant for row in noise)
    # Uncorrected, some noise agents look good against cash (they carry the market's drift):
    raw = [c.p_value for row in noise for c in row.comparisons if c.p_value is not None]
    assert len(raw) == 40
    skilled = board.row("skilled")
    assert skilled is not None
    assert skilled.significant
    assert skilled.best_baseline == "buy-and-hold"
    assert skilled.dsr is not None
    assert skilled.dsr > 0.95
    assert not skilled.immature
    assert all(row.dsr is None or row.dsr < 0.95 for row in noise)
    baseline = board.row("cash")
    assert baseline is not None
    assert baseline.comparisons == ()
    assert baseline.immature
