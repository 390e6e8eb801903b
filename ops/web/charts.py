"""The web pages' charts, drawn on the server as SVG: sparklines, and the equity curve against the
benchmark with its drawdown panel.

This module owns turning NAV series into SVG markup, as pure functions. The x axis is trading
time, not wall-clock time: every instant any series of a chart has is one step of the axis
(`ops.reports.trading_time.TradingAxis`), so the hours a market is closed (nights, weekends,
holidays, lunch breaks) take no room and no line is drawn across them; the axis is labelled with the
session dates (in the market's time zone) where a new session starts. NAVs become floats here,
for drawing only. Every text drawn (labels, dates, figures) is escaped; the SVG is styled by
class names from the pages' stylesheet, never by inline styles, so a Content-Security-Policy
without `'unsafe-inline'` holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from markupsafe import Markup, escape

from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.reports.trading_time import TradingAxis, date_labels, trading_axis

__all__ = ["TradingAxis", "equity_chart", "nav_range", "sparkline", "thin", "trading_axis"]

#: The equity chart's size in SVG user units (it scales to the page's width).
CHART_WIDTH = 800
EQUITY_HEIGHT = 260
DRAWDOWN_HEIGHT = 110
#: Room for the y-axis figures on the left and the date labels below each panel.
_LEFT = 64
_RIGHT = 12
_TOP = 30
#: Roughly how wide a character of a legend is, in SVG user units.
_CHAR_WIDTH = 7.2
_GAP = 34
_BOTTOM = 24
#: At most this many session dates are labelled on the x axis.
MAX_DATE_LABELS = 7

SPARK_WIDTH = 120
SPARK_HEIGHT = 28
#: A sparkline draws at most this many of its points (one per pixel of its width, or so).
SPARK_POINTS = 120


def _svg(text: str) -> Markup:
    """SVG this module wrote: numbers, class names and texts that went through `escape`."""
    return Markup(text)  # noqa: S704  (every text in it was escaped where it was written)


def drawdown(values: Sequence[Decimal]) -> list[float]:
    """The drawdown at each point: its value over the running peak so far, minus one (<= 0)."""
    out: list[float] = []
    peak: Decimal | None = None
    for value in values:
        peak = value if peak is None or value > peak else peak
        out.append(float(value / peak) - 1.0 if peak > 0 else 0.0)
    return out


@dataclass(frozen=True, slots=True)
class _Frame:
    """A panel's drawing box and its scales: the axis steps across, `low..high` upwards."""

    top: float
    height: float
    steps: int
    low: float
    high: float

    def x(self, step: int) -> float:
        span = CHART_WIDTH - _LEFT - _RIGHT
        return _LEFT + (span * step / (self.steps - 1) if self.steps > 1 else span / 2)

    def y(self, value: float) -> float:
        spread = self.high - self.low
        share = (value - self.low) / spread if spread > 0 else 0.5
        return self.top + self.height * (1.0 - share)


def _range(values: Sequence[float], *, floor_zero_top: bool = False) -> tuple[float, float]:
    low, high = min(values), max(values)
    if floor_zero_top:
        high = 0.0
    pad = (high - low) * 0.06 or abs(high) * 0.01 or 1.0
    return low - pad, high + (0.0 if floor_zero_top else pad)


def _points(frame: _Frame, pairs: Sequence[tuple[int, float]]) -> str:
    return " ".join(f"{frame.x(step):.1f},{frame.y(value):.1f}" for step, value in pairs)


def _polyline(frame: _Frame, pairs: Sequence[tuple[int, float]], css: str) -> str:
    if not pairs:
        return ""
    if len(pairs) == 1:
        step, value = pairs[0]
        return f'<circle class="{css}" cx="{frame.x(step):.1f}" cy="{frame.y(value):.1f}" r="2.5"/>'
    return f'<polyline class="{css}" points="{_points(frame, pairs)}"/>'


def _area(frame: _Frame, pairs: Sequence[tuple[int, float]], css: str) -> str:
    """The area between the series and zero (the drawdown panel's fill)."""
    if len(pairs) < 2:
        return ""
    first, last = pairs[0][0], pairs[-1][0]
    zero = frame.y(0.0)
    body = _points(frame, pairs)
    return (
        f'<polygon class="{css}" points="{frame.x(first):.1f},{zero:.1f} {body} '
        f'{frame.x(last):.1f},{zero:.1f}"/>'
    )


def _grid(frame: _Frame, ticks: Sequence[float], text: Sequence[str]) -> str:
    parts: list[str] = []
    for value, label in zip(ticks, text, strict=True):
        y = frame.y(value)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{CHART_WIDTH - _RIGHT}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
    return "".join(parts)


def _session_marks(frame: _Frame, axis: TradingAxis, *, dated: bool) -> str:
    """A faint line at each labelled session start, with its date under the panel if `dated`."""
    parts: list[str] = []
    bottom = frame.top + frame.height
    for step, day in date_labels(axis, MAX_DATE_LABELS):
        x = frame.x(step)
        parts.append(
            f'<line class="session" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top:.1f}" '
            f'y2="{bottom:.1f}"/>'
        )
        if dated:
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{bottom + 15:.1f}" text-anchor="middle">'
                f"{escape(day.isoformat())}</text>"
            )
    return "".join(parts)


