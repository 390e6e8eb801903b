"""What a replay warns about, and where its warnings go: the replay's summary and the ledger.

This module owns the two doubts a replay checks before it runs, each as one sentence starting
`markets.NAME:` (None when there is no doubt): a universe used outside the dates its file vouches
for (`outside_coverage`, a survivorship bias) and a universe whose members are not all in the
replay's data (`partial_coverage`, `markets.member_coverage`: a DJIA-20 replay over a dataset of
five of its stocks trades those five). `ops.planning` refuses a replay with either doubt unless it
is allowed; an allowed replay runs, and its warnings are shown under its summary and recorded in
the ledger (`record_warnings`), which `openbell report` repeats (`warnings_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from sqlalchemy import Engine

from openbell.daemon.plan import CADENCE_INTERVALS, MarketPlan, ReplayPlan
from openbell.markets.member_coverage import member_coverage
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Universe
from openbell.store.db import make_engine
from openbell.store.replay_warnings import ReplayWarning, ReplayWarnings


def outside_coverage(name: str, universe: Universe, start: date, end: date) -> str | None:
    """What is wrong with replaying `universe` from `start` through `end`, in one sentence; None
    when its file vouches for every date of the window."""
    coverage = universe.coverage
    if coverage is None or universe.covers(start, end):
        return None
    vouched = coverage.describe()
    if coverage.from_date is not None and start < coverage.from_date:
        window = f"this replay starts on {start.isoformat()}"
    else:
        window = f"this replay ends on {end.isoformat()}"
    return (
        f"markets.{name}: universe {universe.name} vouches for its members only {vouched}, and "
        f"{window}: trading its list at dates the file cannot vouch for is a survivorship bias"
    )


def partial_coverage(market: MarketPlan, start_at: datetime, end_at: datetime) -> str | None:
    """Which members of the market's universe have no bar of its cadence's interval in
    `[start_at, end_at)`, in one sentence; None when all have."""
    source = market.source
    if not isinstance(source, ReplaySource):  # `ReplayPlan` refuses any other
        return None
    found = member_coverage(
        source,
        universe=market.universe.name,
        members=market.universe.symbols,
        interval=CADENCE_INTERVALS[market.cadence],
        start_at=start_at,
        end_at=end_at,
    )
    return None if found.complete else found.describe()


def record_warnings(plan: ReplayPlan, warnings: Sequence[str]) -> None:
    """Record `warnings` (each starting `markets.NAME:`) in the plan's ledger, per market."""
    found = [
        ReplayWarning(
            run_id=plan.run_id,
            market=market.market,
            start_at=plan.start_at,
            end_at=plan.end_at,
            message=warning,
        )
        for market in plan.markets
        for warning in warnings
        if warning.startswith(f"markets.{market.market}:")
    ]
    engine = make_engine(plan.store_url, redactor=plan.redactor)
    try:
        ReplayWarnings(engine).record(found)
    finally:
        engine.dispose()


def warnings_of(engine: Engine, market: str) -> tuple[str, ...]:
    """The distinct warnings the replays of `market` recorded in the ledger on `engine`."""
    return tuple(warning.message for warning in ReplayWarnings(engine).of_market(market))
