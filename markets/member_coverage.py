"""How much of a universe a replay's data covers: the members with bars in the replay window.

This module owns `MemberCoverage` and `member_coverage`. A member is covered when the replay source
holds at least one bar of the cadence's interval starting in the window; a replay states the
coverage of each universe (`covered/members`) and, when members lack data, refuses or (allowed)
proceeds with a warning naming them, so a universe of 20 stocks is never traded as 5 in silence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from openbell.markets.replay_source import ReplaySource

#: How many missing members a warning names before it says "and N more".
_NAMED = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberCoverage:
    """The members of universe `universe` of market `market`, and those without data."""

    market: str
    universe: str
    members: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def covered(self) -> int:
        """How many members have data in the window."""
        return len(self.members) - len(self.missing)

    @property
    def complete(self) -> bool:
        """Whether every member has data in the window."""
        return not self.missing

    def describe(self) -> str:
        """One sentence, e.g. `markets.us: universe djia20 has data for 5 of its 20 members
        (25.0%) in this replay's window; no data for AAPL, ...`."""
        share = 100.0 * self.covered / len(self.members) if self.members else 0.0
        named = ", ".join(self.missing[:_NAMED])
        more = len(self.missing) - _NAMED
        if more > 0:
            named += f" and {more} more"
        line = (
            f"markets.{self.market}: universe {self.universe} has data for {self.covered} of its "
            f"{len(self.members)} members ({share:.1f}%) in this replay's window"
        )
        return f"{line}; no data for {named}" if self.missing else line


def member_coverage(
    source: ReplaySource,
    *,
    universe: str,
    members: Sequence[str],
    interval: str,
    start_at: datetime,
    end_at: datetime,
) -> MemberCoverage:
    """Which of `members` have a bar of `interval` starting in `[start_at, end_at)` in `source`
    (an interval the source does not serve covers none)."""
    ordered = tuple(dict.fromkeys(members))
    held = source.symbols(None)
    found: set[str] = set()
    if interval in source.intervals:
        present = [symbol for symbol in ordered if symbol in held]
        found = set(source.symbols_between(present, interval, start_at, end_at))
    return MemberCoverage(
        market=source.market,
        universe=universe,
        members=ordered,
        missing=tuple(symbol for symbol in ordered if symbol not in found),
    )
