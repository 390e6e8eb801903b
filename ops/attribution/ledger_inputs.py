"""The factor attribution of one account over a window, read from the ledger and the bars.

This module owns the glue: which periods, holdings, universe and prices the attribution uses.
The periods are the account's consecutive `slot` NAV snapshots in `[start, end)` (the series
its report's panel is computed from, `store.snapshot_holdings`); a period's total is the NAV's
return, and its weights are the marks of the snapshot that opens it (the holdings after that
slot's trades, held until the next slot). The cadence is the caller's or inferred from the
snapshots (`reports.infer_cadence`); it picks the bar interval (`1d` daily, `1h` hourly).
The bars come from the caller's replay source or, by default, the bars bundled with openbell
plus the bars of that interval in the ledger's bar cache (written by a live daemon) of the
bundled symbols and those the account held, as a report prices its benchmark. The universe is
every symbol with bars of that interval, less the market's single-instrument benchmark (QQQ,
the SSE-50 index: an ETF or an index is not a member); a symbol the account held outside it is
scored but not estimated from (`cross_section`). A caller may name the cross-section instead, a
`Universe` (a market's configured one: `attribution_cross_section = "universe"`): each period is
then estimated from the universe's members on the market-local day the period opens, point in
time (a CSI 300 file's members of that day, not today's), that have bars. Each symbol's price at
a snapshot is the benchmark's point-in-time quote rule, carried forward
(`benchmark.carried_prices`), so a symbol's period return is priced at the same instants as the
NAV.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy import Engine

from openbell.markets.domain import Bar
from openbell.markets.errors import IntervalUnavailable, ReportError
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe
from openbell.ops.attribution.cross_section import VIF_THRESHOLD, regress
from openbell.ops.attribution.decomposition import (
    PeriodAttribution,
    WindowAttribution,
    attribute_period,
    link,
)
from openbell.ops.attribution.exposures import (
    Fundamentals,
    PricePanel,
    StyleWindows,
    style_exposures,
)
from openbell.ops.benchmark import benchmark_for, bundled_source, carried_prices
from openbell.ops.reports import infer_cadence
from openbell.store import queries
from openbell.store.cache import SqlBarCache
from openbell.store.snapshot_holdings import SnapshotHoldings, snapshot_holdings

#: The bar interval of each cadence.
INTERVALS = {"daily": "1d", "hourly": "1h"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountAttribution:
    """An account's attribution over a window, with what it was computed from."""

    agent: str
    market: str
    currency: str
    cadence: str
    interval: str
    start: datetime | None
    end: datetime | None
    universe: tuple[str, ...]
    sources: tuple[str, ...]
    cross_section: str
    windows: StyleWindows
    vif_threshold: float
    attribution: WindowAttribution


def _account(engine: Engine, agent: str, market: str) -> queries.AccountInfo:
    found = [info for info in queries.accounts(engine, market) if info.agent_name == agent]
    if not found:
        raise ReportError(f"agent {agent!r} has no account in market {market!r} in the ledger")
    return found[0]


def bar_sources(
    engine: Engine, market: str, interval: str, until: datetime, held: Iterable[str] = ()
) -> tuple[ReplaySource, ...]:
    """The bundled bars of `market` and, if it holds any, the ledger's cached bars of `interval`
    of the bundled symbols and `held` that start before `until`."""
    bundled = bundled_source(market)
    try:
        symbols = sorted(bundled.symbols(interval) | set(held))
    except IntervalUnavailable:
        symbols = sorted(set(held))
    found = SqlBarCache(engine).get_bars(symbols, interval, _EPOCH, until) if symbols else {}
    cached = [entry.bar for series in found.values() for entry in series]
    if not cached:
        return (bundled,)
    live = ReplaySource(market=market, bars={interval: cached}, name=f"bar-cache:{market}")
    return (bundled, live)


def _members(sources: Sequence[ReplaySource], market: str, interval: str) -> frozenset[str]:
    symbols: set[str] = set()
    for source in sources:
        try:
            symbols |= source.symbols(interval)
        except IntervalUnavailable:
            continue
    if not symbols:
        names = ", ".join(source.name for source in sources)
        raise ReportError(f"no {interval} bars of market {market!r} to attribute with ({names})")
    weights = benchmark_for(market).weights
    if len(weights) == 1:
        symbols -= set(weights)
    return frozenset(symbols)


def _bars(
    sources: Sequence[ReplaySource], symbols: Sequence[str], interval: str, until: datetime
) -> dict[str, list[Bar]]:
    """Each symbol's bars of `interval` starting before `until`, a later source winning a start."""
    merged: dict[str, dict[datetime, Bar]] = {}
    for source in sources:
        try:
            found = source.bars_between(symbols, interval, _EPOCH, until)
        except IntervalUnavailable:
            continue
        for symbol, series in found.items():
            merged.setdefault(symbol, {}).update((bar.start_at, bar) for bar in series)
    return {symbol: [by[start] for start in sorted(by)] for symbol, by in merged.items()}


#: What `AccountAttribution.cross_section` says without a universe.
BARS_CROSS_SECTION = "the symbols with bars"


