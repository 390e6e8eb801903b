"""The equity-curve chart of an agent report: the account's NAV against its benchmark, as a PNG.

This module owns the one picture `openbell report --plot` draws. Its x axis is trading time, as
the web pages' charts are (`ops.reports.trading_time`): one step per snapshot instant of either
series, so the hours a market is closed (nights, weekends, holidays) take no room and no straight
line is drawn across them; the ticks are the session dates in the market's time zone. It uses
matplotlib's object API on the Agg canvas (no pyplot, no display, no global backend switch), so it
runs headless on a server and leaves no state behind. NAVs become floats here, for drawing only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from openbell.markets.rules import rules_for
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.reports.market_reports import AgentReport
from openbell.ops.reports.trading_time import TradingAxis, date_labels, trading_axis

#: At most this many session dates label the x axis.
MAX_DATE_TICKS = 10


def _steps(axis: TradingAxis, points: Sequence[NavPoint]) -> list[int]:
    """Each point's step on the trading-time axis."""
    at = axis.positions()
    return [at[point.at] for point in points]


def equity_figure(found: AgentReport) -> Figure:
    """The account's NAV and the benchmark's over the report window, on a trading-time axis."""
    figure = Figure(figsize=(10, 5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    account = found.account
    timezone = rules_for(account.market).timezone
    navs = sorted(found.navs, key=lambda point: point.at)
    bench = sorted(found.benchmark_navs, key=lambda point: point.at)
    axis = trading_axis([point.at for point in itertools.chain(navs, bench)], timezone)
    axes.plot(
        _steps(axis, navs),
        [float(point.nav) for point in navs],
        label=account.agent_name,
        linewidth=1.6,
    )
    if bench:
        axes.plot(
            _steps(axis, bench),
            [float(point.nav) for point in bench],
            label=f"benchmark {found.benchmark}",
            linewidth=1.2,
            linestyle="--",
        )
    axes.axhline(float(account.initial_cash), color="grey", linewidth=0.8, alpha=0.6)
    ticks = date_labels(axis, MAX_DATE_TICKS)
    axes.set_xticks([step for step, _day in ticks], [day.isoformat() for _step, day in ticks])
    for step, _day in axis.sessions[1:]:  # where a session starts, after the market was closed
        axes.axvline(step - 0.5, color="grey", linewidth=0.5, alpha=0.25)
    axes.set_title(f"{account.agent_name} in {account.market} ({found.cadence} slots)")
    axes.set_ylabel(f"NAV ({account.currency})")
    axes.set_xlabel(f"trading time: closed hours take no room; sessions dated in {timezone}")
    axes.grid(visible=True, axis="y", alpha=0.3)
    axes.legend(loc="best")
    figure.autofmt_xdate()
    return figure


def plot_equity(found: AgentReport, path: Path, *, dpi: int = 110) -> Path:
    """Draw `equity_figure(found)` into a PNG at `path`."""
    equity_figure(found).savefig(path, dpi=dpi, format="png")
    return path
