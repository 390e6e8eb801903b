"""benchmarks/ai_trader_table.py: AI-Trader's Table 1 baseline rows from the bundled bars.

The script's every row is pinned (a change of data, window or formula moves a figure and fails
here), the bundled bars reproduce the paper's figures under AI-Trader's formulas, the formulas
and the close-to-close basket are checked by hand, and no row is priced past its bundled bars.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import statistics
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from pathlib import Path
from types import ModuleType

import pytest

from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.return_metrics import NavPoint

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ai_trader_table.py"

# (points, return %, ann. %, vol. %, Sharpe, Sortino, max DD %), as the markdown prints them.
PINNED = {
    "QQQ (us, hourly)": {
        "paper": (None, "1.87", "", "17.16", "", "1.51", "-3.94"),
        "AI-Trader formulas": (162, "1.87", "20.75", "17.16", "1.18", "1.51", "-3.94"),
        "close-to-close": (162, "1.87", "19.01", "16.54", "1.13", "1.63", "-3.94"),
        "openbell": (162, "2.96", "31.52", "14.76", "1.93", "2.66", "-4.08"),
    },
    "SSE-50 000016.SH (cn, daily)": {
        "paper": (None, "1.65", "", "13.03", "", "2.19", "-2.01"),
        "AI-Trader formulas": (23, "1.65", "20.66", "13.03", "1.51", "2.19", "-2.01"),
        "close-to-close": (23, "1.65", "20.66", "13.34", "1.47", "2.14", "-2.01"),
        "openbell": (22, "1.05", "13.36", "17.09", "0.82", "1.16", "-2.88"),
    },
    "CD5 (crypto, daily)": {
        "paper": (None, "-14.30", "", "54.93", "", "-12.71", "-15.71"),
        "AI-Trader formulas": (15, "-14.30", "-98.21", "54.93", "-7.00", "-12.71", "-15.71"),
        "close-to-close": (15, "-14.31", "-98.22", "56.99", "-6.76", "-7.37", "-15.71"),
        "openbell": (14, "-15.26", "-99.04", "57.97", "-7.70", "-8.23", "-15.71"),
    },
    "CD5 (crypto, hourly)": {
        "AI-Trader formulas": (349, "-7.58", "-30.99", "21.44", "-1.62", "-2.01", "-16.42"),
        "close-to-close": (349, "-7.58", "-86.24", "49.64", "-3.75", "-4.83", "-16.42"),
        "openbell": (349, "-7.62", "-86.41", "49.55", "-3.78", "-4.88", "-16.42"),
    },
}


@pytest.fixture(scope="module")
def table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ai_trader_table", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def printed(table: ModuleType, row: object) -> tuple[int | None, str, str, str, str, str, str]:
    pct, ratio = table._pct, table._ratio
    return (
        row.points,  # type: ignore[attr-defined]
        pct(row.cumulative_return),  # type: ignore[attr-defined]
        pct(row.annual_return),  # type: ignore[attr-defined]
        pct(row.annual_volatility),  # type: ignore[attr-defined]
        ratio(row.sharpe_ratio),  # type: ignore[attr-defined]
        ratio(row.sortino_ratio),  # type: ignore[attr-defined]
        pct(row.max_drawdown),  # type: ignore[attr-defined]
    )


def test_every_row_of_the_table_is_pinned(table: ModuleType) -> None:
    found: dict[str, dict[str, tuple[int | None, str, str, str, str, str, str]]] = {}
    for row in table.rows(None):
        found.setdefault(row.baseline, {})[row.convention] = printed(table, row)
    assert found == PINNED


def test_the_bundled_bars_reproduce_the_papers_figures_under_the_ai_trader_convention(
    table: ModuleType,
) -> None:
    compared = 0
    for baseline in table.BASELINES:
        paper = baseline.paper
        if paper is None:
            continue
        source = ReplaySource.from_bundled(baseline.market, names=baseline.files)
        closes = table.bundled_closes(baseline, source, published=True)
        row = table.ai_trader_row(baseline, closes)
        # Table 1's precision: percentages and Sortino to two places.
        assert (
            round(row.cumulative_return * 100, 2),
            round(row.sortino_ratio, 2),
            round(row.annual_volatility * 100, 2),
            round(row.max_drawdown * 100, 2),
        ) == (
            paper.cumulative_return_pct,
            paper.sortino_ratio,
            paper.volatility_pct,
            paper.max_drawdown_pct,
        ), baseline.name
        compared += 1
    assert compared == 3


def test_ai_traders_formulas_by_hand(table: ModuleType) -> None:
    baseline = table.BASELINES[1]  # daily stocks: 252 periods a year
    values = [D(100), D(110), D(99), D("103.95"), D("93.555"), D(120)]
    navs = [NavPoint(at=at(hour), nav=value) for hour, value in enumerate(values)]
    row = table.ai_trader_row(baseline, navs)
    returns = [0.10, -0.10, 0.05, -0.10, 120 / 93.555 - 1]
    mean = sum(returns) / 5
    population = math.sqrt(sum((r - mean) ** 2 for r in returns) / 5)  # not the sample one
    negative = [-0.10, -0.10]
    downside = math.sqrt(sum((r - sum(negative) / 2) ** 2 for r in negative) / 2)
    assert downside == 0  # two equal losses: the downside spread of the negatives alone is 0
    assert row.periods_per_year == 252
    assert row.cumulative_return == pytest.approx(0.2)
    assert row.annual_volatility == pytest.approx(population * math.sqrt(252))
    assert row.sharpe_ratio == pytest.approx(mean / population * math.sqrt(252))
    assert row.sortino_ratio is None  # AI-Trader's code would divide by zero here
    assert row.max_drawdown == pytest.approx(93.555 / 110 - 1)
    # Unequal losses: Sortino is the mean over their population deviation, annualised.
    values = [D(100), D(110), D(99), D("94.05"), D(120)]
    navs = [NavPoint(at=at(hour), nav=value) for hour, value in enumerate(values)]
    row = table.ai_trader_row(baseline, navs)
    returns = [0.10, -0.10, -0.05, 120 / 94.05 - 1]
    expected = (sum(returns) / 4) / statistics.pstdev([-0.10, -0.05]) * math.sqrt(252)
    assert row.sortino_ratio == pytest.approx(expected)
    assert table.ai_trader_factor(dataclasses.replace(baseline, interval="1h")) == 1638
    assert table.ai_trader_factor(table.BASELINES[2]) == 365


def at(hour: int) -> datetime:
    return datetime(2025, 11, 2, tzinfo=UTC) + timedelta(hours=hour)


def test_close_to_close_values_the_basket_from_the_close_before_the_window(
    table: ModuleType,
) -> None:
    series = {
        "A": [(at(0), D(100)), (at(1), D(110)), (at(2), D(99))],
        "B": [(at(0), D(10)), (at(1), D(10)), (at(2), D(12))],
    }
    navs = table.close_to_close({"A": D(3), "B": D(1)}, series, at(0), at(2))
    assert [p.at for p in navs] == [at(0), at(1), at(2)]
    cash = table.CASH
    assert [p.nav for p in navs] == [
        cash,
        cash * (D("0.75") * D("1.1") + D("0.25") * 1),
        cash * (D("0.75") * D("0.99") + D("0.25") * D("1.2")),
    ]
    # Without a close before the window, the window's first close is the base.
    later = table.close_to_close({"A": D(1)}, series, at(0) - timedelta(hours=1), at(2))
    assert [p.nav for p in later] == [cash, cash * D("1.1"), cash * D("0.99")]


def test_no_openbell_row_is_priced_past_its_bundled_bars(table: ModuleType) -> None:
    for baseline in table.BASELINES:
        source = ReplaySource.from_bundled(baseline.market, names=baseline.files)
        row, factor = table.openbell_row(baseline, source)
        last = min(
            source.bars_between([symbol], baseline.interval, table._EARLY, table._FAR)[symbol][
                -1
            ].start_at
            for symbol in table.benchmark_for(baseline.market).weights
        )
        assert datetime.fromisoformat(row.end) <= last, baseline.name
        assert row.points > 10
        assert factor > 0
    # The bundled SSE-50 index ends 2025-11-07: a window past it is refused, not carried flat.
    sse = dataclasses.replace(table.BASELINES[1], end_at=datetime(2025, 11, 20, tzinfo=UTC))
    source = ReplaySource.from_bundled(sse.market, names=sse.files)
    with pytest.raises(ValueError, match=r"000016\.SH bars end 2025-11-07"):
        table.openbell_row(sse, source)
