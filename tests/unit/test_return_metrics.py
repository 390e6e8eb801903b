"""The metrics panel agrees with empyrical on fixed NAV series, and is None where undefined."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import empyrical
import numpy as np
import pytest

from openbell.ops.evaluation import return_metrics as metrics
from openbell.ops.evaluation.return_metrics import (
    ExposurePoint,
    NavPoint,
    Panel,
    compute_panel,
    long_short,
    periods_per_year,
)

START = datetime(2025, 1, 6, 14, 30, tzinfo=UTC)
REL = 1e-12


def make_navs(
    values: Sequence[str | Decimal], step: timedelta = timedelta(days=1)
) -> list[NavPoint]:
    return [NavPoint(at=START + i * step, nav=Decimal(value)) for i, value in enumerate(values)]


def random_walk(seed: int, count: int, drift: float, vol: float, start: float) -> list[Decimal]:
    """A fixed NAV path (seeded), rounded to cents as the ledger would hold it."""
    rng = np.random.default_rng(seed)
    levels = start * np.cumprod(1.0 + rng.normal(drift, vol, count - 1))
    return [Decimal(f"{start:.2f}"), *(Decimal(f"{level:.2f}") for level in levels)]


def float_returns(navs: list[NavPoint]) -> np.ndarray:
    """Returns computed independently of the module under test."""
    values = np.array([float(p.nav) for p in navs], dtype=np.float64)
    returns: np.ndarray = values[1:] / values[:-1] - 1.0
    return returns


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    navs: list[NavPoint]
    benchmark: list[NavPoint]
    factor: float
    undefined: frozenset[str]  # Panel fields empyrical leaves NaN/inf for this series


def _case(
    name: str,
    account: list[Decimal],
    benchmark: list[Decimal],
    factor: float,
    step: timedelta,
    undefined: frozenset[str] = frozenset(),
) -> Case:
    return Case(name, make_navs(account, step), make_navs(benchmark, step), factor, undefined)


DAY, HOUR = timedelta(days=1), timedelta(hours=1)
DRAWDOWN = [Decimal(v) for v in ("100", "110", "90", "95", "80", "120", "118.5")]
RISING = [Decimal(v) for v in ("100", "101", "103", "103.5", "110")]
FLAT = [Decimal(100)] * 6

CASES = [
    _case(
        "us-daily",
        random_walk(1, 253, 0.0005, 0.012, 10_000),
        random_walk(2, 253, 0.0004, 0.010, 480),
        252,
        DAY,
    ),
    _case(
        "us-hourly",
        random_walk(3, 7 * 40 + 1, 0.0001, 0.004, 10_000),
        random_walk(4, 7 * 40 + 1, 0.0001, 0.003, 480),
        252 * 7,
        HOUR,
    ),
    _case(
        "crypto-daily",
        random_walk(5, 366, 0.001, 0.035, 10_000),
        random_walk(6, 366, 0.0008, 0.03, 60_000),
        365,
        DAY,
    ),
    _case(
        "crypto-hourly",
        random_walk(7, 24 * 30 + 1, 0.0, 0.008, 10_000),
        random_walk(8, 24 * 30 + 1, 0.0, 0.006, 60_000),
        365 * 24,
        HOUR,
    ),
    _case("drawdown", DRAWDOWN, RISING + RISING[-1:] * 2, 252, DAY),
    # No losing period: Sortino divides by a zero downside; no drawdown: Calmar by a zero one.
    _case("rising", RISING, DRAWDOWN[:5], 252, DAY, frozenset({"sortino_ratio", "calmar_ratio"})),
    # Flat: every dispersion is zero. The information ratio is defined: the benchmark moves.
    _case(
        "flat",
        FLAT,
        DRAWDOWN[:6],
        252,
        DAY,
        frozenset({"sharpe_ratio", "sortino_ratio", "calmar_ratio"}),
    ),
    # The account tracks the benchmark exactly: no tracking error.
    _case(
        "tracks", DRAWDOWN, [v * 3 for v in DRAWDOWN], 252, DAY, frozenset({"information_ratio"})
    ),
]


def _empyrical_panel(case: Case) -> dict[str, float]:
    r, b, f = float_returns(case.navs), float_returns(case.benchmark), case.factor
    return {
        "cumulative_return": empyrical.cum_returns_final(r),
        "annual_return": empyrical.annual_return(r, annualization=f),
        "annual_volatility": empyrical.annual_volatility(r, annualization=f),
        "sharpe_ratio": empyrical.sharpe_ratio(r, annualization=f),
        "sortino_ratio": empyrical.sortino_ratio(r, annualization=f),
        "max_drawdown": empyrical.max_drawdown(r),
        "calmar_ratio": empyrical.calmar_ratio(r, annualization=f),
        "excess_return": empyrical.cum_returns_final(r) - empyrical.cum_returns_final(b),
        "information_ratio": empyrical.excess_sharpe(r, b) * math.sqrt(f),
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_panel_matches_empyrical(case: Case) -> None:
    panel = compute_panel(case.navs, periods_per_year=case.factor, benchmark=case.benchmark)
    reference = _empyrical_panel(case)
    for field, expected in reference.items():
        ours = getattr(panel, field)
        if field in case.undefined:
            assert not math.isfinite(expected), f"{field}: fixture should be undefined"
            assert ours is None, field
        else:
            assert math.isfinite(expected), f"{field}: fixture should be defined"
            assert ours == pytest.approx(expected, rel=REL, abs=1e-15), field
    assert panel.periods == len(case.navs) - 1
    assert (panel.start_at, panel.end_at) == (case.navs[0].at, case.navs[-1].at)
    assert panel.periods_per_year == case.factor


def test_single_functions_match_empyrical_on_the_daily_series() -> None:
    case = CASES[0]
    r, f = float_returns(case.navs), case.factor
    assert metrics.downside_risk(r, f) == pytest.approx(
        empyrical.downside_risk(r, annualization=f), rel=REL
    )
    assert np.array_equal(metrics.simple_returns(case.navs), r)


def test_drawdown_series_hand_values() -> None:
    panel = compute_panel(make_navs(DRAWDOWN), periods_per_year=252)
    assert panel.max_drawdown == pytest.approx((80 - 110) / 110, rel=REL)
    assert panel.cumulative_return == pytest.approx(0.185, rel=REL)
    # Six returns are 6/252 of a year.
    assert panel.annual_return == pytest.approx(1.185 ** (252 / 6) - 1, rel=1e-9)


def test_flat_series_values() -> None:
    panel = compute_panel(make_navs(FLAT), periods_per_year=252)
    assert panel.cumulative_return == 0.0
    assert panel.annual_return == 0.0
    assert panel.annual_volatility == 0.0
    assert panel.max_drawdown == 0.0
    assert (panel.sharpe_ratio, panel.sortino_ratio, panel.calmar_ratio) == (None, None, None)
    assert (panel.excess_return, panel.information_ratio) == (None, None)


def test_constant_nonzero_returns_have_no_sharpe() -> None:
    # Doubling each period: every return is exactly 1.0, std is zero, empyrical says inf.
    navs = make_navs(["1", "2", "4", "8"])
    r = float_returns(navs)
    assert math.isinf(empyrical.sharpe_ratio(r, annualization=252))
    panel = compute_panel(navs, periods_per_year=252)
    assert panel.sharpe_ratio is None
    assert panel.annual_volatility == 0.0


def test_information_ratio_is_annualised_excess_sharpe() -> None:
    case = CASES[1]
    r, b = float_returns(case.navs), float_returns(case.benchmark)
    ours = metrics.information_ratio(r, b, case.factor)
    assert ours == pytest.approx(empyrical.excess_sharpe(r, b) * math.sqrt(1764), rel=REL)
    assert ours != pytest.approx(empyrical.excess_sharpe(r, b), rel=1e-3)


@pytest.mark.parametrize(
    ("values", "periods", "defined"),
    [
        ([], 0, set()),
        (["100"], 0, set()),
        (
            ["100", "90"],
            1,
            {"cumulative_return", "annual_return", "max_drawdown", "calmar_ratio"},
        ),
    ],
    ids=["empty", "one-point", "two-points"],
)
def test_short_series_are_none_not_errors(
    values: list[str], periods: int, defined: set[str]
) -> None:
    navs = make_navs(values)
    panel = compute_panel(navs, periods_per_year=252, benchmark=make_navs(values))
    assert panel.periods == periods
    ratios = {f.name for f in dataclasses.fields(Panel)} - {
        "periods",
        "periods_per_year",
        "start_at",
        "end_at",
    }
    for name in ratios:
        value = getattr(panel, name)
        if name in defined or (name == "excess_return" and periods):
            assert isinstance(value, float), name
        else:
            assert value is None, name
    assert panel.start_at == (navs[0].at if navs else None)


def test_two_points_match_empyrical_where_defined() -> None:
    panel = compute_panel(make_navs(["100", "90"]), periods_per_year=252)
    r = np.array([-0.1])
    assert panel.max_drawdown == pytest.approx(-0.1, rel=REL)
    assert panel.annual_return == pytest.approx(empyrical.annual_return(r), rel=REL)
    assert panel.calmar_ratio == pytest.approx(empyrical.calmar_ratio(r), rel=REL)
    assert math.isnan(empyrical.sharpe_ratio(r))


@pytest.mark.parametrize(
    ("market", "cadence", "slots", "expected"),
    [
        ("us", "daily", None, 252.0),
        ("cn", "daily", None, 252.0),
        ("crypto", "daily", None, 365.0),
        ("us", "hourly", None, 252.0 * 7),
        ("cn", "hourly", None, 252.0 * 4),
        ("crypto", "hourly", None, 365.0 * 24),
        ("us", "hourly", 3, 252.0 * 3),
        ("cn", "daily", 2, 504.0),
    ],
)
def test_periods_per_year(market: str, cadence: str, slots: int | None, expected: float) -> None:
    assert periods_per_year(market, cadence, slots) == expected


@pytest.mark.parametrize(
    ("market", "cadence", "slots", "message"),
    [
        ("eu", "daily", None, "unknown market"),
        ("us", "weekly", None, "unknown cadence"),
        ("us", "hourly", 0, "at least 1"),
    ],
)
def test_periods_per_year_refuses_bad_input(
    market: str, cadence: str, slots: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        periods_per_year(market, cadence, slots)


BAD_CALLS: list[tuple[str, Callable[[], object]]] = [
    (
        "strictly",
        lambda: compute_panel(
            [NavPoint(at=START, nav=Decimal(1)), NavPoint(at=START, nav=Decimal(2))],
            periods_per_year=252,
        ),
    ),
    (
        "timestamps",
        lambda: compute_panel(
            make_navs(["1", "2"]), periods_per_year=252, benchmark=make_navs(["1", "2"], HOUR)
        ),
    ),
    ("positive finite", lambda: compute_panel(make_navs(["1", "2"]), periods_per_year=0)),
    ("naive", lambda: NavPoint(at=datetime(2025, 1, 6), nav=Decimal(1))),  # noqa: DTZ001
    ("positive", lambda: NavPoint(at=START, nav=Decimal(0))),
    ("differ in length", lambda: metrics.excess_return(np.zeros(3), np.zeros(2))),
]


@pytest.mark.parametrize(("message", "call"), BAD_CALLS, ids=[m for m, _ in BAD_CALLS])
def test_caller_mistakes_raise(message: str, call: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_nav_must_be_decimal() -> None:
    with pytest.raises(TypeError, match="Decimal"):
        NavPoint(at=START, nav=100.0)  # type: ignore[arg-type]


def test_panel_is_frozen() -> None:
    panel = compute_panel(make_navs(DRAWDOWN), periods_per_year=252)
    with pytest.raises(dataclasses.FrozenInstanceError):
        panel.sharpe_ratio = 1.0  # type: ignore[misc]


def test_identical_returns_have_exactly_zero_dispersion() -> None:
    # The float std of three 0.1s is about 1.7e-17, not 0; empyrical's Sharpe still says inf.
    same = np.full(3, 0.1)
    assert np.std(same, ddof=1) != 0.0
    assert math.isinf(empyrical.sharpe_ratio(same, annualization=252))
    assert metrics.sharpe_ratio(same, 252) is None
    assert metrics.annual_volatility(same, 252) == 0.0
    assert metrics.information_ratio(same, np.zeros(3), 252) is None


# -- long-short metrics ---------------------------------------------------------------------------


def _exposure(day: int, nav: int, long: int, short: int) -> ExposurePoint:
    at = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return ExposurePoint(
        at=at, nav=Decimal(nav), long_value=Decimal(long), short_value=Decimal(short)
    )


def test_long_short_means_exposures_over_the_snapshots_and_prices_borrow() -> None:
    points = [
        _exposure(0, 10000, 5000, 5000),  # gross 1.0, net 0.0
        _exposure(1, 8000, 6000, 2000),  # gross 1.0, net 0.5
        _exposure(2, 0, 1, 0),  # a zero NAV says nothing about exposure: left out
    ]
    found = long_short(points, Decimal("12.5"), Decimal(10000))
    assert found.mean_gross_exposure == pytest.approx(1.0)
    assert found.mean_net_exposure == pytest.approx(0.25)
    assert found.max_gross_exposure == pytest.approx(1.0)
    assert found.borrow_fees == Decimal("12.5")
    assert found.borrow_cost == pytest.approx(0.00125)
    empty = long_short([], Decimal(0), Decimal(10000))
    assert empty.mean_gross_exposure is None
    assert empty.mean_net_exposure is None
    assert empty.borrow_cost == 0.0
