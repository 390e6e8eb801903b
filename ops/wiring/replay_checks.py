"""What a replay warns about, and where its warnings go: the replay's summary and the ledger.

This module owns the two doubts a replay checks before it runs, each as one sentence starting
`markets.NAME:` (None when there is no doubt): a universe used outside the dates its file vouches
for (`outside_coverage`, a survivorship bias) and a universe whose members (or benchmark) do not
all have bars across the replay's window (`partial_coverage`, `markets.member_coverage`: a DJIA-20
replay over a dataset of five of its stocks trades those five; an A-share replay past the SSE-50
index's last bundled bar holds a benchmark frozen at it). `check_replay` states each universe's
coverage (`ReplayChecks.coverage`, a line of every replay's summary) and refuses a replay with
either doubt unless it is allowed; an allowed replay runs, its warnings logged
(`universe_outside_coverage`, `universe_partial_coverage`), shown under its summary and recorded
in the ledger (`record_warnings`), which `openbell report` repeats (`warnings_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import structlog
from sqlalchemy import Engine

from openbell.daemon.plan import CADENCE_INTERVALS, MarketPlan, ReplayPlan
from openbell.markets.calendars import calendar_for
from openbell.markets.errors import ConfigError
from openbell.markets.member_coverage import MemberCoverage, member_coverage
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Universe
from openbell.ops.config.schema import MarketConfig
from openbell.store.db import make_engine
from openbell.store.replay_warnings import ReplayWarning, ReplayWarnings

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayChecks:
    """What `check_replay` found: the coverage of each market's universe (in the markets' order)
    and the warnings the replay runs under (each starting `markets.NAME:`)."""

    coverage: tuple[MemberCoverage, ...] = ()
    warnings: tuple[str, ...] = ()


def check_replay(
    markets: Sequence[MarketPlan],
    configs: Sequence[MarketConfig],
    *,
    start: date,
    end: date,
    allow_outside_coverage: bool,
    allow_partial_coverage: bool,
) -> ReplayChecks:
    """The coverage of replaying `markets` (configured by `configs`, in the same order) from
    `start` through `end`, and its warnings: first each universe used outside its coverage, then
    each with members (or a benchmark) without data across the window. Raises `ConfigError` for a
    doubt not allowed here or in the market's config."""
    start_at = datetime.combine(start, time(0), tzinfo=UTC)
    end_at = datetime.combine(end + timedelta(days=1), time(0), tzinfo=UTC)
    warnings = []
    for replayed, configured in zip(markets, configs, strict=True):
        doubt = outside_coverage(replayed.market, replayed.universe, start, end)
        if doubt is None:
            continue
        if not (allow_outside_coverage or configured.allow_outside_coverage):
            raise ConfigError(
                f"{doubt}; replay inside those dates, or pass --allow-outside-coverage (or set "
                f"allow_outside_coverage = true in [markets.{replayed.market}]) to run it anyway"
            )
        vouched = replayed.universe.coverage
        log.warning(
            "universe_outside_coverage",
            market=replayed.market,
            universe=replayed.universe.name,
            start=start.isoformat(),
            end=end.isoformat(),
            coverage_from=_iso(None if vouched is None else vouched.from_date),
            coverage_until=_iso(None if vouched is None else vouched.until_date),
            message=doubt,
        )
        warnings.append(doubt)
    found: list[MemberCoverage] = []
    for replayed, configured in zip(markets, configs, strict=True):
        coverage = universe_coverage(replayed, start_at, end_at)
        if coverage is None:
            continue
        found.append(coverage)
        if coverage.complete:
            continue
        partial = coverage.describe()
        if not (allow_partial_coverage or configured.allow_partial_coverage):
            raise ConfigError(
                f"{partial}; bring their bars (openbell data import FILE), narrow the universe or "
                "the window, or pass --allow-partial-coverage (or set allow_partial_coverage = "
                f"true in [markets.{replayed.market}]) to replay the members with data anyway"
            )
        log.warning(
            "universe_partial_coverage",
            market=replayed.market,
            universe=replayed.universe.name,
            start=start.isoformat(),
            end=end.isoformat(),
            message=partial,
        )
        warnings.append(f"{partial}: replayed anyway, trading each only while it has bars")
    return ReplayChecks(coverage=tuple(found), warnings=tuple(warnings))


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


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


def universe_coverage(
    market: MarketPlan, start_at: datetime, end_at: datetime
) -> MemberCoverage | None:
    """How the market's replay data covers its universe's members (those that are members on a
    session of the window) and benchmark over `[start_at, end_at)`, by bars of its cadence's
    interval (`markets.member_coverage`); None for a source that is not a replay's."""
    source = market.source
    if not isinstance(source, ReplaySource):  # `ReplayPlan` refuses any other
        return None
    return member_coverage(
        source,
        universe=market.universe,
        calendar=calendar_for(market.market_rules.calendar_id),
        interval=CADENCE_INTERVALS[market.cadence],
        start_at=start_at,
        end_at=end_at,
    )


def partial_coverage(market: MarketPlan, start_at: datetime, end_at: datetime) -> str | None:
    """What the market's replay data lacks of its universe over `[start_at, end_at)`
    (`universe_coverage`), in one sentence; None when it covers every member and the benchmark."""
    found = universe_coverage(market, start_at, end_at)
    return None if found is None or found.complete else found.describe()


def record_warnings(plan: ReplayPlan, warnings: Sequence[str]) -> None:
    """Record `warnings` (each starting `markets.NAME:`) in the plan's ledger, per market."""
    found = [
        ReplayWarning(
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
