"""Parsing akshare's frames (Eastmoney and CSIndex, mostly Chinese column names) into openbell's
types.

This module owns every knowledge of the columns akshare 1.19 returns, as pure functions. Times are
naive Beijing time. A daily bar's date becomes its XSHG session `[open, close)` in UTC; a 60-minute
bar is labelled by its END (10:30, 11:30, 14:00, 15:00) and becomes `[end - 1h, end)`, kept only
when it lies inside a session and outside the lunch break. Eastmoney volumes count lots of 100
shares and become shares. Vendor numbers become `Decimal(str(x))` once, here. A row with a NaN, a
repeated timestamp (the first is kept), a bar not finished at `now` or values a `Bar` refuses is
dropped, not raised; an empty frame (akshare returns a 0x0 frame for no data) parses to nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Final
from zoneinfo import ZoneInfo

import pandas as pd

from openbell.markets.adapters.vendor_rows import decimal, finished_bars, make_bar
from openbell.markets.calendars import TradingCalendar
from openbell.markets.corporate_actions import ActionKind, CorporateAction, in_apply_order
from openbell.markets.domain import Bar, Instrument, NewsItem
from openbell.markets.rules import a_share_code
from openbell.markets.universes import Universe

logger = logging.getLogger(__name__)

SHANGHAI: Final = ZoneInfo("Asia/Shanghai")
LOT: Final = Decimal(100)  # Eastmoney's 成交量 counts 手, lots of 100 shares
_HOUR: Final = timedelta(hours=1)
_OHLCV: Final = ("开盘", "最高", "最低", "收盘", "成交量")
_EXCHANGES: Final = {"上海证券交易所": "SH", "深圳证券交易所": "SZ", "北京证券交易所": "BJ"}
_PER_TEN: Final = Decimal(10)  # Eastmoney's bonus and cash ratios are per 10 shares
_BONUS_COLUMNS: Final = ("除权除息日", "送转股份-送转总比例", "现金分红-现金分红比例")


def vendor_code(symbol: str) -> str:
    """The 6-digit code akshare takes for an openbell A-share symbol ("600519.SH" -> "600519")."""
    return a_share_code(symbol)


def is_index(symbol: str) -> bool:
    """Whether `symbol` is an SSE index ("000016.SH"): its code would name an SZSE stock."""
    return symbol.upper().endswith(".SH") and a_share_code(symbol).startswith("000")


def local_to_utc(value: datetime) -> datetime:
    """A naive Beijing time as aware UTC."""
    return value.replace(tzinfo=SHANGHAI).astimezone(UTC)


def _has(frame: pd.DataFrame, columns: Sequence[str]) -> bool:
    return not frame.empty and all(name in frame.columns for name in columns)


def _collect(
    symbol: str,
    spans: Sequence[tuple[datetime, datetime] | None],
    frame: pd.DataFrame,
    now: datetime,
) -> tuple[Bar, ...]:
    def build(start_at: datetime, end_at: datetime, row: pd.Series) -> Bar | None:
        numbers = [decimal(row[name]) for name in _OHLCV]
        return make_bar(
            symbol,
            start_at,
            end_at,
            numbers,
            logger=logger,
            event="akshare_bar_dropped",
            volume_unit=LOT,
        )

    rows = (row for _, row in frame.iterrows())
    return finished_bars(zip(spans, rows, strict=True), now, build)


def _day(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def parse_daily(
    frame: pd.DataFrame, symbol: str, calendar: TradingCalendar, now: datetime
) -> tuple[Bar, ...]:
    """Finished daily bars of `symbol` from a `stock_zh_a_hist` frame."""
    if not _has(frame, ("日期", *_OHLCV)):
        return ()
    spans: list[tuple[datetime, datetime] | None] = []
    for value in frame["日期"]:
        day = _day(value)
        if day is None or not calendar.is_session(day):
            spans.append(None)
            continue
        session = calendar.session(day)
        spans.append((session.open_at, session.close_at))
    return _collect(symbol, spans, frame, now)


#: `stock_zh_index_daily_em`'s columns, renamed to `stock_zh_a_hist`'s.
_INDEX_COLUMNS: Final = {
    "date": "日期",
    "open": "开盘",
    "close": "收盘",
    "high": "最高",
    "low": "最低",
    "volume": "成交量",
}


def index_vendor_symbol(symbol: str) -> str:
    """The code `stock_zh_index_daily_em` takes for an SSE index ("000300.SH" -> "sh000300")."""
    return f"sh{a_share_code(symbol)}"


def parse_index_daily(
    frame: pd.DataFrame, symbol: str, calendar: TradingCalendar, now: datetime
) -> tuple[Bar, ...]:
    """Finished daily bars of index `symbol` from a `stock_zh_index_daily_em` frame (English
    columns `date, open, close, high, low, volume, amount`; Eastmoney's kline volume counts lots
    for an index as for a stock: the same endpoint and field)."""
    if not _has(frame, tuple(_INDEX_COLUMNS)):
        return ()
    return parse_daily(frame.rename(columns=_INDEX_COLUMNS), symbol, calendar, now)


def _hour_span(value: Any, calendar: TradingCalendar) -> tuple[datetime, datetime] | None:
    try:
        end_at = local_to_utc(datetime.fromisoformat(str(value).strip()))
    except ValueError:
        return None
    start_at = end_at - _HOUR
    day = calendar.session_of(start_at)
    if day is None:
        return None
    session = calendar.session(day)
    if end_at > session.close_at:
        return None
    lunch = (session.break_start_at, session.break_end_at)
    if lunch[0] is not None and lunch[1] is not None and start_at < lunch[1] and end_at > lunch[0]:
        return None
    return start_at, end_at


def parse_hourly(
    frame: pd.DataFrame, symbol: str, calendar: TradingCalendar, now: datetime
) -> tuple[Bar, ...]:
    """Finished 60-minute bars of `symbol` from a `stock_zh_a_hist_min_em(period="60")` frame."""
    if not _has(frame, ("时间", *_OHLCV)):
        return ()
    spans = [_hour_span(value, calendar) for value in frame["时间"]]
    return _collect(symbol, spans, frame, now)


def parse_last_price(frame: pd.DataFrame) -> Decimal | None:
    """The last trade price (`最新`) of a `stock_bid_ask_em` item/value frame; None if absent."""
    if not _has(frame, ("item", "value")):
        return None
    found = frame.loc[frame["item"] == "最新", "value"]
    if found.empty:
        return None
    price = decimal(found.iloc[0])
    return price if price is not None and price > 0 else None


def parse_news(frame: pd.DataFrame, symbol: str) -> list[NewsItem]:
    """`stock_news_em` rows as `NewsItem`s about `symbol` (publish times are Beijing time)."""
    if not _has(frame, ("新闻标题", "发布时间")):
        return []
    out: list[NewsItem] = []
    for _, row in frame.iterrows():
        title, stamp = row["新闻标题"], row["发布时间"]
        if not isinstance(title, str) or not title.strip() or not isinstance(stamp, str):
            continue
        try:
            published_at = local_to_utc(datetime.fromisoformat(stamp.strip()))
        except ValueError:
            continue
        url = row.get("新闻链接")
        outlet = row.get("文章来源")
        out.append(
            NewsItem(
                symbol=symbol,
                published_at=published_at,
                title=title.strip(),
                url=url if isinstance(url, str) else "",
                source=f"eastmoney:{outlet}" if isinstance(outlet, str) and outlet else "eastmoney",
            )
        )
    return out


def _action(
    symbol: str,
    day: date,
    ex_at: datetime,
    source: str,
    *,
    cash: Decimal = Decimal(0),
    ratio: Decimal = Decimal(1),
) -> CorporateAction:
    kind = ActionKind.CASH_DIVIDEND if cash else ActionKind.SPLIT
    return CorporateAction(
        symbol=symbol,
        kind=kind,
        ex_date=day,
        ex_at=ex_at,
        currency="CNY",
        source=source,
        cash=cash,
        ratio=ratio,
    )


def parse_actions(
    frame: pd.DataFrame, symbol: str, calendar: TradingCalendar, *, source: str
) -> list[CorporateAction]:
    """The cash dividends and bonus issues of `symbol` in a `stock_fhps_detail_em` frame.

    Eastmoney's figures are per 10 shares: `现金分红-现金分红比例` is the pre-tax cash and
    `送转股份-送转总比例` the bonus shares (送股 and 转增 together; the two separate columns repeat
    the same shares and are not added). A row with both gives a dividend and a split with the same
    ex-date. A plan without an ex-date (`除权除息日` empty) is not an action yet.
    """
    out: list[CorporateAction] = []
    if not _has(frame, _BONUS_COLUMNS):
        return out
    for _, row in frame.iterrows():
        value = row["除权除息日"]
        day = None if pd.isna(value) else _day(value)
        if day is None:
            continue
        cash = decimal(row["现金分红-现金分红比例"])
        bonus = decimal(row["送转股份-送转总比例"])
        try:
            if not calendar.is_session(day):
                raise ValueError(f"{day} is not an XSHG session")
            ex_at = calendar.session_open(day)
            if cash is not None and cash > 0:
                out.append(_action(symbol, day, ex_at, source, cash=cash / _PER_TEN))
            if bonus is not None and bonus > 0:
                out.append(_action(symbol, day, ex_at, source, ratio=1 + bonus / _PER_TEN))
        except ValueError as exc:
            logger.warning(
                "akshare_action_dropped",
                extra={"symbol": symbol, "day": str(day), "error": str(exc)},
            )
    return in_apply_order(out)


def parse_members(frame: pd.DataFrame, name: str, benchmark: str | None = None) -> Universe | None:
    """An `index_stock_cons_csindex` frame as a `Universe` dated by CSIndex's publication date,
    with `benchmark` (the index itself, `000300.SH`) when given."""
    columns = ("日期", "成分券代码", "成分券名称", "交易所")
    if not _has(frame, columns):
        return None
    instruments: list[Instrument] = []
    seen: set[str] = set()
    as_of: date | None = None
    for _, row in frame.iterrows():
        exchange = _EXCHANGES.get(str(row["交易所"]).strip())
        code = str(row["成分券代码"]).strip().zfill(6)
        if exchange is None or not code.isdigit() or f"{code}.{exchange}" in seen:
            continue
        seen.add(f"{code}.{exchange}")
        label = str(row["成分券名称"]).strip()
        instruments.append(
            Instrument(
                symbol=f"{code}.{exchange}",
                market="cn",
                currency="CNY",
                name=label,
                is_st="ST" in label.upper(),
            )
        )
        as_of = max(filter(None, (as_of, _day(row["日期"]))), default=None)
    if not instruments or as_of is None:
        return None
    return Universe(
        name=name,
        market="cn",
        as_of=as_of,
        instruments=tuple(instruments),
        source="csindex",
        benchmark=benchmark,
    )
