"""Metric conventions (issue 25, item 6): each metric under each convention against a reference
computation written here, the annualisation each names, the close-to-close series of an account
and of the benchmark worked by hand, and annual turnover."""

from __future__ import annotations

import itertools
import math
import statistics
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest

from openbell.markets.domain import Bar
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation import behaviour
from openbell.ops.evaluation.benchmark import Benchmark, close_navs
from openbell.ops.evaluation.convention_series import account_series, period_ends
from openbell.ops.evaluation.conventions import (
    CONVENTIONS,
    OPENBELL,
    annualisation_factor,
    convention_named,
)
from openbell.ops.evaluation.return_metrics import NavPoint, compute_panel

START = datetime(2025, 3, 3, 14, 30, tzinfo=UTC)
#: A NAV path with unequal losses, so every Sortino is defined: returns +10 %, -10 %, -5 %, +8 %,
#: +1.5 %, -2 %.
VALUES = ("100", "110", "99", "94.05", "101.574", "103.097610", "101.0356578")
BENCH = ("100", "101", "100", "99", "102", "103", "104")


def navs(values: tuple[str, ...]) -> list[NavPoint]:
    return [NavPoint(at=START + timedelta(days=i), nav=D(v)) for i, v in enumerate(values)]


def returns(values: tuple[str, ...]) -> list[float]:
    levels = [float(v) for v in values]
    return [b / a - 1 for a, b in itertools.pairwise(levels)]


def reference(name: str, factor: float) -> dict[str, float]:
    """The panel as each paper writes its formulas, with `statistics` and `math` only."""
    r, b = returns(VALUES), returns(BENCH)
    std = statistics.pstdev if name == "ai-trader" else statistics.stdev
    mean = statistics.fmean(r)
    negative = [x for x in r if x < 0]
    if name == "ai-trader":  # AI-Trader's code: the spread of the negative returns alone
        downside = statistics.pstdev(negative)
        sortino = mean / downside * math.sqrt(factor)
    elif name == "stockbench":  # sqrt(1/N_d * sum of r^2 over the N_d losses), no annualising
        downside = math.sqrt(sum(x * x for x in negative) / len(negative))
        sortino = mean / downside * math.sqrt(factor)
    else:  # empyrical: sqrt(mean(min(r, 0)^2)) over every period, the mean annualised
        downside = math.sqrt(sum(min(x, 0) ** 2 for x in r) / len(r)) * math.sqrt(factor)
        sortino = mean * factor / downside
    active = [x - y for x, y in zip(r, b, strict=True)]
    cumulative = float(VALUES[-1]) / float(VALUES[0]) - 1
    peak, drawdown = 0.0, 0.0
    for level in (float(v) for v in VALUES):
        peak = max(peak, level)
        drawdown = min(drawdown, level / peak - 1)
    return {
        "cumulative_return": cumulative,
        "annual_return": (1 + cumulative) ** (factor / len(r)) - 1,
        "annual_volatility": std(r) * math.sqrt(factor),
        "sharpe_ratio": mean / std(r) * math.sqrt(factor),
        "sortino_ratio": sortino,
        "max_drawdown": drawdown,
        "information_ratio": statistics.fmean(active) / std(active) * math.sqrt(factor),
        "excess_return": cumulative - (float(BENCH[-1]) / float(BENCH[0]) - 1),
    }


@pytest.mark.parametrize("name", list(CONVENTIONS))
def test_every_metric_of_every_convention_matches_its_reference(name: str) -> None:
    convention = convention_named(name)
    factor = annualisation_factor(convention, "us", "daily", 252.0)
    panel = compute_panel(
        navs(VALUES), periods_per_year=factor, benchmark=navs(BENCH), convention=convention
    )
    expected = reference(name, factor)
    for key, value in expected.items():
        assert getattr(panel, key) == pytest.approx(value, rel=1e-12), (name, key)


