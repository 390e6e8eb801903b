"""The factor attribution of one account over a window, read from the ledger and the bars.

This module owns the glue: which periods, holdings, universe and prices the attribution uses.
The periods are the account's consecutive `slot` NAV snapshots in `[start, end)` (the series
its report's panel is computed from, `store.snapshot_holdings`); a period's total is the NAV's
return, and its weights are the marks of the snapshot that opens it (the holdings after that
slot's trades, held until the next slot). The cadence is the caller's or inferred from the
snapshots (`return_metrics.infer_cadence`); it picks the bar interval (`1d` daily, `1h` hourly).
The bars come from the caller's replay source or, by default, the bars bundled with openbell
plus the bars of that interval in the ledger's bar cache (written by a live daemon) of the
bundled symbols and those the account held, as a report prices its benchmark. The cross-section
(the symbols each period's regression is estimated from) is the caller's choice: by default every
symbol with bars of that interval, less the market's single-instrument benchmark (QQQ, the SSE-50
index: an ETF or an index is not a member); given a `Universe`, its members on the market-local
date each period starts (`Universe.members_on`, point-in-time: a member that joins later or has
left is not in it). A symbol the account held outside it is scored but not estimated from
(`cross_section`). Each symbol's price at a snapshot is the
benchmark's point-in-time quote rule, carried forward (`benchmark.carried_prices`), so a
symbol's period return is priced at the same instants as the NAV.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy import Engine

from openbell.markets.domain import Bar
from openbell.markets.errors import IntervalUnavailable, ReportError
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe
from openbell.ops.evaluation.attribution.cross_section import VIF_THRESHOLD, regress
from openbell.ops.evaluation.attribution.decomposition import (
    PeriodAttribution,
    WindowAttribution,
    attribute_period,
    link,
)
from openbell.ops.evaluation.attribution.exposures import (
    STYLE_FACTORS,
    Fundamentals,
    PricePanel,
    StyleWindows,
    style_exposures,
)
from openbell.ops.evaluation.benchmark import benchmark_for, bundled_source, carried_prices
from openbell.ops.evaluation.return_metrics import infer_cadence
from openbell.store import queries
from openbell.store.cache import SqlBarCache
from openbell.store.snapshot_holdings import SnapshotHoldings, snapshot_holdings

#: The bar interval of each cadence.
INTERVALS = {"daily": "1d", "hourly": "1h"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributionChoice:
    """What a config's `[attribution]` picks: the styles estimated, and, per market, the universe
    whose members at each date make the cross-section (a market without one: every symbol with
    bars). The default is `[attribution]`'s: every style, every symbol with bars."""

    styles: tuple[str, ...] = STYLE_FACTORS
    universes: Mapping[str, Universe] = field(default_factory=dict)

    def of(
        self,
        engine: Engine,
        agent: str,
        market: str,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> AccountAttribution:
        """`account_attribution` of the account over `[start, end)` under this choice."""
        return account_attribution(
            engine,
            agent,
            market,
            start,
            end,
            universe=self.universes.get(market),
            styles=self.styles,
        )


#: `[attribution]`'s defaults: every style, every symbol with bars.
DEFAULT_ATTRIBUTION = AttributionChoice()


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
    windows: StyleWindows
    vif_threshold: float
    attribution: WindowAttribution
    cross_section: str = "bars"
    styles: tuple[str, ...] = STYLE_FACTORS


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


class CrossSectionOf:
    """Which symbols each period's regression is estimated from: `fixed` at every date, or the
    members of `universe` on the market-local date of the period's start."""

    def __init__(
        self, fixed: frozenset[str], universe: Universe | None = None, timezone: str = "UTC"
    ) -> None:
        self._fixed = fixed
        self._universe = universe
        self._zone = ZoneInfo(timezone)

    @property
    def symbols(self) -> frozenset[str]:
        """Every symbol that is in the cross-section at some date."""
        if self._universe is None:
            return self._fixed
        return frozenset(self._universe.symbols)

    def at(self, when: datetime) -> frozenset[str]:
        """The cross-section of a period starting at `when`."""
        if self._universe is None:
            return self._fixed
        return frozenset(self._universe.members_on(when.astimezone(self._zone).date()))

    def describe(self) -> str:
        """The cross-section in words, as the record states it."""
        if self._universe is None:
            return "every symbol with bars"
        return f"members of universe {self._universe.name} at each date"


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


def _periods(
    snapshots: Sequence[SnapshotHoldings],
    sources: Sequence[ReplaySource],
    members: CrossSectionOf,
    panel: PricePanel,
    windows: StyleWindows,
    fundamentals: Fundamentals | None,
    vif_threshold: float,
    styles: Sequence[str],
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
        estimated = members.at(opening.snapshot.at)
        in_universe = np.array([s in estimated for s in panel.symbols], dtype=np.bool_)
        exposures = style_exposures(
            panel, opening.snapshot.at, windows=windows, fundamentals=fundamentals, styles=styles
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
    universe: Universe | None = None,
    styles: Sequence[str] = STYLE_FACTORS,
) -> AccountAttribution:
    """The attribution of `agent`'s account in `market` over `[start, end)` (module docstring).

    `universe` makes the cross-section its members at each date (default: every symbol with
    bars); `styles` picks the styles estimated (`exposures.STYLE_SETS`).

    `fundamentals` are reports of a point-in-time source, for the size and value styles; without
    them, the reports the ledger's cache holds (`known_reports`: recorded by a live daemon or
    imported); with none, those two styles are skipped. Raises `ReportError` when the agent has
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
        (source,)
        if source is not None
        else bar_sources(
            engine, market, interval, until, held | set(universe.symbols if universe else ())
        )
    )
    if universe is not None and universe.market != market:
        raise ReportError(f"universe {universe.name} is not of market {market!r}")
    members = (
        CrossSectionOf(frozenset(), universe, rules_for(market).timezone)
        if universe is not None
        else CrossSectionOf(_members(sources, market, interval))
    )
    symbols = sorted(members.symbols | held)
    if fundamentals is None:
        fundamentals = known_reports(engine, symbols)
    chosen_windows = windows or StyleWindows()
    panel = PricePanel.of_bars(_bars(sources, symbols, interval, stamps[-1]))
    periods = _periods(
        snapshots,
        sources,
        members,
        panel,
        chosen_windows,
        None if fundamentals is None else Fundamentals(fundamentals),
        vif_threshold,
        styles,
    )
    return AccountAttribution(
        agent=agent,
        market=market,
        currency=account.currency,
        cadence=chosen,
        interval=interval,
        start=start,
        end=end,
        universe=tuple(sorted(members.symbols)),
        sources=tuple(s.name for s in sources),
        windows=chosen_windows,
        vif_threshold=vif_threshold,
        attribution=link(periods),
        cross_section=members.describe(),
        styles=tuple(name for name in STYLE_FACTORS if name in styles),
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
