"""The agent page's factor attribution section: a small table of the window's parts.

This module owns how the page shows an account's attribution (`ops.evaluation.attribution`): one row
per part (market, each style estimated in some period, selection, trading, total) with its linked
contribution in percent of NAV and, for a style, the book's mean standardised exposure; a note
names the periods and the styles skipped altogether (size and value without point-in-time
fundamentals). Figures are rounded as the CLI rounds them (`ops.reports.figures`).
"""

from __future__ import annotations

from dataclasses import dataclass

from openbell.ops.evaluation.attribution.ledger_inputs import AccountAttribution
from openbell.ops.evaluation.attribution.output import attribution_record, part_rows
from openbell.ops.reports import figures


@dataclass(frozen=True, slots=True, kw_only=True)
class PartLine:
    """One part as the page shows it."""

    part: str
    contribution: str
    exposure: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributionView:
    """The section: its parts and a one-line note on the periods and skipped styles."""

    parts: tuple[PartLine, ...]
    note: str


def attribution_view(found: AccountAttribution) -> AttributionView:
    """The attribution section of `found`."""
    record = attribution_record(found, periods=False)
    parts = tuple(
        PartLine(
            part=row.part,
            contribution=figures.percent(row.contribution),
            exposure="" if row.mean_exposure is None else f"{row.mean_exposure:+.2f}",
        )
        for row in part_rows(record)
    )
    note = (
        f"{record['periods_count']} {record['cadence']} periods over {record['universe_size']} "
        "symbols, linked by Carino's method."
    )
    if record["skipped"]:
        note += " Not estimated: " + "; ".join(
            f"{name} ({reason})" for name, reason in record["skipped"].items()
        )
        note += "."
    return AttributionView(parts=parts, note=note)
