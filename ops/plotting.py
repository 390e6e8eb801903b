"""The equity-curve chart of an agent report: the account's NAV against its benchmark, as a PNG.

This module owns the one picture `openbell report --plot` draws. It uses matplotlib's object API
on the Agg canvas (no pyplot, no display, no global backend switch), so it runs headless on a
server and leaves no state behind. NAVs become floats here, for drawing only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from openbell.ops.reports import AgentReport
from openbell.ops.return_metrics import NavPoint


def _utc_axis(points: Sequence[NavPoint]) -> npt.NDArray[np.datetime64]:
    """The instants as naive UTC datetime64 values: matplotlib draws those without a tz lookup."""
    naive = [point.at.astimezone(UTC).replace(tzinfo=None) for point in points]
    return np.array(naive, dtype="datetime64[us]")


def plot_equity(found: AgentReport, path: Path, *, dpi: int = 110) -> Path:
    """Draw the account's NAV and the benchmark's over the report window into a PNG at `path`."""
    figure = Figure(figsize=(10, 5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    account = found.account
    axes.plot(
        _utc_axis(found.navs),
        [float(point.nav) for point in found.navs],
        label=account.agent_name,
        linewidth=1.6,
    )
    if found.benchmark_navs:
        axes.plot(
            _utc_axis(found.benchmark_navs),
            [float(point.nav) for point in found.benchmark_navs],
            label=f"benchmark {found.benchmark}",
            linewidth=1.2,
            linestyle="--",
        )
    axes.axhline(float(account.initial_cash), color="grey", linewidth=0.8, alpha=0.6)
    axes.set_title(f"{account.agent_name} in {account.market} ({found.cadence} slots)")
    axes.set_ylabel(f"NAV ({account.currency})")
    axes.set_xlabel("UTC")
    axes.grid(visible=True, alpha=0.3)
    axes.legend(loc="best")
    figure.autofmt_xdate()
    figure.savefig(path, dpi=dpi, format="png")
    return path
