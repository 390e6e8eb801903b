"""`openbell report --plot` in trading time (issue 28, 9): one step per snapshot, so the weekend
between two sessions takes no room and no line is drawn across it, and the ticks are the session
dates in the market's time zone, as on the web pages."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from openbell.ops.reports.market_reports import report
from openbell.ops.reports.plotting import equity_figure, plot_equity
from openbell.store.ledger import Ledger
from openbell_testkit.reports import SLOTS, build_ledger

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_plot_steps_through_trading_time(
    ledger: Ledger, engine: Engine, tmp_path: Path
) -> None:
    build_ledger(ledger)
    found = report(engine, "alpha", "us")
    figure = equity_figure(found)
    (axes,) = figure.axes
    nav = axes.lines[0]
    # Friday 2025-10-03 and Monday 2025-10-06 are neighbouring steps, as every other session.
    assert list(nav.get_xdata()) == list(range(len(SLOTS)))
    assert [float(y) for y in nav.get_ydata()] == [float(p.nav) for p in found.navs]
    labels = [tick.get_text() for tick in axes.get_xticklabels()]
    assert labels == [at.date().isoformat() for at in SLOTS]  # 09:30 New York: same date
    assert list(axes.get_xticks()) == list(range(len(SLOTS)))
    png = plot_equity(found, tmp_path / "alpha.png")
    assert png.read_bytes().startswith(PNG_MAGIC)
