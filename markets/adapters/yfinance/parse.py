"""Parsing yfinance's shapes into openbell's: download frames, news dicts, `Ticker.info`, log lines.

This module owns every knowledge of what yfinance 1.7 returns, as pure functions. A
`yf.download(..., group_by="column")` frame has `(field, TICKER)` columns; its daily index is
tz-naive session dates (a date becomes its XNYS session `[open, close)` in UTC) and its intraday
index is the bar start in the exchange's zone (a 1h bar ends an hour later or at the session
close, whichever is first; pre- and post-market rows are dropped). Vendor floats become
`Decimal(str(x))` once, here. A row with a NaN, a repeated timestamp (the first is kept), a bar not
finished at `now`, or values a `Bar` refuses is dropped, not raised.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final
from urllib.parse import unquote

import numpy as np
import pandas as pd

from openbell.markets.adapters import failures
from openbell.markets.adapters.vendor_rows import finished_bars, make_bar
from openbell.markets.calendars import TradingCalendar
from openbell.markets.corporate_actions import ActionKind, CorporateAction, in_apply_order
from openbell.markets.domain import CURRENCY_PLACES, Bar, NewsItem, Quote
from openbell.markets.fundamentals import Fundamentals

logger = logging.getLogger(__name__)

_FIELDS: Final = ("Open", "High", "Low", "Close", "Volume")
_HOUR: Final = timedelta(hours=1)
_MINUTE: Final = timedelta(minutes=1)
_FAILED_LINE: Final = re.compile(r"^(\[.*?\]): (.*)$", re.DOTALL)
_TICKER_LINE: Final = re.compile(r"^Failed to get ticker '([^']+)' reason: (.*)$", re.DOTALL)
_URL_TICKER: Final = re.compile(r"/(?:chart|quoteSummary)/([^/?#]+)")
_RATE_LIMIT_MARKS: Final = ("YFRateLimitError", "Too Many Requests", "Rate limited")
_CURL_CODE: Final = re.compile(r"curl: \((\d+)\)")
#: requests' "500 Server Error: ..." and curl_cffi's "HTTP Error 500: ...".
_HTTP_STATUS: Final = re.compile(r"\b(?:HTTP Error (\d{3})|(\d{3}) (?:Client|Server) Error)\b")
#: The exception names yfinance puts in its lines ("Cookie/crumb fetch failed (DNSError)").
_ERROR_NAMES: Final = (
    (re.compile(r"\bDNSError\b"), failures.DNS),
    (re.compile(r"\bTimeout\b"), failures.TIMEOUT),
    (re.compile(r"\bConnectionError\b"), failures.CONNECT),
)
#: An answer yfinance could not read: an error page instead of JSON (it hides the status).
_UNREADABLE: Final = ("received faulty response", "Expecting value: line")


def yahoo_ticker(symbol: str) -> str:
    """The Yahoo ticker of an openbell US symbol ("BRK.B" is "BRK-B"; Yahoo upper-cases)."""
    return symbol.strip().upper().replace(".", "-")


def decimal(value: Any) -> Decimal | None:
    """A vendor number as an exact Decimal via its shortest repr; None for NaN, None or text."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return Decimal(int(value))
    if isinstance(value, float | np.floating):
        number = float(value)
        return None if not math.isfinite(number) else Decimal(str(number))
    return None


def yahoo_cause(text: str) -> str | None:
    """The cause a yfinance log line names (see `adapters.failures`), None when it names none."""
    code = _CURL_CODE.search(text)
    if code is not None:
        found = failures.curl_cause(int(code.group(1)), text)
        if found is not None:
            return found
    if any(mark in text for mark in _RATE_LIMIT_MARKS):
        return failures.RATE_LIMITED
    status = _HTTP_STATUS.search(text)
    if status is not None:
        return failures.http_cause(int(status.group(1) or status.group(2)))
    for pattern, cause in _ERROR_NAMES:
        if pattern.search(text):
            return cause
    return failures.PAYLOAD if any(mark in text for mark in _UNREADABLE) else None


