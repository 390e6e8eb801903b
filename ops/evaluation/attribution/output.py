"""An account's attribution as JSON-ready records and as the rows a table shows.

This module owns the attribution's outside shape, shared by `openbell report --attribution`
(its JSON and its table) and the web's agent page and API. Contributions and exposures are
floats (fractions of NAV, standardised exposures), never rounded here; a table rounds them
(`ops.reports.figures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openbell.ops.evaluation.attribution.cross_section import SPARE_NAMES
from openbell.ops.evaluation.attribution.decomposition import PeriodAttribution
from openbell.ops.evaluation.attribution.ledger_inputs import AccountAttribution

#: How the regression weighs symbols and links periods, as the record states it.
METHOD = {
    "market": "equal-weighted mean return of the universe",
    "styles": "WLS on returns in excess of the market, weights sqrt(mean traded value)",
    "standardisation": "equal-weighted mean 0, std 1, clipped at +-3",
    "linking": "carino",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PartRow:
    """One part of the window's return: its linked contribution, the book's mean exposure (for
    a style) and the periods it was not estimated in."""

    part: str
    contribution: float
    mean_exposure: float | None
    dropped_periods: int


def part_rows(record: dict[str, Any]) -> list[PartRow]:
    """An attribution record's window parts in order: market, each style, selection, trading
    and the total (the compounded return the others sum to)."""
    parts = record["parts"]

    def plain(name: str, value: float) -> PartRow:
        return PartRow(part=name, contribution=value, mean_exposure=None, dropped_periods=0)

    styles = [
        PartRow(
            part=name,
            contribution=value,
            mean_exposure=record["mean_exposures"].get(name),
            dropped_periods=record["dropped_periods"].get(name, 0),
        )
        for name, value in parts["styles"].items()
    ]
    return [
        plain("market", parts["market"]),
        *styles,
        plain("selection", parts["selection"]),
        plain("trading", parts["trading"]),
        plain("total", record["total"]),
    ]


def _period_record(period: PeriodAttribution) -> dict[str, Any]:
    return {
        "start_at": period.start_at.isoformat(),
        "end_at": period.end_at.isoformat(),
        "total": period.total,
        "market": period.market,
        "styles": dict(period.styles),
        "selection": period.selection,
        "trading": period.trading,
        "invested": period.invested,
        "exposures": dict(period.exposures),
        "dropped": dict(period.dropped),
    }


def attribution_record(found: AccountAttribution, *, periods: bool = True) -> dict[str, Any]:
    """The attribution as a record: window, method, linked parts, exposures, dropped styles
    (per style, the periods it was not estimated in; `skipped`: each style no period estimated,
    with the first period's reason) and, with `periods`, every period's parts."""
    window = found.attribution
    skipped = {
        name: reason
        for period in window.periods[:1]
        for name, reason in period.dropped.items()
        if name not in window.styles
    }
    record: dict[str, Any] = {
        "agent": found.agent,
        "market": found.market,
        "currency": found.currency,
        "cadence": found.cadence,
        "interval": found.interval,
        "start": found.start.isoformat() if found.start else None,
        "end": found.end.isoformat() if found.end else None,
        "periods_count": len(window.periods),
        "cross_section": found.cross_section,
        "styles": list(found.styles),
        "universe_size": len(found.universe),
        "sources": list(found.sources),
        "method": {
            **METHOD,
            "lookback_bars": found.windows.lookback,
            "reversal_bars": found.windows.reversal,
            "vif_threshold": found.vif_threshold,
            "spare_names": SPARE_NAMES,
        },
        "total": window.total,
        "parts": {
            "market": window.market,
            "styles": dict(window.styles),
            "selection": window.selection,
            "trading": window.trading,
        },
        "parts_sum": window.parts_sum,
        "mean_exposures": dict(window.mean_exposures),
        "dropped_periods": dict(window.dropped_periods),
        "skipped": skipped,
    }
    if periods:
        record["periods"] = [_period_record(period) for period in window.periods]
    return record
