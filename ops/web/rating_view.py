"""The ratings table of a rating agent's cycle page: its stored report, one line per symbol.

This module owns `rating_lines`, which the cycle page shows above the trace when the cycle has a
`ratings` trace row (the last one, as `openbell trace` shows it); a cycle without one has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from openbell.agents.kinds import RATINGS_TOOL
from openbell.agents.rating.report import stored_report
from openbell.ops.reports import figures
from openbell.store.records import TraceEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class RatingLine:
    """One symbol's rating as the page shows it."""

    symbol: str
    rating: str
    confidence: str
    weight: str
    rationale: str


def rating_lines(entries: tuple[TraceEntry, ...]) -> tuple[RatingLine, ...]:
    """The lines of the cycle's last stored report; none without one."""
    found = [e.result for e in entries if e.role == "tool" and e.tool == RATINGS_TOOL and e.result]
    if not found:
        return ()
    return tuple(
        RatingLine(
            symbol=rating.symbol,
            rating=rating.rating.value.replace("_", " "),
            confidence=str(rating.confidence),
            weight=f"{figures.percent(float(weight))}%",
            rationale=rating.rationale,
        )
        for rating, weight in stored_report(found[-1])
    )
