"""The bar and news cache in the database: `SqlBarCache`, the store's `markets.cache.BarCache`.

This module owns the `bar`, `bar_coverage`, `news`, `quote_record` and `fundamentals_report`
tables' reads and writes, and reads them back for a cache replay (`markets.recorded.Recording`).
It keeps the port's semantics exactly as `MemoryBarCache` does: a bar is stored final when
`end_at <= fetched_at`; a stored final bar is never replaced by an unfinished one, and anything
else is replaced by the newer put; a final bar's `known_at` (when a cache replay shows it from) is
kept by a re-fetch of the same values and moved to the re-fetch by other values; a news item is
kept once per (symbol, published_at, title), whose digest is its unique `item_key`, with the first
decision time it was served for; a quote once per (source, symbol, decision time); a fundamentals
report once per (symbol, period end, published_at); a covered span is merged with the spans of its
(source, symbol, interval) that it overlaps or touches. Bar, news, quote and report writes are
single-statement upserts (`INSERT ... ON CONFLICT`, in the SQLite or Postgres dialect) in one
transaction that takes SQLite's write lock up front, so concurrent daemons on Postgres and the one
daemon on SQLite need no read-then-write, but for a bar's `known_at`: the stored final bars of the
keys written are read first in the same transaction, to compare their values in Python (never in
SQL, where SQLite's are text); two daemons on Postgres re-fetching one bar at once may leave either
one's `known_at`, both about the same decision time. A span write does read, delete and insert, in
one such transaction: two daemons on Postgres writing spans of one symbol at once may leave
overlapping spans, which is harmless (reads merge them). Reads return domain values (`CachedBar`,
`TimeSpan`, `NewsItem`, ...); decimals round-trip exactly through `ExactDecimal`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sqlalchemy import Connection, Engine, Table, delete, insert, not_, or_, select
from sqlalchemy.dialects import sqlite

from openbell.markets.cache import CachedBar, bar_known_from
from openbell.markets.coverage import TimeSpan, merge_spans
from openbell.markets.domain import Bar, NewsItem, Quote, check_utc
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.recorded import KnownBar, KnownNews, KnownReport, RecordedQuote
from openbell.markets.sources import check_symbols
from openbell.store.core_tables import (
    BAR_COVERAGE_TABLE,
    BAR_TABLE,
    FUNDAMENTALS_REPORT_TABLE,
    NEWS_TABLE,
    QUOTE_RECORD_TABLE,
)
from openbell.store.db import SQLITE_IMMEDIATE

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

T = TypeVar("T")
_BAR_KEY: Final = ("symbol", "interval", "start_at")
#: Rows per INSERT statement: well under SQLite's limit of 32766 bound parameters.
_CHUNK: Final = 500


def report_key(report: FundamentalsReport) -> str:
    """The unique key of a fundamentals report: SHA-256 of (symbol, period end, published_at)."""
    raw = json.dumps(
        [
            report.symbol,
            report.period_end.isoformat(),
            report.published_at.astimezone(UTC).isoformat(),
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()


def news_key(symbol: str | None, published_at: datetime, title: str) -> str:
    """The unique key of a news item: SHA-256 of (symbol, published_at in UTC, title), in hex."""
    raw = json.dumps([symbol, published_at.astimezone(UTC).isoformat(), title])
    return hashlib.sha256(raw.encode()).hexdigest()


class SqlBarCache:
    """The bar and news cache on one engine (SQLite or Postgres), at the migrations' head."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    def put_bars(
        self,
        *,
        source: str,
        interval: str,
        bars: Sequence[Bar],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        """Record `bars`; a bar is final when `end_at <= fetched_at`, and known from the later of
        its end and `known_at` (None: `fetched_at`). See the module docstring."""
        known = bar_known_from(fetched_at, known_at)
        kept: dict[tuple[str, datetime], dict[str, Any]] = {}
        for bar in bars:  # one row per key, decided as sequential puts would decide it
            values = _bar_values(bar, interval, source, fetched_at, known)
            old = kept.get((bar.symbol, bar.start_at))
            if old is None or not old["is_final"] or values["is_final"]:
                kept[(bar.symbol, bar.start_at)] = values
        if not kept:
            return
        with self._writer.begin() as connection:
            for chunk in _chunks(list(kept.values())):
                _keep_first_known(connection, interval, chunk)
                connection.execute(_upsert_bars(connection, chunk))

    def get_bars(
        self,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
        *,
        final_only: bool = True,
    ) -> Mapping[str, Sequence[CachedBar]]:
        """Cached bars starting in `[start_at, end_at)` by symbol, oldest first."""
        wanted = check_symbols(symbols)
        query = (
            select(BAR_TABLE)
            .where(
                BAR_TABLE.c.symbol.in_(wanted),
                BAR_TABLE.c.interval == interval,
                BAR_TABLE.c.start_at >= start_at,
                BAR_TABLE.c.start_at < end_at,
            )
            .order_by(BAR_TABLE.c.symbol, BAR_TABLE.c.start_at)
        )
        if final_only:
            query = query.where(BAR_TABLE.c.is_final)
        out: dict[str, list[CachedBar]] = {}
        with self._engine.connect() as connection:
            for row in connection.execute(query):
                out.setdefault(row.symbol, []).append(_cached_bar(row))
        return out

    def put_coverage(
        self,
        *,
        source: str,
        interval: str,
        spans: Mapping[str, TimeSpan],
        fetched_at: datetime,
    ) -> None:
        """Record that every bar of `source` starting in each symbol's span is cached and final."""
        check_utc("fetched_at", fetched_at)
        if not spans:
            return
        low = min(span.start_at for span in spans.values())
        high = max(span.end_at for span in spans.values())
        with self._writer.begin() as connection:
            for symbols in _chunks(sorted(spans)):
                query = select(BAR_COVERAGE_TABLE).where(
                    BAR_COVERAGE_TABLE.c.source == source,
                    BAR_COVERAGE_TABLE.c.interval == interval,
                    BAR_COVERAGE_TABLE.c.symbol.in_(symbols),
                    BAR_COVERAGE_TABLE.c.start_at <= high,
                    BAR_COVERAGE_TABLE.c.end_at >= low,
                )
                stored: dict[str, list[Any]] = {}
                for row in connection.execute(query):
                    stored.setdefault(row.symbol, []).append(row)
                gone: list[int] = []
                rows: list[dict[str, Any]] = []
                for symbol in symbols:
                    span = spans[symbol]
                    touching = [
                        row
                        for row in stored.get(symbol, ())
                        if row.start_at <= span.end_at and span.start_at <= row.end_at
                    ]
                    (merged,) = merge_spans([span, *(_span(row) for row in touching)])
                    gone.extend(row.id for row in touching)
                    rows.append(
                        {
                            "source": source,
                            "symbol": symbol,
                            "interval": interval,
                            "start_at": merged.start_at,
                            "end_at": merged.end_at,
                            "fetched_at": max([fetched_at, *(row.fetched_at for row in touching)]),
                        }
                    )
                if gone:
                    connection.execute(
                        delete(BAR_COVERAGE_TABLE).where(BAR_COVERAGE_TABLE.c.id.in_(gone))
                    )
                connection.execute(insert(BAR_COVERAGE_TABLE), rows)

    def get_coverage(
        self,
        *,
        source: str,
        symbols: Sequence[str],
        interval: str,
        start_at: datetime,
        end_at: datetime,
    ) -> Mapping[str, Sequence[TimeSpan]]:
        """Each symbol's covered spans overlapping `[start_at, end_at)`, merged, oldest first."""
        query = select(BAR_COVERAGE_TABLE).where(
            BAR_COVERAGE_TABLE.c.source == source,
            BAR_COVERAGE_TABLE.c.interval == interval,
            BAR_COVERAGE_TABLE.c.symbol.in_(check_symbols(symbols)),
            BAR_COVERAGE_TABLE.c.start_at < end_at,
            BAR_COVERAGE_TABLE.c.end_at > start_at,
        )
        found: dict[str, list[TimeSpan]] = {}
        with self._engine.connect() as connection:
            for row in connection.execute(query):
                found.setdefault(row.symbol, []).append(_span(row))
        return {symbol: merge_spans(spans) for symbol, spans in found.items()}

    def put_news(
        self,
        *,
        source: str,
        items: Sequence[NewsItem],
        fetched_at: datetime,
        known_at: datetime | None = None,
    ) -> None:
        """Record news items not yet cached, each known from `known_at` (never before its
        publication; None: from its publication)."""
        check_utc("fetched_at", fetched_at)
        kept: dict[str, dict[str, Any]] = {}
        for item in items:
            key = news_key(item.symbol, item.published_at, item.title)
            known = item.published_at if known_at is None else max(known_at, item.published_at)
            kept.setdefault(key, _news_values(item, key, source, fetched_at, known))
        self._insert_new(NEWS_TABLE, list(kept.values()), ["item_key"])

    def put_quotes(
        self, *, source: str, quotes: Sequence[RecordedQuote], fetched_at: datetime
    ) -> None:
        """Record the quotes `source` answered, once per (source, symbol, asked_at)."""
        check_utc("fetched_at", fetched_at)
        rows = {
            (recorded.quote.symbol, recorded.asked_at): {
                "source": source,
                "symbol": recorded.quote.symbol,
                "asked_at": recorded.asked_at,
                "quoted_at": recorded.quote.at,
                "price": recorded.quote.price,
                "fetched_at": fetched_at,
            }
            for recorded in quotes
        }
        self._insert_new(QUOTE_RECORD_TABLE, list(rows.values()), ["source", "symbol", "asked_at"])

    def put_reports(
        self, *, source: str, reports: Sequence[KnownReport], fetched_at: datetime
    ) -> None:
        """Record fundamentals reports not yet recorded; a report's first `known_at` is kept."""
        check_utc("fetched_at", fetched_at)
        rows: dict[str, dict[str, Any]] = {}
        for known in reports:
            report = known.report
            key = report_key(report)
            rows.setdefault(
                key,
                {
                    "symbol": report.symbol,
                    "period_end": report.period_end,
                    "published_at": report.published_at,
                    "known_at": max(known.known_at, report.published_at),
                    "currency": report.currency,
                    "figures": json.dumps({k: str(v) for k, v in report.values.items()}),
                    "source": report.source or source,
                    "fetched_at": fetched_at,
                    "item_key": key,
                },
            )
        self._insert_new(FUNDAMENTALS_REPORT_TABLE, list(rows.values()), ["item_key"])

    def _insert_new(self, table: Table, rows: list[dict[str, Any]], key: list[str]) -> None:
        if not rows:
            return
        with self._writer.begin() as connection:
            for chunk in _chunks(rows):
                insert = _insert(connection, table).values(chunk)
                connection.execute(insert.on_conflict_do_nothing(index_elements=key))

    # -- what a cache replay reads (`markets.recorded.Recording`) -----------------------------

    def recorded_bars(
        self, symbols: Sequence[str], interval: str
    ) -> Mapping[str, Sequence[KnownBar]]:
        """The final bars of `symbols` of `interval`, each with when it was first known, oldest
        first."""
        query = (
            select(BAR_TABLE)
            .where(
                BAR_TABLE.c.symbol.in_(check_symbols(symbols)),
                BAR_TABLE.c.interval == interval,
                BAR_TABLE.c.is_final,
            )
            .order_by(BAR_TABLE.c.symbol, BAR_TABLE.c.start_at)
        )
        out: dict[str, list[KnownBar]] = {}
        with self._engine.connect() as connection:
            for row in connection.execute(query):
                out.setdefault(row.symbol, []).append(
                    KnownBar(bar=_cached_bar(row).bar, known_at=row.known_at)
                )
        return out

    def recorded_news(self, symbols: Sequence[str]) -> Sequence[KnownNews]:
        """The news about `symbols` and the market-wide news, oldest first."""
        query = (
            select(NEWS_TABLE)
            .where(
                or_(NEWS_TABLE.c.symbol.in_(check_symbols(symbols)), NEWS_TABLE.c.symbol.is_(None))
            )
            .order_by(NEWS_TABLE.c.published_at, NEWS_TABLE.c.id)
        )
        with self._engine.connect() as connection:
            return tuple(
                KnownNews(item=_news_item(row), known_at=row.known_at or row.published_at)
                for row in connection.execute(query)
            )

    def recorded_reports(self, symbols: Sequence[str]) -> Sequence[KnownReport]:
        """The fundamentals reports of `symbols`, oldest first."""
        table = FUNDAMENTALS_REPORT_TABLE
        query = (
            select(table)
            .where(table.c.symbol.in_(check_symbols(symbols)))
            .order_by(table.c.published_at, table.c.id)
        )
        with self._engine.connect() as connection:
            return tuple(
                KnownReport(
                    report=FundamentalsReport(
                        symbol=row.symbol,
                        period_end=row.period_end,
                        published_at=row.published_at,
                        currency=row.currency,
                        values={k: Decimal(v) for k, v in json.loads(row.figures).items()},
                        source=row.source,
                    ),
                    known_at=row.known_at,
                )
                for row in connection.execute(query)
            )

    def recorded_quotes(self, symbols: Sequence[str]) -> Sequence[RecordedQuote]:
        """The quotes of `symbols` the live sources answered, oldest decision time first."""
        table = QUOTE_RECORD_TABLE
        query = (
            select(table)
            .where(table.c.symbol.in_(check_symbols(symbols)))
            .order_by(table.c.asked_at, table.c.id)
        )
        with self._engine.connect() as connection:
            return tuple(
                RecordedQuote(
                    asked_at=row.asked_at,
                    quote=Quote(symbol=row.symbol, price=row.price, at=row.quoted_at),
                )
                for row in connection.execute(query)
            )

    def get_news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Cached news published in `[start_at, end_at)` (None: any symbol), newest first."""
        query = (
            select(NEWS_TABLE)
            .where(NEWS_TABLE.c.published_at >= start_at, NEWS_TABLE.c.published_at < end_at)
            .order_by(NEWS_TABLE.c.published_at.desc(), NEWS_TABLE.c.id)
            .limit(max(limit, 0))
        )
        if symbols is not None:
            query = query.where(NEWS_TABLE.c.symbol.in_(check_symbols(symbols)))
        with self._engine.connect() as connection:
            return tuple(_news_item(row) for row in connection.execute(query))


def _bar_values(
    bar: Bar, interval: str, source: str, fetched_at: datetime, known_at: datetime
) -> dict[str, Any]:
    final = bar.end_at <= fetched_at
    return {
        "symbol": bar.symbol,
        "interval": interval,
        "start_at": bar.start_at,
        "end_at": bar.end_at,
        "open": bar.open,
        "high": bar.high,
        "low": bar.low,
        "close": bar.close,
        "volume": bar.volume,
        "source": source,
        "fetched_at": fetched_at,
        "is_final": final,
        "known_at": max(known_at, bar.end_at) if final else None,
    }


_VALUES: Final = ("end_at", "open", "high", "low", "close", "volume")


def _keep_first_known(connection: Connection, interval: str, rows: list[dict[str, Any]]) -> None:
    """Give each final row of `rows` the `known_at` of the stored final bar it re-fetches with the
    same values (compared as decimals): those values were known since then."""
    final = [row for row in rows if row["is_final"]]
    if not final:
        return
    table = BAR_TABLE
    query = select(table).where(
        table.c.interval == interval,
        table.c.symbol.in_(sorted({row["symbol"] for row in final})),
        table.c.start_at >= min(row["start_at"] for row in final),
        table.c.start_at <= max(row["start_at"] for row in final),
        table.c.is_final,
    )
    stored = {(row.symbol, row.start_at): row for row in connection.execute(query)}
    for row in final:
        old = stored.get((row["symbol"], row["start_at"]))
        if (
            old is not None
            and old.known_at is not None
            and all(getattr(old, name) == row[name] for name in _VALUES)
        ):
            row["known_at"] = old.known_at


def _news_item(row: Any) -> NewsItem:
    return NewsItem(
        symbol=row.symbol,
        published_at=row.published_at,
        title=row.title,
        url=row.url or "",
        source=row.item_source,
    )


def _news_values(
    item: NewsItem, key: str, source: str, fetched_at: datetime, known_at: datetime
) -> dict[str, Any]:
    return {
        "symbol": item.symbol,
        "published_at": item.published_at,
        "title": item.title,
        "url": item.url,
        "source": source,
        "fetched_at": fetched_at,
        "item_key": key,
        "item_source": item.source,
        "known_at": known_at,
    }


def _cached_bar(row: Any) -> CachedBar:
    bar = Bar(
        symbol=row.symbol,
        start_at=row.start_at,
        end_at=row.end_at,
        open=row.open,
        high=row.high,
        low=row.low,
        close=row.close,
        volume=row.volume,
    )
    return CachedBar(
        bar=bar,
        interval=row.interval,
        source=row.source,
        fetched_at=row.fetched_at,
        known_at=row.known_at,
    )


def _span(row: Any) -> TimeSpan:
    return TimeSpan(start_at=row.start_at, end_at=row.end_at)


def _insert(connection: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    # Both dialects' inserts build the same ON CONFLICT clauses; the store runs on nothing else.
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql  # not imported for a SQLite ledger

        return postgresql.insert(table)
    return sqlite.insert(table)


def _upsert_bars(
    connection: Connection, rows: list[dict[str, Any]]
) -> sqlite.Insert | postgresql.Insert:
    insert = _insert(connection, BAR_TABLE).values(rows)
    return insert.on_conflict_do_update(
        index_elements=list(_BAR_KEY),
        set_={name: insert.excluded[name] for name in rows[0] if name not in _BAR_KEY},
        # A stored final bar is replaced only by another final one (a re-fetch after the end).
        where=or_(not_(BAR_TABLE.c.is_final), insert.excluded.is_final),
    )


def _chunks(rows: list[T]) -> Iterator[list[T]]:
    for start in range(0, len(rows), _CHUNK):
        yield rows[start : start + _CHUNK]
