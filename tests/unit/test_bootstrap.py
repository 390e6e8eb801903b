"""The stationary block bootstrap against a plain re-implementation and analytic cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openbell.ops.evaluation.bootstrap import (
    PANEL_METRICS,
    block_length,
    bootstrap_ranking,
    interval,
    panel_columns,
    returns_panel,
    stationary_indices,
)

FACTOR = 252.0


def reference_indices(periods: int, draws: int, mean_block: int, seed: int) -> list[list[int]]:
    """Politis-Romano, written out: a new block with probability 1/L, else the next index."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        starts = [int(x) for x in rng.integers(0, periods, size=periods)]
        breaks = [float(x) for x in rng.random(periods)]
        row = [starts[0]]
        for i in range(1, periods):
            row.append(starts[i] if breaks[i] < 1.0 / mean_block else (row[-1] + 1) % periods)
        out.append(row)
    return out


def reference_quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method), by hand."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def cumulative(returns: list[float]) -> float:
    wealth = 1.0
    for r in returns:
        wealth *= 1.0 + r
    return wealth - 1.0


def deepest_drawdown(returns: list[float]) -> float:
    wealth, peak, deepest = 1.0, 1.0, 0.0
    for r in returns:
        wealth *= 1.0 + r
        peak = max(peak, wealth)
        deepest = min(deepest, wealth / peak - 1.0)
    return deepest


def sharpe(returns: list[float]) -> float | None:
    mean = sum(returns) / len(returns)
    var = sum((r - mean) ** 2 for r in returns) / (len(returns) - 1)
    return None if var == 0 else mean / math.sqrt(var) * math.sqrt(FACTOR)


@pytest.mark.parametrize(
    ("periods", "expected"),
    [(0, 1), (1, 1), (2, 2), (8, 2), (9, 3), (27, 3), (28, 4), (64, 4), (65, 5), (252, 7)],
)
def test_block_length_is_the_ceiling_of_the_cube_root(periods: int, expected: int) -> None:
    assert block_length(periods) == expected


def test_indices_follow_the_stationary_bootstrap_rule() -> None:
    found = stationary_indices(40, 25, mean_block=4, rng=np.random.default_rng(7))
    assert found.tolist() == reference_indices(40, 25, 4, seed=7)


def test_mean_block_length_is_close_to_the_rule() -> None:
    found = stationary_indices(500, 200, mean_block=5, rng=np.random.default_rng(1))
    continued = (found[:, 1:] == (found[:, :-1] + 1) % 500).mean()
    # a block continues with probability 1 - 1/L (a fresh start equal to i + 1 is rare)
    assert continued == pytest.approx(0.8, abs=0.01)


def test_intervals_match_a_reference_computation_on_fixed_series() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(0.001, 0.01, 60)
    b = rng.normal(0.0, 0.02, 60)
    draws, seed = 300, 11
    result = bootstrap_ranking(
        {"a": a, "b": b}, periods_per_year=FACTOR, draws=draws, seed=seed, confidence=0.9
    )
    assert result is not None
    assert result.block_length == 4
    assert result.periods == 60
    rows = reference_indices(60, draws, 4, seed)
    by_name = {found.name: found.intervals for found in result.accounts}
    for name, series in (("a", a), ("b", b)):
        values = [float(x) for x in series]
        cums = [cumulative([values[i] for i in row]) for row in rows]
        drawdowns = [deepest_drawdown([values[i] for i in row]) for row in rows]
        sharpes = [s for row in rows if (s := sharpe([values[i] for i in row])) is not None]
        for metric, samples in (
            ("cumulative_return", cums),
            ("max_drawdown", drawdowns),
            ("sharpe_ratio", sharpes),
        ):
            found = by_name[name][metric]
            assert found.defined == len(samples)
            assert found.low == pytest.approx(reference_quantile(samples, 0.05), rel=1e-9)
            assert found.high == pytest.approx(reference_quantile(samples, 0.95), rel=1e-9)


def sortino(returns: list[float]) -> float | None:
    """Mean over the downside deviation (the losing periods' root mean square over all periods),
    annualised; None with no losing period."""
    downside = math.sqrt(sum(min(r, 0.0) ** 2 for r in returns) / len(returns))
    if downside == 0:
        return None
    return (sum(returns) / len(returns)) * FACTOR / (downside * math.sqrt(FACTOR))


def reference_composites(draw: dict[str, list[float]]) -> dict[str, float]:
    """StockBench's composite of one draw, by hand: each account's cumulative return, max
    drawdown and Sortino z-scored over the accounts (sample deviation; an undefined Sortino
    scores 0 and stays out of the others' mean and spread), averaged."""
    metrics = {name: (cumulative(r), deepest_drawdown(r), sortino(r)) for name, r in draw.items()}
    z: dict[str, list[float]] = {name: [] for name in draw}
    for k in range(3):
        values = [m[k] for m in metrics.values() if m[k] is not None]
        mean = sum(values) / len(values) if values else 0.0
        spread = (
            math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            if len(values) > 1
            else 0.0
        )
        for name, m in metrics.items():
            value = m[k]
            z[name].append(0.0 if value is None or spread == 0 else (value - mean) / spread)
    return {name: sum(scores) / 3 for name, scores in z.items()}


def reference_ranks(composites: dict[str, float]) -> dict[str, int]:
    """Competition ranks: 1 + how many composites are strictly higher."""
    return {
        name: 1 + sum(other > mine for other in composites.values())
        for name, mine in composites.items()
    }