@dataclass(frozen=True, slots=True)
class _CrossSection:
    """Which symbols a period is estimated from: `members` with bars, and, with a `universe`,
    only those of them that are its members on the period's market-local opening day."""

    members: frozenset[str]
    universe: Universe | None
    timezone: ZoneInfo

    def on(self, at: datetime) -> frozenset[str]:
        if self.universe is None:
            return self.members
        day: date = at.astimezone(self.timezone).date()
        return frozenset(s for s in self.universe.members_on(day) if s in self.members)


def _periods(
    snapshots: Sequence[SnapshotHoldings],
    sources: Sequence[ReplaySource],
    members: _CrossSection,
    panel: PricePanel,
    windows: StyleWindows,
    fundamentals: Fundamentals | None,
    vif_threshold: float,
) -> list[PeriodAttribution]:
    stamps = [item.snapshot.at for item in snapshots]
    prices = np.full((len(stamps), len(panel.symbols)), np.nan)
    for column, symbol in enumerate(panel.symbols):
        for row, price in enumerate(carried_prices(sources, symbol, stamps)):
            if price is not None:
                prices[row, column] = float(price)
    out: list[PeriodAttribution] = []
    for index in range(1, len(snapshots)):
        opening, closing = snapshots[index - 1], snapshots[index]
        sample = members.on(opening.snapshot.at)
        in_universe = np.array([symbol in sample for symbol in panel.symbols], dtype=np.bool_)
        exposures = style_exposures(
            panel, opening.snapshot.at, windows=windows, fundamentals=fundamentals
        )
        returns = prices[index] / prices[index - 1] - 1.0
        section = regress(returns, exposures, members=in_universe, vif_threshold=vif_threshold)
        nav = opening.snapshot.nav
        out.append(
            attribute_period(
                start_at=opening.snapshot.at,
                end_at=closing.snapshot.at,
                total=float(closing.snapshot.nav / nav - 1),
                weights={h.symbol: float(h.value / nav) for h in opening.holdings},
                section=section,
                skipped=exposures.skipped,
            )
        )
    return out


def account_attribution(
    engine: Engine,
    agent: str,
    market: str,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    cadence: str | None = None,
    source: ReplaySource | None = None,
    fundamentals: Sequence[FundamentalsReport] | None = None,
    windows: StyleWindows | None = None,
    vif_threshold: float = VIF_THRESHOLD,
    cross_section: Universe | None = None,
) -> AccountAttribution:
    """The attribution of `agent`'s account in `market` over `[start, end)` (module docstring).

    `fundamentals` are reports of a point-in-time source, for the size and value styles; without
    them, the reports the ledger's cache holds (`known_reports`: recorded by a live daemon or
    imported); with none, those two styles are skipped. `cross_section` is the universe whose
    members of each period's day the period is estimated from (default: every symbol with bars,
    less the benchmark). Raises `ReportError` when the agent has
    no account in the market, fewer than two snapshots in the window, or no bars of the cadence's
    interval.
    """
    account = _account(engine, agent, market)
    snapshots = [
        item
        for item in snapshot_holdings(engine, account.account_id, start, end)
        if item.snapshot.nav > 0
    ]
    if len(snapshots) < 2:
        raise ReportError(
            f"agent {agent!r} has fewer than two slot snapshots in market {market!r} in the window"
        )
    stamps = [item.snapshot.at for item in snapshots]
    chosen = cadence or infer_cadence(stamps)
    interval = INTERVALS[chosen]
    until = stamps[-1] + timedelta(microseconds=1)
    held = {holding.symbol for item in snapshots for holding in item.holdings}
    sources = (
        (source,) if source is not None else bar_sources(engine, market, interval, until, held)
    )
    members = _members(sources, market, interval)
    if cross_section is not None:
        members = members & frozenset(cross_section.symbols)
    if fundamentals is None:
        fundamentals = known_reports(engine, sorted(members | held))
    chosen_windows = windows or StyleWindows()
    panel = PricePanel.of_bars(_bars(sources, sorted(members | held), interval, stamps[-1]))
    periods = _periods(
        snapshots,
        sources,
        _CrossSection(members, cross_section, ZoneInfo(rules_for(market).timezone)),
        panel,
        chosen_windows,
        None if fundamentals is None else Fundamentals(fundamentals),
        vif_threshold,
    )
    return AccountAttribution(
        agent=agent,
        market=market,
        currency=account.currency,
        cadence=chosen,
        interval=interval,
        start=start,
        end=end,
        universe=tuple(sorted(members)),
        sources=tuple(s.name for s in sources),
        cross_section=BARS_CROSS_SECTION
        if cross_section is None
        else f"the members of universe {cross_section.name} on each period's day",
        windows=chosen_windows,
        vif_threshold=vif_threshold,
        attribution=link(periods),
    )


def known_reports(engine: Engine, symbols: Sequence[str]) -> list[FundamentalsReport] | None:
    """The fundamentals reports of `symbols` the ledger's cache holds, each as of when it was
    known (its publication, or the first decision time a live read served it, whichever is later:
    a report backfilled by the vendor counts from when openbell first saw it); None when there
    are none."""
    known = SqlBarCache(engine).recorded_reports(symbols) if symbols else ()
    reports = [
        replace(entry.report, published_at=max(entry.report.published_at, entry.known_at))
        for entry in known
    ]
    return reports or None
