"""Dollar caps that fail closed: an LLM agent's model spend per UTC day and per season.

This module owns `SpendCaps` (the configured caps, in the currency of the model's prices, USD in
practice) and `SpendGuard`, which an `LlmAgent` asks before each cycle. The spend is the priced
cost of the agent's cycles (`Recorder`'s `CycleUsage.cost`, from the model's `Prices`) in one
account, that is in one market (an agent trading two markets is built once per market, and has
its caps in each): the day's is that of the cycles whose slot falls on the UTC day of the decision
time, the season's that of the cycles whose slot falls in the window of the ledger's season
holding the decision time (`openbell season open`; the last opened if several do), or, outside
any season, of every cycle in the ledger. The guard reads the ledger's totals once per window
(`ctx.spending`, a `protocol.Spending`), at the window's first cycle in this process, then adds
each cycle's cost as it ends: restarts resume from the ledger, and a replay's write-behind batch
is never read back.

Before a cycle, a window at or past its cap raises `CycleSkipped("budget_exhausted")`: the cycle
is recorded `skipped` with that reason until the window resets (the next UTC day; never, for the
season). A cycle that starts under the cap runs to its end, so an agent stops within one cycle's
spend of its cap (the per-cycle token budget bounds that spend). The first cycle of a window that
starts at or past `WARN_SHARE` of a cap gets a warning: a `budget` trace row, seen on the cycle's
page, and a `budget_warning` log event. A cap needs prices: the config refuses a cap on an
unpriced model (`ops.config.schema`), and the guard refuses to run when a priced cost is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Final

import structlog

from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import CycleSkipped

#: The reason stored on a cycle skipped because a dollar cap was reached.
BUDGET_EXHAUSTED: Final = "budget_exhausted"
#: The share of a cap whose crossing is warned about.
WARN_SHARE: Final = Decimal("0.8")

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendCaps:
    """An agent's dollar caps: `per_day` (a UTC day of slots) and `per_season` (the season's
    window, or the ledger's life outside any season), each None for no cap."""

    per_day: Decimal | None = None
    per_season: Decimal | None = None

    def __post_init__(self) -> None:
        for cap in (self.per_day, self.per_season):
            if cap is not None and (not cap.is_finite() or cap <= 0):
                raise ValueError(f"a dollar cap must be positive, got {cap}")

    @property
    def any(self) -> bool:
        """Whether any cap is set."""
        return self.per_day is not None or self.per_season is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Window:
    label: str  # "day 2025-09-01", "season NAME" or "season" (the ledger's life)
    cap: Decimal
    start: datetime | None
    end: datetime | None  # None: open (the season)


class SpendGuard:
    """One agent's spend against its caps; see the module docstring."""

    def __init__(self, caps: SpendCaps) -> None:
        self.caps = caps
        self._spent: dict[tuple[int, str], Decimal] = {}
        self._warned: set[tuple[int, str]] = set()

    def _windows(self, ctx: DecisionContext) -> list[_Window]:
        now = ctx.now
        out = []
        if self.caps.per_day is not None:
            day = now.astimezone(UTC).date()
            start = _midnight(day)
            out.append(
                _Window(
                    label=f"day {day.isoformat()}",
                    cap=self.caps.per_day,
                    start=start,
                    end=start + timedelta(days=1),
                )
            )
        if self.caps.per_season is not None:
            season = None if ctx.spending is None else ctx.spending.season_at(now)
            if season is None:
                out.append(_Window(label="season", cap=self.caps.per_season, start=None, end=None))
            else:
                name, start, end = season
                out.append(
                    _Window(label=f"season {name}", cap=self.caps.per_season, start=start, end=end)
                )
        return out

    def check(self, ctx: DecisionContext, warn: Callable[[str], None]) -> None:
        """Raise `CycleSkipped(BUDGET_EXHAUSTED)` when a window of `ctx.now` is spent; call `warn`
        with a one-line note for each window past `WARN_SHARE` not warned about yet."""
        for window in self._windows(ctx):
            spent = self._spent_in(ctx, window)
            if spent >= window.cap:
                until = (
                    "the season ends"
                    if window.end is None or window.label.startswith("season")
                    else window.end.isoformat()
                )
                raise CycleSkipped(
                    BUDGET_EXHAUSTED,
                    f"{ctx.agent_name} spent {spent} of its {window.label} cap of {window.cap}; "
                    f"its cycles are skipped until {until}",
                )
            key = (ctx.account_id, window.label)
            if spent >= window.cap * WARN_SHARE and key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "budget_warning",
                    agent=ctx.agent_name,
                    account_id=ctx.account_id,
                    window=window.label,
                    spent=str(spent),
                    cap=str(window.cap),
                )
                warn(f"{window.label}: spent {spent} of the cap of {window.cap}")

    def spent(self, ctx: DecisionContext, cost: Decimal | None) -> None:
        """Add a finished cycle's `cost` to its windows. A missing cost with a cap set fails
        closed: every window is marked spent."""
        for window in self._windows(ctx):
            total = self._spent_in(ctx, window)
            key = (ctx.account_id, window.label)
            self._spent[key] = window.cap if cost is None else total + cost

    def _spent_in(self, ctx: DecisionContext, window: _Window) -> Decimal:
        key = (ctx.account_id, window.label)
        found = self._spent.get(key)
        if found is None:
            found = Decimal(0)
            if ctx.spending is not None:
                end = window.end if window.end is not None else ctx.now
                found = ctx.spending.llm_spend(ctx.account_id, window.start, end)
            self._spent[key] = found
        return found


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)