@dataclass(slots=True)
class DownloadFailures:
    """The failures yfinance met during one call (`download` and `get_news` never raise): its
    log lines (`read`) and its failed requests (`note`, from `watch.YahooWatch`).

    `failed` maps a ticker whose requests failed (no DNS, no connection, a timeout, an error
    status) to its most telling cause; `missing` are tickers Yahoo answered for but does not know
    (possibly delisted), never one that `failed`; `seen` are causes of requests and lines about
    no ticker (the cookie, crumb and news requests).
    """

    rate_limited: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)  # cause -> the first words about it

    def read(self, message: str) -> None:
        """Take in one `yfinance` log line such as `['NOPE']: possibly delisted; ...`."""
        self.messages.append(message)
        text = message.strip()
        cause = yahoo_cause(text)
        if cause is not None:
            self.details.setdefault(cause, text)
        per_ticker = _TICKER_LINE.match(text)
        match = _FAILED_LINE.match(text)
        if per_ticker is not None:
            tickers = [per_ticker.group(1)]
        elif match is not None:
            tickers = _tickers(match.group(1))
        else:
            if cause is not None:
                self.seen.append(cause)
            return
        for ticker in (str(found).upper() for found in tickers):
            if cause is not None:
                self._fail(ticker, cause)
            elif match is not None and ticker not in self.failed:
                self.missing.add(ticker)

    def note(self, url: str, cause: str, detail: str) -> None:
        """Take in a request to `url` that failed with `cause` (what yfinance may not log)."""
        self.details.setdefault(cause, detail)
        ticker = _URL_TICKER.search(url)
        if ticker is None:
            self.seen.append(cause)
            return
        self._fail(unquote(ticker.group(1)).upper(), cause)

    def _fail(self, ticker: str, cause: str) -> None:
        if cause == failures.RATE_LIMITED:
            self.rate_limited.add(ticker)
        known = self.failed.get(ticker)
        if known is None or failures.rank(cause) < failures.rank(known):
            self.failed[ticker] = cause
        self.missing.discard(ticker)

    @property
    def cause(self) -> str | None:
        """The cause named most often (by ticker first, then by the other lines), if any."""
        for named in (list(self.failed.values()), self.seen):
            if named:
                return failures.most_common(named)
        return None

    def first(self, cause: str) -> str:
        """The first words about `cause` (an exception or a line), to quote in an error message."""
        return self.details.get(cause, "")


def _tickers(listed: str) -> list[str]:
    try:
        found = ast.literal_eval(listed)
    except (ValueError, SyntaxError):
        return []
    return [str(ticker) for ticker in found] if isinstance(found, list) else []


def _column(frame: pd.DataFrame, name: str, ticker: str) -> pd.Series | None:
    key = (name, ticker)
    return frame[key] if key in frame.columns else None


def tickers_with_rows(frame: pd.DataFrame | None) -> frozenset[str]:
    """The tickers of a download frame with at least one non-NaN close."""
    if frame is None or frame.empty or not isinstance(frame.columns, pd.MultiIndex):
        return frozenset()
    closes = [ticker for name, ticker in frame.columns if name == "Close"]
    return frozenset(str(t) for t in closes if frame[("Close", t)].notna().any())


def _span(
    stamp: pd.Timestamp, interval: str, calendar: TradingCalendar
) -> tuple[datetime, datetime] | None:
    """The UTC `[start, end)` of the bar yfinance labels `stamp`, None outside a session."""
    if interval == "1d":
        day: date = stamp.date()
        if not calendar.is_session(day):
            return None
        session = calendar.session(day)
        return session.open_at, session.close_at
    start_at = stamp.to_pydatetime().astimezone(UTC)
    day_of = calendar.session_of(start_at)
    if day_of is None or not calendar.is_open(start_at):
        return None
    session = calendar.session(day_of)
    return start_at, min(start_at + _HOUR, session.close_at)