def test_the_conventions_differ_where_their_papers_do() -> None:
    r = returns(VALUES)
    openbell = compute_panel(navs(VALUES), periods_per_year=252.0)
    ai_trader = compute_panel(
        navs(VALUES), periods_per_year=252.0, convention=CONVENTIONS["ai-trader"]
    )
    # population against sample deviation: sqrt((n-1)/n) apart
    ratio = math.sqrt((len(r) - 1) / len(r))
    assert ai_trader.annual_volatility == pytest.approx(openbell.annual_volatility * ratio)
    assert openbell.sortino_ratio != pytest.approx(ai_trader.sortino_ratio)
    # the default is what compute_panel always computed (empyrical's, pinned elsewhere)
    assert compute_panel(navs(VALUES), periods_per_year=252.0, convention=OPENBELL) == openbell


@pytest.mark.parametrize(
    ("name", "market", "cadence", "observed", "expected"),
    [
        ("openbell", "us", "hourly", 1512.0, 1512.0),
        ("openbell", "crypto", "daily", 365.0, 365.0),
        ("ktd-fin", "cn", "daily", 252.0, 252.0),
        ("ai-trader", "us", "hourly", 1512.0, 1638.0),  # 252 x 6.5, whatever rang
        ("ai-trader", "crypto", "hourly", 8760.0, 1638.0),  # AI-Trader's --is-hourly
        ("ai-trader", "cn", "daily", 252.0, 252.0),
        ("ai-trader", "crypto", "daily", 365.0, 365.0),
        ("stockbench", "us", "daily", 252.0, 1.0),
    ],
)
def test_each_convention_annualises_as_its_paper(
    name: str, market: str, cadence: str, observed: float, expected: float
) -> None:
    assert annualisation_factor(convention_named(name), market, cadence, observed) == expected


def test_stockbench_reads_per_period_and_its_paper_shows_four_places() -> None:
    convention = convention_named("stockbench")
    panel = compute_panel(navs(VALUES), periods_per_year=1.0, convention=convention)
    r = returns(VALUES)
    negative = [x for x in r if x < 0]
    assert panel.sortino_ratio == pytest.approx(
        statistics.fmean(r) / math.sqrt(sum(x * x for x in negative) / len(negative))
    )
    assert convention.ratio_places == 4
    assert OPENBELL.ratio_places == 2


def test_sortinos_undefined_cases() -> None:
    rising = navs(("100", "101", "103"))
    one_loss = navs(("100", "101", "99", "100"))
    equal_losses = navs(("100", "90", "81", "90"))
    for name in CONVENTIONS:
        convention = convention_named(name)
        assert (
            compute_panel(rising, periods_per_year=252, convention=convention).sortino_ratio is None
        )
    ai_trader = CONVENTIONS["ai-trader"]
    # one loss, or equal losses, have no spread: AI-Trader's code would divide by zero
    assert compute_panel(one_loss, periods_per_year=252, convention=ai_trader).sortino_ratio is None
    assert (
        compute_panel(equal_losses, periods_per_year=252, convention=ai_trader).sortino_ratio
        is None
    )
    stockbench = CONVENTIONS["stockbench"]
    assert compute_panel(one_loss, periods_per_year=1, convention=stockbench).sortino_ratio == (
        pytest.approx(statistics.fmean(returns(("100", "101", "99", "100"))) / (2 / 101))
    )


def test_an_unknown_convention_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="openbell, ai-trader, stockbench, ktd-fin"):
        convention_named("sharpe-only")


def test_every_convention_describes_itself_in_one_line() -> None:
    described = CONVENTIONS["ai-trader"].describe()
    assert described.startswith("metrics: ai-trader convention (AI-Trader, arXiv 2512.10971")
    assert "population standard deviation" in described
    assert "close-to-close returns" in described
    assert "weights as published" in described
    assert "\n" not in described


# -- close to close ---------------------------------------------------------------------------


def day(n: int, hour: int = 0) -> datetime:
    return datetime(2025, 11, 1, tzinfo=UTC) + timedelta(days=n, hours=hour)


def bar(symbol: str, start: datetime, close: str, length: timedelta = timedelta(days=1)) -> Bar:
    price = D(close)
    return Bar(
        symbol=symbol,
        start_at=start,
        end_at=start + length,
        open=price,
        high=price,
        low=price,
        close=price,
        volume=D(1),
    )


