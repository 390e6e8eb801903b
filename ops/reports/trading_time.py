"""Trading time: an x axis on which the hours a market is closed take no room.

This module owns `TradingAxis`, shared by the web pages' SVG charts (`ops.web.charts`) and the
PNG of `openbell report --plot` (`ops.reports.plotting`): every instant any series of a chart has is
one step of the axis, so nights, weekends, holidays and lunch breaks take no room and no line is
drawn across them, and the axis is labelled with the session dates (in the market's time zone) where
a new session starts. Pure: instants in, steps out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo


@dataclass(frozen=True, slots=True)
class TradingAxis:
    """The x axis in trading time: one step per instant, sessions labelled by their local date.

    `steps` are the instants in order; `sessions` the index of the first step of each session
    with its date in the market's time zone.
    """

    steps: tuple[datetime, ...]
    sessions: tuple[tuple[int, date], ...]

    def positions(self) -> dict[datetime, int]:
        """Each instant's step."""
        return {at: i for i, at in enumerate(self.steps)}


def trading_axis(instants: Sequence[datetime], timezone: str) -> TradingAxis:
    """The trading-time axis of `instants` (any order, duplicates allowed), with sessions split
    where the local date in `timezone` changes."""
    steps = tuple(sorted(set(instants)))
    zone = ZoneInfo(timezone)
    sessions: list[tuple[int, date]] = []
    for i, at in enumerate(steps):
        day = at.astimezone(zone).date()
        if not sessions or sessions[-1][1] != day:
            sessions.append((i, day))
    return TradingAxis(steps=steps, sessions=tuple(sessions))


def date_labels(axis: TradingAxis, limit: int) -> list[tuple[int, date]]:
    """At most `limit` session starts, evenly picked, the first always among them."""
    sessions = list(axis.sessions)
    if len(sessions) <= limit:
        return sessions
    stride = -(-len(sessions) // limit)
    return sessions[::stride]