def _ticker_bars(
    symbol: str,
    columns: Sequence[pd.Series],
    index: pd.Index,
    interval: str,
    calendar: TradingCalendar,
    now: datetime,
) -> tuple[Bar, ...]:
    """Finished bars of `symbol` from its open, high, low, close and volume `columns`."""

    def build(start_at: datetime, end_at: datetime, position: int) -> Bar | None:
        numbers = [decimal(column.iloc[position]) for column in columns]
        return make_bar(
            symbol, start_at, end_at, numbers, logger=logger, event="yfinance_bar_dropped"
        )

    rows = (
        (_span(pd.Timestamp(stamp), interval, calendar), position)
        for position, stamp in enumerate(index)
    )
    return finished_bars(rows, now, build)


def parse_download(
    frame: pd.DataFrame | None,
    symbols: Mapping[str, str],
    interval: str,
    calendar: TradingCalendar,
    now: datetime,
) -> dict[str, tuple[Bar, ...]]:
    """Finished bars by openbell symbol from a `download` frame; `symbols` maps symbol -> ticker."""
    out: dict[str, tuple[Bar, ...]] = {}
    if frame is None or frame.empty or not isinstance(frame.columns, pd.MultiIndex):
        return out
    for symbol, ticker in symbols.items():
        columns = [_column(frame, name, ticker) for name in _FIELDS]
        found = [column for column in columns if column is not None]
        if len(found) < len(columns):
            continue
        bars = _ticker_bars(symbol, found, frame.index, interval, calendar, now)
        if bars:
            out[symbol] = bars
    return out


def parse_last_prices(
    frame: pd.DataFrame | None, symbols: Mapping[str, str], at: datetime, step: timedelta = _MINUTE
) -> dict[str, Quote]:
    """The last close before `at` of each ticker of an intraday frame, stamped `min(end, at)`."""
    out: dict[str, Quote] = {}
    if frame is None or frame.empty or not isinstance(frame.columns, pd.MultiIndex):
        return out
    starts = [pd.Timestamp(stamp).to_pydatetime().astimezone(UTC) for stamp in frame.index]
    for symbol, ticker in symbols.items():
        closes = _column(frame, "Close", ticker)
        if closes is None:
            continue
        for position in range(len(starts) - 1, -1, -1):
            price = decimal(closes.iloc[position])
            if starts[position] < at and price is not None and price > 0:
                stamp = min(starts[position] + step, at)
                out[symbol] = Quote(symbol=symbol, price=price, at=stamp)
                break
    return out


#: The action columns of a `download(actions=True)` frame.
_ACTION_COLUMNS: Final = (
    ("Dividends", ActionKind.CASH_DIVIDEND),
    ("Stock Splits", ActionKind.SPLIT),
)


def split_ratio(factor: Decimal) -> Decimal:
    """yfinance's split factor (numerator / denominator, as a float) as the nearest fraction
    with a denominator up to 1000, so that a 1-for-3 reverse split is 1/3 to Decimal precision."""
    fraction = Fraction(factor).limit_denominator(1000)
    return Decimal(fraction.numerator) / Decimal(fraction.denominator)


def parse_actions(
    frame: pd.DataFrame | None,
    symbols: Mapping[str, str],
    calendar: TradingCalendar,
    *,
    source: str,
) -> list[CorporateAction]:
    """The splits and cash dividends in a daily `download(actions=True)` frame, in apply order.

    A row's date is the ex-date (Yahoo stamps events at its session); a zero means no action. A
    date that is not an XNYS session or a value an action refuses is logged and dropped.
    """
    out: list[CorporateAction] = []
    if frame is None or frame.empty or not isinstance(frame.columns, pd.MultiIndex):
        return out
    for symbol, ticker in symbols.items():
        for name, kind in _ACTION_COLUMNS:
            column = _column(frame, name, ticker)
            if column is None:
                continue
            for stamp, value in zip(frame.index, column, strict=True):
                number = decimal(value)
                if number is None or number == 0:
                    continue
                day = pd.Timestamp(stamp).date()
                try:
                    if not calendar.is_session(day):
                        raise ValueError(f"{day} is not an XNYS session")
                    out.append(
                        CorporateAction(
                            symbol=symbol,
                            kind=kind,
                            ex_date=day,
                            ex_at=calendar.session_open(day),
                            currency="USD",
                            source=source,
                            ratio=split_ratio(number) if kind is ActionKind.SPLIT else Decimal(1),
                            cash=number if kind is ActionKind.CASH_DIVIDEND else Decimal(0),
                        )
                    )
                except ValueError as exc:
                    logger.warning(
                        "yfinance_action_dropped",
                        extra={
                            "ticker": ticker,
                            "column": name,
                            "day": str(day),
                            "error": str(exc),
                        },
                    )
    return in_apply_order(out)


