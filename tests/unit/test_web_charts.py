"""The web pages' SVG charts: trading-time axis with closed hours collapsed, drawdown, escaping."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from xml.etree import ElementTree

import pytest

from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.web.charts import (
    SPARK_HEIGHT,
    SPARK_POINTS,
    drawdown,
    equity_chart,
    nav_range,
    sparkline,
    thin,
    trading_axis,
)

SVG = "{http://www.w3.org/2000/svg}"


def _hourly(day: datetime, navs: list[str]) -> list[NavPoint]:
    """Hourly snapshots from 15:00 UTC (10:00 New York in winter) on `day`."""
    return [
        NavPoint(at=day + timedelta(hours=15 + i), nav=Decimal(nav)) for i, nav in enumerate(navs)
    ]


FRIDAY = datetime(2026, 1, 2, tzinfo=UTC)
MONDAY = datetime(2026, 1, 5, tzinfo=UTC)


def _xs(svg: str, css: str) -> list[float]:
    tree = ElementTree.fromstring(svg)  # noqa: S314  (our own SVG)
    for line in tree.iter(f"{SVG}polyline"):
        if line.get("class") == css:
            return [float(pair.split(",")[0]) for pair in line.get("points", "").split()]
    raise AssertionError(f"no polyline of class {css!r}")


def test_the_weekend_takes_one_step_like_an_hour_of_trading() -> None:
    navs = _hourly(FRIDAY, ["100", "101", "102"]) + _hourly(MONDAY, ["103", "104", "105"])
    svg = str(equity_chart(navs, navs, timezone="America/New_York", label="a", benchmark_label="b"))
    xs = _xs(svg, "line nav")
    gaps = {round(b - a, 3) for a, b in itertools.pairwise(xs)}
    assert len(xs) == 6
    assert len(gaps) == 1  # Friday 17:00 -> Monday 15:00 UTC is one step, as 15:00 -> 16:00 is


def test_sessions_are_labelled_by_their_local_date() -> None:
    navs = _hourly(FRIDAY, ["100", "101"]) + _hourly(MONDAY, ["102", "103"])
    axis = trading_axis([p.at for p in navs], "America/New_York")
    assert [(i, d.isoformat()) for i, d in axis.sessions] == [(0, "2026-01-02"), (2, "2026-01-05")]
    svg = str(equity_chart(navs, [], timezone="America/New_York", label="a", benchmark_label="b"))
    labels = re.findall(r">(\d{4}-\d\d-\d\d)<", svg)
    assert labels[:2] == ["2026-01-02", "2026-01-05"]


def test_a_local_date_not_the_utc_one_splits_sessions() -> None:
    at = datetime(2026, 1, 5, 1, 30, tzinfo=UTC)  # 09:30 Shanghai, Monday
    axis = trading_axis([at, at + timedelta(hours=5)], "Asia/Shanghai")  # 09:30, 14:30
    assert [d.isoformat() for _, d in axis.sessions] == ["2026-01-05"]
    axis = trading_axis([at, at + timedelta(hours=23)], "UTC")
    assert [d.isoformat() for _, d in axis.sessions] == ["2026-01-05", "2026-01-06"]


def test_the_benchmark_shares_the_accounts_axis() -> None:
    navs = _hourly(FRIDAY, ["100", "101", "102"])
    bench = navs[1:]
    svg = str(equity_chart(navs, bench, timezone="UTC", label="a", benchmark_label="b"))
    assert _xs(svg, "line benchmark") == _xs(svg, "line nav")[1:]


@pytest.mark.parametrize(
    ("navs", "expected"),
    [
        (["100", "110", "99", "120"], [0.0, 0.0, -0.1, 0.0]),
        (["100", "50", "75", "25"], [0.0, -0.5, -0.25, -0.75]),
        (["100"], [0.0]),
        ([], []),
    ],
)
def test_drawdown_is_the_fall_from_the_running_peak(navs: list[str], expected: list[float]) -> None:
    assert drawdown([Decimal(n) for n in navs]) == pytest.approx(expected)


def test_the_drawdown_panel_draws_the_accounts_drawdown() -> None:
    navs = _hourly(FRIDAY, ["100", "110", "99", "120"])
    svg = str(equity_chart(navs, [], timezone="UTC", label="a", benchmark_label="b"))
    tree = ElementTree.fromstring(svg)  # noqa: S314  (our own SVG)
    line = next(e for e in tree.iter(f"{SVG}polyline") if e.get("class") == "line drawdown")
    ys = [float(pair.split(",")[1]) for pair in line.get("points", "").split()]
    assert ys[0] == ys[1] == ys[3]  # at the peak: zero drawdown
    assert ys[2] > ys[0]  # below zero, drawn lower (SVG y grows downwards)
    assert ">-10.0%<" in svg


def test_text_in_a_chart_is_escaped() -> None:
    navs = _hourly(FRIDAY, ["100", "101"])
    hostile = '<script>alert(1)</script>"'
    svg = str(equity_chart(navs, [], timezone="UTC", label=hostile, benchmark_label=hostile))
    assert "<script>" not in svg
    ElementTree.fromstring(svg)  # noqa: S314  (our own SVG)  # still well-formed
    assert "<script>" not in str(sparkline(navs, label=hostile))


def test_an_empty_series_says_so() -> None:
    svg = str(equity_chart([], [], timezone="UTC", label="a", benchmark_label="b"))
    assert "no NAV snapshots yet" in svg


def test_a_sparkline_is_up_or_down_with_one_point_per_snapshot() -> None:
    up = str(sparkline(_hourly(FRIDAY, ["100", "90", "120"]), label="x"))
    down = str(sparkline(_hourly(FRIDAY, ["100", "120", "90"]), label="x"))
    assert 'class="spark up"' in up
    assert 'class="spark down"' in down
    points = re.search(r'points="([^"]+)"', up)
    assert points is not None
    assert len(points.group(1).split()) == 3


def test_a_long_series_is_thinned_keeping_its_ends() -> None:
    assert thin([1.0, 2.0, 3.0], 5) == [1.0, 2.0, 3.0]
    values = [float(i) for i in range(1000)]
    kept = thin(values, 10)
    assert len(kept) == 10
    assert (kept[0], kept[-1]) == (0.0, 999.0)
    assert kept == sorted(kept)
    navs = [NavPoint(at=FRIDAY + timedelta(hours=i), nav=Decimal(100 + i % 7)) for i in range(1500)]
    points = re.search(r'points="([^"]+)"', str(sparkline(navs, label="x")))
    assert points is not None
    assert len(points.group(1).split()) == SPARK_POINTS


def _ys(svg: str) -> list[float]:
    points = re.search(r'points="([^"]+)"', svg)
    assert points is not None
    return [float(pair.split(",")[1]) for pair in points.group(1).split()]


def test_sparklines_on_a_shared_scale_compare_their_heights() -> None:
    """Issue 28 (9): each line spans its own height by default; on one scale a small move draws
    small beside a big one."""
    small, big = _hourly(FRIDAY, ["100", "110"]), _hourly(FRIDAY, ["100", "200"])
    top, bottom = 1.0, SPARK_HEIGHT - 1.0
    assert _ys(str(sparkline(small, label="x"))) == [bottom, top]
    assert _ys(str(sparkline(big, label="x"))) == [bottom, top]
    scale = nav_range([small, big])
    assert scale == (100.0, 200.0)
    shared_small = _ys(str(sparkline(small, label="x", scale=scale)))
    assert shared_small[0] == bottom
    assert shared_small[1] == pytest.approx(bottom - (bottom - top) * 0.1, abs=0.05)
    assert _ys(str(sparkline(big, label="x", scale=scale))) == [bottom, top]
    assert nav_range([[], []]) is None
