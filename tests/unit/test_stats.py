"""The reports' statistics against values worked out by hand and against scipy: Spearman's rho,
Student's t tail, and OLS with fixed effects (slope, standard error, t, p, R^2)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.ops.evaluation.stats import (
    ols,
    ranks,
    regularized_beta,
    spearman,
    t_two_sided_p,
)


def test_ols_by_hand() -> None:
    # x (1, 2, 3, 4), y (2, 4, 5, 8): Sxx 5, Sxy 9.5, slope 1.9, intercept 0; residuals
    # (.1, .2, -.7, .4), RSS 0.7, TSS 18.75; se = sqrt(0.7 / 2 / 5) = sqrt(0.07).
    found = ols([2, 4, 5, 8], [1, 2, 3, 4])
    assert found is not None
    assert found.slope == pytest.approx(1.9, rel=1e-12)
    assert found.stderr == pytest.approx(math.sqrt(0.07), rel=1e-12)
    assert found.t_stat == pytest.approx(1.9 / math.sqrt(0.07), rel=1e-12)
    assert found.r_squared == pytest.approx(1 - 0.7 / 18.75, rel=1e-12)
    assert (found.n, found.df_resid, found.fixed_effects) == (4, 2, ())
    # With 2 degrees of freedom the tail has a closed form: p = 1 - t / sqrt(2 + t^2).
    t = 1.9 / math.sqrt(0.07)
    assert found.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-10)


def test_ols_with_a_fixed_effect_by_hand() -> None:
    # Groups a (x 1, 2; y 1, 2) and b (x 1, 3; y 5, 9): demeaned within groups, x (-.5, .5, -1, 1)
    # and y (-.5, .5, -2, 2): slope 4.5 / 2.5 = 1.8; residuals (.4, -.4, -.2, .2), RSS 0.4, one
    # degree of freedom left (4 points, intercept, one dummy, slope): se = sqrt(0.4 / 2.5) = 0.4.
    found = ols([1, 2, 5, 9], [1, 2, 1, 3], {"group": ["a", "a", "b", "b"]})
    assert found is not None
    assert found.slope == pytest.approx(1.8, rel=1e-12)
    assert found.stderr == pytest.approx(0.4, rel=1e-12)
    assert found.df_resid == 1
    # One degree of freedom is the Cauchy distribution: p = 1 - 2 atan(|t|) / pi.
    assert found.p_value == pytest.approx(1 - 2 * math.atan(4.5) / math.pi, rel=1e-10)
    # A level nested in another factor adds nothing: the same slope and degrees of freedom.
    nested = ols([1, 2, 5, 9], [1, 2, 1, 3], {"group": list("aabb"), "twin": list("xxyy")})
    assert nested is not None
    assert (nested.slope, nested.df_resid) == pytest.approx((1.8, 1))


def test_ols_is_undefined_without_spread_or_freedom() -> None:
    assert ols([1, 2, 3], [1, 1, 1]) is None
    assert ols([1, 2, 3, 4], [1, 1, 2, 2], {"group": list("aabb")}) is None  # x is the group
    assert ols([1, 2], [1, 2]) is None  # no degree of freedom left
    assert ols([1.0], [2.0]) is None
    with pytest.raises(ValueError, match="fixed effect 'g' has 1 levels for 2 points"):
        ols([1, 2], [1, 2], {"g": ["a"]})


def test_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    x = rng.normal(size=15)
    y = 0.4 * x + rng.normal(size=15)
    found = ols(list(y), list(x))
    reference = stats.linregress(x, y)
    assert found is not None
    assert found.slope == pytest.approx(reference.slope, rel=1e-10)
    assert found.stderr == pytest.approx(reference.stderr, rel=1e-10)
    assert found.p_value == pytest.approx(reference.pvalue, rel=1e-8)
    assert found.r_squared == pytest.approx(reference.rvalue**2, rel=1e-10)
    for t, df in ((0.3, 1), (1.7, 4), (-2.5, 9), (6.0, 30), (0.0, 2)):
        assert t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)
    assert regularized_beta(2.5, 0.5, 0.3) == pytest.approx(
        float(pytest.importorskip("scipy.special").betainc(2.5, 0.5, 0.3)), rel=1e-10
    )
    xs, ys = [3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8]
    assert spearman(xs, ys) == pytest.approx(stats.spearmanr(xs, ys).statistic, rel=1e-12)


@given(
    st.lists(
        st.sampled_from([-1.0, 0.0, -0.0, 1.0, 2.5, math.inf, -math.inf, math.nan])
        | st.floats(allow_nan=False),
        max_size=40,
    )
)
def test_ranks_are_scipys_average_ranks(values: list[float]) -> None:
    # Ties (of codes in {-1, 0, 1} above all) and infinities as `scipy.stats.rankdata` ranks them;
    # NaNs after every number, as one value (sharing the average of the last ranks).
    stats = pytest.importorskip("scipy.stats")
    numbers = [v for v in values if not math.isnan(v)]
    by_scipy = iter(float(rank) for rank in stats.rankdata(numbers, method="average"))
    nan_rank = (len(numbers) + 1 + len(values)) / 2
    expected = [nan_rank if math.isnan(v) else next(by_scipy) for v in values]
    assert ranks(values) == expected
