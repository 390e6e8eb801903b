"""`openbell report --attribution`: an agent's factor attribution as a record and a table.

This module owns the attribution's part of the `report` command: computing it over the report's
window (`ops.evaluation.attribution.ledger_inputs`) and showing its record
(`ops.evaluation.attribution.output`) as a rich table of parts (contribution in percent of NAV, the
book's mean exposure to each style, the periods a style was not estimated in), with the styles
skipped altogether in the caption.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from openbell.ops.reports import figures

if TYPE_CHECKING:
    from rich.table import Table

    from openbell.markets.replay_source import ReplaySource
    from openbell.ops.config.schema import OpenbellConfig


def attribution_of(
    engine: Engine,
    agent: str,
    market: str,
    window: tuple[datetime | None, datetime | None],
    loaded: OpenbellConfig | None = None,
    *,
    source: ReplaySource | None = None,
) -> dict[str, Any]:
    """The attribution record of `agent` in `market` over `window` (every period included), with
    the cross-section and the style set of `loaded`'s `[attribution]` (default: every symbol with
    bars, every style); `cross_section = "universe"` takes the market's configured universe (a
    CSI 300 file's members of each period's day). `source` gives the bars (a `replay:` market's
    files) in place of the bundled ones and the ledger's cache."""
    from openbell.daemon.clock import SystemClock
    from openbell.ops.evaluation.attribution.ledger_inputs import (
        DEFAULT_ATTRIBUTION,
        account_attribution,
    )
    from openbell.ops.evaluation.attribution.output import attribution_record
    from openbell.ops.wiring.planning import attribution_choice

    choice = (
        DEFAULT_ATTRIBUTION
        if loaded is None
        else attribution_choice(loaded, SystemClock().now().date())
    )
    found = account_attribution(
        engine,
        agent,
        market,
        *window,
        universe=choice.universes.get(market),
        styles=choice.styles,
        source=source,
    )
    return attribution_record(found)


def _exposure(value: float | None) -> str:
    return figures.MISSING if value is None else f"{value:+.2f}"


def attribution_table(record: dict[str, Any]) -> Table:
    """The record's linked parts as a table: part, contribution %, mean exposure, periods not
    estimated; the total last, the skipped styles and the method in the caption."""
    from rich.table import Table

    from openbell.ops.evaluation.attribution.output import part_rows

    table = Table(
        title=(
            f"{record['agent']} in {record['market']}: factor attribution over "
            f"{record['periods_count']} {record['cadence']} periods, "
            f"{record['universe_size']} symbols"
        ),
        title_justify="left",
        caption=_caption(record),
        caption_justify="left",
    )
    table.add_column("part")
    table.add_column("contribution %", justify="right")
    table.add_column("mean exposure", justify="right")
    table.add_column("periods not estimated", justify="right")
    for row in part_rows(record):
        table.add_row(
            row.part,
            figures.percent(row.contribution),
            _exposure(row.mean_exposure),
            str(row.dropped_periods) if row.mean_exposure is not None else "",
            style="bold" if row.part == "total" else None,
        )
    return table


def _caption(record: dict[str, Any]) -> str:
    skipped = "; ".join(f"{name}: {reason}" for name, reason in record["skipped"].items())
    method = record["method"]
    lines = [
        f"periods linked by Carino's method; styles screened at VIF > {method['vif_threshold']:g}",
        f"lookback {method['lookback_bars']} bars, reversal {method['reversal_bars']} bars",
        f"cross-section: {record['cross_section']}",
    ]
    if skipped:
        lines.append(f"skipped: {skipped}")
    return "\n".join(lines)