def test_composite_rank_and_p_beat_match_a_reference_computation_on_fixed_series() -> None:
    rng = np.random.default_rng(8)
    series = {
        "steady": rng.normal(0.0008, 0.006, 45),
        "wild": rng.normal(0.0012, 0.02, 45),
        "flat": rng.normal(0.0, 0.004, 45),
        "drift": rng.normal(-0.0005, 0.01, 45),
    }
    draws, seed = 250, 4
    result = bootstrap_ranking(
        series, periods_per_year=FACTOR, draws=draws, seed=seed, confidence=0.8
    )
    assert result is not None
    assert result.block_length == 4
    values = {name: [float(x) for x in r] for name, r in series.items()}
    composites: dict[str, list[float]] = {name: [] for name in series}
    ranks: dict[str, list[float]] = {name: [] for name in series}
    wins = {a: dict.fromkeys(series, 0) for a in series}
    for row in reference_indices(45, draws, 4, seed):
        draw = {name: [r[i] for i in row] for name, r in values.items()}
        found = reference_composites(draw)
        for name, rank in reference_ranks(found).items():
            composites[name].append(found[name])
            ranks[name].append(float(rank))
        for a in series:
            for b in series:
                if a != b and found[a] > found[b]:
                    wins[a][b] += 1
    by_name = {found.name: found.intervals for found in result.accounts}
    for name in series:
        for metric, samples in (("composite", composites[name]), ("rank", ranks[name])):
            found = by_name[name][metric]
            assert found.defined == draws
            assert found.low == pytest.approx(reference_quantile(samples, 0.1), rel=1e-9, abs=1e-12)
            assert found.high == pytest.approx(
                reference_quantile(samples, 0.9), rel=1e-9, abs=1e-12
            )
        for other in series:
            if other != name:
                assert result.p_beat[name][other] == wins[name][other] / draws
    # The fixed series are not a tie: the intervals say something.
    assert len({by_name[name]["rank"].low for name in series}) > 1


def test_p_beat_counts_the_draws_where_one_composite_is_above_the_other() -> None:
    rng = np.random.default_rng(5)
    base = rng.normal(0.0, 0.01, 50)
    result = bootstrap_ranking(
        {"better": base + 0.002, "worse": base, "noise": rng.normal(0.0, 0.01, 50)},
        periods_per_year=FACTOR,
        draws=200,
    )
    assert result is not None
    # "better" beats "worse" on return, drawdown and Sortino in every draw with the same periods
    assert result.p_beat["better"]["worse"] == 1.0
    assert result.p_beat["worse"]["better"] == 0.0
    noise = result.p_beat["noise"]["worse"] + result.p_beat["worse"]["noise"]
    assert noise == pytest.approx(1.0)  # composites tie in no draw
    ranks = {found.name: found.intervals["rank"] for found in result.accounts}
    for found in ranks.values():
        assert found.defined == 200
        assert found.low is not None
        assert found.high is not None
        assert 1.0 <= found.low <= found.high <= 3.0
    assert ranks["better"].high <= 2.0  # never below "worse", so never last


def test_a_constant_series_has_a_point_interval() -> None:
    flat = np.full(30, 0.001)
    result = bootstrap_ranking({"flat": flat}, periods_per_year=FACTOR, draws=50)
    assert result is not None
    found = result.accounts[0].intervals
    expected = 1.001**30 - 1.0
    assert found["cumulative_return"].low == pytest.approx(expected)
    assert found["cumulative_return"].high == pytest.approx(expected)
    assert found["sharpe_ratio"].defined == 0  # zero dispersion in every draw
    assert found["sharpe_ratio"].low is None


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others() -> None:
    series = {"x": np.random.default_rng(2).normal(0.0, 0.01, 40)}
    first = bootstrap_ranking(series, periods_per_year=FACTOR, draws=100, seed=4)
    again = bootstrap_ranking(series, periods_per_year=FACTOR, draws=100, seed=4)
    other = bootstrap_ranking(series, periods_per_year=FACTOR, draws=100, seed=5)
    assert first == again
    assert first != other


def test_too_short_or_ragged_series() -> None:
    assert bootstrap_ranking({"x": np.array([0.01])}, periods_per_year=FACTOR) is None
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_ranking({"x": np.zeros(5), "y": np.zeros(6)}, periods_per_year=FACTOR, draws=10)


def test_interval_leaves_undefined_draws_out() -> None:
    found = interval([None, 1.0, 3.0, None, 2.0], 0.5)
    assert found.defined == 3
    assert found.low == pytest.approx(1.5)
    assert found.high == pytest.approx(2.5)


def test_panel_columns_agree_with_the_one_series_panel_row_by_row() -> None:
    rng = np.random.default_rng(9)
    matrix = rng.normal(0.0005, 0.02, (40, 25))
    matrix[0] = 0.001  # no dispersion: no Sharpe, no Sortino, no drawdown, no Calmar
    matrix[1] = np.abs(matrix[1])  # no losing period: no Sortino
    bench = rng.normal(0.0, 0.01, (40, 25))
    bench[2] = matrix[2] - 0.0003  # a constant lead: no information ratio
    columns = panel_columns(matrix, periods_per_year=FACTOR, benchmark=bench)
    for row in range(matrix.shape[0]):
        expected = returns_panel(matrix[row], periods_per_year=FACTOR, benchmark=bench[row])
        for metric in PANEL_METRICS:
            found = float(columns[metric][row])
            wanted = getattr(expected, metric)
            if wanted is None:
                assert math.isnan(found), (row, metric, found)
            else:
                assert found == pytest.approx(wanted, rel=1e-9, abs=1e-12), (row, metric)