def _legend(label: str, benchmark_label: str) -> str:
    """The key above the equity panel: a swatch of each line and its name."""
    second = _LEFT + 24 + _CHAR_WIDTH * len(label) + 24
    return (
        f'<line class="line nav" x1="{_LEFT}" x2="{_LEFT + 18}" y1="12" y2="12"/>'
        f'<text class="legend nav" x="{_LEFT + 24}" y="16">{escape(label)}</text>'
        f'<line class="line benchmark" x1="{second:.1f}" x2="{second + 18:.1f}" y1="12" y2="12"/>'
        f'<text class="legend benchmark" x="{second + 24:.1f}" y="16">'
        f"{escape(benchmark_label)}</text>"
    )


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def _series(axis: TradingAxis, points: Sequence[NavPoint]) -> list[tuple[int, float]]:
    positions = axis.positions()
    return [(positions[point.at], float(point.nav)) for point in points]


def equity_chart(
    navs: Sequence[NavPoint],
    benchmark: Sequence[NavPoint],
    *,
    timezone: str,
    label: str,
    benchmark_label: str,
) -> Markup:
    """The account's NAV against the benchmark's over trading time, with a drawdown panel below.

    `timezone` is the market's, for the session dates on the x axis. An empty `navs` draws an
    empty frame saying so.
    """
    axis = trading_axis([p.at for p in itertools.chain(navs, benchmark)], timezone)
    height = _TOP + EQUITY_HEIGHT + _GAP + DRAWDOWN_HEIGHT + _BOTTOM
    head = (
        f'<svg class="chart equity" viewBox="0 0 {CHART_WIDTH} {height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(label)} against '
        f'{escape(benchmark_label)}, with drawdown">'
    )
    if not navs:
        return _svg(
            f'{head}<text class="empty" x="{CHART_WIDTH / 2}" y="{height / 2}" '
            'text-anchor="middle">no NAV snapshots yet</text></svg>'
        )
    own = _series(axis, navs)
    bench = _series(axis, benchmark)
    low, high = _range([v for _, v in itertools.chain(own, bench)])
    top = _Frame(top=_TOP, height=EQUITY_HEIGHT, steps=len(axis.steps), low=low, high=high)
    own_dd = [(s, d) for (s, _), d in zip(own, drawdown([p.nav for p in navs]), strict=True)]
    bench_dd = [
        (s, d) for (s, _), d in zip(bench, drawdown([p.nav for p in benchmark]), strict=True)
    ]
    dd_low, dd_high = _range([d for _, d in itertools.chain(own_dd, bench_dd)], floor_zero_top=True)
    lower = _Frame(
        top=_TOP + EQUITY_HEIGHT + _GAP,
        height=DRAWDOWN_HEIGHT,
        steps=len(axis.steps),
        low=dd_low,
        high=dd_high,
    )
    nav_ticks = _ticks(low, high)
    deepest = min(d for _, d in itertools.chain(own_dd, bench_dd))
    dd_ticks = [deepest, deepest / 2, 0.0] if deepest < 0 else [0.0]
    body = "".join(
        [
            _grid(top, nav_ticks, [f"{t:,.0f}" for t in nav_ticks]),
            _session_marks(top, axis, dated=False),
            _polyline(top, bench, "line benchmark"),
            _polyline(top, own, "line nav"),
            _grid(lower, dd_ticks, [f"{t:.1%}" for t in dd_ticks]),
            _session_marks(lower, axis, dated=True),
            _area(lower, own_dd, "area drawdown"),
            _polyline(lower, bench_dd, "line benchmark"),
            _polyline(lower, own_dd, "line drawdown"),
            _legend(label, benchmark_label),
            f'<text class="legend" x="{_LEFT}" y="{lower.top - 8:.1f}">drawdown</text>',
        ]
    )
    return _svg(f"{head}{body}</svg>")


def thin(values: Sequence[float], limit: int) -> list[float]:
    """At most `limit` (>= 2) of `values`, evenly spaced, the first and the last among them."""
    if len(values) <= limit:
        return list(values)
    last = len(values) - 1
    return [values[round(i * last / (limit - 1))] for i in range(limit)]


def nav_range(series: Sequence[Sequence[NavPoint]]) -> tuple[float, float] | None:
    """The lowest and highest NAV of all of `series` (a board's shared sparkline scale), or None
    when they have no point."""
    values = [float(point.nav) for navs in series for point in navs]
    return (min(values), max(values)) if values else None


def sparkline(
    navs: Sequence[NavPoint], *, label: str, scale: tuple[float, float] | None = None
) -> Markup:
    """A small line of the NAV series in trading time (one step per snapshot, at most
    `SPARK_POINTS` of them), for a table row; drawn `up` or `down` by whether the last NAV is
    above the first. Its height spans the series' own range, or `scale` (low, high: one range
    shared by a board's lines, so their heights compare)."""
    values = thin([float(p.nav) for p in sorted(navs, key=lambda p: p.at)], SPARK_POINTS)
    head = (
        f'<svg class="spark" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(label)}">'
    )
    if len(values) < 2:
        return _svg(f"{head}</svg>")
    low, high = scale if scale is not None else (min(values), max(values))
    spread = high - low
    step = (SPARK_WIDTH - 2) / (len(values) - 1)
    coords = " ".join(
        f"{1 + i * step:.1f},"
        f"{(SPARK_HEIGHT - 2) * (1 - ((v - low) / spread if spread else 0.5)) + 1:.1f}"
        for i, v in enumerate(values)
    )
    trend = "up" if values[-1] >= values[0] else "down"
    return _svg(f'{head}<polyline class="spark {trend}" points="{coords}"/></svg>')