def _published_at(raw: Mapping[str, Any], content: Mapping[str, Any]) -> datetime | None:
    text = content.get("pubDate") or content.get("displayTime")
    if isinstance(text, str) and text:
        try:
            return datetime.fromisoformat(text).astimezone(UTC)
        except ValueError:
            return None
    epoch = raw.get("providerPublishTime")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        return datetime.fromtimestamp(epoch, tz=UTC)
    return None


def _url(content: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    for key in ("canonicalUrl", "clickThroughUrl"):
        found = content.get(key)
        if isinstance(found, Mapping) and isinstance(found.get("url"), str):
            return str(found["url"])
    link = raw.get("link")
    return link if isinstance(link, str) else ""


def parse_news(raw_items: Iterable[Any], symbol: str) -> list[NewsItem]:
    """`Ticker.news` items (the 2025 `content` shape or the older flat one) as `NewsItem`s."""
    out: list[NewsItem] = []
    for raw in raw_items:
        if not isinstance(raw, Mapping):
            continue
        content = raw.get("content")
        content = content if isinstance(content, Mapping) else raw
        title = content.get("title")
        published_at = _published_at(raw, content)
        if not isinstance(title, str) or not title.strip() or published_at is None:
            continue
        provider = content.get("provider")
        source = (
            provider.get("displayName") if isinstance(provider, Mapping) else raw.get("publisher")
        )
        out.append(
            NewsItem(
                symbol=symbol,
                published_at=published_at,
                title=title.strip(),
                url=_url(content, raw),
                source=f"yahoo:{source}" if isinstance(source, str) and source else "yahoo",
            )
        )
    return out


def parse_info(info: Mapping[str, Any], symbol: str, fetched_at: datetime) -> Fundamentals | None:
    """`Ticker.info` as `Fundamentals` stamped `fetched_at`; None when Yahoo knew no such symbol."""
    if not info or "quoteType" not in info:
        return None

    def number(key: str) -> Decimal | None:
        return decimal(info.get(key))

    currency = info.get("currency")
    dividend = number("trailingAnnualDividendYield")
    if dividend is None:
        # Since 2025 `dividendYield` is in percent points (AAPL 0.35 means 0.35 %).
        points = number("dividendYield")
        dividend = None if points is None else points / 100
    return Fundamentals(
        symbol=symbol,
        fetched_at=fetched_at,
        source="yfinance",
        currency=currency if currency in CURRENCY_PLACES else None,
        name=str(info.get("longName") or info.get("shortName") or ""),
        sector=str(info.get("sector") or ""),
        industry=str(info.get("industry") or ""),
        market_cap=number("marketCap"),
        shares_outstanding=number("sharesOutstanding"),
        trailing_pe=number("trailingPE"),
        forward_pe=number("forwardPE"),
        price_to_book=number("priceToBook"),
        beta=number("beta"),
        dividend_yield=dividend,
        fifty_two_week_high=number("fiftyTwoWeekHigh"),
        fifty_two_week_low=number("fiftyTwoWeekLow"),
    )


def parse_shares(series: Any) -> list[tuple[date, Decimal]]:
    """`Ticker.get_shares_full`'s series (share counts indexed by instants in the exchange's zone,
    naive when yfinance could not learn it: then UTC; None when Yahoo had none) as (New York
    date, shares), one count per date (the last), oldest first."""
    if series is None or len(series) == 0:
        return []
    out: dict[date, Decimal] = {}
    for at, value in series.items():
        count = decimal(value)
        stamp = pd.Timestamp(at)
        if stamp.tzinfo is None:
            stamp = stamp.tz_localize("UTC")
        if count is not None and count > 0:
            out[stamp.tz_convert("America/New_York").date()] = count
    return sorted(out.items())
