"""Downloading a universe's history through a live adapter into a download folder, resumably.

This module owns `download`, what `openbell data download` runs. For each symbol, in order:
its bars of the interval over the window and, for daily bars, the 53 weeks before it (the
52-week range of the window's first day, and the agents' look-back); its splits and cash
dividends over the same days, where the adapter serves them (yfinance, akshare); its shares
outstanding, where the adapter dates them (yfinance); its news published in the window, where the
adapter has news (yfinance and akshare serve recent news only, so a window in the past finds
none: bring your own with `openbell data import-news`); and, for daily bars, StockBench's
fundamentals rebuilt point in time from those (`derived_fundamentals`). Every piece lands in the
`DownloadFolder` with its range recorded, so a second run asks the vendor only for the ranges
missing; a range is recorded up to the last day that has ended by `now` (the adapters drop a bar
still in progress). A symbol whose read fails (`TransientError`, `NotServed`) is named in the
report and the rest go on: running the same download again fetches what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from openbell.markets.barfile import BarFileMeta
from openbell.markets.calendars import calendar_for
from openbell.markets.corporate_action_files import read_actions
from openbell.markets.corporate_actions import CorporateAction
from openbell.markets.domain import Bar, NewsItem
from openbell.markets.errors import NotServed, TransientError
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.importers.derived_fundamentals import daily_reports
from openbell.markets.importers.download_folder import ACTIONS, DownloadFolder, Span, slug
from openbell.markets.rules import rules_for
from openbell.markets.universes import MARKET_CURRENCY

#: The days before the window whose daily bars are fetched too: 52 weeks and one.
LOOKBACK_DAYS: Final = 53 * 7
#: The most news items asked for per symbol and range.
NEWS_LIMIT: Final = 1000
KINDS: Final = ("bars", "actions", "shares", "fundamentals", "news")


class Vendor(Protocol):
    """What a download needs of a live adapter: its bars (`MarketDataSource.bars`)."""

    @property
    def name(self) -> str: ...

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Any: ...


@runtime_checkable
class _Actions(Protocol):
    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]: ...


@runtime_checkable
class _Shares(Protocol):
    async def shares_outstanding(
        self, symbol: str, first: date, last: date
    ) -> list[tuple[date, Decimal]]: ...


@runtime_checkable
class _News(Protocol):
    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadRequest:
    """What to download: `symbols` of `market`, bars of `interval` (`1d` or `1h`), the window's
    local days `first` through `last`, as of `now` (aware UTC, the wall clock's)."""

    market: str
    symbols: tuple[str, ...]
    interval: str
    first: date
    last: date
    now: datetime

    def __post_init__(self) -> None:
        if self.interval not in ("1d", "1h"):
            raise ValueError(f"interval must be 1d or 1h, got {self.interval!r}")
        if self.last < self.first:
            raise ValueError(f"the window ends ({self.last}) before it starts ({self.first})")
        if not self.symbols:
            raise ValueError("no symbol to download")


@dataclass(slots=True)
class DownloadReport:
    """What a download did: the pieces asked of the vendor and those already in the folder, by
    kind; the folder's counts after it; and each failed piece with why."""

    asked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    present: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    bars: int = 0
    actions: int = 0
    news: int = 0
    reports: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    symbols_done: int = 0

    def summary(self, symbols: int) -> list[str]:
        """The report as lines for a person."""
        kinds = ", ".join(
            f"{kind} {self.asked[kind]} fetched / {self.present[kind]} already there"
            for kind in KINDS
        )
        counts = (
            f"{self.symbols_done}/{symbols} symbols complete: {self.bars:,} bars, "
            f"{self.actions} corporate actions, {self.reports:,} fundamentals reports, "
            f"{self.news} news items"
        )
        lines = [counts, f"pieces: {kinds}"]
        lines += [f"failed: {piece}: {why}" for piece, why in sorted(self.failed.items())]
        return lines


Progress = Callable[[int, int, str], None]


async def download(
    vendor: Vendor,
    request: DownloadRequest,
    folder: DownloadFolder,
    *,
    progress: Progress = lambda done, total, what: None,
) -> DownloadReport:
    """Download `request` from `vendor` into `folder` (see the module docstring); `progress`
    is told (pieces done, pieces in all, the next piece) before each piece."""
    run = _Run(vendor, request, folder, progress)
    for symbol in request.symbols:
        if await run.symbol(symbol):
            run.report.symbols_done += 1
    run.report.actions = len(folder.actions())
    progress(run.total, run.total, "done")
    return run.report


class _Run:
    def __init__(
        self, vendor: Vendor, request: DownloadRequest, folder: DownloadFolder, progress: Progress
    ) -> None:
        self.vendor, self.request, self.folder, self.progress = vendor, request, folder, progress
        self.report = DownloadReport()
        self.rules = rules_for(request.market)
        self.zone = ZoneInfo(self.rules.timezone)
        self.daily = request.interval == "1d"
        self.total = len(request.symbols) * len(KINDS)
        self.done = 0
        # the last local day that has ended by `now`: ranges are recorded up to it
        self.ended = request.now.astimezone(self.zone).date() - timedelta(days=1)
        lookback = timedelta(days=LOOKBACK_DAYS if self.daily else 0)
        self.history = (request.first - lookback, request.last)

    def _at(self, day: date) -> datetime:
        """The start of the market-local `day`, in UTC."""
        return datetime.combine(day, time(0), tzinfo=self.zone).astimezone(UTC)

    async def symbol(self, symbol: str) -> bool:
        """Every piece of `symbol`; whether all of them are in the folder now."""
        complete = True
        for kind in KINDS:
            self.progress(self.done, self.total, f"{symbol} {kind}")
            self.done += 1
            key, span = self._piece(kind, symbol)
            if key is None:
                continue
            if kind == "fundamentals" and not self._inputs_ready(symbol):
                complete = False
                continue
            begin, end = span
            gaps = self.folder.to_fetch(key, begin, min(end, self.ended))
            if not gaps:
                self.report.present[kind] += 1
                continue
            try:
                for gap in gaps:
                    await self._fetch(kind, symbol, gap)
                    self.folder.fetched(key, *gap)
                self.report.asked[kind] += 1
            except (TransientError, NotServed) as exc:
                self.report.failed[f"{kind} {symbol}"] = str(exc)
                complete = False
        held = self.folder.bars(self.request.market, self.request.interval, symbol)
        self.report.bars += len(held)
        self.report.reports += _count_lines(self.folder, "fundamentals", symbol)
        self.report.news += _count_lines(self.folder, "news", symbol)
        return complete and self.request.last <= self.ended

    def _piece(self, kind: str, symbol: str) -> tuple[str | None, Span]:
        """The manifest key and the days of one kind of piece (no key: the vendor or the
        interval has none of that kind)."""
        interval = self.request.interval
        window = (self.request.first, self.request.last)
        if kind == "bars":
            return f"bars:{interval}:{symbol}", self.history
        if kind == "actions":
            return (f"actions:{symbol}" if isinstance(self.vendor, _Actions) else None), (
                self.history
            )
        if kind == "shares":
            return (f"shares:{symbol}" if isinstance(self.vendor, _Shares) else None), (
                self.history
            )
        if kind == "fundamentals":
            derivable = self.daily and isinstance(self.vendor, _Actions | _Shares)
            return (f"fundamentals:{symbol}" if derivable else None), window
        return (f"news:{symbol}" if isinstance(self.vendor, _News) else None), window

    def _inputs_ready(self, symbol: str) -> bool:
        """Whether the bars, actions and shares fundamentals are rebuilt from are all in the
        folder over the history (else they wait for a run that has them)."""
        first, last = self.history
        last = min(last, self.ended)
        for kind in ("bars", "actions", "shares"):
            key, _ = self._piece(kind, symbol)
            if key is not None and self.folder.to_fetch(key, first, last):
                return False
        return True

    async def _fetch(self, kind: str, symbol: str, gap: Span) -> None:
        first, last = gap
        start_at, end_at = self._at(first), self._at(last + timedelta(days=1))
        market = self.request.market
        if kind == "bars":
            found = await self.vendor.bars([symbol], self.request.interval, start_at, end_at)
            bars: Sequence[Bar] = found.get(symbol, ())
            meta = BarFileMeta(
                market=market,
                interval=self.request.interval,
                timezone=self.rules.timezone,
                label="start",
                adjustment="raw",
                source=self.vendor.name,
                provenance=f"openbell data download from {self.vendor.name}",
            )
            self.folder.add_bars(meta, symbol, bars)
        elif kind == "actions" and isinstance(self.vendor, _Actions):
            self.folder.add_actions(await self.vendor.actions([symbol], first, last))
        elif kind == "shares" and isinstance(self.vendor, _Shares):
            counts = await self.vendor.shares_outstanding(symbol, first, last)
            self.folder.add_shares(symbol, counts)
        elif kind == "news" and isinstance(self.vendor, _News):
            items = await self.vendor.news([symbol], start_at, end_at, NEWS_LIMIT)
            self.folder.add_news(symbol, [item for item in items if item.symbol == symbol])
        elif kind == "fundamentals":
            self.folder.add_reports(symbol, self._fundamentals(symbol, gap))

    def _fundamentals(self, symbol: str, gap: Span) -> list[FundamentalsReport]:
        market = self.request.market
        calendar = calendar_for(self.rules.calendar_id)
        sessions = [(day, calendar.session_open(day)) for day in calendar.sessions_between(*gap)]
        actions = (
            read_actions(self.folder.path / ACTIONS, market).all
            if (self.folder.path / ACTIONS).exists()
            else ()
        )
        return daily_reports(
            symbol,
            self.folder.bars(market, "1d", symbol),
            actions,
            self.folder.shares(symbol),
            sessions=sessions,
            currency=MARKET_CURRENCY[market],
            source=self.vendor.name,
        )


def _count_lines(folder: DownloadFolder, kind: str, symbol: str) -> int:
    file = folder.path / kind / f"{slug(symbol)}.jsonl"
    if not file.exists():
        return 0
    return sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