def test_the_benchmark_close_to_close_from_the_close_before_the_first_slot() -> None:
    source = ReplaySource(
        market="crypto",
        bars={
            "1d": [
                bar("A", day(0), "100"),  # ends at day 1 00:00: the base
                bar("A", day(1), "110"),
                bar("A", day(2), "99"),
                bar("B", day(0), "10"),
                bar("B", day(1), "10"),
                bar("B", day(2), "12"),
            ]
        },
    )
    basket = Benchmark.basket("AB", {"A": D("75.02"), "B": D(25)})  # published: 100.02 %
    slots = [day(1), day(2)]
    cash = D(1000)
    normalised = close_navs("crypto", slots, "1d", cash, sources=(source,), benchmark=basket)
    wa, wb = D("75.02") / D("100.02"), D(25) / D("100.02")
    assert [(p.at, p.nav) for p in normalised] == [
        (day(1), cash),
        (day(2), cash * (wa * D("1.1") + wb * 1)),
        (day(3), cash * (wa * D("0.99") + wb * D("1.2"))),
    ]
    published = close_navs(
        "crypto", slots, "1d", cash, sources=(source,), benchmark=basket, published=True
    )
    # AI-Trader's CD5: the base is the cash, the basket then worth its published 100.02 %
    assert [p.nav for p in published] == [
        cash,
        cash * (D("0.7502") * D("1.1") + D("0.25") * 1),
        cash * (D("0.7502") * D("0.99") + D("0.25") * D("1.2")),
    ]
    # No close before the first slot: the first slot's close is the base, and is the first point.
    later = close_navs("crypto", [day(0), day(1)], "1d", cash, sources=(source,), benchmark=basket)
    assert [(p.at, p.nav) for p in later] == [(day(1), cash), (day(2), cash * (wa * D("1.1") + wb))]


def point(at: datetime, nav: str) -> NavPoint:
    return NavPoint(at=at, nav=D(nav))


def test_an_accounts_periods_end_at_the_next_snapshot_a_close_first() -> None:
    # Hourly: slots at 10, 11 and 15 h; a close at 16 h; a next day's slot at 10 h.
    slots = [point(day(0, 10), "100"), point(day(0, 11), "101"), point(day(0, 15), "103")]
    slots.append(point(day(1, 10), "104"))
    closes = [point(day(0, 16), "102.5"), point(day(1, 16), "105")]
    ends = period_ends(slots, closes, point(day(0, 10), "99"))
    assert [(p.at, p.nav) for p in ends] == [
        (day(0, 10), D(99)),  # the value before the first slot's decision
        (day(0, 11), D(101)),  # the 10 h period ends at the 11 h slot
        (day(0, 15), D(103)),  # the 11 h period at the 15 h slot (no bar between)
        (day(0, 16), D("102.5")),  # the 15 h period at the session's close
        (day(1, 16), D(105)),  # the next day's, at its close
    ]


def test_a_close_at_the_next_slots_instant_ends_the_period() -> None:
    # Crypto: a session's close and the next slot at the same midnight: the close ends the day.
    slots = [point(day(0), "100"), point(day(1), "90")]
    closes = [point(day(1), "95"), point(day(2), "97")]
    assert [p.nav for p in period_ends(slots, closes, None)] == [D(95), D(97)]
    # A close more than a day after a slot is not its period's end (a session without one).
    assert period_ends([point(day(0), "100")], [point(day(2), "97")], None) == []


def test_account_series_by_convention() -> None:
    slots = [point(day(0, 14), "100"), point(day(1, 14), "101")]
    closes = [point(day(0, 21), "102"), point(day(1, 21), "99")]
    assert account_series(OPENBELL, slots, closes, D(1)) == tuple(slots)
    measured = account_series(CONVENTIONS["ktd-fin"], slots, closes, D(98))
    assert [(p.at, p.nav) for p in measured] == [
        (day(0, 14), D(98)),
        (day(0, 21), D(102)),
        (day(1, 21), D(99)),
    ]


def test_annual_turnover_is_the_mean_per_step_scaled_to_a_year() -> None:
    assert behaviour.annual_turnover(0.5, 10, 252.0) == pytest.approx(0.5 / 10 * 252)
    assert behaviour.annual_turnover(None, 10, 252.0) is None
    assert behaviour.annual_turnover(0.5, 0, 252.0) is None
